-- 004_spend_charged_with_calls: a capped batch's spend counter is charged
-- by the transaction that writes each call's row, in attempts or in
-- interrupted_attempts, whichever code path writes it: the counter can
-- never disagree with the ledger, and a call that ends while Postgres is
-- down is charged when its row is written, as it must be.
--
-- A call's hold (spend_holds) keeps its share of the budget from before
-- it is sent until its row is written: the writer deletes it in the same
-- transaction. Only capped batches are charged: a batch capped at enqueue
-- from nothing, one capped later from what the ledger held then
-- (store.SetCap).

-- The capped batches, for the trigger's first question.
CREATE INDEX batches_capped ON batches (name) WHERE max_cost_usd IS NOT NULL OR max_total_tokens IS NOT NULL;

CREATE FUNCTION fixpoint_spend_charge() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM batches WHERE max_cost_usd IS NOT NULL OR max_total_tokens IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    -- Counters are written in batch order, as the rollup triggers write
    -- theirs, so two writers never wait for each other in a cycle.
    INSERT INTO spend_counters AS c (batch, tokens, cost_usd, calls)
    SELECT j.batch, sum(n.tokens_in + n.tokens_out), coalesce(sum(n.cost_usd), 0), count(*)
    FROM new_calls n
    JOIN jobs j ON j.id = n.job_id
    JOIN batches b ON b.name = j.batch
    WHERE b.max_cost_usd IS NOT NULL OR b.max_total_tokens IS NOT NULL
    GROUP BY j.batch
    ORDER BY j.batch
    ON CONFLICT (batch) DO UPDATE SET
        tokens = c.tokens + EXCLUDED.tokens, cost_usd = c.cost_usd + EXCLUDED.cost_usd, calls = c.calls + EXCLUDED.calls;
    RETURN NULL;
END $$;

CREATE TRIGGER attempts_spend AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_calls FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_spend_charge();
CREATE TRIGGER interrupted_attempts_spend AFTER INSERT ON interrupted_attempts
    REFERENCING NEW TABLE AS new_calls FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_spend_charge();

-- Holds whose worker died expired and were left: Reserve clears a batch's
-- expired holds from now on; this clears those already there.
DELETE FROM spend_holds WHERE expires_at <= now();

---- create above / drop below ----

DROP TRIGGER interrupted_attempts_spend ON interrupted_attempts;
DROP TRIGGER attempts_spend ON attempts;
DROP FUNCTION fixpoint_spend_charge();
DROP INDEX batches_capped;
