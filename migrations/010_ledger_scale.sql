-- 010_ledger_scale: the questions of report summary and report failures
-- that still read a batch's attempts or its ended jobs, from rollups; and
-- a record of the attempts report purge deleted.
--
-- batch_rollup_current holds what report summary's cache, delivery and
-- repair figures count over the attempts of the jobs' current runs, and
-- batch_rollup_current_kinds its coercions by kind and its patch replies by
-- outcome. An attempt counts there from its insert while its run is its
-- job's current one; a requeue or a revalidation, which keeps the run in
-- job_runs before starting the next, uncounts that run's attempts. Kept by
-- triggers of their own (attempts_current_runs, job_runs_current_runs), so
-- that the rollup triggers of 003 and 009 stay as they are.
--
-- batch_rollup_end_reasons holds the jobs that ended dead, rejected,
-- failed, cancelled or over budget by batch, status and reason (the error
-- with its amounts folded to N, as report failures groups them), kept by
-- triggers on jobs (jobs_end_reasons_*).
--
-- Each trigger locks its batches' batch_rollups rows first, in batch
-- order, as 003's and 009's do, so that writers of the same batches wait
-- for each other in one order.

CREATE TABLE batch_rollup_current (
    batch               text PRIMARY KEY REFERENCES batches (name) ON DELETE CASCADE,
    -- attempts (replies or not) and their estimated cost, by price basis
    realtime_attempts   bigint NOT NULL DEFAULT 0,
    realtime_cost_usd   numeric NOT NULL DEFAULT 0,
    batch_attempts      bigint NOT NULL DEFAULT 0,
    batch_cost_usd      numeric NOT NULL DEFAULT 0,
    -- tokens_in, tokens_cached and tokens_cache_write of the attempts that
    -- got a reply (class other than 'provider')
    prompt_tokens       bigint NOT NULL DEFAULT 0,
    cached_tokens       bigint NOT NULL DEFAULT 0,
    cache_write_tokens  bigint NOT NULL DEFAULT 0,
    -- valid attempts made valid by schema-guided repairs (coerced > 0), and
    -- by text repairs alone (repaired_locally, coerced = 0)
    calls_saved         bigint NOT NULL DEFAULT 0,
    text_saved          bigint NOT NULL DEFAULT 0,
    -- job runs with an attempt after the first, and those attempts' output
    -- tokens
    retried_jobs        bigint NOT NULL DEFAULT 0,
    retry_tokens_out    bigint NOT NULL DEFAULT 0
);

-- kind 'coercion': the schema-guided repairs of the attempts (repairs
-- entries with a pointer) by their kind; kind 'patch': the attempts that
-- answered a patch request, by patch_outcome.
CREATE TABLE batch_rollup_current_kinds (
    batch  text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    kind   text NOT NULL CHECK (kind IN ('coercion', 'patch')),
    name   text NOT NULL,
    n      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, kind, name)
);

-- The statements that add (sign 1) or take away (sign -1) the attempts
-- src selects (columns batch, job_id, run, attempt_no and the attempts'
-- own, batch not NULL) to or from the two tables above, for a trigger to
-- run (only its own statements see its transition tables). A job run's
-- first attempt after the first counts it in retried_jobs once: added when
-- the run had none before this statement, taken away with the run's
-- attempts.
CREATE FUNCTION fixpoint_current_runs_sql(src text, sign int) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[format($q$
        WITH a AS MATERIALIZED (%s), r AS (
            SELECT batch, job_id, run, count(*) AS k FROM a WHERE attempt_no > 1 GROUP BY 1, 2, 3
        ), rj AS (
            SELECT batch, count(*) AS n FROM r
            WHERE %s < 0 OR (SELECT count(*) FROM attempts p
                             WHERE p.job_id = r.job_id AND p.run = r.run AND p.attempt_no > 1) = r.k
            GROUP BY 1
        ), s AS (
            SELECT batch,
                   count(*) FILTER (WHERE price_basis = 'realtime') AS ra,
                   coalesce(sum(cost_usd) FILTER (WHERE price_basis = 'realtime'), 0) AS rc,
                   count(*) FILTER (WHERE price_basis = 'batch') AS ba,
                   coalesce(sum(cost_usd) FILTER (WHERE price_basis = 'batch'), 0) AS bc,
                   coalesce(sum(tokens_in) FILTER (WHERE class <> 'provider'), 0) AS pt,
                   coalesce(sum(tokens_cached) FILTER (WHERE class <> 'provider'), 0) AS ct,
                   coalesce(sum(tokens_cache_write) FILTER (WHERE class <> 'provider'), 0) AS cw,
                   count(*) FILTER (WHERE valid AND coerced > 0) AS cs,
                   count(*) FILTER (WHERE valid AND repaired_locally AND coerced = 0) AS ts,
                   coalesce(sum(tokens_out) FILTER (WHERE attempt_no > 1), 0) AS rt
            FROM a GROUP BY 1
        )
        INSERT INTO batch_rollup_current AS c (batch, realtime_attempts, realtime_cost_usd, batch_attempts, batch_cost_usd,
                                               prompt_tokens, cached_tokens, cache_write_tokens, calls_saved, text_saved,
                                               retried_jobs, retry_tokens_out)
        SELECT s.batch, %2$s * ra, %2$s * rc, %2$s * ba, %2$s * bc, %2$s * pt, %2$s * ct, %2$s * cw, %2$s * cs, %2$s * ts,
               %2$s * coalesce(rj.n, 0), %2$s * rt
        FROM s LEFT JOIN rj ON rj.batch = s.batch ORDER BY 1
        ON CONFLICT (batch) DO UPDATE SET
            realtime_attempts = c.realtime_attempts + EXCLUDED.realtime_attempts,
            realtime_cost_usd = c.realtime_cost_usd + EXCLUDED.realtime_cost_usd,
            batch_attempts = c.batch_attempts + EXCLUDED.batch_attempts,
            batch_cost_usd = c.batch_cost_usd + EXCLUDED.batch_cost_usd,
            prompt_tokens = c.prompt_tokens + EXCLUDED.prompt_tokens,
            cached_tokens = c.cached_tokens + EXCLUDED.cached_tokens,
            cache_write_tokens = c.cache_write_tokens + EXCLUDED.cache_write_tokens,
            calls_saved = c.calls_saved + EXCLUDED.calls_saved, text_saved = c.text_saved + EXCLUDED.text_saved,
            retried_jobs = c.retried_jobs + EXCLUDED.retried_jobs,
            retry_tokens_out = c.retry_tokens_out + EXCLUDED.retry_tokens_out$q$, src, sign),
    format($q$
        INSERT INTO batch_rollup_current_kinds AS c (batch, kind, name, n)
        SELECT batch, kind, name, %2$s * count(*) FROM (
            SELECT a.batch, 'coercion' AS kind, coalesce(x->>'kind', '') AS name
            FROM (%1$s) a
            CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(a.repairs) = 'array' THEN a.repairs ELSE '[]'::jsonb END) x
            WHERE jsonb_typeof(x) = 'object' AND x ? 'pointer'
            UNION ALL
            SELECT a.batch, 'patch', a.patch_outcome FROM (%1$s) a WHERE a.patch_outcome <> ''
        ) k
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (batch, kind, name) DO UPDATE SET n = c.n + EXCLUDED.n$q$, src, sign)]
$$;

CREATE FUNCTION fixpoint_attempts_current_runs() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    q text;
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_attempts a JOIN jobs j ON j.id = a.job_id)
    ORDER BY batch FOR UPDATE;
    -- An attempt of a run its job has left (kept in job_runs) is no
    -- current one.
    FOREACH q IN ARRAY fixpoint_current_runs_sql(
        'SELECT j.batch, n.* FROM new_attempts n JOIN jobs j ON j.id = n.job_id AND j.run = n.run
         WHERE j.batch IS NOT NULL', 1) LOOP
        EXECUTE q;
    END LOOP;
    RETURN NULL;
END $$;

CREATE FUNCTION fixpoint_job_runs_current_runs() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    q text;
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_runs r JOIN jobs j ON j.id = r.job_id)
    ORDER BY batch FOR UPDATE;
    FOREACH q IN ARRAY fixpoint_current_runs_sql(
        'SELECT j.batch, a.* FROM new_runs r JOIN jobs j ON j.id = r.job_id
         JOIN attempts a ON a.job_id = r.job_id AND a.run = r.run
         WHERE j.batch IS NOT NULL', -1) LOOP
        EXECUTE q;
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER attempts_current_runs AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_attempts_current_runs();
CREATE TRIGGER job_runs_current_runs AFTER INSERT ON job_runs
    REFERENCING NEW TABLE AS new_runs FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_job_runs_current_runs();

CREATE TABLE batch_rollup_end_reasons (
    batch    text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    status   text NOT NULL,
    -- fixpoint_end_reason(error)
    reason   text NOT NULL,
    -- the least error (its first 201 characters) of the jobs counted here
    -- since the row was made
    example  text NOT NULL,
    jobs     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, status, reason)
);

-- The reason an ended job's error gives, whatever its amounts: each
-- spend-cap error names its call's own estimate, and 248 jobs read as 113
-- reasons. Only numbers standing alone (after a space, '$' or '('): a
-- model's version ("gpt-5.1-mini") tells two reasons apart.
CREATE FUNCTION fixpoint_end_reason(error text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT regexp_replace(left(error, 200), '(^|[[:space:]$(])[0-9][0-9.,]*', '\1N', 'g')
$$;

CREATE FUNCTION fixpoint_jobs_end_reasons() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    ended constant text := '(''dead'', ''rejected'', ''failed'', ''cancelled'', ''over_budget'')';
    src text;
    batches text;
    n bigint;
BEGIN
    src := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT batch, status, error, 1 AS s FROM new_jobs WHERE status IN %s', ended)
        WHEN 'DELETE' THEN format('SELECT batch, status, error, -1 AS s FROM old_jobs WHERE status IN %s', ended)
        ELSE format('SELECT batch, status, error, 1 AS s FROM new_jobs WHERE status IN %s
                     UNION ALL SELECT batch, status, error, -1 FROM old_jobs WHERE status IN %s', ended, ended)
    END;
    -- Most statements (a result that is valid, a publish) end no job.
    EXECUTE format('SELECT count(*) FROM (%s) x', src) INTO n;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    batches := CASE TG_OP
        WHEN 'INSERT' THEN 'SELECT batch FROM new_jobs'
        WHEN 'DELETE' THEN 'SELECT batch FROM old_jobs'
        ELSE 'SELECT batch FROM new_jobs UNION SELECT batch FROM old_jobs'
    END;
    EXECUTE format('SELECT 1 FROM batch_rollups WHERE batch IN (%s) ORDER BY batch FOR UPDATE', batches);
    EXECUTE format($q$
        INSERT INTO batch_rollup_end_reasons AS r (batch, status, reason, example, jobs)
        SELECT batch, status, fixpoint_end_reason(error), coalesce(min(left(error, 201)) FILTER (WHERE s > 0), ''), sum(s)
        FROM (%s) x WHERE batch IS NOT NULL
        GROUP BY 1, 2, 3 HAVING sum(s) <> 0
        ORDER BY 1, 2, 3
        ON CONFLICT (batch, status, reason) DO UPDATE SET
            jobs = r.jobs + EXCLUDED.jobs,
            example = CASE WHEN r.jobs <= 0 OR r.example = '' THEN EXCLUDED.example
                           WHEN EXCLUDED.example = '' THEN r.example
                           ELSE least(r.example, EXCLUDED.example) END$q$, src);
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_end_reasons_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_jobs_end_reasons();
CREATE TRIGGER jobs_end_reasons_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_jobs_end_reasons();
CREATE TRIGGER jobs_end_reasons_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_jobs FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_jobs_end_reasons();

-- The jobs whose attempts report purge deleted: when, and how many rows
-- of each kind went, so that a job's page says its attempts were purged
-- rather than showing none. The job row, its final value and every rollup
-- stay.
CREATE TABLE purged_jobs (
    job_id       text PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    purged_at    timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    interrupted  integer NOT NULL DEFAULT 0
);

-- report purge finds the jobs finished before its cutoff through this
-- index, oldest first, a chunk at a time.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE status <> 'queued';

-- The ledger as it is (the triggers hold their tables' locks until this
-- migration commits: no write falls between them and these counts).
INSERT INTO batch_rollup_current (batch, realtime_attempts, realtime_cost_usd, batch_attempts, batch_cost_usd,
                                  prompt_tokens, cached_tokens, cache_write_tokens, calls_saved, text_saved,
                                  retried_jobs, retry_tokens_out)
SELECT j.batch,
       count(*) FILTER (WHERE a.price_basis = 'realtime'),
       coalesce(sum(a.cost_usd) FILTER (WHERE a.price_basis = 'realtime'), 0),
       count(*) FILTER (WHERE a.price_basis = 'batch'),
       coalesce(sum(a.cost_usd) FILTER (WHERE a.price_basis = 'batch'), 0),
       coalesce(sum(a.tokens_in) FILTER (WHERE a.class <> 'provider'), 0),
       coalesce(sum(a.tokens_cached) FILTER (WHERE a.class <> 'provider'), 0),
       coalesce(sum(a.tokens_cache_write) FILTER (WHERE a.class <> 'provider'), 0),
       count(*) FILTER (WHERE a.valid AND a.coerced > 0),
       count(*) FILTER (WHERE a.valid AND a.repaired_locally AND a.coerced = 0),
       count(DISTINCT a.job_id) FILTER (WHERE a.attempt_no > 1),
       coalesce(sum(a.tokens_out) FILTER (WHERE a.attempt_no > 1), 0)
FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run
WHERE j.batch IS NOT NULL GROUP BY 1;
INSERT INTO batch_rollup_current_kinds (batch, kind, name, n)
SELECT batch, kind, name, count(*) FROM (
    SELECT j.batch, 'coercion' AS kind, coalesce(x->>'kind', '') AS name
    FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run
    CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(a.repairs) = 'array' THEN a.repairs ELSE '[]'::jsonb END) x
    WHERE j.batch IS NOT NULL AND jsonb_typeof(x) = 'object' AND x ? 'pointer'
    UNION ALL
    SELECT j.batch, 'patch', a.patch_outcome
    FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run
    WHERE j.batch IS NOT NULL AND a.patch_outcome <> ''
) k
GROUP BY 1, 2, 3;
INSERT INTO batch_rollup_end_reasons (batch, status, reason, example, jobs)
SELECT batch, status, fixpoint_end_reason(error), min(left(error, 201)), count(*)
FROM jobs WHERE batch IS NOT NULL AND status IN ('dead', 'rejected', 'failed', 'cancelled', 'over_budget')
GROUP BY 1, 2, 3;

---- create above / drop below ----

DROP INDEX jobs_finished;
DROP TABLE purged_jobs;
DROP TRIGGER jobs_end_reasons_delete ON jobs;
DROP TRIGGER jobs_end_reasons_update ON jobs;
DROP TRIGGER jobs_end_reasons_insert ON jobs;
DROP FUNCTION fixpoint_jobs_end_reasons();
DROP FUNCTION fixpoint_end_reason(text);
DROP TABLE batch_rollup_end_reasons;
DROP TRIGGER job_runs_current_runs ON job_runs;
DROP TRIGGER attempts_current_runs ON attempts;
DROP FUNCTION fixpoint_job_runs_current_runs();
DROP FUNCTION fixpoint_attempts_current_runs();
DROP FUNCTION fixpoint_current_runs_sql(text, int);
DROP TABLE batch_rollup_current_kinds;
DROP TABLE batch_rollup_current;
