-- 003_views: the questions users ask of a batch, as views. Each is plain SQL
-- meant to be queried directly (psql) as well as by `report`.
--
-- Conventions: batch is '' for jobs rejected before their batch was known;
-- a job is "finished" once its status is anything but 'queued'; rates are
-- float8 in [0, 1] and NULL when their denominator is 0.

-- Every attempt's errors must be a JSON array (possibly empty).
ALTER TABLE attempts ADD CONSTRAINT attempts_errors_array CHECK (jsonb_typeof(errors) = 'array');

-- batch_summary: one row per batch.
--   jobs, queued .. dead            job counts by status; finished = jobs - queued
--   valid_rate                      valid / finished
--   first_attempt_valid_rate        jobs valid on their first attempt / finished
--   repair_rate                     valid jobs that needed more than one attempt
--                                   or a local repair / valid
--   mean_attempts                   mean attempts of the jobs that reached the
--                                   model (valid, invalid, failed)
--   tokens_*, cost_usd              totals over every job of the batch
--   tokens_per_valid_job            (tokens_in + tokens_out) / valid: what one
--                                   valid value cost, failures included
--   cost_per_valid_job              cost_usd / valid
--   p50_wall_ms, p95_wall_ms        job wall time percentiles (finished jobs)
-- Example: SELECT batch, valid_rate, p95_wall_ms FROM batch_summary WHERE batch = 'demo';
CREATE VIEW batch_summary AS
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
            FILTER (WHERE j.status <> 'queued' AND j.wall_ms IS NOT NULL)   AS p95_wall_ms
    FROM jobs j
    GROUP BY coalesce(j.batch, '')
) s;

-- failure_classes: failed attempts by batch, model, attempt number and class.
--   attempts   attempts with that number that ended in that class
--   share      attempts / every attempt (valid or not) with that batch, model
--              and number: how often attempt n fails this way
-- Example: SELECT * FROM failure_classes WHERE batch = 'demo' ORDER BY attempt_no, attempts DESC;
CREATE VIEW failure_classes AS
SELECT batch, model, attempt_no, class, attempts, attempts::float8 / total AS share
FROM (
    SELECT
        coalesce(j.batch, '')                                           AS batch,
        coalesce(nullif(a.model, ''), j.model)                          AS model,
        a.attempt_no,
        a.class,
        count(*)                                                        AS attempts,
        sum(count(*)) OVER (PARTITION BY coalesce(j.batch, ''),
                            coalesce(nullif(a.model, ''), j.model),
                            a.attempt_no)                               AS total
    FROM attempts a
    JOIN jobs j ON j.id = a.job_id
    GROUP BY 1, 2, 3, 4
) c
WHERE class <> '';

-- repair_effectiveness: of the jobs whose attempt n failed with a class, how
-- many made attempt n+1 and how many were valid at n+1.
--   failed        jobs whose attempt n was not valid, by its class
--   retried       of those, jobs that made attempt n+1
--   valid_next    of those, jobs valid at attempt n+1
--   repair_rate   valid_next / failed
-- Example: SELECT * FROM repair_effectiveness WHERE batch = 'demo' ORDER BY attempt_no, class;
CREATE VIEW repair_effectiveness AS
SELECT
    coalesce(j.batch, '')                                   AS batch,
    a.attempt_no,
    a.class,
    count(*)                                                AS failed,
    count(n.job_id)                                         AS retried,
    count(*) FILTER (WHERE n.valid)                         AS valid_next,
    (count(*) FILTER (WHERE n.valid))::float8 / count(*)    AS repair_rate
FROM attempts a
JOIN jobs j ON j.id = a.job_id
LEFT JOIN attempts n ON n.job_id = a.job_id AND n.attempt_no = a.attempt_no + 1
WHERE NOT a.valid
GROUP BY 1, 2, 3;

-- error_paths: validation errors by batch, schema path and keyword. Array
-- indices in the JSON pointer are folded to '*' (/items/3/name becomes
-- /items/*/name) so one schema location is one row.
--   errors   error entries across every attempt
--   jobs     distinct jobs with at least one such error
-- Example: SELECT path, keyword, errors FROM error_paths WHERE batch = 'demo' ORDER BY errors DESC LIMIT 10;
CREATE VIEW error_paths AS
SELECT
    coalesce(j.batch, '')                                                   AS batch,
    regexp_replace(coalesce(e->>'path', e->>'pointer', ''),
                   '/[0-9]+(?=/|$)', '/*', 'g')                             AS path,
    coalesce(e->>'keyword', '')                                             AS keyword,
    coalesce(e->>'class', '')                                               AS class,
    count(*)                                                                AS errors,
    count(DISTINCT a.job_id)                                                AS jobs
FROM attempts a
JOIN jobs j ON j.id = a.job_id
CROSS JOIN LATERAL jsonb_array_elements(a.errors) e
GROUP BY 1, 2, 3, 4;

---- create above / drop below ----

DROP VIEW error_paths;
DROP VIEW repair_effectiveness;
DROP VIEW failure_classes;
DROP VIEW batch_summary;
ALTER TABLE attempts DROP CONSTRAINT attempts_errors_array;
