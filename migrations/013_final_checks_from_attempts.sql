-- 013_final_checks_from_attempts: 010's final checks (what each job's
-- final check adds to batch_rollup_rules.final_jobs and to
-- batch_rollup_grades) kept exact for less of the writer's Postgres time.
--
-- 010 kept a job_final_checks row for every job whose final check added
-- anything (in the typical preset nearly every job: each is graded for
-- evidence), so that a new final check could take the old one away. The
-- attempts trigger built each job's row as JSON through two SQL functions
-- called once a job, and fixpoint_set_final_checks, planned again at each
-- call, inserted the rows: more than half of the attempts trigger's time
-- on the writer's 16-job saves. A job's old final check is now read again
-- from its attempts and revalidations, by key, where they still are: the
-- writer's first results of a run find none recorded before them. The
-- rollups get the difference from one set-based statement of a PL/pgSQL
-- function, whose plans are kept for the session.
--
-- job_final_checks keeps only the final checks of the jobs report purge
-- purged, whose attempts and revalidations are gone: the purge calls
-- fixpoint_keep_final_checks before it deletes them. A new final check of
-- such a job (a later attempt, a revalidation, a requeue's new run) takes
-- the kept one away and removes its row.

-- A change to what final checks add: a check taken away (s -1) or added
-- (s 1), given by its errors, warnings and evidence as recorded, or, for a
-- check kept in job_final_checks, by its rules and grades there.
CREATE TYPE fixpoint_final_check AS (
    batch text, job_id text, s integer, errors jsonb, warnings jsonb, evidence jsonb, rules jsonb, grades jsonb
);

-- Adds the changes d to final_jobs and the grades, and removes the rows
-- of the kept checks taken away. The caller holds its batches'
-- batch_rollups rows. Its statements read d, a parameter: left to choose,
-- the plan cache may plan them again at each call (a custom plan, about as
-- costly as running them); their generic plans are kept for the session.
CREATE FUNCTION fixpoint_apply_final_checks(d fixpoint_final_check[]) RETURNS void
LANGUAGE plpgsql SET jit = off SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(d) WHERE s < 0 AND rules IS NOT NULL) THEN
        DELETE FROM job_final_checks WHERE job_id IN (SELECT job_id FROM unnest(d) WHERE s < 0 AND rules IS NOT NULL);
    END IF;
    WITH x AS MATERIALIZED (
        SELECT * FROM unnest(d)
    ), rules AS (
        -- a job counts once for each distinct failure of its final check
        INSERT INTO batch_rollup_rules AS r (batch, rule, path, severity, final_jobs)
        SELECT batch, rule, path, severity, sum(s) FROM (
            SELECT DISTINCT x.batch, x.job_id, x.s, f.rule, f.path, f.severity
            FROM x CROSS JOIN LATERAL fixpoint_check_rules(x.errors, x.warnings) f
            WHERE x.rules IS NULL
            UNION ALL
            SELECT x.batch, x.job_id, x.s, k->>0, k->>1, k->>2 FROM x CROSS JOIN LATERAL jsonb_array_elements(x.rules) k
        ) u
        GROUP BY 1, 2, 3, 4 HAVING sum(s) <> 0 ORDER BY 1, 2, 3, 4
        ON CONFLICT (batch, rule, path, severity) DO UPDATE SET final_jobs = r.final_jobs + EXCLUDED.final_jobs
    )
    INSERT INTO batch_rollup_grades AS r (batch, path, leaves, exact, normalized, fuzzy, none)
    SELECT * FROM (
        SELECT batch, path, sum(leaves) AS leaves, sum(exact) AS exact, sum(normalized) AS normalized,
               sum(fuzzy) AS fuzzy, sum(none) AS none
        FROM (
            SELECT x.batch, regexp_replace(coalesce(g->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
                   x.s::bigint AS leaves,
                   CASE WHEN g->>'grade' = 'exact' THEN x.s ELSE 0 END::bigint AS exact,
                   CASE WHEN g->>'grade' = 'normalized' THEN x.s ELSE 0 END::bigint AS normalized,
                   CASE WHEN g->>'grade' = 'fuzzy' THEN x.s ELSE 0 END::bigint AS fuzzy,
                   CASE WHEN g->>'grade' = 'none' THEN x.s ELSE 0 END::bigint AS none
            FROM x CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(x.evidence) = 'array' THEN x.evidence END) g
            WHERE x.grades IS NULL
            UNION ALL
            SELECT x.batch, g->>0, x.s * (g->>1)::bigint, x.s * (g->>2)::bigint, x.s * (g->>3)::bigint,
                   x.s * (g->>4)::bigint, x.s * (g->>5)::bigint
            FROM x CROSS JOIN LATERAL jsonb_array_elements(x.grades) g
        ) u
        GROUP BY 1, 2
    ) g
    WHERE (leaves, exact, normalized, fuzzy, none) <> (0, 0, 0, 0, 0)
    ORDER BY 1, 2
    ON CONFLICT (batch, path) DO UPDATE SET
        leaves = r.leaves + EXCLUDED.leaves, exact = r.exact + EXCLUDED.exact,
        normalized = r.normalized + EXCLUDED.normalized, fuzzy = r.fuzzy + EXCLUDED.fuzzy, none = r.none + EXCLUDED.none;
END $$;

-- As 011's, the final checks read from the attempts.
CREATE OR REPLACE FUNCTION fixpoint_attempts_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off SET enable_seqscan = off AS $$
DECLARE
    finals fixpoint_final_check[];
BEGIN
    -- Each job looked up once (a job's attempts come together), not once
    -- per attempt.
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM (SELECT DISTINCT job_id FROM new_attempts) i
                    CROSS JOIN LATERAL (SELECT batch FROM jobs WHERE id = i.job_id LIMIT 1) j)
    ORDER BY batch FOR UPDATE;

    WITH j AS MATERIALIZED (
        SELECT j.* FROM (SELECT DISTINCT job_id FROM new_attempts) i
        CROSS JOIN LATERAL (SELECT id, batch, row_no, run, status, model FROM jobs
                            WHERE id = i.job_id AND batch IS NOT NULL LIMIT 1) j
    ), a AS MATERIALIZED (
        SELECT j.batch, j.row_no, j.run AS job_run, j.status AS job_status,
               coalesce(nullif(n.model, ''), j.model) AS model,
               n.job_id, n.run, n.attempt_no, n.valid, n.class, n.errors, n.coerced, n.patch_outcome,
               n.price_basis, n.tokens_in, n.tokens_out, n.tokens_cached, n.cost_usd, n.latency_ms, n.started_at,
               n.tokens_cache_write, n.repaired_locally
        FROM new_attempts n JOIN j ON j.id = n.job_id
    ), cur AS (
        -- 010's batch_rollup_current: the attempts of their jobs' current
        -- runs. A run's first attempt after the first counts it in
        -- retried_jobs once (when the run had none before this statement).
        SELECT * FROM a WHERE run = job_run
    ), cur_r AS (
        SELECT batch, job_id, run, count(*) AS k FROM cur WHERE attempt_no > 1 GROUP BY 1, 2, 3
    ), cur_rj AS (
        SELECT batch, count(*) AS n FROM cur_r r
        WHERE (SELECT count(*) FROM attempts p
               WHERE p.job_id = r.job_id AND p.run = r.run AND p.attempt_no > 1) = r.k
        GROUP BY 1
    ), cur_s AS (
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
        FROM cur GROUP BY 1
    ), curr AS (
        INSERT INTO batch_rollup_current AS c (batch, realtime_attempts, realtime_cost_usd, batch_attempts, batch_cost_usd,
                                               prompt_tokens, cached_tokens, cache_write_tokens, calls_saved, text_saved,
                                               retried_jobs, retry_tokens_out)
        SELECT s.batch, ra, rc, ba, bc, pt, ct, cw, cs, ts, coalesce(rj.n, 0), rt
        FROM cur_s s LEFT JOIN cur_rj rj ON rj.batch = s.batch ORDER BY 1
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
            retry_tokens_out = c.retry_tokens_out + EXCLUDED.retry_tokens_out
    ), wave_sums AS (
        -- 010's wave_rollups (waves exist only for a batch: no lock beyond
        -- its batch's)
        INSERT INTO wave_rollups AS w (wave_id, tokens_in, tokens_out, valid, cost_usd)
        SELECT n.wave_id, sum(n.tokens_in), sum(n.tokens_out), count(*) FILTER (WHERE n.valid), coalesce(sum(n.cost_usd), 0)
        FROM new_attempts n JOIN waves v ON v.id = n.wave_id
        GROUP BY 1 ORDER BY 1
        ON CONFLICT (wave_id) DO UPDATE SET
            tokens_in = w.tokens_in + EXCLUDED.tokens_in, tokens_out = w.tokens_out + EXCLUDED.tokens_out,
            valid = w.valid + EXCLUDED.valid, cost_usd = w.cost_usd + EXCLUDED.cost_usd
    ), hours AS (
        -- 005's batch_cost_hours
        INSERT INTO batch_cost_hours AS r (hour, batch, calls, tokens, cost_usd)
        SELECT date_trunc('hour', started_at, 'UTC'), batch, count(*), sum(tokens_in + tokens_out), coalesce(sum(cost_usd), 0)
        FROM a WHERE started_at IS NOT NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (hour, batch) DO UPDATE SET
            calls = r.calls + EXCLUDED.calls, tokens = r.tokens + EXCLUDED.tokens, cost_usd = r.cost_usd + EXCLUDED.cost_usd
    ), spend AS (
        -- 004's spend counters, of the capped batches only
        INSERT INTO spend_counters AS c (batch, tokens, cost_usd, calls)
        SELECT a.batch, sum(a.tokens_in + a.tokens_out), coalesce(sum(a.cost_usd), 0), count(*)
        FROM a JOIN batches b ON b.name = a.batch
        WHERE b.max_cost_usd IS NOT NULL OR b.max_total_tokens IS NOT NULL
        GROUP BY a.batch ORDER BY a.batch
        ON CONFLICT (batch) DO UPDATE SET
            tokens = c.tokens + EXCLUDED.tokens, cost_usd = c.cost_usd + EXCLUDED.cost_usd, calls = c.calls + EXCLUDED.calls
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
    ), classes AS (
        INSERT INTO batch_rollup_classes AS r (batch, model, attempt_no, class, attempts)
        SELECT batch, model, attempt_no, class, count(*) FROM a GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (batch, model, attempt_no, class) DO UPDATE SET attempts = r.attempts + EXCLUDED.attempts
    ), latency AS (
        INSERT INTO batch_rollup_latency AS r (batch, latency_ms, calls)
        SELECT batch, fixpoint_hist_bucket(latency_ms), count(*) FROM a WHERE price_basis = 'realtime'
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (batch, latency_ms) DO UPDATE SET calls = r.calls + EXCLUDED.calls
    ), w AS (
        -- each new attempt with the new attempts before and after it (by
        -- a sort, not a join whose plan rests on a guessed row count)
        SELECT batch, job_id, run, attempt_no, valid, class,
               lag(attempt_no) OVER j AS prev_no, lag(valid) OVER j AS prev_valid, lag(class) OVER j AS prev_class,
               lead(attempt_no) OVER j AS next_no
        FROM a WINDOW j AS (PARTITION BY job_id, run ORDER BY attempt_no)
    ), repairs AS (
        INSERT INTO batch_rollup_repairs AS r (batch, attempt_no, class, failed, retried, valid_next)
        SELECT batch, attempt_no, class, sum(failed), sum(retried), sum(valid_next) FROM (
            -- a failed attempt
            SELECT batch, attempt_no, class, 1 AS failed, 0 AS retried, 0 AS valid_next FROM a WHERE NOT valid
            UNION ALL
            -- a failed attempt and the next one, both new (the writer's
            -- case: a job's attempts come in one statement)
            SELECT batch, attempt_no - 1, prev_class, 0, 1, valid::int
            FROM w WHERE prev_no = attempt_no - 1 AND NOT prev_valid
            UNION ALL
            -- a new attempt after a failed one recorded before: looked up
            -- only for the attempts whose previous one is not new
            SELECT w.batch, p.attempt_no, p.class, 0, 1, w.valid::int
            FROM w JOIN attempts p ON p.job_id = w.job_id AND p.run = w.run AND p.attempt_no = w.attempt_no - 1
            WHERE w.attempt_no > 1 AND w.prev_no IS DISTINCT FROM w.attempt_no - 1 AND NOT p.valid
            UNION ALL
            -- a new failed attempt whose next one was recorded before it
            SELECT w.batch, w.attempt_no, w.class, 0, 1, n.valid::int
            FROM w JOIN attempts n ON n.job_id = w.job_id AND n.run = w.run AND n.attempt_no = w.attempt_no + 1
            WHERE NOT w.valid AND w.next_no IS DISTINCT FROM w.attempt_no + 1
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

    -- 010's rest, each statement (planned anew each time) only for the
    -- few attempts it concerns: the current runs' kinds (repairs, patch
    -- replies, unpriced attempts) and the rule failures.
    IF EXISTS (SELECT 1 FROM new_attempts WHERE jsonb_typeof(repairs) = 'array' OR patch_outcome <> '' OR unpriced) THEN
        EXECUTE (fixpoint_current_runs_sql(
            'SELECT j.batch, j.model AS job_model, n.* FROM new_attempts n JOIN jobs j ON j.id = n.job_id AND j.run = n.run
             WHERE j.batch IS NOT NULL', 1))[2];
    END IF;
    IF EXISTS (SELECT 1 FROM new_attempts WHERE errors @> '[{"keyword": "x-fixpoint-rules"}]'
                                             OR warnings @> '[{"keyword": "x-fixpoint-rules"}]') THEN
        EXECUTE fixpoint_rule_failures_sql(
            'SELECT j.batch, n.job_id, n.errors, n.warnings FROM new_attempts n JOIN jobs j ON j.id = n.job_id
             WHERE j.batch IS NOT NULL');
    END IF;
    -- 010's final checks: a job's final check is its latest run's
    -- revalidation, else that run's valid attempt, else its last. A new
    -- attempt changes it when it comes before, in that order, the best
    -- attempt recorded before this statement (or there was none), or when
    -- the job's final check was kept in job_final_checks (its attempts
    -- purged). Only the checks that add something (a rule failure or
    -- evidence) go into the array; their jobs alone are looked up.
    WITH n AS MATERIALIZED (
        -- each job's best new attempt, and the numbers of all its new ones
        SELECT DISTINCT ON (job_id, run) job_id, run, attempt_no, valid, errors, warnings, evidence,
               array_agg(attempt_no) OVER (PARTITION BY job_id, run) AS nos
        FROM new_attempts ORDER BY job_id, run, valid DESC, attempt_no DESC
    ), o AS MATERIALIZED (
        -- with the check kept for it, else its best attempt recorded before
        SELECT n.*, k.rules AS k_rules, k.grades AS k_grades,
               p.attempt_no AS o_no, p.valid AS o_valid, p.errors AS o_errors, p.warnings AS o_warnings,
               p.evidence AS o_evidence
        FROM n
        LEFT JOIN LATERAL (SELECT f.rules, f.grades FROM job_final_checks f WHERE f.job_id = n.job_id LIMIT 1) k ON true
        LEFT JOIN LATERAL (SELECT a.attempt_no, a.valid, a.errors, a.warnings, a.evidence FROM attempts a
                           WHERE a.job_id = n.job_id AND a.run = n.run AND a.attempt_no <> ALL (n.nos)
                           ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1) p ON true
    ), c AS (
        SELECT job_id, run, -1 AS s, NULL::jsonb AS errors, NULL::jsonb AS warnings, NULL::jsonb AS evidence,
               k_rules AS rules, k_grades AS grades
        FROM o WHERE k_rules IS NOT NULL
        UNION ALL
        SELECT job_id, run, -1, o_errors, o_warnings, o_evidence, NULL, NULL
        FROM o WHERE k_rules IS NULL AND (valid, attempt_no) > (o_valid, o_no)
        UNION ALL
        SELECT job_id, run, 1, errors, warnings, evidence, NULL, NULL
        FROM o WHERE o_no IS NULL OR (valid, attempt_no) > (o_valid, o_no)
        UNION ALL
        -- a kept check replaced by an attempt recorded before this statement
        SELECT job_id, run, 1, o_errors, o_warnings, o_evidence, NULL, NULL
        FROM o WHERE k_rules IS NOT NULL AND (valid, attempt_no) < (o_valid, o_no)
    )
    SELECT array_agg(ROW(j.batch, c.job_id, c.s, c.errors, c.warnings, c.evidence, c.rules, c.grades)::fixpoint_final_check)
    INTO finals
    FROM c
    CROSS JOIN LATERAL (SELECT batch FROM jobs WHERE id = c.job_id AND run = c.run AND batch IS NOT NULL LIMIT 1) j
    WHERE (c.rules IS NOT NULL OR c.evidence IS NOT NULL OR c.warnings IS NOT NULL
           OR c.errors @> '[{"keyword": "x-fixpoint-rules"}]')
      AND (SELECT true FROM revalidations r WHERE r.job_id = c.job_id AND r.run = c.run LIMIT 1) IS NULL;
    IF finals IS NOT NULL THEN
        PERFORM fixpoint_apply_final_checks(finals);
    END IF;
    RETURN NULL;
END $$;

-- A revalidation is its run's final check; the run, new, has none before
-- it but one kept for a purged job.
CREATE OR REPLACE FUNCTION fixpoint_revalidations_checks() RETURNS trigger
LANGUAGE plpgsql SET jit = off SET enable_seqscan = off AS $$
DECLARE
    finals fixpoint_final_check[];
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_checks c JOIN jobs j ON j.id = c.job_id)
    ORDER BY batch FOR UPDATE;
    EXECUTE fixpoint_rule_failures_sql(
        'SELECT j.batch, n.job_id, n.errors, n.warnings FROM new_checks n JOIN jobs j ON j.id = n.job_id
         WHERE j.batch IS NOT NULL');
    SELECT array_agg(ROW(x.*)::fixpoint_final_check) INTO finals FROM (
        WITH t AS MATERIALIZED (
            SELECT j.batch, n.job_id, n.run, n.errors, n.warnings, n.evidence FROM new_checks n
            CROSS JOIN LATERAL (SELECT batch FROM jobs WHERE id = n.job_id AND run = n.run AND batch IS NOT NULL LIMIT 1) j
        )
        SELECT t.batch, t.job_id, -1 AS s, c.errors, c.warnings, c.evidence, k.rules, k.grades
        FROM t
        LEFT JOIN LATERAL (SELECT f.rules, f.grades FROM job_final_checks f WHERE f.job_id = t.job_id LIMIT 1) k ON true
        LEFT JOIN LATERAL (SELECT a.errors, a.warnings, a.evidence FROM attempts a WHERE a.job_id = t.job_id AND a.run = t.run
                           ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1) c ON k.rules IS NULL
        UNION ALL
        SELECT batch, job_id, 1, errors, warnings, evidence, NULL, NULL FROM t
    ) x
    WHERE x.rules IS NOT NULL OR x.evidence IS NOT NULL OR x.warnings IS NOT NULL
       OR x.errors @> '[{"keyword": "x-fixpoint-rules"}]';
    IF finals IS NOT NULL THEN
        PERFORM fixpoint_apply_final_checks(finals);
    END IF;
    RETURN NULL;
END $$;

-- A run kept in job_runs is no job's latest: its final check (kept, else
-- its revalidation, else its best attempt) is taken away until the next
-- run's first attempt or revalidation.
CREATE OR REPLACE FUNCTION fixpoint_job_runs_checks() RETURNS trigger
LANGUAGE plpgsql SET jit = off SET enable_seqscan = off AS $$
DECLARE
    finals fixpoint_final_check[];
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_runs r JOIN jobs j ON j.id = r.job_id)
    ORDER BY batch FOR UPDATE;
    SELECT array_agg(ROW(x.*)::fixpoint_final_check) INTO finals FROM (
        SELECT j.batch, r.job_id, -1 AS s, c.errors, c.warnings, c.evidence, k.rules, k.grades
        FROM new_runs r
        CROSS JOIN LATERAL (SELECT batch FROM jobs WHERE id = r.job_id AND run = r.run AND batch IS NOT NULL LIMIT 1) j
        LEFT JOIN LATERAL (SELECT f.rules, f.grades FROM job_final_checks f WHERE f.job_id = r.job_id LIMIT 1) k ON true
        LEFT JOIN LATERAL (
            SELECT v.errors, v.warnings, v.evidence FROM revalidations v WHERE v.job_id = r.job_id AND v.run = r.run
            UNION ALL
            (SELECT a.errors, a.warnings, a.evidence FROM attempts a WHERE a.job_id = r.job_id AND a.run = r.run
             ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1)
            LIMIT 1
        ) c ON k.rules IS NULL
    ) x
    WHERE x.rules IS NOT NULL OR x.evidence IS NOT NULL OR x.warnings IS NOT NULL
       OR x.errors @> '[{"keyword": "x-fixpoint-rules"}]';
    IF finals IS NOT NULL THEN
        PERFORM fixpoint_apply_final_checks(finals);
    END IF;
    RETURN NULL;
END $$;

-- Keeps what the final checks of the jobs ids add, before report purge
-- deletes the attempts and revalidations they are read from. The caller
-- holds the jobs' rows; a job keeps a row it already has.
CREATE FUNCTION fixpoint_keep_final_checks(ids text[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO job_final_checks (job_id, batch, rules, grades)
    SELECT id, batch, rules, grades FROM (
        SELECT j.id, j.batch, fixpoint_final_rules(c.errors, c.warnings) AS rules, fixpoint_final_grades(c.evidence) AS grades
        FROM jobs j
        CROSS JOIN LATERAL (
            SELECT r.errors, r.warnings, r.evidence FROM revalidations r WHERE r.job_id = j.id AND r.run = j.run
            UNION ALL
            (SELECT a.errors, a.warnings, a.evidence FROM attempts a
             WHERE a.job_id = j.id AND a.run = j.run ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1)
            LIMIT 1
        ) c
        WHERE j.id = ANY (ids) AND j.batch IS NOT NULL
          AND (c.evidence IS NOT NULL OR c.warnings IS NOT NULL OR c.errors @> '[{"keyword": "x-fixpoint-rules"}]')
    ) f
    WHERE rules <> '[]'::jsonb OR grades <> '[]'::jsonb
    ORDER BY id
    ON CONFLICT (job_id) DO NOTHING
$$;

DROP FUNCTION fixpoint_set_final_checks(jsonb);

-- Only the purged jobs' rows stay: the others' final checks are in their
-- attempts and revalidations. Copied aside and put back, so that the
-- migration's time grows with the purged jobs, not with the ledger.
CREATE TEMP TABLE kept_final_checks ON COMMIT DROP AS
SELECT f.job_id, f.batch, f.rules, f.grades FROM purged_jobs p JOIN job_final_checks f ON f.job_id = p.job_id;
TRUNCATE job_final_checks;
INSERT INTO job_final_checks (job_id, batch, rules, grades)
SELECT job_id, batch, rules, grades FROM kept_final_checks ORDER BY job_id;

---- create above / drop below ----

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

-- 010's rows for every job whose final check adds anything, beside the
-- purged jobs' kept ones.
INSERT INTO job_final_checks (job_id, batch, rules, grades)
SELECT id, batch, rules, grades FROM (
    SELECT j.id, j.batch, fixpoint_final_rules(c.errors, c.warnings) AS rules, fixpoint_final_grades(c.evidence) AS grades
    FROM jobs j
    CROSS JOIN LATERAL (
        SELECT r.errors, r.warnings, r.evidence FROM revalidations r WHERE r.job_id = j.id AND r.run = j.run
        UNION ALL
        (SELECT a.errors, a.warnings, a.evidence FROM attempts a
         WHERE a.job_id = j.id AND a.run = j.run ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1)
        LIMIT 1
    ) c
    WHERE j.batch IS NOT NULL
      AND (c.evidence IS NOT NULL OR c.warnings IS NOT NULL OR c.errors @> '[{"keyword": "x-fixpoint-rules"}]')
) f
WHERE rules <> '[]'::jsonb OR grades <> '[]'::jsonb
ON CONFLICT (job_id) DO NOTHING;

DROP FUNCTION fixpoint_keep_final_checks(text[]);

CREATE OR REPLACE FUNCTION fixpoint_revalidations_checks() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION fixpoint_job_runs_checks() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION fixpoint_attempts_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off SET enable_seqscan = off AS $$
DECLARE
    checks jsonb;
BEGIN
    -- Each job looked up once (a job's attempts come together), not once
    -- per attempt.
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM (SELECT DISTINCT job_id FROM new_attempts) i
                    CROSS JOIN LATERAL (SELECT batch FROM jobs WHERE id = i.job_id LIMIT 1) j)
    ORDER BY batch FOR UPDATE;

    WITH j AS MATERIALIZED (
        SELECT j.* FROM (SELECT DISTINCT job_id FROM new_attempts) i
        CROSS JOIN LATERAL (SELECT id, batch, row_no, run, status, model FROM jobs
                            WHERE id = i.job_id AND batch IS NOT NULL LIMIT 1) j
    ), a AS MATERIALIZED (
        SELECT j.batch, j.row_no, j.run AS job_run, j.status AS job_status,
               coalesce(nullif(n.model, ''), j.model) AS model,
               n.job_id, n.run, n.attempt_no, n.valid, n.class, n.errors, n.coerced, n.patch_outcome,
               n.price_basis, n.tokens_in, n.tokens_out, n.tokens_cached, n.cost_usd, n.latency_ms, n.started_at,
               n.tokens_cache_write, n.repaired_locally
        FROM new_attempts n JOIN j ON j.id = n.job_id
    ), cur AS (
        -- 010's batch_rollup_current: the attempts of their jobs' current
        -- runs. A run's first attempt after the first counts it in
        -- retried_jobs once (when the run had none before this statement).
        SELECT * FROM a WHERE run = job_run
    ), cur_r AS (
        SELECT batch, job_id, run, count(*) AS k FROM cur WHERE attempt_no > 1 GROUP BY 1, 2, 3
    ), cur_rj AS (
        SELECT batch, count(*) AS n FROM cur_r r
        WHERE (SELECT count(*) FROM attempts p
               WHERE p.job_id = r.job_id AND p.run = r.run AND p.attempt_no > 1) = r.k
        GROUP BY 1
    ), cur_s AS (
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
        FROM cur GROUP BY 1
    ), curr AS (
        INSERT INTO batch_rollup_current AS c (batch, realtime_attempts, realtime_cost_usd, batch_attempts, batch_cost_usd,
                                               prompt_tokens, cached_tokens, cache_write_tokens, calls_saved, text_saved,
                                               retried_jobs, retry_tokens_out)
        SELECT s.batch, ra, rc, ba, bc, pt, ct, cw, cs, ts, coalesce(rj.n, 0), rt
        FROM cur_s s LEFT JOIN cur_rj rj ON rj.batch = s.batch ORDER BY 1
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
            retry_tokens_out = c.retry_tokens_out + EXCLUDED.retry_tokens_out
    ), wave_sums AS (
        -- 010's wave_rollups (waves exist only for a batch: no lock beyond
        -- its batch's)
        INSERT INTO wave_rollups AS w (wave_id, tokens_in, tokens_out, valid, cost_usd)
        SELECT n.wave_id, sum(n.tokens_in), sum(n.tokens_out), count(*) FILTER (WHERE n.valid), coalesce(sum(n.cost_usd), 0)
        FROM new_attempts n JOIN waves v ON v.id = n.wave_id
        GROUP BY 1 ORDER BY 1
        ON CONFLICT (wave_id) DO UPDATE SET
            tokens_in = w.tokens_in + EXCLUDED.tokens_in, tokens_out = w.tokens_out + EXCLUDED.tokens_out,
            valid = w.valid + EXCLUDED.valid, cost_usd = w.cost_usd + EXCLUDED.cost_usd
    ), hours AS (
        -- 005's batch_cost_hours
        INSERT INTO batch_cost_hours AS r (hour, batch, calls, tokens, cost_usd)
        SELECT date_trunc('hour', started_at, 'UTC'), batch, count(*), sum(tokens_in + tokens_out), coalesce(sum(cost_usd), 0)
        FROM a WHERE started_at IS NOT NULL
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (hour, batch) DO UPDATE SET
            calls = r.calls + EXCLUDED.calls, tokens = r.tokens + EXCLUDED.tokens, cost_usd = r.cost_usd + EXCLUDED.cost_usd
    ), spend AS (
        -- 004's spend counters, of the capped batches only
        INSERT INTO spend_counters AS c (batch, tokens, cost_usd, calls)
        SELECT a.batch, sum(a.tokens_in + a.tokens_out), coalesce(sum(a.cost_usd), 0), count(*)
        FROM a JOIN batches b ON b.name = a.batch
        WHERE b.max_cost_usd IS NOT NULL OR b.max_total_tokens IS NOT NULL
        GROUP BY a.batch ORDER BY a.batch
        ON CONFLICT (batch) DO UPDATE SET
            tokens = c.tokens + EXCLUDED.tokens, cost_usd = c.cost_usd + EXCLUDED.cost_usd, calls = c.calls + EXCLUDED.calls
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
    ), classes AS (
        INSERT INTO batch_rollup_classes AS r (batch, model, attempt_no, class, attempts)
        SELECT batch, model, attempt_no, class, count(*) FROM a GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (batch, model, attempt_no, class) DO UPDATE SET attempts = r.attempts + EXCLUDED.attempts
    ), latency AS (
        INSERT INTO batch_rollup_latency AS r (batch, latency_ms, calls)
        SELECT batch, fixpoint_hist_bucket(latency_ms), count(*) FROM a WHERE price_basis = 'realtime'
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (batch, latency_ms) DO UPDATE SET calls = r.calls + EXCLUDED.calls
    ), w AS (
        -- each new attempt with the new attempts before and after it (by
        -- a sort, not a join whose plan rests on a guessed row count)
        SELECT batch, job_id, run, attempt_no, valid, class,
               lag(attempt_no) OVER j AS prev_no, lag(valid) OVER j AS prev_valid, lag(class) OVER j AS prev_class,
               lead(attempt_no) OVER j AS next_no
        FROM a WINDOW j AS (PARTITION BY job_id, run ORDER BY attempt_no)
    ), repairs AS (
        INSERT INTO batch_rollup_repairs AS r (batch, attempt_no, class, failed, retried, valid_next)
        SELECT batch, attempt_no, class, sum(failed), sum(retried), sum(valid_next) FROM (
            -- a failed attempt
            SELECT batch, attempt_no, class, 1 AS failed, 0 AS retried, 0 AS valid_next FROM a WHERE NOT valid
            UNION ALL
            -- a failed attempt and the next one, both new (the writer's
            -- case: a job's attempts come in one statement)
            SELECT batch, attempt_no - 1, prev_class, 0, 1, valid::int
            FROM w WHERE prev_no = attempt_no - 1 AND NOT prev_valid
            UNION ALL
            -- a new attempt after a failed one recorded before: looked up
            -- only for the attempts whose previous one is not new
            SELECT w.batch, p.attempt_no, p.class, 0, 1, w.valid::int
            FROM w JOIN attempts p ON p.job_id = w.job_id AND p.run = w.run AND p.attempt_no = w.attempt_no - 1
            WHERE w.attempt_no > 1 AND w.prev_no IS DISTINCT FROM w.attempt_no - 1 AND NOT p.valid
            UNION ALL
            -- a new failed attempt whose next one was recorded before it
            SELECT w.batch, w.attempt_no, w.class, 0, 1, n.valid::int
            FROM w JOIN attempts n ON n.job_id = w.job_id AND n.run = w.run AND n.attempt_no = w.attempt_no + 1
            WHERE NOT w.valid AND w.next_no IS DISTINCT FROM w.attempt_no + 1
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

    -- 010's rest, each statement (planned anew each time) only for the
    -- few attempts it concerns: the current runs' kinds (repairs, patch
    -- replies, unpriced attempts) and the rule failures.
    IF EXISTS (SELECT 1 FROM new_attempts WHERE jsonb_typeof(repairs) = 'array' OR patch_outcome <> '' OR unpriced) THEN
        EXECUTE (fixpoint_current_runs_sql(
            'SELECT j.batch, j.model AS job_model, n.* FROM new_attempts n JOIN jobs j ON j.id = n.job_id AND j.run = n.run
             WHERE j.batch IS NOT NULL', 1))[2];
    END IF;
    IF EXISTS (SELECT 1 FROM new_attempts WHERE errors @> '[{"keyword": "x-fixpoint-rules"}]'
                                             OR warnings @> '[{"keyword": "x-fixpoint-rules"}]') THEN
        EXECUTE fixpoint_rule_failures_sql(
            'SELECT j.batch, n.job_id, n.errors, n.warnings FROM new_attempts n JOIN jobs j ON j.id = n.job_id
             WHERE j.batch IS NOT NULL');
    END IF;
    -- 010's final checks: a job's final check is its latest run's
    -- revalidation, else that run's valid attempt, else its last. Only a
    -- job with a new check that may add something, or whose final check
    -- added something, can change what it adds: most attempts (no rules,
    -- no evidence) are passed by here.
    SELECT jsonb_agg(jsonb_build_object('job_id', t.id, 'batch', t.batch, 'rules', fixpoint_final_rules(c.errors, c.warnings),
                                        'grades', fixpoint_final_grades(c.evidence)))
    INTO checks
    FROM (
        SELECT i.job_id AS id, j.batch, j.run
        FROM (SELECT job_id, run,
                     bool_or(evidence IS NOT NULL OR warnings IS NOT NULL OR errors @> '[{"keyword": "x-fixpoint-rules"}]') AS adds
              FROM new_attempts GROUP BY 1, 2) i
        CROSS JOIN LATERAL (SELECT batch, run FROM jobs
                            WHERE id = i.job_id AND run = i.run AND batch IS NOT NULL LIMIT 1) j
        -- (a scalar subquery, not EXISTS: that was planned as a hash of
        -- the whole of job_final_checks)
        WHERE i.adds OR (SELECT true FROM job_final_checks f WHERE f.job_id = i.job_id LIMIT 1)
    ) t
    CROSS JOIN LATERAL (
        SELECT a.errors, a.warnings, a.evidence FROM attempts a
        WHERE a.job_id = t.id AND a.run = t.run ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1
    ) c
    WHERE (SELECT true FROM revalidations r WHERE r.job_id = t.id AND r.run = t.run LIMIT 1) IS NULL;
    IF checks IS NOT NULL THEN
        PERFORM fixpoint_set_final_checks(checks);
    END IF;
    RETURN NULL;
END $$;

DROP FUNCTION fixpoint_apply_final_checks(fixpoint_final_check[]);
DROP TYPE fixpoint_final_check;
