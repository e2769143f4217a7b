-- 007_revalidations: enqueue revalidate checks a batch's stored values
-- (and, when asked, its stored replies) against another schema, its
-- rules and the evidence stage, with no provider call, and records the
-- outcome as a new run of the batch (batch_runs), each job's earlier run
-- kept in job_runs. One row per job and revalidation run: what was
-- checked (the value of prior_run, or its reply attempt_no), against which
-- schema (with its rules), and what came of it. A requeue of a job whose
-- revalidation failed goes on from the reply checked, its errors as
-- feedback.
CREATE TABLE revalidations (
    job_id       text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    run          integer NOT NULL CHECK (run >= 2),
    prior_run    integer NOT NULL CHECK (prior_run >= 1),
    -- the reply checked (with --replies); NULL: the run's final value
    attempt_no   integer,
    schema_hash  text NOT NULL REFERENCES schemas (hash),
    valid        boolean NOT NULL,
    class        text NOT NULL DEFAULT '',
    errors       jsonb NOT NULL DEFAULT '[]'::jsonb,
    warnings     jsonb,
    evidence     jsonb,
    checked_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, run)
);

-- The schema (with its rules) a run's value was checked against: a
-- revalidated job's earlier run keeps its own.
ALTER TABLE job_runs ADD COLUMN schema_hash text;

---- create above / drop below ----

ALTER TABLE job_runs DROP COLUMN schema_hash;
DROP TABLE revalidations;
