-- 014_batch_spend_exact: batch_spend adds its costs as numeric and converts
-- once, at the end. It added float8 parts, so a batch whose final calls cost
-- $0.1 and whose interrupted calls cost $0.2 read $0.30000000000000004. The
-- columns, their names and types (float8) are unchanged.
-- Example: SELECT * FROM batch_spend WHERE batch = 'demo-20261201-120000';
CREATE OR REPLACE VIEW batch_spend AS
SELECT b.batch,
       (b.tokens_in + coalesce(r.tokens_in, 0))::bigint   AS final_tokens_in,
       (b.tokens_out + coalesce(r.tokens_out, 0))::bigint AS final_tokens_out,
       (b.cost_usd + coalesce(r.cost_usd, 0))::float8     AS final_cost_usd,
       coalesce(i.calls, 0) AS interrupted_calls,
       coalesce(i.tokens_in, 0) AS interrupted_tokens_in, coalesce(i.tokens_out, 0) AS interrupted_tokens_out,
       coalesce(i.cost_usd, 0)::float8 AS interrupted_cost_usd,
       (b.cost_usd + coalesce(r.cost_usd, 0) + coalesce(i.cost_usd, 0))::float8 AS cost_usd,
       coalesce(r.calls, 0) AS earlier_runs_calls,
       coalesce(r.cost_usd, 0)::float8 AS earlier_runs_cost_usd
FROM (
    -- A cancelled job's totals are the running totals of its run when the
    -- cancel came: its run's attempts, a superset, count instead.
    SELECT coalesce(j.batch, '') AS batch,
           coalesce(sum(greatest(j.tokens_in, c.tokens_in)), 0)::bigint AS tokens_in,
           coalesce(sum(greatest(j.tokens_out, c.tokens_out)), 0)::bigint AS tokens_out,
           coalesce(sum(greatest(j.cost_usd, c.cost_usd)), 0) AS cost_usd
    FROM jobs j
    LEFT JOIN LATERAL (
        SELECT sum(a.tokens_in) AS tokens_in, sum(a.tokens_out) AS tokens_out, sum(a.cost_usd) AS cost_usd
        FROM attempts a WHERE j.status = 'cancelled' AND a.job_id = j.id AND a.run = j.run
    ) c ON true
    GROUP BY 1
) b
LEFT JOIN (
    SELECT coalesce(j.batch, '') AS batch, sum(r.calls)::bigint AS calls, sum(r.tokens_in)::bigint AS tokens_in,
           sum(r.tokens_out)::bigint AS tokens_out, sum(r.cost_usd) AS cost_usd
    FROM job_runs r JOIN jobs j ON j.id = r.job_id GROUP BY 1
) r ON r.batch = b.batch
LEFT JOIN (
    SELECT coalesce(j.batch, '') AS batch, count(*) AS calls, sum(a.tokens_in)::bigint AS tokens_in,
           sum(a.tokens_out)::bigint AS tokens_out, sum(a.cost_usd) AS cost_usd
    FROM interrupted_attempts a JOIN jobs j ON j.id = a.job_id GROUP BY 1
) i ON i.batch = b.batch;

---- create above / drop below ----

CREATE OR REPLACE VIEW batch_spend AS
SELECT b.batch,
       (b.tokens_in + coalesce(r.tokens_in, 0))::bigint   AS final_tokens_in,
       (b.tokens_out + coalesce(r.tokens_out, 0))::bigint AS final_tokens_out,
       b.cost_usd + coalesce(r.cost_usd, 0)               AS final_cost_usd,
       coalesce(i.calls, 0) AS interrupted_calls,
       coalesce(i.tokens_in, 0) AS interrupted_tokens_in, coalesce(i.tokens_out, 0) AS interrupted_tokens_out,
       coalesce(i.cost_usd, 0) AS interrupted_cost_usd,
       b.cost_usd + coalesce(r.cost_usd, 0) + coalesce(i.cost_usd, 0) AS cost_usd,
       coalesce(r.calls, 0) AS earlier_runs_calls,
       coalesce(r.cost_usd, 0) AS earlier_runs_cost_usd
FROM (
    -- A cancelled job's totals are the running totals of its run when the
    -- cancel came: its run's attempts, a superset, count instead.
    SELECT coalesce(j.batch, '') AS batch,
           coalesce(sum(greatest(j.tokens_in, c.tokens_in)), 0)::bigint AS tokens_in,
           coalesce(sum(greatest(j.tokens_out, c.tokens_out)), 0)::bigint AS tokens_out,
           coalesce(sum(greatest(j.cost_usd, c.cost_usd)), 0)::float8 AS cost_usd
    FROM jobs j
    LEFT JOIN LATERAL (
        SELECT sum(a.tokens_in) AS tokens_in, sum(a.tokens_out) AS tokens_out, sum(a.cost_usd) AS cost_usd
        FROM attempts a WHERE j.status = 'cancelled' AND a.job_id = j.id AND a.run = j.run
    ) c ON true
    GROUP BY 1
) b
LEFT JOIN (
    SELECT coalesce(j.batch, '') AS batch, sum(r.calls)::bigint AS calls, sum(r.tokens_in)::bigint AS tokens_in,
           sum(r.tokens_out)::bigint AS tokens_out, sum(r.cost_usd)::float8 AS cost_usd
    FROM job_runs r JOIN jobs j ON j.id = r.job_id GROUP BY 1
) r ON r.batch = b.batch
LEFT JOIN (
    SELECT coalesce(j.batch, '') AS batch, count(*) AS calls, sum(a.tokens_in)::bigint AS tokens_in,
           sum(a.tokens_out)::bigint AS tokens_out, sum(a.cost_usd)::float8 AS cost_usd
    FROM interrupted_attempts a JOIN jobs j ON j.id = a.job_id GROUP BY 1
) i ON i.batch = b.batch;
