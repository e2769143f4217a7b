-- 007_batch_actions: a batch an operator can act on after it ran.
--
-- Runs. `enqueue requeue` runs chosen jobs again, possibly with other
-- settings. Each time is a run of the batch, numbered from 1 (the enqueue
-- itself). A job row shows its latest run; the outcome of each earlier run
-- is kept in job_runs, and every attempt keeps its run number, so SQL can
-- still answer what the first run did.
CREATE TABLE batch_runs (
    batch       text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    run         integer NOT NULL CHECK (run >= 2),
    -- the settings the run's jobs run with (as batches.settings)
    settings    jsonb NOT NULL,
    -- what was asked for: statuses, class, and the settings changed
    request     jsonb NOT NULL DEFAULT '{}'::jsonb,
    jobs        integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (batch, run)
);

ALTER TABLE jobs ADD COLUMN run integer NOT NULL DEFAULT 1 CHECK (run >= 1);
ALTER TABLE attempts ADD COLUMN run integer NOT NULL DEFAULT 1 CHECK (run >= 1);
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD PRIMARY KEY (job_id, run, attempt_no);
ALTER TABLE interrupted_attempts ADD COLUMN run integer NOT NULL DEFAULT 1 CHECK (run >= 1);
ALTER TABLE interrupted_attempts DROP CONSTRAINT interrupted_attempts_pkey;
ALTER TABLE interrupted_attempts ADD PRIMARY KEY (job_id, run, delivery, attempt_no);

-- The final state of a job in a run that a later run replaced.
CREATE TABLE job_runs (
    job_id               text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    run                  integer NOT NULL,
    status               text NOT NULL,
    provider             text NOT NULL DEFAULT '',
    model                text NOT NULL DEFAULT '',
    value                jsonb,
    error                text NOT NULL DEFAULT '',
    final_class          text NOT NULL DEFAULT '',
    attempts             integer NOT NULL DEFAULT 0,
    calls                integer NOT NULL DEFAULT 0,
    first_attempt_valid  boolean NOT NULL DEFAULT false,
    repaired_locally     boolean NOT NULL DEFAULT false,
    tokens_in            bigint NOT NULL DEFAULT 0,
    tokens_out           bigint NOT NULL DEFAULT 0,
    tokens_cached        bigint NOT NULL DEFAULT 0,
    cost_usd             numeric(18, 8) NOT NULL DEFAULT 0,
    started_at           timestamptz,
    finished_at          timestamptz,
    deliveries           integer NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, run)
);

-- Two more final statuses: 'cancelled' (enqueue cancel: never called) and
-- 'over_budget' (the batch's spend cap was reached before the job was done).
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('queued', 'valid', 'invalid', 'failed', 'rejected', 'dead', 'cancelled', 'over_budget'));

-- Cancel and spend caps.
ALTER TABLE batches ADD COLUMN cancelled_at timestamptz;
ALTER TABLE batches ADD COLUMN max_cost_usd numeric(18, 8) CHECK (max_cost_usd >= 0);
ALTER TABLE batches ADD COLUMN max_total_tokens bigint CHECK (max_total_tokens >= 0);

-- What a capped batch has spent, charged by every worker after each call,
-- and the calls in flight, reserved before they are sent. A hold whose
-- worker died expires.
CREATE TABLE spend_counters (
    batch      text PRIMARY KEY REFERENCES batches (name) ON DELETE CASCADE,
    tokens     bigint NOT NULL DEFAULT 0,
    cost_usd   numeric(18, 8) NOT NULL DEFAULT 0,
    calls      bigint NOT NULL DEFAULT 0
);
CREATE TABLE spend_holds (
    id          bigserial PRIMARY KEY,
    batch       text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    tokens      bigint NOT NULL,
    cost_usd    numeric(18, 8) NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX spend_holds_batch ON spend_holds (batch, expires_at);

-- The views learn the new statuses and runs.
CREATE OR REPLACE VIEW attempt_requests AS
SELECT a.job_id, a.attempt_no,
       CASE WHEN a.system_sha256 IS NULL THEN a.request
            ELSE jsonb_build_array(jsonb_build_object('role', 'system', 'content', p.text))
                 || coalesce(a.request, '[]'::jsonb)
       END AS request,
       a.run
FROM attempts a
LEFT JOIN system_prompts p ON p.sha256 = a.system_sha256;

DROP VIEW batch_summary;
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
            FILTER (WHERE j.status <> 'queued' AND j.wall_ms IS NOT NULL)   AS p95_wall_ms,
        count(*) FILTER (WHERE j.status = 'cancelled')                      AS cancelled,
        count(*) FILTER (WHERE j.status = 'over_budget')                    AS over_budget,
        coalesce(max(j.run), 1)                                             AS runs
    FROM jobs j
    GROUP BY coalesce(j.batch, '')
) s;

-- repair_effectiveness: attempt n+1 is the next attempt of the same run.
CREATE OR REPLACE VIEW repair_effectiveness AS
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
LEFT JOIN attempts n ON n.job_id = a.job_id AND n.run = a.run AND n.attempt_no = a.attempt_no + 1
WHERE NOT a.valid
GROUP BY 1, 2, 3;

---- create above / drop below ----

DROP VIEW attempt_requests;
CREATE VIEW attempt_requests AS
SELECT a.job_id, a.attempt_no,
       CASE WHEN a.system_sha256 IS NULL THEN a.request
            ELSE jsonb_build_array(jsonb_build_object('role', 'system', 'content', p.text))
                 || coalesce(a.request, '[]'::jsonb)
       END AS request
FROM attempts a
LEFT JOIN system_prompts p ON p.sha256 = a.system_sha256;

CREATE OR REPLACE VIEW repair_effectiveness AS
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
DROP VIEW batch_summary;
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
DROP TABLE spend_holds;
DROP TABLE spend_counters;
ALTER TABLE batches DROP COLUMN max_total_tokens;
ALTER TABLE batches DROP COLUMN max_cost_usd;
ALTER TABLE batches DROP COLUMN cancelled_at;
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('queued', 'valid', 'invalid', 'failed', 'rejected', 'dead'));
DROP TABLE job_runs;
ALTER TABLE interrupted_attempts DROP CONSTRAINT interrupted_attempts_pkey;
ALTER TABLE interrupted_attempts DROP COLUMN run;
ALTER TABLE interrupted_attempts ADD PRIMARY KEY (job_id, delivery, attempt_no);
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts DROP COLUMN run;
ALTER TABLE attempts ADD PRIMARY KEY (job_id, attempt_no);
ALTER TABLE jobs DROP COLUMN run;
DROP TABLE batch_runs;
