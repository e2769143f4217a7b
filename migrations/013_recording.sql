-- 013_recording: whether an enqueue finished recording a batch's rows.
--   recording_since  set when an enqueue starts recording the rows of its
--                    dataset (its second pass), cleared when it has
--                    recorded them all; NULL otherwise. A batch whose
--                    enqueue was killed mid-pass holds only part of its
--                    rows: enqueue --resume then published what was
--                    recorded, report wait called the batch done, and the
--                    other rows were gone without a word.
ALTER TABLE batches ADD COLUMN recording_since timestamptz;

---- create above / drop below ----

ALTER TABLE batches DROP COLUMN recording_since;
