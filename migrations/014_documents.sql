-- 014_documents: a job's input can be a document (enqueue --document-field,
-- --document-file-field). Each document is stored once, by the SHA-256 of
-- its bytes, however many jobs share it; a job names its document by that
-- hash, and no job message carries the text. body is the document byte for
-- byte (valid UTF-8 without NUL, which enqueue checks), bytes its length.
--
-- jobs.document_hash has no foreign key: enqueue writes a chunk's
-- documents before the chunk's jobs, and a key checked on every row copied
-- into jobs would cost the jobs of no document too. A job whose document is
-- missing fails with an error naming the hash.
CREATE TABLE documents (
    hash       text PRIMARY KEY,
    bytes      integer NOT NULL CHECK (bytes >= 0),
    body       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE jobs ADD COLUMN document_hash text;

---- create above / drop below ----

ALTER TABLE jobs DROP COLUMN document_hash;
DROP TABLE documents;
