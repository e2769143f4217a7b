-- 020_first_try_across_runs: a requeued job was counted by the summary as
-- its latest run alone: 602 jobs that had failed 3 attempts in run 1 and
-- were valid on run 2's first became "first try", so a requeue raised
-- 1ST-TRY% (51.7% to 54.7%) and lowered ATTEMPTS (1.65 to 1.57). A valid
-- job is first-try now when the first run of it that made a call was valid
-- on its first answered attempt (a valid job requeued keeps its first
-- try), REPAIRED% counts the others, and ATTEMPTS adds up every run's.
CREATE OR REPLACE VIEW batch_summary AS
SELECT
    s.*,
    s.valid::float8 / nullif(s.finished, 0)                     AS valid_rate,
    s.first_attempt_valid::float8 / nullif(s.finished, 0)       AS first_attempt_valid_rate,
    s.repaired::float8 / nullif(s.valid, 0)                     AS repair_rate,
    (s.tokens_in + s.tokens_out)::float8 / nullif(s.valid, 0)   AS tokens_per_valid_job,
    s.cost_usd / nullif(s.valid, 0)                             AS cost_per_valid_job
FROM (
    SELECT
        coalesce(j.batch, '')                                               AS batch,
        count(*)                                                            AS jobs,
        count(*) FILTER (WHERE j.status = 'queued')                         AS queued,
        count(*) FILTER (WHERE j.status = 'valid')                          AS valid,
        count(*) FILTER (WHERE j.status = 'invalid')                        AS invalid,
        count(*) FILTER (WHERE j.status = 'failed')                         AS failed,
        count(*) FILTER (WHERE j.status = 'rejected')                       AS rejected,
        count(*) FILTER (WHERE j.status = 'dead')                           AS dead,
        count(*) FILTER (WHERE j.status <> 'queued')                        AS finished,
        count(*) FILTER (WHERE j.status = 'valid' AND j.first_try)          AS first_attempt_valid,
        count(*) FILTER (WHERE j.status = 'valid'
                           AND (NOT j.first_try OR j.repaired_locally))     AS repaired,
        coalesce(avg(j.attempts + j.earlier_attempts) FILTER (
            WHERE j.status IN ('valid', 'invalid', 'failed')), 0)::float8   AS mean_attempts,
        coalesce(sum(j.tokens_in), 0)::bigint                               AS tokens_in,
        coalesce(sum(j.tokens_out), 0)::bigint                              AS tokens_out,
        coalesce(sum(j.tokens_cached), 0)::bigint                           AS tokens_cached,
        coalesce(sum(j.cost_usd), 0)::float8                                AS cost_usd,
        percentile_cont(0.5) WITHIN GROUP (ORDER BY j.wall_ms)
            FILTER (WHERE j.status <> 'queued' AND j.wall_ms IS NOT NULL)   AS p50_wall_ms,
        percentile_cont(0.95) WITHIN GROUP (ORDER BY j.wall_ms)
            FILTER (WHERE j.status <> 'queued' AND j.wall_ms IS NOT NULL)   AS p95_wall_ms,
        count(*) FILTER (WHERE j.status = 'cancelled')                      AS cancelled,
        count(*) FILTER (WHERE j.status = 'over_budget')                    AS over_budget,
        coalesce(max(j.run), 1)                                             AS runs
    FROM (
        -- A requeued job's first try was in its first run that made a
        -- call (valid there or not), and its attempts are those of every
        -- run.
        SELECT j.*,
               CASE WHEN j.run = 1 THEN j.first_attempt_valid
                    ELSE coalesce((SELECT r.first_attempt_valid FROM job_runs r
                                   WHERE r.job_id = j.id AND r.run < j.run AND r.calls > 0
                                   ORDER BY r.run LIMIT 1), j.first_attempt_valid) END AS first_try,
               CASE WHEN j.run > 1 THEN coalesce((
                   SELECT sum(r.attempts) FROM job_runs r WHERE r.job_id = j.id AND r.run < j.run), 0)
               ELSE 0 END AS earlier_attempts
        FROM jobs j
    ) j
    GROUP BY coalesce(j.batch, '')
) s;

---- create above / drop below ----

CREATE OR REPLACE VIEW batch_summary AS
SELECT
    s.*,
    s.valid::float8 / nullif(s.finished, 0)                     AS valid_rate,
    s.first_attempt_valid::float8 / nullif(s.finished, 0)       AS first_attempt_valid_rate,
    s.repaired::float8 / nullif(s.valid, 0)                     AS repair_rate,
    (s.tokens_in + s.tokens_out)::float8 / nullif(s.valid, 0)   AS tokens_per_valid_job,
    s.cost_usd / nullif(s.valid, 0)                             AS cost_per_valid_job
FROM (
    SELECT
        coalesce(j.batch, '')                                               AS batch,
        count(*)                                                            AS jobs,
        count(*) FILTER (WHERE j.status = 'queued')                         AS queued,
        count(*) FILTER (WHERE j.status = 'valid')                          AS valid,
        count(*) FILTER (WHERE j.status = 'invalid')                        AS invalid,
        count(*) FILTER (WHERE j.status = 'failed')                         AS failed,
        count(*) FILTER (WHERE j.status = 'rejected')                       AS rejected,
        count(*) FILTER (WHERE j.status = 'dead')                           AS dead,
        count(*) FILTER (WHERE j.status <> 'queued')                        AS finished,
        count(*) FILTER (WHERE j.status = 'valid' AND j.first_attempt_valid) AS first_attempt_valid,
        count(*) FILTER (WHERE j.status = 'valid'
                           AND (NOT j.first_attempt_valid OR j.repaired_locally)) AS repaired,
        coalesce(avg(j.attempts) FILTER (
            WHERE j.status IN ('valid', 'invalid', 'failed')), 0)::float8   AS mean_attempts,
        coalesce(sum(j.tokens_in), 0)::bigint                               AS tokens_in,
        coalesce(sum(j.tokens_out), 0)::bigint                              AS tokens_out,
        coalesce(sum(j.tokens_cached), 0)::bigint                           AS tokens_cached,
        coalesce(sum(j.cost_usd), 0)::float8                                AS cost_usd,
        percentile_cont(0.5) WITHIN GROUP (ORDER BY j.wall_ms)
            FILTER (WHERE j.status <> 'queued' AND j.wall_ms IS NOT NULL)   AS p50_wall_ms,
        percentile_cont(0.95) WITHIN GROUP (ORDER BY j.wall_ms)
            FILTER (WHERE j.status <> 'queued' AND j.wall_ms IS NOT NULL)   AS p95_wall_ms,
        count(*) FILTER (WHERE j.status = 'cancelled')                      AS cancelled,
        count(*) FILTER (WHERE j.status = 'over_budget')                    AS over_budget,
        coalesce(max(j.run), 1)                                             AS runs
    FROM jobs j
    GROUP BY coalesce(j.batch, '')
) s;
