-- 012_enqueue_publishing: enqueue records a chunk of new jobs as published
-- in the transaction that copies them in, instead of marking each job
-- published once the queue took it (an update of every row, as costly as
-- its insert). Until the queue has answered for the chunk, its job ids are
-- kept here under the token of the run's recording mark; the run then marks
-- unpublished the jobs the queue did not take and removes the row. A row
-- left by a run that died in between is reclaimed by the next enqueue or
-- --resume of the batch: its jobs still queued are marked unpublished and
-- published again (the stream drops a copy it holds by its message id).
CREATE TABLE enqueue_publishing (
    id         bigserial PRIMARY KEY,
    token      text NOT NULL,
    batch      text NOT NULL REFERENCES batches(name) ON DELETE CASCADE,
    job_ids    text[] NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX enqueue_publishing_batch ON enqueue_publishing (batch);

---- create above / drop below ----

DROP TABLE enqueue_publishing;
