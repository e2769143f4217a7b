-- 003_batch_rollups: what the dashboard reads of a batch of a million jobs
-- without counting them at each request.
--
-- batch_rollups holds, per batch, its job counts by status and its spend;
-- batch_rollup_attempts its finished jobs by attempt count (the funnel);
-- batch_rollup_costs, batch_rollup_repairs and batch_rollup_errors what
-- the batch page's cost, repair and failure-cluster parts show;
-- job_facets the jobs' error paths, coercions and applied patches, per run,
-- in row order (the job list's filters). Triggers on jobs and attempts
-- keep them, in the transaction of every write that changes what they
-- hold, whichever code path writes: they are exact, never rebuilt (see
-- docs/design.md, "Batch rollups"). The indexes give the job list its row
-- order and its filters.

CREATE TABLE batch_rollups (
    batch        text PRIMARY KEY REFERENCES batches (name) ON DELETE CASCADE,
    jobs         bigint NOT NULL DEFAULT 0,
    queued       bigint NOT NULL DEFAULT 0,
    valid        bigint NOT NULL DEFAULT 0,
    invalid      bigint NOT NULL DEFAULT 0,
    failed       bigint NOT NULL DEFAULT 0,
    rejected     bigint NOT NULL DEFAULT 0,
    dead         bigint NOT NULL DEFAULT 0,
    cancelled    bigint NOT NULL DEFAULT 0,
    over_budget  bigint NOT NULL DEFAULT 0,
    -- valid jobs with first_attempt_valid (of their latest run)
    first_valid  bigint NOT NULL DEFAULT 0,
    -- sums over the jobs' latest runs
    attempts     bigint NOT NULL DEFAULT 0,
    tokens_in    bigint NOT NULL DEFAULT 0,
    tokens_out   bigint NOT NULL DEFAULT 0,
    cost_usd     numeric NOT NULL DEFAULT 0
);

-- The finished (not queued) jobs of a batch by their attempt count.
CREATE TABLE batch_rollup_attempts (
    batch     text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    attempts  integer NOT NULL,
    finished  bigint NOT NULL DEFAULT 0,
    valid     bigint NOT NULL DEFAULT 0,
    -- valid jobs repaired locally
    local     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, attempts)
);

-- A batch's calls by model (the attempt's, else its job's when the attempt
-- was recorded) and price basis, and the valid jobs their valid attempts
-- made (a valid attempt of the job's latest run, the job valid).
CREATE TABLE batch_rollup_costs (
    batch       text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    model       text NOT NULL,
    basis       text NOT NULL,
    calls       bigint NOT NULL DEFAULT 0,
    tokens_in   bigint NOT NULL DEFAULT 0,
    tokens_out  bigint NOT NULL DEFAULT 0,
    tokens_cached bigint NOT NULL DEFAULT 0,
    cost_usd    numeric NOT NULL DEFAULT 0,
    valid_jobs  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, model, basis)
);

-- A batch's failed attempts by number and class (every run's): how many,
-- how many were followed by another attempt, and how many of those were
-- valid (the repair_effectiveness view for one batch).
CREATE TABLE batch_rollup_repairs (
    batch       text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    attempt_no  integer NOT NULL,
    class       text NOT NULL,
    failed      bigint NOT NULL DEFAULT 0,
    retried     bigint NOT NULL DEFAULT 0,
    valid_next  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, attempt_no, class)
);

-- A batch's validation errors by folded path and keyword (every attempt's,
-- as the error_paths view): error entries, distinct jobs, the least class,
-- and an example (the least job id, one of its messages).
CREATE TABLE batch_rollup_errors (
    batch            text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    path             text NOT NULL,
    keyword          text NOT NULL,
    class            text NOT NULL,
    errors           bigint NOT NULL DEFAULT 0,
    jobs             bigint NOT NULL DEFAULT 0,
    example_job      text NOT NULL,
    example_message  text NOT NULL DEFAULT '',
    PRIMARY KEY (batch, path, keyword)
);

-- The jobs counted in batch_rollup_errors.jobs, once per path and keyword.
CREATE TABLE job_error_keys (
    batch    text NOT NULL,
    path     text NOT NULL,
    keyword  text NOT NULL,
    job_id   text NOT NULL,
    PRIMARY KEY (batch, path, keyword, job_id)
);

-- A fact about a job's run that the job list filters on, in the job's row
-- order: 'path:' and the folded JSON pointer (array indices as '*', as in
-- error_paths) of a validation error of one of the run's attempts,
-- 'coerced' (an attempt had schema-guided fixes), 'patched' (a patch reply
-- was applied). Inserted with the attempts; a later run's facets are its
-- own, the earlier ones stay. No foreign key: jobs are never deleted, and
-- the check would cost every attempt insert.
CREATE TABLE job_facets (
    batch   text NOT NULL,
    facet   text NOT NULL,
    row_no  integer NOT NULL,
    job_id  text NOT NULL,
    run     integer NOT NULL,
    PRIMARY KEY (batch, facet, row_no, job_id, run)
);

-- The job list: a batch's jobs in row order, and by status in row order
-- (which serves what jobs_batch_status did); the failure class, the start
-- and end times read as one index probe each.
CREATE INDEX jobs_batch_row ON jobs (batch, row_no, id);
-- A wave's calls, for its cost on the batch page (realtime calls have none).
CREATE INDEX attempts_wave ON attempts (wave_id) WHERE wave_id IS NOT NULL;
CREATE INDEX jobs_batch_status_row ON jobs (batch, status, row_no, id);
DROP INDEX jobs_batch_status;
CREATE INDEX jobs_batch_class_row ON jobs (batch, final_class, row_no, id) WHERE final_class <> '';
CREATE INDEX jobs_batch_started ON jobs (batch, started_at);
CREATE INDEX jobs_batch_finished ON jobs (batch, finished_at) WHERE status <> 'queued';

-- (The trigger functions run without JIT: the row estimates of transition
-- tables and jsonb_array_elements make the planner's costs large enough to
-- compile each statement, which costs seconds for a few hundred rows.)

-- Adds a statement's changes to the rollups: the rows it wrote counted in,
-- the rows it replaced counted out, netted per batch and counted values (a
-- statement that changes nothing counted, e.g. published or wave_id,
-- writes nothing). Rollup rows are locked in batch order, a batch's main
-- row before its attempt rows, so that two writers never wait for each
-- other in a cycle within a statement. The source is the trigger's
-- transition tables (an INSERT has no old rows, a DELETE no new ones).
CREATE FUNCTION fixpoint_jobs_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    cols constant text := 'batch, status, attempts, first_attempt_valid, repaired_locally, tokens_in, tokens_out, cost_usd';
    src text;
    net text;
    n bigint;
BEGIN
    src := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT %s, 1 AS s FROM new_jobs', cols)
        WHEN 'DELETE' THEN format('SELECT %s, -1 AS s FROM old_jobs', cols)
        ELSE format('SELECT %s, 1 AS s FROM new_jobs UNION ALL SELECT %s, -1 FROM old_jobs', cols, cols)
    END;
    net := format('SELECT %s, sum(s) AS n FROM (%s) x WHERE batch IS NOT NULL GROUP BY %s HAVING sum(s) <> 0', cols, src, cols);
    EXECUTE format($q$
        INSERT INTO batch_rollups AS r (batch, jobs, queued, valid, invalid, failed, rejected, dead, cancelled,
                                        over_budget, first_valid, attempts, tokens_in, tokens_out, cost_usd)
        SELECT batch, sum(n),
               coalesce(sum(n) FILTER (WHERE status = 'queued'), 0), coalesce(sum(n) FILTER (WHERE status = 'valid'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'invalid'), 0), coalesce(sum(n) FILTER (WHERE status = 'failed'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'rejected'), 0), coalesce(sum(n) FILTER (WHERE status = 'dead'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'cancelled'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'over_budget'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'valid' AND first_attempt_valid), 0),
               sum(n * attempts), sum(n * tokens_in), sum(n * tokens_out), sum(n * cost_usd)
        FROM (%s) d GROUP BY batch ORDER BY batch
        ON CONFLICT (batch) DO UPDATE SET
            jobs = r.jobs + EXCLUDED.jobs, queued = r.queued + EXCLUDED.queued, valid = r.valid + EXCLUDED.valid,
            invalid = r.invalid + EXCLUDED.invalid, failed = r.failed + EXCLUDED.failed,
            rejected = r.rejected + EXCLUDED.rejected, dead = r.dead + EXCLUDED.dead,
            cancelled = r.cancelled + EXCLUDED.cancelled, over_budget = r.over_budget + EXCLUDED.over_budget,
            first_valid = r.first_valid + EXCLUDED.first_valid, attempts = r.attempts + EXCLUDED.attempts,
            tokens_in = r.tokens_in + EXCLUDED.tokens_in, tokens_out = r.tokens_out + EXCLUDED.tokens_out,
            cost_usd = r.cost_usd + EXCLUDED.cost_usd$q$, net);
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    EXECUTE format($q$
        INSERT INTO batch_rollup_attempts AS r (batch, attempts, finished, valid, local)
        SELECT * FROM (
            SELECT batch, attempts, sum(n) AS finished, coalesce(sum(n) FILTER (WHERE status = 'valid'), 0) AS valid,
                   coalesce(sum(n) FILTER (WHERE status = 'valid' AND repaired_locally), 0) AS local
            FROM (%s) d WHERE status <> 'queued' GROUP BY batch, attempts
        ) g WHERE (finished, valid, local) <> (0, 0, 0)
        ORDER BY batch, attempts
        ON CONFLICT (batch, attempts) DO UPDATE SET
            finished = r.finished + EXCLUDED.finished, valid = r.valid + EXCLUDED.valid,
            local = r.local + EXCLUDED.local$q$, net);
    -- A job valid in a run counts its valid attempts of that run in
    -- batch_rollup_costs.valid_jobs: a job becoming valid counts the ones
    -- recorded before it (the attempts trigger counts the ones after), a
    -- job no longer valid in that run uncounts them.
    src := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT batch, id, run, model, 1 AS s FROM new_jobs WHERE status = %L', 'valid')
        WHEN 'DELETE' THEN format('SELECT batch, id, run, model, -1 AS s FROM old_jobs WHERE status = %L', 'valid')
        ELSE format('SELECT batch, id, run, model, 1 AS s FROM new_jobs WHERE status = %L
                     UNION ALL SELECT batch, id, run, model, -1 FROM old_jobs WHERE status = %L', 'valid', 'valid')
    END;
    EXECUTE format($q$
        INSERT INTO batch_rollup_costs AS r (batch, model, basis, valid_jobs)
        SELECT v.batch, coalesce(nullif(a.model, ''), v.model), a.price_basis, sum(v.n)
        FROM (SELECT batch, id, run, model, sum(s) AS n FROM (%s) x WHERE batch IS NOT NULL
              GROUP BY batch, id, run, model HAVING sum(s) <> 0) v
        JOIN attempts a ON a.job_id = v.id AND a.run = v.run AND a.valid
        GROUP BY 1, 2, 3 HAVING sum(v.n) <> 0 ORDER BY 1, 2, 3
        ON CONFLICT (batch, model, basis) DO UPDATE SET valid_jobs = r.valid_jobs + EXCLUDED.valid_jobs$q$, src);
    RETURN NULL;
END $$;


-- Adds a statement's new attempts to the rollups of their batches (their
-- main rows locked first, in batch order, as the jobs trigger does): their
-- facets, costs, repair steps and error clusters, in one statement over
-- the attempts joined to their jobs once.
CREATE FUNCTION fixpoint_attempts_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_attempts a JOIN jobs j ON j.id = a.job_id)
    ORDER BY batch FOR UPDATE;

    WITH a AS MATERIALIZED (
        SELECT j.batch, j.row_no, j.run AS job_run, j.status AS job_status,
               coalesce(nullif(n.model, ''), j.model) AS model,
               n.job_id, n.run, n.attempt_no, n.valid, n.class, n.errors, n.coerced, n.patch_outcome,
               n.price_basis, n.tokens_in, n.tokens_out, n.tokens_cached, n.cost_usd
        FROM new_attempts n JOIN jobs j ON j.id = n.job_id
        WHERE j.batch IS NOT NULL
    ), e AS MATERIALIZED (
        SELECT a.batch, a.row_no, a.job_id, a.run,
               regexp_replace(coalesce(x->>'path', x->>'pointer', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
               coalesce(x->>'keyword', '') AS keyword, coalesce(x->>'class', '') AS class,
               coalesce(x->>'message', '') AS message
        FROM a CROSS JOIN LATERAL jsonb_array_elements(a.errors) x
        WHERE a.errors <> '[]'::jsonb
    ), facets AS (
        INSERT INTO job_facets (batch, facet, row_no, job_id, run)
        SELECT DISTINCT batch, facet, row_no, job_id, run FROM (
            SELECT batch, 'path:' || path AS facet, row_no, job_id, run FROM e
            UNION ALL SELECT batch, 'coerced', row_no, job_id, run FROM a WHERE coerced > 0
            UNION ALL SELECT batch, 'patched', row_no, job_id, run FROM a WHERE patch_outcome = 'applied'
        ) f
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT DO NOTHING
    ), costs AS (
        INSERT INTO batch_rollup_costs AS r (batch, model, basis, calls, tokens_in, tokens_out, tokens_cached, cost_usd, valid_jobs)
        SELECT batch, model, price_basis, count(*), sum(tokens_in), sum(tokens_out), sum(tokens_cached), coalesce(sum(cost_usd), 0),
               count(*) FILTER (WHERE valid AND run = job_run AND job_status = 'valid')
        FROM a GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (batch, model, basis) DO UPDATE SET
            calls = r.calls + EXCLUDED.calls, tokens_in = r.tokens_in + EXCLUDED.tokens_in,
            tokens_out = r.tokens_out + EXCLUDED.tokens_out, tokens_cached = r.tokens_cached + EXCLUDED.tokens_cached,
            cost_usd = r.cost_usd + EXCLUDED.cost_usd,
            valid_jobs = r.valid_jobs + EXCLUDED.valid_jobs
    ), repairs AS (
        INSERT INTO batch_rollup_repairs AS r (batch, attempt_no, class, failed, retried, valid_next)
        SELECT batch, attempt_no, class, sum(failed), sum(retried), sum(valid_next) FROM (
            -- a failed attempt
            SELECT batch, attempt_no, class, 1 AS failed, 0 AS retried, 0 AS valid_next FROM a WHERE NOT valid
            UNION ALL
            -- an attempt after a failed one recorded before it or with it
            SELECT a.batch, p.attempt_no, p.class, 0, 1, a.valid::int
            FROM a JOIN attempts p ON p.job_id = a.job_id AND p.run = a.run AND p.attempt_no = a.attempt_no - 1
            WHERE a.attempt_no > 1 AND NOT p.valid
            UNION ALL
            -- a failed attempt whose next one was recorded before it: those
            -- with a next attempt, less those whose next one is new too
            -- (counted above)
            SELECT a.batch, a.attempt_no, a.class, 0, 1, n.valid::int
            FROM a JOIN attempts n ON n.job_id = a.job_id AND n.run = a.run AND n.attempt_no = a.attempt_no + 1
            WHERE NOT a.valid
            UNION ALL
            SELECT a.batch, a.attempt_no, a.class, 0, -1, -n.valid::int
            FROM a JOIN a n ON n.job_id = a.job_id AND n.run = a.run AND n.attempt_no = a.attempt_no + 1
            WHERE NOT a.valid
        ) x
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (batch, attempt_no, class) DO UPDATE SET
            failed = r.failed + EXCLUDED.failed, retried = r.retried + EXCLUDED.retried,
            valid_next = r.valid_next + EXCLUDED.valid_next
    ), k AS (
        INSERT INTO job_error_keys (batch, path, keyword, job_id)
        SELECT DISTINCT batch, path, keyword, job_id FROM e ORDER BY 1, 2, 3, 4
        ON CONFLICT DO NOTHING
        RETURNING batch, path, keyword
    ), nk AS (
        SELECT batch, path, keyword, count(*) AS n FROM k GROUP BY 1, 2, 3
    ), g AS (
        SELECT batch, path, keyword, min(class) AS class, count(*) AS errors, min(job_id) AS example
        FROM e GROUP BY 1, 2, 3
    )
    INSERT INTO batch_rollup_errors AS r (batch, path, keyword, class, errors, jobs, example_job, example_message)
    SELECT g.batch, g.path, g.keyword, g.class, g.errors, coalesce(nk.n, 0), g.example,
           coalesce((SELECT left(e.message, 2000) FROM e
                     WHERE e.batch = g.batch AND e.job_id = g.example AND e.path = g.path AND e.keyword = g.keyword
                     LIMIT 1), '')
    FROM g LEFT JOIN nk ON nk.batch = g.batch AND nk.path = g.path AND nk.keyword = g.keyword
    ORDER BY 1, 2, 3
    ON CONFLICT (batch, path, keyword) DO UPDATE SET
        class = least(r.class, EXCLUDED.class), errors = r.errors + EXCLUDED.errors, jobs = r.jobs + EXCLUDED.jobs,
        example_job = least(r.example_job, EXCLUDED.example_job),
        example_message = CASE WHEN EXCLUDED.example_job < r.example_job THEN EXCLUDED.example_message
                               ELSE r.example_message END;
    RETURN NULL;
END $$;

-- Transition tables allow one event per trigger: three on jobs.
CREATE TRIGGER jobs_rollup_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_jobs_rollup();
CREATE TRIGGER jobs_rollup_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_jobs_rollup();
CREATE TRIGGER jobs_rollup_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_jobs FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_jobs_rollup();
CREATE TRIGGER attempts_rollup AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_attempts_rollup();

-- The ledger as it is: the triggers hold their tables' locks until this
-- migration commits, so no write falls between them and these counts.
INSERT INTO batch_rollups (batch, jobs, queued, valid, invalid, failed, rejected, dead, cancelled, over_budget,
                           first_valid, attempts, tokens_in, tokens_out, cost_usd)
SELECT batch, count(*), count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'valid'),
       count(*) FILTER (WHERE status = 'invalid'), count(*) FILTER (WHERE status = 'failed'),
       count(*) FILTER (WHERE status = 'rejected'), count(*) FILTER (WHERE status = 'dead'),
       count(*) FILTER (WHERE status = 'cancelled'), count(*) FILTER (WHERE status = 'over_budget'),
       count(*) FILTER (WHERE status = 'valid' AND first_attempt_valid),
       coalesce(sum(attempts), 0), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0), coalesce(sum(cost_usd), 0)
FROM jobs WHERE batch IS NOT NULL GROUP BY batch;
INSERT INTO batch_rollup_attempts (batch, attempts, finished, valid, local)
SELECT batch, attempts, count(*), count(*) FILTER (WHERE status = 'valid'),
       count(*) FILTER (WHERE status = 'valid' AND repaired_locally)
FROM jobs WHERE batch IS NOT NULL AND status <> 'queued' GROUP BY batch, attempts;
INSERT INTO job_facets (batch, facet, row_no, job_id, run)
SELECT DISTINCT j.batch, f.facet, j.row_no, a.job_id, a.run
FROM attempts a
JOIN jobs j ON j.id = a.job_id
CROSS JOIN LATERAL (
    SELECT 'path:' || regexp_replace(coalesce(e->>'path', e->>'pointer', ''), '/[0-9]+(?=/|$)', '/*', 'g')
    FROM jsonb_array_elements(a.errors) e
    UNION ALL SELECT 'coerced' WHERE a.coerced > 0
    UNION ALL SELECT 'patched' WHERE a.patch_outcome = 'applied'
) f (facet)
WHERE j.batch IS NOT NULL;
INSERT INTO batch_rollup_costs (batch, model, basis, calls, tokens_in, tokens_out, tokens_cached, cost_usd, valid_jobs)
SELECT j.batch, coalesce(nullif(a.model, ''), j.model), a.price_basis, count(*), sum(a.tokens_in), sum(a.tokens_out), sum(a.tokens_cached),
       coalesce(sum(a.cost_usd), 0), count(*) FILTER (WHERE a.valid AND a.run = j.run AND j.status = 'valid')
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE j.batch IS NOT NULL GROUP BY 1, 2, 3;
INSERT INTO batch_rollup_repairs (batch, attempt_no, class, failed, retried, valid_next)
SELECT j.batch, a.attempt_no, a.class, count(*), count(n.job_id), count(*) FILTER (WHERE n.valid)
FROM attempts a JOIN jobs j ON j.id = a.job_id
LEFT JOIN attempts n ON n.job_id = a.job_id AND n.run = a.run AND n.attempt_no = a.attempt_no + 1
WHERE j.batch IS NOT NULL AND NOT a.valid GROUP BY 1, 2, 3;
INSERT INTO job_error_keys (batch, path, keyword, job_id)
SELECT DISTINCT j.batch, regexp_replace(coalesce(e->>'path', e->>'pointer', ''), '/[0-9]+(?=/|$)', '/*', 'g'),
       coalesce(e->>'keyword', ''), a.job_id
FROM attempts a JOIN jobs j ON j.id = a.job_id CROSS JOIN LATERAL jsonb_array_elements(a.errors) e
WHERE j.batch IS NOT NULL;
WITH e AS (
    SELECT j.batch, a.job_id,
           regexp_replace(coalesce(e->>'path', e->>'pointer', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
           coalesce(e->>'keyword', '') AS keyword, coalesce(e->>'class', '') AS class,
           coalesce(e->>'message', '') AS message
    FROM attempts a JOIN jobs j ON j.id = a.job_id CROSS JOIN LATERAL jsonb_array_elements(a.errors) e
    WHERE j.batch IS NOT NULL
), g AS (
    SELECT batch, path, keyword, min(class) AS class, count(*) AS errors, count(DISTINCT job_id) AS jobs,
           min(job_id) AS example
    FROM e GROUP BY 1, 2, 3
)
INSERT INTO batch_rollup_errors (batch, path, keyword, class, errors, jobs, example_job, example_message)
SELECT g.batch, g.path, g.keyword, g.class, g.errors, g.jobs, g.example,
       coalesce((SELECT left(e.message, 2000) FROM e
                 WHERE e.batch = g.batch AND e.job_id = g.example AND e.path = g.path AND e.keyword = g.keyword
                 LIMIT 1), '')
FROM g;

---- create above / drop below ----

DROP TRIGGER attempts_rollup ON attempts;
DROP TRIGGER jobs_rollup_delete ON jobs;
DROP TRIGGER jobs_rollup_update ON jobs;
DROP TRIGGER jobs_rollup_insert ON jobs;
DROP FUNCTION fixpoint_attempts_rollup();
DROP FUNCTION fixpoint_jobs_rollup();
DROP INDEX jobs_batch_finished;
DROP INDEX jobs_batch_started;
DROP INDEX jobs_batch_class_row;
CREATE INDEX jobs_batch_status ON jobs (batch, status);
DROP INDEX jobs_batch_status_row;
DROP INDEX jobs_batch_row;
DROP TABLE job_facets;
DROP TABLE job_error_keys;
DROP TABLE batch_rollup_errors;
DROP TABLE batch_rollup_repairs;
DROP TABLE batch_rollup_costs;
DROP TABLE batch_rollup_attempts;
DROP TABLE batch_rollups;
