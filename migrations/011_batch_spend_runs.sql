-- 011_batch_spend_runs: batch_spend counts what every run of a batch cost.
-- It summed jobs, which hold only the latest run: a requeued job's earlier
-- runs (job_runs) were left out, and so were the replies a provider batch
-- returned for a job cancelled while it ran (their attempts are recorded;
-- the cancelled job's totals stop where the cancel found them).
--   final_*         the calls recorded as attempts: the jobs' latest runs
--                   (for a cancelled job, all its run's attempts), and their
--                   earlier runs
--   interrupted_*   the calls of deliveries that ended without a result
--   cost_usd        final_cost_usd + interrupted_cost_usd
--   earlier_runs_*  of final_*, the runs a requeue replaced
-- Example: SELECT * FROM batch_spend WHERE batch = 'demo-20261201-120000';
DROP VIEW batch_spend;
CREATE VIEW batch_spend AS
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

---- create above / drop below ----

DROP VIEW batch_spend;
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
