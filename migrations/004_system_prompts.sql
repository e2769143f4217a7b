-- 004_system_prompts: each distinct system prompt is stored once.
-- Every attempt of a batch is sent the same system prompt (the rules and the
-- schema, about 1.5 KB for a small schema). Kept in each attempt's request,
-- it was most of the attempts table's bytes, and Postgres parsed and
-- compressed it again for every attempt. Attempts now keep the messages
-- after it and its SHA-256; attempt_requests puts the two back together.
-- Rows written before this migration keep their whole request and a NULL
-- system_sha256, and read the same through the view.
CREATE TABLE system_prompts (
    sha256     text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    text       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- No foreign key: the prompt is written in the same transaction as the
-- first attempt that refers to it, and a per-row check would cost the COPY
-- of attempts more than the prompt saves.
ALTER TABLE attempts ADD COLUMN system_sha256 text;

COMMENT ON COLUMN attempts.request IS
    'messages sent after the system prompt (the whole request for rows with no system_sha256); NULL when only request_hash is kept';
COMMENT ON COLUMN attempts.system_sha256 IS
    'system_prompts.sha256 of the system prompt sent first; NULL when none was sent or only request_hash is kept';

-- attempt_requests: each attempt's request as sent, system prompt first.
-- Example: SELECT request FROM attempt_requests WHERE job_id = 'demo-42' ORDER BY attempt_no;
CREATE VIEW attempt_requests AS
SELECT a.job_id, a.attempt_no,
       CASE WHEN a.system_sha256 IS NULL THEN a.request
            ELSE jsonb_build_array(jsonb_build_object('role', 'system', 'content', p.text))
                 || coalesce(a.request, '[]'::jsonb)
       END AS request
FROM attempts a
LEFT JOIN system_prompts p ON p.sha256 = a.system_sha256;

---- create above / drop below ----

DROP VIEW attempt_requests;
COMMENT ON COLUMN attempts.request IS NULL;
ALTER TABLE attempts DROP COLUMN system_sha256;
DROP TABLE system_prompts;
