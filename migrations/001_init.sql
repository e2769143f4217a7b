-- 001_init: the ledger tables. One row per batch, per distinct schema, per job
-- (from the moment it is enqueued) and per attempt (one provider call and its
-- validation).

-- A batch is one enqueue run: the settings it was started with and how many
-- jobs it holds.
CREATE TABLE batches (
    name        text PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- provider, model, mode, strategy and limits as enqueue recorded them.
    settings    jsonb NOT NULL DEFAULT '{}'::jsonb,
    total_jobs  integer NOT NULL DEFAULT 0
);

-- A schema is stored once, keyed by the sha256 (hex) of its canonical bytes
-- (compact JSON, object keys sorted).
CREATE TABLE schemas (
    hash        text PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{64}$'),
    body        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- A job is one prompt to turn into one schema-valid value. It is inserted as
-- 'queued' by enqueue and set exactly once to a final status by the first
-- worker that finishes it: valid, invalid (attempts exhausted), failed
-- (permanent provider error or budget), rejected (bad input) or dead
-- (delivered too often).
CREATE TABLE jobs (
    id                   text PRIMARY KEY,
    -- batch is NULL only for a message rejected before its batch was known.
    batch                text REFERENCES batches (name),
    row_no               integer NOT NULL DEFAULT 0,
    schema_hash          text REFERENCES schemas (hash),
    status               text NOT NULL DEFAULT 'queued'
                         CHECK (status IN ('queued', 'valid', 'invalid', 'failed', 'rejected', 'dead')),
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
    final_class          text NOT NULL DEFAULT ''
);

CREATE INDEX jobs_batch_status ON jobs (batch, status);
-- Small and hot: the jobs still waiting for a worker.
CREATE INDEX jobs_queued ON jobs (batch) WHERE status = 'queued';
-- enqueue --resume: jobs recorded but not yet published, in row order.
CREATE INDEX jobs_unpublished ON jobs (batch, row_no) WHERE NOT published;

-- An attempt is one provider call and what came of it. Rows are append-only
-- and written only by the worker whose result became final.
CREATE TABLE attempts (
    job_id             text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt_no         integer NOT NULL CHECK (attempt_no >= 1),
    -- the request as sent (messages), or only its hash when configured so.
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
    PRIMARY KEY (job_id, attempt_no)
);

-- Append-only and large: a BRIN index serves time-range scans cheaply.
CREATE INDEX attempts_started_at ON attempts USING brin (started_at);

---- create above / drop below ----

DROP TABLE attempts;
DROP TABLE jobs;
DROP TABLE schemas;
DROP TABLE batches;
