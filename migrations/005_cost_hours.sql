-- What each batch's calls cost by the hour they started in (UTC): the
-- dashboard's costs over time read a range of hours across batches from
-- here rather than every attempt of the range and its job. A trigger on
-- attempts keeps it in the transaction of every write, as the batch
-- rollups of 003 are kept: it fires after attempts_rollup (triggers fire
-- in name order), whose lock on each batch's batch_rollups row orders
-- the writers of one batch. Calls with no start time are not in it.
CREATE TABLE batch_cost_hours (
    hour     timestamptz NOT NULL,
    batch    text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    calls    bigint NOT NULL DEFAULT 0,
    tokens   bigint NOT NULL DEFAULT 0,
    cost_usd numeric NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, batch)
);
-- For the cascade of a batch's deletion.
CREATE INDEX batch_cost_hours_batch ON batch_cost_hours (batch);

CREATE FUNCTION fixpoint_attempts_cost_hours() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    INSERT INTO batch_cost_hours AS r (hour, batch, calls, tokens, cost_usd)
    SELECT date_trunc('hour', n.started_at, 'UTC'), j.batch, count(*), sum(n.tokens_in + n.tokens_out), coalesce(sum(n.cost_usd), 0)
    FROM new_attempts n JOIN jobs j ON j.id = n.job_id
    WHERE j.batch IS NOT NULL AND n.started_at IS NOT NULL
    GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (hour, batch) DO UPDATE SET
        calls = r.calls + EXCLUDED.calls, tokens = r.tokens + EXCLUDED.tokens, cost_usd = r.cost_usd + EXCLUDED.cost_usd;
    RETURN NULL;
END $$;

CREATE TRIGGER attempts_rollup_hours AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_attempts_cost_hours();

-- The ledger as it is (the trigger holds the attempts table's lock until
-- this migration commits: no call falls between it and this count).
INSERT INTO batch_cost_hours (hour, batch, calls, tokens, cost_usd)
SELECT date_trunc('hour', a.started_at, 'UTC'), j.batch, count(*), sum(a.tokens_in + a.tokens_out), coalesce(sum(a.cost_usd), 0)
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE j.batch IS NOT NULL AND a.started_at IS NOT NULL
GROUP BY 1, 2;

---- create above / drop below ----

DROP TRIGGER attempts_rollup_hours ON attempts;
DROP FUNCTION fixpoint_attempts_cost_hours();
DROP TABLE batch_cost_hours;
