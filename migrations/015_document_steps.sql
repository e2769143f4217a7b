-- 015_document_steps: a document job (strategies parallel, sequential and
-- agent) makes several kinds of call, and each attempt keeps which it was:
--   step         chunk, merge, repair or agent; NULL for the attempts of
--                the other strategies (one conversation, no steps)
--   chunk_n      on a chunk step, the chunk read (0 for the first), and
--   chunk_start  its place in the document: code point offsets, half
--   chunk_end    open, like evidence spans
--   fields       on a step with a value, the non-null strings, numbers and
--                booleans it held (each array item's counted, the grain of
--                evidence grades): what a chunk found
--   tool_calls   the reply's tool calls, [{id, name, arguments}], in order
--                (the agent strategy)
--   conflicts    on a merge step, where the chunks' values disagreed,
--                [{path, values, chunks, chosen}]
-- The ordinary job's row stays as small as it was: every new column is
-- NULL there, which costs a bit of the row's null bitmap. interrupted_
-- attempts keeps the same columns, so that a call kept apart still says
-- which step it was.
--
-- Their checks are added NOT VALID: the rows already in the ledger hold
-- NULL in every new column and pass them, and validating would read the
-- whole attempts table under its lock for nothing. New rows are checked.
--
-- Reports read rollups, never a scan that grows with the batch (see 009):
-- a statement trigger on attempts, attempts_rollup_steps, keeps
--   batch_rollup_steps      a batch's calls by step and class: attempts,
--                           valid ones, tokens, cost, tool calls, merge
--                           conflicts, and the evidence grades of the
--                           steps' values (attempts.evidence)
--   batch_rollup_chunks     chunk steps by chunk number: attempts, valid
--                           ones, and the fields their values held
--   batch_rollup_conflicts  merge conflicts by path (array indices folded
--                           to '*', as evidence_grades folds them)
-- counting every run's attempts (a requeued job's earlier runs too), as
-- batch_rollup_classes does; report purge leaves them. The trigger fires
-- after attempts_rollup (triggers fire in name order), whose lock on each
-- batch's batch_rollups row orders the writers of one batch, and it
-- returns at once from a statement with no step.
--
-- Views: step_calls, chunk_fields and merge_conflicts read the rollups;
-- attempt_requests gains each attempt's step and chunk.

ALTER TABLE attempts
    ADD COLUMN step text,
    ADD COLUMN chunk_n integer,
    ADD COLUMN chunk_start integer,
    ADD COLUMN chunk_end integer,
    ADD COLUMN fields integer,
    ADD COLUMN tool_calls jsonb,
    ADD COLUMN conflicts jsonb;
ALTER TABLE attempts ADD CONSTRAINT attempts_step_check
    CHECK (step IN ('chunk', 'merge', 'repair', 'agent')) NOT VALID;
ALTER TABLE attempts ADD CONSTRAINT attempts_chunk_check
    CHECK ((chunk_n IS NULL AND chunk_start IS NULL AND chunk_end IS NULL)
           OR (chunk_n >= 0 AND chunk_start >= 0 AND chunk_end >= chunk_start)) NOT VALID;
ALTER TABLE attempts ADD CONSTRAINT attempts_fields_check CHECK (fields >= 0) NOT VALID;
ALTER TABLE attempts ADD CONSTRAINT attempts_tool_calls_array
    CHECK (tool_calls IS NULL OR jsonb_typeof(tool_calls) = 'array') NOT VALID;
ALTER TABLE attempts ADD CONSTRAINT attempts_conflicts_array
    CHECK (conflicts IS NULL OR jsonb_typeof(conflicts) = 'array') NOT VALID;

-- A call kept apart is not counted by step: its columns are only read
-- back with it.
ALTER TABLE interrupted_attempts
    ADD COLUMN step text,
    ADD COLUMN chunk_n integer,
    ADD COLUMN chunk_start integer,
    ADD COLUMN chunk_end integer,
    ADD COLUMN fields integer,
    ADD COLUMN tool_calls jsonb,
    ADD COLUMN conflicts jsonb;

CREATE TABLE batch_rollup_steps (
    batch         text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    step          text NOT NULL,
    -- the attempt's class: '' for a valid one
    class         text NOT NULL,
    attempts      bigint NOT NULL DEFAULT 0,
    valid         bigint NOT NULL DEFAULT 0,
    tokens_in     bigint NOT NULL DEFAULT 0,
    tokens_out    bigint NOT NULL DEFAULT 0,
    tokens_cached bigint NOT NULL DEFAULT 0,
    cost_usd      numeric NOT NULL DEFAULT 0,
    -- attempts the worker had no price for (their cost counts 0)
    unpriced      bigint NOT NULL DEFAULT 0,
    tool_calls    bigint NOT NULL DEFAULT 0,
    -- merge conflicts, and the merge attempts with at least one
    conflicts     bigint NOT NULL DEFAULT 0,
    conflicted    bigint NOT NULL DEFAULT 0,
    -- attempts whose value the evidence stage graded, and its grades
    graded        bigint NOT NULL DEFAULT 0,
    leaves        bigint NOT NULL DEFAULT 0,
    exact         bigint NOT NULL DEFAULT 0,
    normalized    bigint NOT NULL DEFAULT 0,
    fuzzy         bigint NOT NULL DEFAULT 0,
    none          bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, step, class)
);

CREATE TABLE batch_rollup_chunks (
    batch      text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    chunk      integer NOT NULL,
    attempts   bigint NOT NULL DEFAULT 0,
    valid      bigint NOT NULL DEFAULT 0,
    -- attempts with a value (fields not NULL), the fields they held, and
    -- those whose value held none
    with_value bigint NOT NULL DEFAULT 0,
    fields     bigint NOT NULL DEFAULT 0,
    empty      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, chunk)
);

CREATE TABLE batch_rollup_conflicts (
    batch     text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    path      text NOT NULL,
    conflicts bigint NOT NULL DEFAULT 0,
    -- distinct merge attempts with a conflict at the path
    merges    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, path)
);

-- Adds the step attempts of the statement (new_attempts) to the rollups.
-- Rows are upserted in key order, so that two writers of one batch (held
-- in order by attempts_rollup's lock anyway) never wait on each other
-- crosswise.
CREATE FUNCTION fixpoint_attempts_rollup_steps() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_attempts WHERE step IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    WITH s AS MATERIALIZED (
        SELECT row_number() OVER () AS i, j.batch, n.step, n.class, n.valid, n.chunk_n, n.fields,
               n.tokens_in, n.tokens_out, n.tokens_cached, coalesce(n.cost_usd, 0) AS cost_usd, n.unpriced,
               CASE WHEN jsonb_typeof(n.tool_calls) = 'array' THEN jsonb_array_length(n.tool_calls) ELSE 0 END AS tool_calls,
               CASE WHEN jsonb_typeof(n.conflicts) = 'array' THEN n.conflicts END AS conflicts,
               CASE WHEN jsonb_typeof(n.evidence) = 'array' THEN n.evidence END AS evidence
        FROM new_attempts n
        CROSS JOIN LATERAL (SELECT batch FROM jobs WHERE id = n.job_id AND batch IS NOT NULL LIMIT 1) j
        WHERE n.step IS NOT NULL
    ), steps AS (
        INSERT INTO batch_rollup_steps AS r (batch, step, class, attempts, valid, tokens_in, tokens_out, tokens_cached,
                                             cost_usd, unpriced, tool_calls, conflicts, conflicted,
                                             graded, leaves, exact, normalized, fuzzy, none)
        SELECT s.batch, s.step, s.class, count(*), count(*) FILTER (WHERE s.valid),
               sum(s.tokens_in), sum(s.tokens_out), sum(s.tokens_cached), sum(s.cost_usd),
               count(*) FILTER (WHERE s.unpriced), sum(s.tool_calls),
               coalesce(sum(jsonb_array_length(s.conflicts)), 0),
               count(*) FILTER (WHERE jsonb_array_length(s.conflicts) > 0),
               count(s.evidence), sum(g.leaves), sum(g.exact), sum(g.normalized), sum(g.fuzzy), sum(g.none)
        FROM s
        CROSS JOIN LATERAL (
            SELECT count(*) AS leaves,
                   count(*) FILTER (WHERE e->>'grade' = 'exact') AS exact,
                   count(*) FILTER (WHERE e->>'grade' = 'normalized') AS normalized,
                   count(*) FILTER (WHERE e->>'grade' = 'fuzzy') AS fuzzy,
                   count(*) FILTER (WHERE e->>'grade' = 'none') AS none
            FROM jsonb_array_elements(s.evidence) e
        ) g
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (batch, step, class) DO UPDATE SET
            attempts = r.attempts + EXCLUDED.attempts, valid = r.valid + EXCLUDED.valid,
            tokens_in = r.tokens_in + EXCLUDED.tokens_in, tokens_out = r.tokens_out + EXCLUDED.tokens_out,
            tokens_cached = r.tokens_cached + EXCLUDED.tokens_cached, cost_usd = r.cost_usd + EXCLUDED.cost_usd,
            unpriced = r.unpriced + EXCLUDED.unpriced, tool_calls = r.tool_calls + EXCLUDED.tool_calls,
            conflicts = r.conflicts + EXCLUDED.conflicts, conflicted = r.conflicted + EXCLUDED.conflicted,
            graded = r.graded + EXCLUDED.graded, leaves = r.leaves + EXCLUDED.leaves, exact = r.exact + EXCLUDED.exact,
            normalized = r.normalized + EXCLUDED.normalized, fuzzy = r.fuzzy + EXCLUDED.fuzzy, none = r.none + EXCLUDED.none
    ), chunks AS (
        INSERT INTO batch_rollup_chunks AS r (batch, chunk, attempts, valid, with_value, fields, empty)
        SELECT batch, chunk_n, count(*), count(*) FILTER (WHERE valid), count(fields), coalesce(sum(fields), 0),
               count(*) FILTER (WHERE fields = 0)
        FROM s
        WHERE step = 'chunk' AND chunk_n IS NOT NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (batch, chunk) DO UPDATE SET
            attempts = r.attempts + EXCLUDED.attempts, valid = r.valid + EXCLUDED.valid,
            with_value = r.with_value + EXCLUDED.with_value, fields = r.fields + EXCLUDED.fields,
            empty = r.empty + EXCLUDED.empty
    )
    INSERT INTO batch_rollup_conflicts AS r (batch, path, conflicts, merges)
    SELECT batch, path, count(*), count(DISTINCT i) FROM (
        SELECT s.i, s.batch, regexp_replace(coalesce(c->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path
        FROM s CROSS JOIN LATERAL jsonb_array_elements(s.conflicts) c
    ) u
    GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (batch, path) DO UPDATE SET
        conflicts = r.conflicts + EXCLUDED.conflicts, merges = r.merges + EXCLUDED.merges;
    RETURN NULL;
END $$;

CREATE TRIGGER attempts_rollup_steps AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_attempts_rollup_steps();
-- Nothing to count from the ledger as it is: no attempt made before this
-- migration has a step.

-- step_calls: a batch's calls by step kind (chunk, merge, repair, agent)
-- and class, every run's; the attempts of the other strategies have no
-- step and are not in it.
--   attempts, valid          calls, and those whose value the step took
--   tokens_*, cost_usd       what they used and cost
--   tool_calls               the replies' tool calls (agent turns)
--   conflicts, conflicted    merge conflicts, and the merges with one
--   graded, leaves, ...      attempts the evidence stage graded, and the
--                            grades of their values' leaves
-- Example: SELECT step, sum(attempts), sum(valid) FROM step_calls WHERE batch = 'contracts' GROUP BY step;
CREATE VIEW step_calls AS
SELECT batch, step, class, attempts, valid, tokens_in, tokens_out, tokens_cached, cost_usd, unpriced,
       tool_calls, conflicts, conflicted, graded, leaves, exact, normalized, fuzzy, none
FROM batch_rollup_steps
WHERE attempts > 0;

-- chunk_fields: a batch's chunk steps by chunk number (0 the first),
-- with the fields their values held: mean_fields over the attempts with
-- a value, empty those whose value held none.
-- Example: SELECT chunk, attempts, mean_fields, empty FROM chunk_fields WHERE batch = 'contracts' ORDER BY chunk;
CREATE VIEW chunk_fields AS
SELECT batch, chunk, attempts, valid, with_value, fields, empty,
       CASE WHEN with_value > 0 THEN fields::float8 / with_value END AS mean_fields
FROM batch_rollup_chunks
WHERE attempts > 0;

-- merge_conflicts: where a batch's merges found the chunks disagreeing,
-- by path (array indices folded to '*'): conflicts there, and the merges
-- that had one there.
-- Example: SELECT path, conflicts FROM merge_conflicts WHERE batch = 'contracts' ORDER BY conflicts DESC LIMIT 10;
CREATE VIEW merge_conflicts AS
SELECT batch, path, conflicts, merges
FROM batch_rollup_conflicts
WHERE conflicts > 0;

-- attempt_requests, as 001's, with each attempt's step and chunk (NULL
-- for the attempts of the other strategies).
CREATE OR REPLACE VIEW attempt_requests AS
SELECT a.job_id, a.attempt_no,
       CASE WHEN a.system_sha256 IS NULL THEN a.request
            ELSE jsonb_build_array(jsonb_build_object('role', 'system', 'content', p.text))
                 || coalesce(a.request, '[]'::jsonb)
       END AS request,
       a.run, a.step, a.chunk_n
FROM attempts a
LEFT JOIN system_prompts p ON p.sha256 = a.system_sha256;

---- create above / drop below ----

DROP VIEW attempt_requests;
CREATE VIEW attempt_requests AS
SELECT a.job_id, a.attempt_no,
       CASE WHEN a.system_sha256 IS NULL THEN a.request
            ELSE jsonb_build_array(jsonb_build_object('role', 'system', 'content', p.text))
                 || coalesce(a.request, '[]'::jsonb)
       END AS request,
       a.run
FROM attempts a
LEFT JOIN system_prompts p ON p.sha256 = a.system_sha256;
DROP VIEW merge_conflicts;
DROP VIEW chunk_fields;
DROP VIEW step_calls;
DROP TRIGGER attempts_rollup_steps ON attempts;
DROP FUNCTION fixpoint_attempts_rollup_steps();
DROP TABLE batch_rollup_conflicts;
DROP TABLE batch_rollup_chunks;
DROP TABLE batch_rollup_steps;
ALTER TABLE interrupted_attempts
    DROP COLUMN conflicts, DROP COLUMN tool_calls, DROP COLUMN fields, DROP COLUMN chunk_end,
    DROP COLUMN chunk_start, DROP COLUMN chunk_n, DROP COLUMN step;
ALTER TABLE attempts
    DROP COLUMN conflicts, DROP COLUMN tool_calls, DROP COLUMN fields, DROP COLUMN chunk_end,
    DROP COLUMN chunk_start, DROP COLUMN chunk_n, DROP COLUMN step;
