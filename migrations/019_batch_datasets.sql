-- 019_batch_datasets: the datasets a batch was enqueued from, each with the
-- rows enqueue read and the bad rows it left out of the batch because
-- --max-bad-rows let them pass. The batch's export is short of those rows,
-- and nothing in the ledger said so: report summary and report export say
-- it now. A dataset enqueued again replaces its row.
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

---- create above / drop below ----

DROP TABLE batch_datasets;
