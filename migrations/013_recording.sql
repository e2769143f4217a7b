-- 013_recording: whether enqueue runs finished recording a batch's rows.
--   batch_recordings  one row per enqueue run in its second pass (recording
--                     the rows of its dataset): a random token, a digest of
--                     its dataset, when it began and its last heartbeat.
--                     The run deletes its row when every row is recorded.
--                     A row whose heartbeat stopped is a run that was
--                     killed: the batch holds only part of that dataset. A
--                     later run of the same dataset removes it when it
--                     finishes; enqueue cancel removes them all. Before,
--                     enqueue --resume of such a batch published what was
--                     recorded, report wait called the batch done, and the
--                     other rows were gone without a word. (One mark per
--                     batch would be cleared by whichever of two
--                     concurrent runs finished first, and could not tell a
--                     run still going from a killed one.)
CREATE TABLE batch_recordings (
    token          text PRIMARY KEY,
    batch          text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    dataset_sha256 text NOT NULL,
    started_at     timestamptz NOT NULL DEFAULT now(),
    beat_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX batch_recordings_batch ON batch_recordings (batch);

---- create above / drop below ----

DROP TABLE batch_recordings;
