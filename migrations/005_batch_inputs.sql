-- 005_batch_inputs: what a batch was made from, for exports that look like
-- the input and for re-runs that must not silently change it.
--   input_columns  the dataset's column names in the file's order (the CSV
--                  header, or the keys of the first JSONL row as written);
--                  NULL for batches enqueued before this migration.
--   schema_hash    the schema every job of the batch is validated against.
ALTER TABLE batches ADD COLUMN input_columns jsonb
    CHECK (input_columns IS NULL OR jsonb_typeof(input_columns) = 'array');
ALTER TABLE batches ADD COLUMN schema_hash text REFERENCES schemas (hash);

---- create above / drop below ----

ALTER TABLE batches DROP COLUMN schema_hash;
ALTER TABLE batches DROP COLUMN input_columns;
