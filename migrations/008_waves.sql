-- 008_waves: batch delivery. A batch with delivery 'batch' runs its jobs'
-- attempts in waves: provider batches (OpenAI Batch API, Anthropic Message
-- Batches) at half the price, answered within hours. A wave is recorded
-- before anything is sent, each of its requests with the job and attempt it
-- is; the ledger owns a job from the moment its place in a wave is
-- committed (its queue message is acked then). One worker at a time drives
-- a wave (a lease, taken over when it expires): upload, create, poll,
-- download, record each reply as an attempt, and put the jobs that need
-- another attempt in the next wave, or run them realtime near the deadline.
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
    UNIQUE (batch, number)
);
CREATE INDEX waves_open ON waves (next_poll_at) WHERE status NOT IN ('done', 'failed');

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
-- A job's attempt is in one wave at most.
CREATE UNIQUE INDEX wave_requests_attempt ON wave_requests (job_id, run, attempt_no);

-- The wave holding a job's next attempt; NULL when the queue has the job
-- (or it is final).
ALTER TABLE jobs ADD COLUMN wave_id bigint REFERENCES waves (id) ON DELETE SET NULL;

-- Attempts keep what batch delivery and prompt caching need: the feedback
-- sent after them (to go on from the ledger in a later wave), the wave
-- that carried them, the price basis (realtime or batch), cache writes and
-- the attempt's cost.
ALTER TABLE attempts ADD COLUMN feedback text NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN wave_id bigint;
ALTER TABLE attempts ADD COLUMN price_basis text NOT NULL DEFAULT 'realtime'
    CHECK (price_basis IN ('realtime', 'batch'));
ALTER TABLE attempts ADD COLUMN tokens_cache_write bigint NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN cost_usd numeric(18, 8);
-- provider_class: why a call of class 'provider' got no reply, as package
-- llm classifies it (rate_limited, server, timeout, too_large, expired,
-- cancelled, ...): an expired or cancelled batch request is an attempt of
-- its own class, retried in the next wave or realtime.
ALTER TABLE attempts ADD COLUMN provider_class text NOT NULL DEFAULT '';
ALTER TABLE interrupted_attempts ADD COLUMN provider_class text NOT NULL DEFAULT '';
ALTER TABLE interrupted_attempts ADD COLUMN price_basis text NOT NULL DEFAULT 'realtime';
ALTER TABLE interrupted_attempts ADD COLUMN tokens_cache_write bigint NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN tokens_cache_write bigint NOT NULL DEFAULT 0;

---- create above / drop below ----

ALTER TABLE jobs DROP COLUMN tokens_cache_write;
ALTER TABLE interrupted_attempts DROP COLUMN tokens_cache_write;
ALTER TABLE interrupted_attempts DROP COLUMN price_basis;
ALTER TABLE interrupted_attempts DROP COLUMN provider_class;
ALTER TABLE attempts DROP COLUMN provider_class;
ALTER TABLE attempts DROP COLUMN cost_usd;
ALTER TABLE attempts DROP COLUMN tokens_cache_write;
ALTER TABLE attempts DROP COLUMN price_basis;
ALTER TABLE attempts DROP COLUMN wave_id;
ALTER TABLE attempts DROP COLUMN feedback;
ALTER TABLE jobs DROP COLUMN wave_id;
DROP TABLE wave_requests;
DROP TABLE waves;
