-- 010_ledger_scale: the questions of report summary and report failures
-- that still read a batch's attempts or its ended jobs, from rollups; and
-- a record of the attempts report purge deleted (which finds a batch's
-- jobs finished before its cutoff through 003's jobs_batch_finished).
--
-- batch_rollup_current holds what report summary's cache, delivery and
-- repair figures count over the attempts of the jobs' current runs, and
-- batch_rollup_current_kinds its coercions by kind and its patch replies by
-- outcome. An attempt counts there from its insert while its run is its
-- job's current one; a requeue or a revalidation, which keeps the run in
-- job_runs before starting the next, uncounts that run's attempts. Kept by
-- triggers of their own (attempts_counts, job_runs_current_runs), so
-- that the rollup triggers of 003 and 009 stay as they are.
--
-- batch_rollup_end_reasons holds the jobs that ended dead, rejected,
-- failed, cancelled or over budget by batch, status and reason (the error
-- with its amounts folded to N, as report failures groups them), kept by
-- triggers on jobs (jobs_end_reasons_*). wave_rollups holds each wave's
-- tokens, valid replies and cost (the timeline). batch_rollup_rules and
-- batch_rollup_grades hold the counts of the views rule_failures and
-- evidence_grades, which now read them (see below).
--
-- With these, no question of report or the dashboard reads attempts, and
-- report purge can delete them (purged_jobs says which jobs' went)
-- without changing a figure.
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
-- answered a patch request, by patch_outcome; kind 'unpriced': the
-- attempts with no price, by their job's model.
CREATE TABLE batch_rollup_current_kinds (
    batch  text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    kind   text NOT NULL CHECK (kind IN ('coercion', 'patch', 'unpriced')),
    name   text NOT NULL,
    n      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, kind, name)
);

-- The statements that add (sign 1) or take away (sign -1) the attempts
-- src selects (columns batch, job_model, and the attempts' own, batch not
-- NULL) to or from the two tables above, for a trigger to
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
            UNION ALL
            SELECT a.batch, 'unpriced', a.job_model FROM (%1$s) a WHERE a.unpriced
        ) k
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (batch, kind, name) DO UPDATE SET n = c.n + EXCLUDED.n$q$, src, sign)]
$$;

-- What the dashboard's timeline shows of each wave: the tokens, valid
-- replies and cost of the attempts it carried.
CREATE TABLE wave_rollups (
    wave_id     bigint PRIMARY KEY REFERENCES waves (id) ON DELETE CASCADE,
    tokens_in   bigint NOT NULL DEFAULT 0,
    tokens_out  bigint NOT NULL DEFAULT 0,
    valid       bigint NOT NULL DEFAULT 0,
    cost_usd    numeric NOT NULL DEFAULT 0
);

CREATE FUNCTION fixpoint_attempts_counts() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    q text;
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_attempts a JOIN jobs j ON j.id = a.job_id)
    ORDER BY batch FOR UPDATE;
    -- An attempt of a run its job has left (kept in job_runs) is no
    -- current one.
    -- fixpoint_current_runs_sql's first statement for sign 1, written out:
    -- a static statement's plan is kept for the session, where EXECUTE
    -- plans anew at each of the writer's statements.
    WITH a AS MATERIALIZED (SELECT j.batch, j.model AS job_model, n.* FROM new_attempts n JOIN jobs j ON j.id = n.job_id AND j.run = n.run
               WHERE j.batch IS NOT NULL), r AS (
        SELECT batch, job_id, run, count(*) AS k FROM a WHERE attempt_no > 1 GROUP BY 1, 2, 3
    ), rj AS (
        SELECT batch, count(*) AS n FROM r
        WHERE (SELECT count(*) FROM attempts p
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
    SELECT s.batch, ra, rc, ba, bc, pt, ct, cw, cs, ts,
           coalesce(rj.n, 0), rt
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
        retry_tokens_out = c.retry_tokens_out + EXCLUDED.retry_tokens_out;
    -- The kinds' statement (planned anew each time) only for attempts
    -- with a repair, a patch reply or no price: most have none.
    IF EXISTS (SELECT 1 FROM new_attempts WHERE jsonb_typeof(repairs) = 'array' OR patch_outcome <> '' OR unpriced) THEN
        q := (fixpoint_current_runs_sql(
            'SELECT j.batch, j.model AS job_model, n.* FROM new_attempts n JOIN jobs j ON j.id = n.job_id AND j.run = n.run
             WHERE j.batch IS NOT NULL', 1))[2];
        EXECUTE q;
    END IF;
    -- A wave's attempts (waves exist only for a batch: no lock beyond its
    -- batch's).
    INSERT INTO wave_rollups AS w (wave_id, tokens_in, tokens_out, valid, cost_usd)
    SELECT n.wave_id, sum(n.tokens_in), sum(n.tokens_out), count(*) FILTER (WHERE n.valid), coalesce(sum(n.cost_usd), 0)
    FROM new_attempts n JOIN waves v ON v.id = n.wave_id
    GROUP BY 1 ORDER BY 1
    ON CONFLICT (wave_id) DO UPDATE SET
        tokens_in = w.tokens_in + EXCLUDED.tokens_in, tokens_out = w.tokens_out + EXCLUDED.tokens_out,
        valid = w.valid + EXCLUDED.valid, cost_usd = w.cost_usd + EXCLUDED.cost_usd;
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
        'SELECT j.batch, j.model AS job_model, a.* FROM new_runs r JOIN jobs j ON j.id = r.job_id
         JOIN attempts a ON a.job_id = r.job_id AND a.run = r.run
         WHERE j.batch IS NOT NULL', -1) LOOP
        EXECUTE q;
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER attempts_counts AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_attempts_counts();
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
BEGIN
    src := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT batch, status, error, 1 AS s FROM new_jobs WHERE status IN %s', ended)
        WHEN 'DELETE' THEN format('SELECT batch, status, error, -1 AS s FROM old_jobs WHERE status IN %s', ended)
        ELSE format('SELECT batch, status, error, 1 AS s FROM new_jobs WHERE status IN %s
                     UNION ALL SELECT batch, status, error, -1 FROM old_jobs WHERE status IN %s', ended, ended)
    END;
    -- Most statements (a result that is valid, a publish) end no job:
    -- static checks (their plans kept for the session) say so.
    IF TG_OP = 'INSERT' THEN
        IF NOT EXISTS (SELECT 1 FROM new_jobs WHERE status IN ('dead', 'rejected', 'failed', 'cancelled', 'over_budget')) THEN
            RETURN NULL;
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM old_jobs WHERE status IN ('dead', 'rejected', 'failed', 'cancelled', 'over_budget')) THEN
            RETURN NULL;
        END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM new_jobs WHERE status IN ('dead', 'rejected', 'failed', 'cancelled', 'over_budget'))
          AND NOT EXISTS (SELECT 1 FROM old_jobs WHERE status IN ('dead', 'rejected', 'failed', 'cancelled', 'over_budget')) THEN
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

-- rule_failures and evidence_grades (008) read every check of a batch's
-- jobs at each ask. Their counts are kept here instead:
-- batch_rollup_rules the rule failures by rule, folded path and severity
-- (failures, distinct jobs through job_rule_keys, and the jobs whose final
-- check has one), batch_rollup_grades the grades of the final checks'
-- leaves by folded path. job_final_checks holds what each job's final
-- check (as 008 defines it) adds to final_jobs and to the grades, for the
-- jobs where that is anything, so that a new final check (a later
-- attempt, a revalidation, a requeue's new run, which has none) takes the
-- old one's away exactly, even after report purge deleted its attempts.
CREATE TABLE batch_rollup_rules (
    batch       text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    -- the error's "rule" ('' for none)
    rule        text NOT NULL,
    path        text NOT NULL,
    severity    text NOT NULL,
    failures    bigint NOT NULL DEFAULT 0,
    jobs        bigint NOT NULL DEFAULT 0,
    final_jobs  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, rule, path, severity)
);

CREATE TABLE job_rule_keys (
    batch     text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    rule      text NOT NULL,
    path      text NOT NULL,
    severity  text NOT NULL,
    job_id    text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (batch, rule, path, severity, job_id)
);

CREATE TABLE batch_rollup_grades (
    batch       text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    path        text NOT NULL,
    leaves      bigint NOT NULL DEFAULT 0,
    exact       bigint NOT NULL DEFAULT 0,
    normalized  bigint NOT NULL DEFAULT 0,
    fuzzy       bigint NOT NULL DEFAULT 0,
    none        bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, path)
);

-- rules: the distinct [rule, path, severity] of the final check's rule
-- failures; grades: [path, leaves, exact, normalized, fuzzy, none] by
-- folded path.
CREATE TABLE job_final_checks (
    job_id  text PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    batch   text NOT NULL,
    rules   jsonb NOT NULL DEFAULT '[]'::jsonb,
    grades  jsonb NOT NULL DEFAULT '[]'::jsonb
);

-- The rule failures of a check (its errors and warnings), one row each.
CREATE FUNCTION fixpoint_check_rules(errors jsonb, warnings jsonb)
RETURNS TABLE (rule text, path text, severity text) LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(f.e->>'rule', ''), regexp_replace(coalesce(f.e->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g'), f.severity
    FROM (
        SELECT 'error' AS severity, e FROM jsonb_array_elements(CASE WHEN jsonb_typeof(errors) = 'array' THEN errors END) e
        WHERE e->>'keyword' = 'x-fixpoint-rules'
        UNION ALL
        SELECT 'warn', w FROM jsonb_array_elements(CASE WHEN jsonb_typeof(warnings) = 'array' THEN warnings END) w
        WHERE w->>'keyword' = 'x-fixpoint-rules'
    ) f
$$;

-- What a final check (errors, warnings, evidence) adds: its rules and
-- grades as job_final_checks keeps them.
CREATE FUNCTION fixpoint_final_rules(errors jsonb, warnings jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_agg(DISTINCT jsonb_build_array(rule, path, severity)), '[]'::jsonb)
    FROM fixpoint_check_rules(errors, warnings)
$$;
CREATE FUNCTION fixpoint_final_grades(evidence jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_array(path, leaves, exact, normalized, fuzzy, none) ORDER BY path), '[]'::jsonb)
    FROM (
        SELECT regexp_replace(coalesce(g->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path, count(*) AS leaves,
               count(*) FILTER (WHERE g->>'grade' = 'exact') AS exact,
               count(*) FILTER (WHERE g->>'grade' = 'normalized') AS normalized,
               count(*) FILTER (WHERE g->>'grade' = 'fuzzy') AS fuzzy,
               count(*) FILTER (WHERE g->>'grade' = 'none') AS none
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(evidence) = 'array' THEN evidence END) g
        GROUP BY 1
    ) x
$$;

-- Sets the final checks of jobs: checks is a JSON array of
-- {"job_id", "batch", "rules", "grades"} (fixpoint_final_rules and
-- fixpoint_final_grades of the new final check; empty arrays for none).
-- Takes each job's old final check away from final_jobs and the grades,
-- adds the new one, and keeps it. The caller holds its batches'
-- batch_rollups rows.
CREATE FUNCTION fixpoint_set_final_checks(checks jsonb) RETURNS void LANGUAGE sql AS $$
    WITH n AS (
        SELECT c->>'job_id' AS job_id, c->>'batch' AS batch, c->'rules' AS rules, c->'grades' AS grades
        FROM jsonb_array_elements(checks) c
    ), d AS MATERIALIZED (
        SELECT job_id, batch, rules, grades, 1 AS s FROM n
        UNION ALL
        SELECT f.job_id, f.batch, f.rules, f.grades, -1 FROM job_final_checks f WHERE f.job_id IN (SELECT job_id FROM n)
    ), rules AS (
        INSERT INTO batch_rollup_rules AS r (batch, rule, path, severity, final_jobs)
        SELECT d.batch, k->>0, k->>1, k->>2, sum(d.s)
        FROM d CROSS JOIN LATERAL jsonb_array_elements(d.rules) k
        GROUP BY 1, 2, 3, 4 HAVING sum(d.s) <> 0 ORDER BY 1, 2, 3, 4
        ON CONFLICT (batch, rule, path, severity) DO UPDATE SET final_jobs = r.final_jobs + EXCLUDED.final_jobs
    ), grades AS (
        INSERT INTO batch_rollup_grades AS r (batch, path, leaves, exact, normalized, fuzzy, none)
        SELECT d.batch, g->>0, sum(d.s * (g->>1)::bigint), sum(d.s * (g->>2)::bigint), sum(d.s * (g->>3)::bigint),
               sum(d.s * (g->>4)::bigint), sum(d.s * (g->>5)::bigint)
        FROM d CROSS JOIN LATERAL jsonb_array_elements(d.grades) g
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (batch, path) DO UPDATE SET
            leaves = r.leaves + EXCLUDED.leaves, exact = r.exact + EXCLUDED.exact,
            normalized = r.normalized + EXCLUDED.normalized, fuzzy = r.fuzzy + EXCLUDED.fuzzy, none = r.none + EXCLUDED.none
    ), gone AS (
        DELETE FROM job_final_checks
        WHERE job_id IN (SELECT job_id FROM n WHERE rules = '[]'::jsonb AND grades = '[]'::jsonb)
    )
    INSERT INTO job_final_checks AS f (job_id, batch, rules, grades)
    SELECT job_id, batch, rules, grades FROM n
    WHERE rules <> '[]'::jsonb OR grades <> '[]'::jsonb
    ORDER BY job_id
    ON CONFLICT (job_id) DO UPDATE SET batch = EXCLUDED.batch, rules = EXCLUDED.rules, grades = EXCLUDED.grades
$$;

-- The statement that counts the rule failures of the checks src selects
-- (columns batch, job_id, errors, warnings) in failures and jobs.
CREATE FUNCTION fixpoint_rule_failures_sql(src text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT format($q$
        WITH e AS MATERIALIZED (
            SELECT c.batch, c.job_id, f.rule, f.path, f.severity
            FROM (%s) c CROSS JOIN LATERAL fixpoint_check_rules(c.errors, c.warnings) f
        ), k AS (
            INSERT INTO job_rule_keys (batch, rule, path, severity, job_id)
            SELECT DISTINCT batch, rule, path, severity, job_id FROM e ORDER BY 1, 2, 3, 4, 5
            ON CONFLICT DO NOTHING
            RETURNING batch, rule, path, severity
        ), nk AS (
            SELECT batch, rule, path, severity, count(*) AS n FROM k GROUP BY 1, 2, 3, 4
        )
        INSERT INTO batch_rollup_rules AS r (batch, rule, path, severity, failures, jobs)
        SELECT g.batch, g.rule, g.path, g.severity, g.n, coalesce(nk.n, 0)
        FROM (SELECT batch, rule, path, severity, count(*) AS n FROM e GROUP BY 1, 2, 3, 4) g
        LEFT JOIN nk USING (batch, rule, path, severity)
        ORDER BY 1, 2, 3, 4
        ON CONFLICT (batch, rule, path, severity) DO UPDATE SET
            failures = r.failures + EXCLUDED.failures, jobs = r.jobs + EXCLUDED.jobs$q$, src)
$$;

-- A job's final check is its latest run's revalidation, else that run's
-- valid attempt, else its last: new attempts of a run with no
-- revalidation may change it.
CREATE FUNCTION fixpoint_attempts_checks() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    checks jsonb;
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_attempts a JOIN jobs j ON j.id = a.job_id)
    ORDER BY batch FOR UPDATE;
    -- Rule failures are in few attempts: the statement that counts them
    -- (planned anew each time) runs only when there are some.
    IF EXISTS (SELECT 1 FROM new_attempts WHERE errors @> '[{"keyword": "x-fixpoint-rules"}]'
                                             OR warnings @> '[{"keyword": "x-fixpoint-rules"}]') THEN
        EXECUTE fixpoint_rule_failures_sql(
            'SELECT j.batch, n.job_id, n.errors, n.warnings FROM new_attempts n JOIN jobs j ON j.id = n.job_id
             WHERE j.batch IS NOT NULL');
    END IF;
    SELECT jsonb_agg(jsonb_build_object('job_id', t.id, 'batch', t.batch, 'rules', fixpoint_final_rules(c.errors, c.warnings),
                                        'grades', fixpoint_final_grades(c.evidence)))
    INTO checks
    FROM (
        -- Only a job with a new check that may add something, or whose
        -- final check added something, can change what it adds: most
        -- attempts (no rules, no evidence) are passed by here.
        SELECT j.id, j.batch, j.run FROM new_attempts n JOIN jobs j ON j.id = n.job_id AND j.run = n.run
        WHERE j.batch IS NOT NULL
        GROUP BY 1, 2, 3
        HAVING bool_or(n.evidence IS NOT NULL OR n.warnings IS NOT NULL OR n.errors @> '[{"keyword": "x-fixpoint-rules"}]')
            OR EXISTS (SELECT 1 FROM job_final_checks f WHERE f.job_id = j.id)
    ) t
    CROSS JOIN LATERAL (
        SELECT a.errors, a.warnings, a.evidence FROM attempts a
        WHERE a.job_id = t.id AND a.run = t.run ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1
    ) c
    WHERE NOT EXISTS (SELECT 1 FROM revalidations r WHERE r.job_id = t.id AND r.run = t.run);
    IF checks IS NOT NULL THEN
        PERFORM fixpoint_set_final_checks(checks);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION fixpoint_revalidations_checks() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    checks jsonb;
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_checks c JOIN jobs j ON j.id = c.job_id)
    ORDER BY batch FOR UPDATE;
    EXECUTE fixpoint_rule_failures_sql(
        'SELECT j.batch, n.job_id, n.errors, n.warnings FROM new_checks n JOIN jobs j ON j.id = n.job_id
         WHERE j.batch IS NOT NULL');
    SELECT jsonb_agg(jsonb_build_object('job_id', j.id, 'batch', j.batch, 'rules', fixpoint_final_rules(n.errors, n.warnings),
                                        'grades', fixpoint_final_grades(n.evidence)))
    INTO checks
    FROM new_checks n JOIN jobs j ON j.id = n.job_id AND j.run = n.run
    WHERE j.batch IS NOT NULL;
    IF checks IS NOT NULL THEN
        PERFORM fixpoint_set_final_checks(checks);
    END IF;
    RETURN NULL;
END $$;

-- A run kept in job_runs is no job's latest: its job has no final check
-- until the next run's first attempt or revalidation.
CREATE FUNCTION fixpoint_job_runs_checks() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    checks jsonb;
BEGIN
    SELECT jsonb_agg(jsonb_build_object('job_id', f.job_id, 'batch', f.batch, 'rules', '[]'::jsonb, 'grades', '[]'::jsonb))
    INTO checks
    FROM job_final_checks f WHERE f.job_id IN (SELECT job_id FROM new_runs);
    IF checks IS NOT NULL THEN
        PERFORM 1 FROM batch_rollups
        WHERE batch IN (SELECT j.batch FROM new_runs r JOIN jobs j ON j.id = r.job_id)
        ORDER BY batch FOR UPDATE;
        PERFORM fixpoint_set_final_checks(checks);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER attempts_checks AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_attempts_checks();
CREATE TRIGGER revalidations_checks AFTER INSERT ON revalidations
    REFERENCING NEW TABLE AS new_checks FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_revalidations_checks();
CREATE TRIGGER job_runs_checks AFTER INSERT ON job_runs
    REFERENCING NEW TABLE AS new_runs FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_job_runs_checks();

-- The jobs whose attempts report purge deleted: when, and how many rows
-- of each kind went, so that a job's page says its attempts were purged
-- rather than showing none. The job row, its final value and every rollup
-- stay.
-- The job list filtered on an attempt count (alone, or with a status or a
-- class) in row order: without it, a count few jobs have read the whole
-- batch, or all its jobs of that status, to fill a page.
CREATE INDEX jobs_batch_attempts_row ON jobs (batch, attempts, row_no, id);

CREATE TABLE purged_jobs (
    job_id       text PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    purged_at    timestamptz NOT NULL DEFAULT now(),
    attempts     integer NOT NULL DEFAULT 0,
    interrupted  integer NOT NULL DEFAULT 0
);

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
    UNION ALL
    SELECT j.batch, 'unpriced', j.model
    FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run
    WHERE j.batch IS NOT NULL AND a.unpriced
) k
GROUP BY 1, 2, 3;
INSERT INTO wave_rollups (wave_id, tokens_in, tokens_out, valid, cost_usd)
SELECT a.wave_id, sum(a.tokens_in), sum(a.tokens_out), count(*) FILTER (WHERE a.valid), coalesce(sum(a.cost_usd), 0)
FROM attempts a JOIN waves w ON w.id = a.wave_id
GROUP BY 1;
INSERT INTO batch_rollup_end_reasons (batch, status, reason, example, jobs)
SELECT batch, status, fixpoint_end_reason(error), min(left(error, 201)), count(*)
FROM jobs WHERE batch IS NOT NULL AND status IN ('dead', 'rejected', 'failed', 'cancelled', 'over_budget')
GROUP BY 1, 2, 3;

INSERT INTO job_final_checks (job_id, batch, rules, grades)
SELECT j.id, j.batch, fixpoint_final_rules(c.errors, c.warnings), fixpoint_final_grades(c.evidence)
FROM jobs j
CROSS JOIN LATERAL (
    SELECT r.errors, r.warnings, r.evidence FROM revalidations r WHERE r.job_id = j.id AND r.run = j.run
    UNION ALL
    (SELECT a.errors, a.warnings, a.evidence FROM attempts a
     WHERE a.job_id = j.id AND a.run = j.run ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1)
    LIMIT 1
) c
WHERE j.batch IS NOT NULL
  AND (c.evidence IS NOT NULL OR c.warnings IS NOT NULL OR c.errors @> '[{"keyword": "x-fixpoint-rules"}]');
DELETE FROM job_final_checks WHERE rules = '[]'::jsonb AND grades = '[]'::jsonb;
INSERT INTO job_rule_keys (batch, rule, path, severity, job_id)
SELECT DISTINCT j.batch, f.rule, f.path, f.severity, c.job_id
FROM (SELECT job_id, errors, warnings FROM attempts UNION ALL SELECT job_id, errors, warnings FROM revalidations) c
JOIN jobs j ON j.id = c.job_id
CROSS JOIN LATERAL fixpoint_check_rules(c.errors, c.warnings) f
WHERE j.batch IS NOT NULL;
INSERT INTO batch_rollup_rules (batch, rule, path, severity, failures, jobs, final_jobs)
SELECT batch, rule, path, severity, sum(failures), sum(jobs), sum(final_jobs) FROM (
    SELECT j.batch, f.rule, f.path, f.severity, 1 AS failures, 0 AS jobs, 0 AS final_jobs
    FROM (SELECT job_id, errors, warnings FROM attempts UNION ALL SELECT job_id, errors, warnings FROM revalidations) c
    JOIN jobs j ON j.id = c.job_id
    CROSS JOIN LATERAL fixpoint_check_rules(c.errors, c.warnings) f
    WHERE j.batch IS NOT NULL
    UNION ALL
    SELECT batch, rule, path, severity, 0, 1, 0 FROM job_rule_keys
    UNION ALL
    SELECT f.batch, k->>0, k->>1, k->>2, 0, 0, 1 FROM job_final_checks f CROSS JOIN LATERAL jsonb_array_elements(f.rules) k
) x
GROUP BY 1, 2, 3, 4;
INSERT INTO batch_rollup_grades (batch, path, leaves, exact, normalized, fuzzy, none)
SELECT f.batch, g->>0, sum((g->>1)::bigint), sum((g->>2)::bigint), sum((g->>3)::bigint), sum((g->>4)::bigint), sum((g->>5)::bigint)
FROM job_final_checks f CROSS JOIN LATERAL jsonb_array_elements(f.grades) g
GROUP BY 1, 2;

-- rule_failures and evidence_grades: as 008's (see there for the
-- columns), from the rollups.
CREATE OR REPLACE VIEW rule_failures AS
SELECT batch, nullif(rule, '') AS rule, path, severity, failures, jobs, final_jobs
FROM batch_rollup_rules
WHERE failures > 0;

CREATE OR REPLACE VIEW evidence_grades AS
SELECT batch, path, leaves, exact, normalized, fuzzy, none,
       exact::float8 / leaves      AS exact_share,
       normalized::float8 / leaves AS normalized_share,
       fuzzy::float8 / leaves      AS fuzzy_share,
       none::float8 / leaves       AS none_share
FROM batch_rollup_grades
WHERE leaves > 0;

---- create above / drop below ----

-- 008's views, over the checks.
CREATE OR REPLACE VIEW rule_failures AS
SELECT
    j.batch,
    f.e->>'rule'                                                            AS rule,
    regexp_replace(coalesce(f.e->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
    f.severity,
    count(*)                                                                AS failures,
    count(DISTINCT j.id)                                                    AS jobs,
    count(DISTINCT j.id) FILTER (WHERE c.run = j.run AND (c.attempt_no IS NULL OR c.attempt_no = fin.attempt_no)) AS final_jobs
FROM jobs j
-- Every check of a job's values: its attempts, and its revalidations
-- (attempt_no NULL; a revalidation's run has no attempt).
JOIN (
    SELECT job_id, run, attempt_no, errors, warnings FROM attempts
    UNION ALL
    SELECT job_id, run, NULL, errors, warnings FROM revalidations
) c ON c.job_id = j.id
CROSS JOIN LATERAL (
    SELECT 'error' AS severity, e FROM jsonb_array_elements(c.errors) e
    WHERE e->>'keyword' = 'x-fixpoint-rules'
    UNION ALL
    SELECT 'warn', w FROM jsonb_array_elements(c.warnings) w
    WHERE w->>'keyword' = 'x-fixpoint-rules'
) f
-- Read for the checks with a failure only (the lateral comes after f).
LEFT JOIN LATERAL (
    SELECT l.attempt_no FROM attempts l
    WHERE l.job_id = j.id AND l.run = j.run
    ORDER BY l.valid DESC, l.attempt_no DESC LIMIT 1
) fin ON true
WHERE j.batch IS NOT NULL
GROUP BY 1, 2, 3, 4;

CREATE OR REPLACE VIEW evidence_grades AS
SELECT batch, path, leaves, exact, normalized, fuzzy, none,
       exact::float8 / leaves      AS exact_share,
       normalized::float8 / leaves AS normalized_share,
       fuzzy::float8 / leaves      AS fuzzy_share,
       none::float8 / leaves       AS none_share
FROM (
    SELECT
        j.batch,
        regexp_replace(coalesce(g->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
        count(*)                                                 AS leaves,
        count(*) FILTER (WHERE g->>'grade' = 'exact')            AS exact,
        count(*) FILTER (WHERE g->>'grade' = 'normalized')       AS normalized,
        count(*) FILTER (WHERE g->>'grade' = 'fuzzy')            AS fuzzy,
        count(*) FILTER (WHERE g->>'grade' = 'none')             AS none
    FROM jobs j
    CROSS JOIN LATERAL (
        SELECT r.evidence FROM revalidations r WHERE r.job_id = j.id AND r.run = j.run
        UNION ALL
        (SELECT a.evidence FROM attempts a
         WHERE a.job_id = j.id AND a.run = j.run
         ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1)
        LIMIT 1
    ) f
    CROSS JOIN LATERAL jsonb_array_elements(f.evidence) g
    WHERE j.batch IS NOT NULL
    GROUP BY 1, 2
) c;

DROP TRIGGER job_runs_checks ON job_runs;
DROP TRIGGER revalidations_checks ON revalidations;
DROP TRIGGER attempts_checks ON attempts;
DROP FUNCTION fixpoint_job_runs_checks();
DROP FUNCTION fixpoint_revalidations_checks();
DROP FUNCTION fixpoint_attempts_checks();
DROP FUNCTION fixpoint_rule_failures_sql(text);
DROP FUNCTION fixpoint_set_final_checks(jsonb);
DROP FUNCTION fixpoint_final_grades(jsonb);
DROP FUNCTION fixpoint_final_rules(jsonb, jsonb);
DROP FUNCTION fixpoint_check_rules(jsonb, jsonb);
DROP TABLE job_final_checks;
DROP TABLE batch_rollup_grades;
DROP TABLE job_rule_keys;
DROP TABLE batch_rollup_rules;

DROP TABLE purged_jobs;
DROP INDEX jobs_batch_attempts_row;
DROP TRIGGER jobs_end_reasons_delete ON jobs;
DROP TRIGGER jobs_end_reasons_update ON jobs;
DROP TRIGGER jobs_end_reasons_insert ON jobs;
DROP FUNCTION fixpoint_jobs_end_reasons();
DROP FUNCTION fixpoint_end_reason(text);
DROP TABLE batch_rollup_end_reasons;
DROP TRIGGER job_runs_current_runs ON job_runs;
DROP TRIGGER attempts_counts ON attempts;
DROP FUNCTION fixpoint_job_runs_current_runs();
DROP FUNCTION fixpoint_attempts_counts();
DROP TABLE wave_rollups;
DROP FUNCTION fixpoint_current_runs_sql(text, int);
DROP TABLE batch_rollup_current_kinds;
DROP TABLE batch_rollup_current;
