-- 018_first_answered_attempt: a job is valid on its first attempt when the
-- first attempt that got a reply was valid. A provider batch's request that
-- never ran (expired, errored, cancelled: an attempt of class 'provider'
-- with no reply) is no try, as a realtime call's transport failures are
-- none: such jobs counted as repaired, not first-try, so batch and realtime
-- figures could not be compared. Repaired is now "valid, not on the first
-- answered attempt, or repaired locally" (it was "more than one attempt").
UPDATE jobs j SET first_attempt_valid = true
WHERE j.status = 'valid' AND NOT j.first_attempt_valid
  AND EXISTS (SELECT 1 FROM attempts w WHERE w.job_id = j.id AND w.run = j.run AND w.wave_id IS NOT NULL AND w.class = 'provider')
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.job_id = j.id AND a.run = j.run AND NOT a.valid
                  AND NOT (a.class = 'provider' AND a.raw = ''));

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

---- create above / drop below ----

UPDATE jobs SET first_attempt_valid = false WHERE status = 'valid' AND first_attempt_valid AND attempts > 1;

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
                           AND (j.attempts > 1 OR j.repaired_locally))      AS repaired,
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
