-- 006_interrupted_attempts: every call a provider was paid for leaves a row.
-- A job's attempts table rows are those of the run that made its final
-- result. Calls made by a delivery that ended without one are kept here
-- instead of being thrown away:
--   reason 'handed_back'  the job was handed back to the queue (provider
--                         still failing after its retries, a wait longer than
--                         a worker holds a job)
--   reason 'shutdown'     the worker stopped and the grace period ran out
--   reason 'superseded'   another delivery of the job had already finished
--                         it (a duplicate delivery), so this one's result lost
-- Same columns as attempts, plus the delivery, the reason, the attempt's
-- estimated cost and when it was recorded.
CREATE TABLE interrupted_attempts (
    job_id             text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    delivery           integer NOT NULL,
    attempt_no         integer NOT NULL CHECK (attempt_no >= 1),
    reason             text NOT NULL CHECK (reason IN ('handed_back', 'shutdown', 'superseded')),
    request            jsonb,
    request_hash       text NOT NULL DEFAULT '',
    system_sha256      text,
    raw                text NOT NULL DEFAULT '',
    source             text NOT NULL DEFAULT '',
    repairs            jsonb,
    errors             jsonb NOT NULL DEFAULT '[]'::jsonb,
    class              text NOT NULL DEFAULT '',
    valid              boolean NOT NULL DEFAULT false,
    repaired_locally   boolean NOT NULL DEFAULT false,
    finish_reason      text NOT NULL DEFAULT '',
    latency_ms         bigint NOT NULL DEFAULT 0,
    tokens_in          bigint NOT NULL DEFAULT 0,
    tokens_out         bigint NOT NULL DEFAULT 0,
    tokens_cached      bigint NOT NULL DEFAULT 0,
    cost_usd           numeric(18, 8) NOT NULL DEFAULT 0,
    transport_retries  integer NOT NULL DEFAULT 0,
    retry_classes      jsonb,
    provider_status    integer NOT NULL DEFAULT 0,
    provider_error     text NOT NULL DEFAULT '',
    model              text NOT NULL DEFAULT '',
    request_id         text NOT NULL DEFAULT '',
    started_at         timestamptz,
    recorded_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, delivery, attempt_no)
);

-- batch_spend: what a batch cost, the calls whose results were thrown away
-- included.
--   final_*         the attempts of the jobs' final results (as jobs sums them)
--   interrupted_*   the calls of deliveries that ended without a result
--   cost_usd        final_cost_usd + interrupted_cost_usd
-- Example: SELECT * FROM batch_spend WHERE batch = 'demo-20261201-120000';
CREATE VIEW batch_spend AS
SELECT f.batch,
       f.tokens_in AS final_tokens_in, f.tokens_out AS final_tokens_out, f.cost_usd AS final_cost_usd,
       coalesce(i.calls, 0) AS interrupted_calls,
       coalesce(i.tokens_in, 0) AS interrupted_tokens_in, coalesce(i.tokens_out, 0) AS interrupted_tokens_out,
       coalesce(i.cost_usd, 0) AS interrupted_cost_usd,
       f.cost_usd + coalesce(i.cost_usd, 0) AS cost_usd
FROM (
    SELECT coalesce(batch, '') AS batch, coalesce(sum(tokens_in), 0)::bigint AS tokens_in,
           coalesce(sum(tokens_out), 0)::bigint AS tokens_out, coalesce(sum(cost_usd), 0)::float8 AS cost_usd
    FROM jobs GROUP BY 1
) f
LEFT JOIN (
    SELECT coalesce(j.batch, '') AS batch, count(*) AS calls, sum(a.tokens_in)::bigint AS tokens_in,
           sum(a.tokens_out)::bigint AS tokens_out, sum(a.cost_usd)::float8 AS cost_usd
    FROM interrupted_attempts a JOIN jobs j ON j.id = a.job_id GROUP BY 1
) i ON i.batch = f.batch;

---- create above / drop below ----

DROP VIEW batch_spend;
DROP TABLE interrupted_attempts;
