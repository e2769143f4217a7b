-- 001_baseline: the ledger as of v0.1.0. One row per batch, per distinct
-- schema and system prompt, per job (from the moment it is enqueued) and per
-- attempt (one provider call and its validation), plus what batch delivery,
-- requeues, spend caps and interrupted calls need. Migrations after this one
-- change it; see README.md in this directory.
--
-- Tables first, then indexes, then views (the ledger defines no functions:
-- its logic is the store package's SQL). Conventions of the views: batch is
-- '' for jobs rejected before their batch was known; a job is "finished"
-- once its status is anything but 'queued'; rates are float8 in [0, 1] and
-- NULL when their denominator is 0.

--------------------------------------------------------------------- tables

-- A schema is stored once, keyed by the sha256 (hex) of its canonical bytes
-- (compact JSON, object keys sorted).
CREATE TABLE schemas (
    hash        text PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{64}$'),
    body        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- A system prompt is stored once (every attempt of a batch is sent the same
-- one, the rules and the schema): attempts keep the messages after it and
-- its sha256, and attempt_requests puts the two back together.
CREATE TABLE system_prompts (
    sha256     text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    text       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A batch is what one enqueue command recorded: its settings, its jobs, and
-- what an operator did to it afterwards (cancel, spend caps). A batch a
-- worker made, for a job message of a batch the ledger did not hold, has
-- settings '{}'.
CREATE TABLE batches (
    name              text PRIMARY KEY,
    created_at        timestamptz NOT NULL DEFAULT now(),
    -- provider, model, mode, strategy, limits, template digest, delivery,
    -- as enqueue recorded them.
    settings          jsonb NOT NULL DEFAULT '{}'::jsonb,
    total_jobs        integer NOT NULL DEFAULT 0,
    -- the dataset's column names in the file's order (the CSV header, or
    -- the keys of the first JSONL row as written), for exports shaped like
    -- the input; NULL for a batch a worker made.
    input_columns     jsonb CHECK (input_columns IS NULL OR jsonb_typeof(input_columns) = 'array'),
    -- the schema every job of the batch is validated against.
    schema_hash       text REFERENCES schemas (hash),
    -- set by enqueue cancel.
    cancelled_at      timestamptz,
    -- spend caps (NULL: none).
    max_cost_usd      numeric(18, 8) CHECK (max_cost_usd >= 0),
    max_total_tokens  bigint CHECK (max_total_tokens >= 0)
);

-- A requeue (enqueue requeue) is a run of the batch, numbered from 2 (run 1
-- is the enqueue itself), with the settings its jobs run with.
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

-- One row per enqueue run recording a batch's rows (its second pass): a
-- random token, a digest of its dataset, when it began and its last
-- heartbeat. The run deletes its row when every row is recorded; a row
-- whose heartbeat stopped is a run that was killed, and the batch holds
-- only part of that dataset until a later run of the same dataset finishes
-- (or enqueue cancel removes the rows). One row per run, not one mark per
-- batch, so that two concurrent runs do not clear each other's mark and a
-- live run is told from a killed one.
CREATE TABLE batch_recordings (
    token          text PRIMARY KEY,
    batch          text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    dataset_sha256 text NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    beat_at        timestamptz NOT NULL DEFAULT now()
);

-- The datasets a batch was enqueued from, each with the rows enqueue read
-- and the bad rows --max-bad-rows let it leave out: report summary and
-- report export say when a batch is short of them. A dataset enqueued again
-- replaces its row.
CREATE TABLE batch_datasets (
    batch          text NOT NULL REFERENCES batches(name) ON DELETE CASCADE,
    dataset_sha256 text NOT NULL,
    rows_read      bigint NOT NULL CHECK (rows_read >= 0),
    bad_rows       bigint NOT NULL CHECK (bad_rows >= 0),
    -- The job ids the bad rows would have had, where a row was read that
    -- far: a later dataset (the file fixed) that records them makes the
    -- batch whole again. The other bad rows stay missing.
    bad_ids        text[] NOT NULL DEFAULT '{}',
    finished_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (batch, dataset_sha256)
);

-- A wave is one provider batch (OpenAI Batch API, Anthropic Message
-- Batches) carrying the next attempts of a delivery-'batch' batch's jobs. It
-- is recorded before anything is sent, each of its requests with the job
-- and attempt it is; the ledger owns a job from the moment its place in a
-- wave is committed. One worker at a time drives a wave (a lease, taken over
-- when it expires): upload, create, poll, download, record each reply as an
-- attempt, and put the jobs that need another attempt in the next wave, or
-- run them realtime near the deadline.
CREATE TABLE waves (
    id                 bigserial PRIMARY KEY,
    batch              text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    run                integer NOT NULL DEFAULT 1,
    -- 1 for a batch's first wave, then 2, 3, ... (repair waves)
    number             integer NOT NULL,
    provider           text NOT NULL,
    model              text NOT NULL,
    -- the batch's deadline: a wave that cannot end before it is cancelled
    -- and its jobs run realtime
    deadline           timestamptz,
    -- recorded: its requests are in the ledger, nothing sent yet;
    -- uploaded: OpenAI's input file is uploaded (input_file_id);
    -- submitted: the provider batch exists (provider_batch_id);
    -- ended: the provider says it is over, results not yet all recorded;
    -- done: every result recorded; failed: it could not be submitted or
    -- the provider failed it (its jobs were taken back); cancelling:
    -- enqueue cancel asked for it, a worker has not cancelled it yet.
    status             text NOT NULL DEFAULT 'recorded'
                       CHECK (status IN ('recorded', 'uploaded', 'submitted', 'ended', 'done', 'failed', 'cancelling')),
    input_file_id      text,
    provider_batch_id  text,
    requests           integer NOT NULL DEFAULT 0,
    succeeded          integer NOT NULL DEFAULT 0,
    errored            integer NOT NULL DEFAULT 0,
    expired            integer NOT NULL DEFAULT 0,
    cancelled          integer NOT NULL DEFAULT 0,
    error              text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    submitted_at       timestamptz,
    ended_at           timestamptz,
    done_at            timestamptz,
    -- the worker driving the wave, until lease_until; next_poll_at paces polls
    lease_owner        text,
    lease_until        timestamptz,
    next_poll_at       timestamptz,
    polls              integer NOT NULL DEFAULT 0,
    -- where the wave can be driven: the queue stream its realtime remainder
    -- is published to and the provider endpoint it was submitted to. A
    -- worker claims only waves of its own homes ('' = any).
    home               text NOT NULL DEFAULT '',
    -- when the provider first answered 404 for the batch, so that the
    -- grace before giving it up does not start again at each worker
    -- restart; NULL while the provider knows it.
    missing_since      timestamptz,
    UNIQUE (batch, number)
);

-- A job is one prompt to turn into one schema-valid value. It is inserted as
-- 'queued' by enqueue and set exactly once per run to a final status by the
-- first worker that finishes it: valid, invalid (attempts exhausted), failed
-- (permanent provider error), rejected (bad input), dead (delivered too
-- often), cancelled (enqueue cancel: never called) or over_budget (the
-- batch's spend cap was reached before the job was done). The row shows the
-- job's latest run; job_runs keeps the outcome of each earlier one.
CREATE TABLE jobs (
    id                   text PRIMARY KEY,
    -- batch is NULL only for a message rejected before its batch was known.
    batch                text REFERENCES batches (name),
    row_no               integer NOT NULL DEFAULT 0,
    schema_hash          text REFERENCES schemas (hash),
    status               text NOT NULL DEFAULT 'queued'
                         CHECK (status IN ('queued', 'valid', 'invalid', 'failed', 'rejected', 'dead', 'cancelled', 'over_budget')),
    published            boolean NOT NULL DEFAULT false,
    published_at         timestamptz,
    prompt               text NOT NULL DEFAULT '',
    provider             text NOT NULL DEFAULT '',
    model                text NOT NULL DEFAULT '',
    mode                 text NOT NULL DEFAULT '',
    strategy             text NOT NULL DEFAULT '',
    -- the input row's fields, exported next to the value.
    metadata             jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- the final value (valid: the value; invalid: the last candidate, if any).
    value                jsonb,
    error                text NOT NULL DEFAULT '',
    -- the raw message of a rejected or dead job, for inspection.
    payload              bytea,
    attempts             integer NOT NULL DEFAULT 0,
    calls                integer NOT NULL DEFAULT 0,
    -- valid on the first attempt that got a reply (a provider batch request
    -- that never ran is no try, as a realtime call's transport failure is
    -- none).
    first_attempt_valid  boolean NOT NULL DEFAULT false,
    repaired_locally     boolean NOT NULL DEFAULT false,
    tokens_in            bigint NOT NULL DEFAULT 0,
    tokens_out           bigint NOT NULL DEFAULT 0,
    tokens_cached        bigint NOT NULL DEFAULT 0,
    cost_usd             numeric(18, 8) NOT NULL DEFAULT 0,
    created_at           timestamptz NOT NULL DEFAULT now(),
    started_at           timestamptz,
    finished_at          timestamptz,
    wall_ms              bigint,
    -- JetStream delivery count of the message that finished the job.
    deliveries           integer NOT NULL DEFAULT 0,
    -- the class of the last failed attempt when the job is not valid.
    final_class          text NOT NULL DEFAULT '',
    run                  integer NOT NULL DEFAULT 1 CHECK (run >= 1),
    -- the wave holding the job's next attempt; NULL when the queue has the
    -- job (or it is final).
    wave_id              bigint REFERENCES waves (id) ON DELETE SET NULL,
    tokens_cache_write   bigint NOT NULL DEFAULT 0
);

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

-- An attempt is one provider call and what came of it. Rows are append-only
-- and written only by the worker whose result became final (or by the
-- driver of the wave that carried the call).
CREATE TABLE attempts (
    job_id             text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt_no         integer NOT NULL CHECK (attempt_no >= 1),
    -- see the column comment below.
    request            jsonb,
    request_hash       text NOT NULL DEFAULT '',
    raw                text NOT NULL DEFAULT '',
    -- where in the reply the value was found (e.g. "fence", "object").
    source             text NOT NULL DEFAULT '',
    -- local repairs applied before validation.
    repairs            jsonb,
    -- array of {path, keyword, class, message}.
    errors             jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- '' for a valid attempt.
    class              text NOT NULL DEFAULT ''
                       CHECK (class IN ('', 'syntax', 'shape', 'semantic', 'truncated', 'refusal', 'provider')),
    valid              boolean NOT NULL DEFAULT false,
    repaired_locally   boolean NOT NULL DEFAULT false,
    finish_reason      text NOT NULL DEFAULT '',
    latency_ms         bigint NOT NULL DEFAULT 0,
    tokens_in          bigint NOT NULL DEFAULT 0,
    tokens_out         bigint NOT NULL DEFAULT 0,
    tokens_cached      bigint NOT NULL DEFAULT 0,
    transport_retries  integer NOT NULL DEFAULT 0,
    retry_classes      jsonb,
    provider_status    integer NOT NULL DEFAULT 0,
    provider_error     text NOT NULL DEFAULT '',
    model              text NOT NULL DEFAULT '',
    request_id         text NOT NULL DEFAULT '',
    started_at         timestamptz,
    -- No foreign key to system_prompts: the prompt is written in the same
    -- transaction as the first attempt that refers to it, and a per-row
    -- check would cost the COPY of attempts more than the prompt saves.
    system_sha256      text,
    run                integer NOT NULL DEFAULT 1 CHECK (run >= 1),
    -- the feedback sent after the attempt, to go on from the ledger in a
    -- later wave.
    feedback           text NOT NULL DEFAULT '',
    -- the wave that carried the call, if any.
    wave_id            bigint,
    price_basis        text NOT NULL DEFAULT 'realtime'
                       CHECK (price_basis IN ('realtime', 'batch')),
    tokens_cache_write bigint NOT NULL DEFAULT 0,
    cost_usd           numeric(18, 8),
    -- why a call of class 'provider' got no reply, as package llm classifies
    -- it (rate_limited, server, timeout, too_large, expired, cancelled, ...).
    provider_class     text NOT NULL DEFAULT '',
    -- the schema-guided fixes applied to the value (each is also in
    -- repairs); an attempt made valid by them is a call saved.
    coerced            integer NOT NULL DEFAULT 0,
    -- how a reply to a patch request went: applied, parse_error,
    -- apply_error, out_of_scope ('' when the attempt answered none).
    patch_outcome      text NOT NULL DEFAULT '',
    -- the model had no price in the worker's table: cost_usd is 0 because
    -- the price is unknown, not because the call was free.
    unpriced           boolean NOT NULL DEFAULT false,
    PRIMARY KEY (job_id, run, attempt_no),
    CONSTRAINT attempts_errors_array CHECK (jsonb_typeof(errors) = 'array')
);

COMMENT ON COLUMN attempts.request IS
    'messages sent after the system prompt (the whole request for rows with no system_sha256); NULL when only request_hash is kept';
COMMENT ON COLUMN attempts.system_sha256 IS
    'system_prompts.sha256 of the system prompt sent first; NULL when none was sent or only request_hash is kept';

-- Every call a provider was paid for, or may have been, leaves a row: the
-- calls of a delivery that ended without the job's result are kept here,
-- with the columns of attempts and why:
--   handed_back  the job was handed back to the queue (provider still
--                failing after its retries, a wait longer than a worker
--                holds a job)
--   shutdown     the worker stopped and the grace period ran out
--   superseded   another delivery of the job had already finished it
--   outage       the call failed while the provider was down; the job
--                waited inside its delivery and went on (not paid for, and
--                not one of the job's attempts)
--   cancelled    the job's batch was cancelled while the call ran
--   crashed      a reply a worker that died had received and written to
--                its reply journal; the next worker with that spill
--                directory records it, unless the ledger has the call
-- hold is, for 'outage', which wait of the delivery the call came before
-- (1, 2, ...), 0 for every other reason: a resumed job numbers its next call
-- as the one that failed, and the hold keeps the rows apart.
CREATE TABLE interrupted_attempts (
    job_id             text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    delivery           integer NOT NULL,
    attempt_no         integer NOT NULL CHECK (attempt_no >= 1),
    reason             text NOT NULL
                       CHECK (reason IN ('handed_back', 'shutdown', 'superseded', 'outage', 'cancelled', 'crashed')),
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
    run                integer NOT NULL DEFAULT 1 CHECK (run >= 1),
    provider_class     text NOT NULL DEFAULT '',
    price_basis        text NOT NULL DEFAULT 'realtime',
    tokens_cache_write bigint NOT NULL DEFAULT 0,
    hold               integer NOT NULL DEFAULT 0 CHECK (hold >= 0),
    PRIMARY KEY (job_id, run, delivery, hold, attempt_no)
);

-- One request of a wave: the job's next attempt, as sent.
CREATE TABLE wave_requests (
    wave_id     bigint NOT NULL REFERENCES waves (id) ON DELETE CASCADE,
    custom_id   text NOT NULL,
    job_id      text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    run         integer NOT NULL,
    attempt_no  integer NOT NULL,
    -- the llm.Request, to upload it again after a crash
    request     jsonb NOT NULL,
    -- the job message (pipeline.Envelope): what the reply is checked against
    envelope    jsonb NOT NULL,
    -- pending until its reply (or failure) is recorded as an attempt
    recorded    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (wave_id, custom_id)
);

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

-- Prices per model in US dollars per million tokens, as the workers charge
-- them: each worker writes its price table (the built-in one, and --prices
-- over it) at start, defaults applied (a cache write not given costs the
-- input price, a batch price not given is half the realtime one). A model
-- no worker knows keeps the row it has. A model ending in '*' is a prefix
-- pattern. source says who wrote a row ('migration' or 'worker').
CREATE TABLE model_prices (
    model                        text PRIMARY KEY,
    input_per_mtok               numeric(12, 6) NOT NULL CHECK (input_per_mtok >= 0),
    output_per_mtok              numeric(12, 6) NOT NULL CHECK (output_per_mtok >= 0),
    cached_input_per_mtok        numeric(12, 6) NOT NULL CHECK (cached_input_per_mtok >= 0),
    cache_write_per_mtok         numeric(12, 6) NOT NULL DEFAULT 0 CHECK (cache_write_per_mtok >= 0),
    batch_input_per_mtok         numeric(12, 6) NOT NULL DEFAULT 0 CHECK (batch_input_per_mtok >= 0),
    batch_output_per_mtok        numeric(12, 6) NOT NULL DEFAULT 0 CHECK (batch_output_per_mtok >= 0),
    batch_cached_input_per_mtok  numeric(12, 6) NOT NULL DEFAULT 0 CHECK (batch_cached_input_per_mtok >= 0),
    batch_cache_write_per_mtok   numeric(12, 6) NOT NULL DEFAULT 0 CHECK (batch_cache_write_per_mtok >= 0),
    source                       text NOT NULL DEFAULT 'migration',
    updated_at                   timestamptz NOT NULL DEFAULT now()
);

INSERT INTO model_prices (model, input_per_mtok, output_per_mtok, cached_input_per_mtok, cache_write_per_mtok,
                          batch_input_per_mtok, batch_output_per_mtok, batch_cached_input_per_mtok, batch_cache_write_per_mtok) VALUES
    ('gpt-4o-mini',             0.15,  0.60, 0.075, 0.15, 0.075, 0.30, 0.0375, 0.075),
    ('gpt-4o',                  2.50, 10.00, 1.25,  2.50, 1.25,  5.00, 0.625,  1.25),
    ('claude-3-5-haiku-latest', 0.80,  4.00, 0.08,  0.80, 0.40,  2.00, 0.04,   0.40),
    ('claude-sonnet-4',         3.00, 15.00, 0.30,  3.00, 1.50,  7.50, 0.15,   1.50),
    ('sim-*',                   0,     0,    0,     0,    0,     0,    0,      0);

-------------------------------------------------------------------- indexes

CREATE INDEX jobs_batch_status ON jobs (batch, status);
-- Small and hot: the jobs still waiting for a worker.
CREATE INDEX jobs_queued ON jobs (batch) WHERE status = 'queued';
-- enqueue --resume: jobs recorded but not yet published, in row order.
CREATE INDEX jobs_unpublished ON jobs (batch, row_no) WHERE NOT published;
-- Append-only and large: a BRIN index serves time-range scans cheaply.
CREATE INDEX attempts_started_at ON attempts USING brin (started_at);
CREATE INDEX batch_recordings_batch ON batch_recordings (batch);
-- The waves a worker may have to drive.
CREATE INDEX waves_open ON waves (next_poll_at) WHERE status NOT IN ('done', 'failed');
-- A job's attempt is in one wave at most.
CREATE UNIQUE INDEX wave_requests_attempt ON wave_requests (job_id, run, attempt_no);
CREATE INDEX spend_holds_batch ON spend_holds (batch, expires_at);

---------------------------------------------------------------------- views
-- The questions users ask of a batch. Each is plain SQL meant to be queried
-- directly (psql) as well as by `report`.

-- batch_summary: one row per batch.
--   jobs, queued .. dead            job counts by status; finished = jobs - queued
--   first_attempt_valid             valid jobs whose first run that made a
--                                   call was valid on its first answered
--                                   attempt (a valid job requeued keeps its
--                                   first try)
--   repaired                        the other valid jobs, and those repaired
--                                   locally
--   valid_rate                      valid / finished
--   first_attempt_valid_rate        first_attempt_valid / finished
--   repair_rate                     repaired / valid
--   mean_attempts                   mean attempts, every run's, of the jobs
--                                   that reached the model (valid, invalid,
--                                   failed)
--   tokens_*, cost_usd              totals over every job of the batch
--                                   (latest runs; see batch_spend for all)
--   tokens_per_valid_job            (tokens_in + tokens_out) / valid: what one
--                                   valid value cost, failures included
--   cost_per_valid_job              cost_usd / valid
--   p50_wall_ms, p95_wall_ms        job wall time percentiles (finished jobs)
--   cancelled, over_budget, runs    more job counts, and the batch's runs
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

-- batch_spend: what a batch cost, every run and every call paid for. Costs
-- are added as numeric and converted to float8 once, at the end.
--   final_*         the calls recorded as attempts: the jobs' latest runs
--                   (for a cancelled job, all its run's attempts), and their
--                   earlier runs
--   interrupted_*   the calls of deliveries that ended without a result
--   cost_usd        final_cost_usd + interrupted_cost_usd
--   earlier_runs_*  of final_*, the runs a requeue replaced
-- Example: SELECT * FROM batch_spend WHERE batch = 'demo-20261201-120000';
CREATE VIEW batch_spend AS
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
-- many made attempt n+1 (the next attempt of the same run) and how many
-- were valid at n+1.
--   failed        jobs whose attempt n was not valid, by its class
--   retried       of those, jobs that made attempt n+1
--   valid_next    of those, jobs valid at attempt n+1
--   repair_rate   valid_next / retried; NULL when none was asked again (the
--                 last attempt a job was allowed, or jobs that ended
--                 another way)
-- Example: SELECT * FROM repair_effectiveness WHERE batch = 'demo' ORDER BY attempt_no, class;
CREATE VIEW repair_effectiveness AS
SELECT
    coalesce(j.batch, '')                                                      AS batch,
    a.attempt_no,
    a.class,
    count(*)                                                                   AS failed,
    count(n.job_id)                                                            AS retried,
    count(*) FILTER (WHERE n.valid)                                            AS valid_next,
    (count(*) FILTER (WHERE n.valid))::float8 / nullif(count(n.job_id), 0)     AS repair_rate
FROM attempts a
JOIN jobs j ON j.id = a.job_id
LEFT JOIN attempts n ON n.job_id = a.job_id AND n.run = a.run AND n.attempt_no = a.attempt_no + 1
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

-- attempt_requests: each attempt's request as sent, system prompt first.
-- Example: SELECT request FROM attempt_requests WHERE job_id = 'demo-42' ORDER BY run, attempt_no;
CREATE VIEW attempt_requests AS
SELECT a.job_id, a.attempt_no,
       CASE WHEN a.system_sha256 IS NULL THEN a.request
            ELSE jsonb_build_array(jsonb_build_object('role', 'system', 'content', p.text))
                 || coalesce(a.request, '[]'::jsonb)
       END AS request,
       a.run
FROM attempts a
LEFT JOIN system_prompts p ON p.sha256 = a.system_sha256;

---- create above / drop below ----

DROP VIEW attempt_requests;
DROP VIEW error_paths;
DROP VIEW repair_effectiveness;
DROP VIEW failure_classes;
DROP VIEW batch_spend;
DROP VIEW batch_summary;
DROP TABLE model_prices;
DROP TABLE spend_holds;
DROP TABLE spend_counters;
DROP TABLE wave_requests;
DROP TABLE interrupted_attempts;
DROP TABLE attempts;
DROP TABLE job_runs;
DROP TABLE jobs;
DROP TABLE waves;
DROP TABLE batch_datasets;
DROP TABLE batch_recordings;
DROP TABLE batch_runs;
DROP TABLE batches;
DROP TABLE system_prompts;
DROP TABLE schemas;
