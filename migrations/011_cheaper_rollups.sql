-- 011_cheaper_rollups: the rollups of 003, 004, 005 and 009 kept exact
-- for less of Postgres's time under the writer.
--
-- The attempts of a statement were read three times (attempts_rollup,
-- attempts_spend, attempts_rollup_hours), each pass joining every attempt
-- row to its job: one trigger now reads them once, looks each job up
-- once, and writes batch_cost_hours and the capped batches' spend counters
-- in the same statement as the other rollups. interrupted_attempts keeps
-- 004's spend trigger. The repairs rollup pairs the statement's attempts
-- among themselves (lag and lead) and looks up in attempts only the
-- neighbours of those whose neighbour is not new, where it looked up two
-- for every attempt.
--
-- The jobs trigger built its seven statements as dynamic SQL, planned
-- again on every call (most of its time under the writer's updates); it
-- now nets the statement's changes once, per job, into an array and reads
-- that from two static statements, whose plans PL/pgSQL keeps. A
-- statement that changes nothing counted returns before writing.

-- One job's counted values in a statement's net change (n: +1 for a new
-- row, -1 for an old one, netted per job).
CREATE TYPE fixpoint_job_delta AS (
    batch text, status text, attempts integer, first_attempt_valid boolean, repaired_locally boolean,
    tokens_in bigint, tokens_out bigint, cost_usd numeric, tokens_cached bigint, run integer, ft boolean,
    earlier_attempts integer, wall bigint, minute timestamptz, id text, model text, n bigint
);

CREATE OR REPLACE FUNCTION fixpoint_jobs_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    d fixpoint_job_delta[];
BEGIN
    -- The statement's changes netted per job and counted values: an
    -- update that changes nothing counted nets to nothing and returns here.
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(ROW(x.*)::fixpoint_job_delta ORDER BY x.batch) INTO d FROM (
            SELECT batch, status, attempts, first_attempt_valid, repaired_locally, tokens_in, tokens_out, cost_usd,
                   tokens_cached, run, coalesce(first_try, first_attempt_valid), earlier_attempts,
                   CASE WHEN status <> 'queued' THEN fixpoint_hist_bucket(wall_ms) END,
                   CASE WHEN status <> 'queued' THEN date_trunc('minute', finished_at, 'UTC') END, id, model, 1::bigint
            FROM new_jobs WHERE batch IS NOT NULL
        ) x;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(ROW(x.*)::fixpoint_job_delta ORDER BY x.batch) INTO d FROM (
            SELECT batch, status, attempts, first_attempt_valid, repaired_locally, tokens_in, tokens_out, cost_usd,
                   tokens_cached, run, coalesce(first_try, first_attempt_valid), earlier_attempts,
                   CASE WHEN status <> 'queued' THEN fixpoint_hist_bucket(wall_ms) END,
                   CASE WHEN status <> 'queued' THEN date_trunc('minute', finished_at, 'UTC') END, id, model, -1::bigint
            FROM old_jobs WHERE batch IS NOT NULL
        ) x;
    ELSE
        SELECT array_agg(ROW(x.*)::fixpoint_job_delta ORDER BY x.batch) INTO d FROM (
            SELECT batch, status, attempts, first_attempt_valid, repaired_locally, tokens_in, tokens_out, cost_usd,
                   tokens_cached, run, ft, earlier_attempts, wall, minute, id, model, sum(s)
            FROM (
                SELECT batch, status, attempts, first_attempt_valid, repaired_locally, tokens_in, tokens_out, cost_usd,
                       tokens_cached, run, coalesce(first_try, first_attempt_valid) AS ft, earlier_attempts,
                       CASE WHEN status <> 'queued' THEN fixpoint_hist_bucket(wall_ms) END AS wall,
                       CASE WHEN status <> 'queued' THEN date_trunc('minute', finished_at, 'UTC') END AS minute,
                       id, model, 1 AS s
                FROM new_jobs WHERE batch IS NOT NULL
                UNION ALL
                SELECT batch, status, attempts, first_attempt_valid, repaired_locally, tokens_in, tokens_out, cost_usd,
                       tokens_cached, run, coalesce(first_try, first_attempt_valid), earlier_attempts,
                       CASE WHEN status <> 'queued' THEN fixpoint_hist_bucket(wall_ms) END,
                       CASE WHEN status <> 'queued' THEN date_trunc('minute', finished_at, 'UTC') END, id, model, -1
                FROM old_jobs WHERE batch IS NOT NULL
            ) u
            GROUP BY batch, status, attempts, first_attempt_valid, repaired_locally, tokens_in, tokens_out, cost_usd,
                     tokens_cached, run, ft, earlier_attempts, wall, minute, id, model
            HAVING sum(s) <> 0
        ) x;
    END IF;
    IF d IS NULL THEN
        RETURN NULL;
    END IF;

    -- batch_rollups first: its row is the batch's lock, taken in batch
    -- order, before any other rollup row is written.
    INSERT INTO batch_rollups AS r (batch, jobs, queued, valid, invalid, failed, rejected, dead, cancelled,
                                    over_budget, first_valid, attempts, tokens_in, tokens_out, cost_usd,
                                    tokens_cached, first_try_valid, repaired, reached, reached_attempts)
    SELECT batch, sum(n),
           coalesce(sum(n) FILTER (WHERE status = 'queued'), 0), coalesce(sum(n) FILTER (WHERE status = 'valid'), 0),
           coalesce(sum(n) FILTER (WHERE status = 'invalid'), 0), coalesce(sum(n) FILTER (WHERE status = 'failed'), 0),
           coalesce(sum(n) FILTER (WHERE status = 'rejected'), 0), coalesce(sum(n) FILTER (WHERE status = 'dead'), 0),
           coalesce(sum(n) FILTER (WHERE status = 'cancelled'), 0),
           coalesce(sum(n) FILTER (WHERE status = 'over_budget'), 0),
           coalesce(sum(n) FILTER (WHERE status = 'valid' AND first_attempt_valid), 0),
           sum(n * attempts), sum(n * tokens_in), sum(n * tokens_out), sum(n * cost_usd), sum(n * tokens_cached),
           coalesce(sum(n) FILTER (WHERE status = 'valid' AND ft), 0),
           coalesce(sum(n) FILTER (WHERE status = 'valid' AND (NOT ft OR repaired_locally)), 0),
           coalesce(sum(n) FILTER (WHERE status IN ('valid', 'invalid', 'failed')), 0),
           coalesce(sum(n * (attempts + earlier_attempts)) FILTER (WHERE status IN ('valid', 'invalid', 'failed')), 0)
    FROM unnest(d) GROUP BY batch ORDER BY batch
    ON CONFLICT (batch) DO UPDATE SET
        jobs = r.jobs + EXCLUDED.jobs, queued = r.queued + EXCLUDED.queued, valid = r.valid + EXCLUDED.valid,
        invalid = r.invalid + EXCLUDED.invalid, failed = r.failed + EXCLUDED.failed,
        rejected = r.rejected + EXCLUDED.rejected, dead = r.dead + EXCLUDED.dead,
        cancelled = r.cancelled + EXCLUDED.cancelled, over_budget = r.over_budget + EXCLUDED.over_budget,
        first_valid = r.first_valid + EXCLUDED.first_valid, attempts = r.attempts + EXCLUDED.attempts,
        tokens_in = r.tokens_in + EXCLUDED.tokens_in, tokens_out = r.tokens_out + EXCLUDED.tokens_out,
        cost_usd = r.cost_usd + EXCLUDED.cost_usd, tokens_cached = r.tokens_cached + EXCLUDED.tokens_cached,
        first_try_valid = r.first_try_valid + EXCLUDED.first_try_valid, repaired = r.repaired + EXCLUDED.repaired,
        reached = r.reached + EXCLUDED.reached, reached_attempts = r.reached_attempts + EXCLUDED.reached_attempts;

    -- The other rollups in one statement: the batches' rows are locked.
    -- A job valid in a run counts its valid attempts of that run in
    -- batch_rollup_costs.valid_jobs: a job becoming valid counts the ones
    -- recorded before it (the attempts trigger counts the ones after), a
    -- job no longer valid in that run uncounts them.
    WITH x AS MATERIALIZED (
        SELECT * FROM unnest(d)
    ), funnel AS (
        INSERT INTO batch_rollup_attempts AS r (batch, attempts, finished, valid, local)
        SELECT * FROM (
            SELECT batch, attempts, sum(n) AS finished, coalesce(sum(n) FILTER (WHERE status = 'valid'), 0) AS valid,
                   coalesce(sum(n) FILTER (WHERE status = 'valid' AND repaired_locally), 0) AS local
            FROM x WHERE status <> 'queued' GROUP BY batch, attempts
        ) g WHERE (finished, valid, local) <> (0, 0, 0)
        ORDER BY batch, attempts
        ON CONFLICT (batch, attempts) DO UPDATE SET
            finished = r.finished + EXCLUDED.finished, valid = r.valid + EXCLUDED.valid,
            local = r.local + EXCLUDED.local
    ), walls AS (
        INSERT INTO batch_rollup_walls AS r (batch, wall_ms, jobs)
        SELECT batch, wall, sum(n) FROM x WHERE wall IS NOT NULL
        GROUP BY 1, 2 HAVING sum(n) <> 0 ORDER BY 1, 2
        ON CONFLICT (batch, wall_ms) DO UPDATE SET jobs = r.jobs + EXCLUDED.jobs
    ), runs AS (
        INSERT INTO batch_rollup_runs AS r (batch, run, jobs)
        SELECT batch, run, sum(n) FROM x GROUP BY 1, 2 HAVING sum(n) <> 0 ORDER BY 1, 2
        ON CONFLICT (batch, run) DO UPDATE SET jobs = r.jobs + EXCLUDED.jobs
    ), minutes AS (
        INSERT INTO batch_rollup_minutes AS r (batch, minute, valid, invalid, failed, other)
        SELECT * FROM (
            SELECT batch, minute, coalesce(sum(n) FILTER (WHERE status = 'valid'), 0) AS valid,
                   coalesce(sum(n) FILTER (WHERE status = 'invalid'), 0) AS invalid,
                   coalesce(sum(n) FILTER (WHERE status = 'failed'), 0) AS failed,
                   coalesce(sum(n) FILTER (WHERE status NOT IN ('valid', 'invalid', 'failed')), 0) AS other
            FROM x WHERE minute IS NOT NULL GROUP BY 1, 2
        ) g WHERE (valid, invalid, failed, other) <> (0, 0, 0, 0)
        ORDER BY 1, 2
        ON CONFLICT (batch, minute) DO UPDATE SET
            valid = r.valid + EXCLUDED.valid, invalid = r.invalid + EXCLUDED.invalid,
            failed = r.failed + EXCLUDED.failed, other = r.other + EXCLUDED.other
    )
    INSERT INTO batch_rollup_costs AS r (batch, model, basis, valid_jobs)
    SELECT v.batch, coalesce(nullif(a.model, ''), v.model), a.price_basis, sum(v.n)
    FROM (SELECT batch, id, run, model, sum(n) AS n FROM x WHERE status = 'valid'
          GROUP BY batch, id, run, model HAVING sum(n) <> 0) v
    JOIN attempts a ON a.job_id = v.id AND a.run = v.run AND a.valid
    GROUP BY 1, 2, 3 HAVING sum(v.n) <> 0 ORDER BY 1, 2, 3
    ON CONFLICT (batch, model, basis) DO UPDATE SET valid_jobs = r.valid_jobs + EXCLUDED.valid_jobs;
    RETURN NULL;
END $$;

DROP TRIGGER attempts_rollup_hours ON attempts;
DROP TRIGGER attempts_spend ON attempts;
DROP FUNCTION fixpoint_attempts_cost_hours();

-- As 009's, reading the statement's attempts once, with 005's
-- batch_cost_hours, 004's spend counters and 010's rollups of the current
-- runs (batch_rollup_current and its kinds), of the waves and of the final
-- checks: 010's triggers attempts_counts and attempts_checks each locked
-- the batches and joined the attempts to their jobs again, which cost the
-- writer as much as this trigger.
--
-- Jobs, final checks and revalidations are looked up by key one at a time
-- (a LATERAL or a scalar subquery with LIMIT, which the planner cannot turn
-- into a join or a hash), and without sequential scans: PL/pgSQL keeps a
-- statement's plan for the session, and one made while the ledger was small
-- read the whole of jobs or job_final_checks at every statement (once per
-- job for a lookup), so that the trigger's cost grew with the ledger until
-- its tables were analyzed.
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

-- Their work is in attempts_rollup now.
DROP TRIGGER attempts_counts ON attempts;
DROP TRIGGER attempts_checks ON attempts;

---- create above / drop below ----

CREATE TRIGGER attempts_counts AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_attempts_counts();
CREATE TRIGGER attempts_checks AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_attempts_checks();

CREATE OR REPLACE FUNCTION fixpoint_attempts_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_attempts a JOIN jobs j ON j.id = a.job_id)
    ORDER BY batch FOR UPDATE;

    WITH a AS MATERIALIZED (
        SELECT j.batch, j.row_no, j.run AS job_run, j.status AS job_status,
               coalesce(nullif(n.model, ''), j.model) AS model,
               n.job_id, n.run, n.attempt_no, n.valid, n.class, n.errors, n.coerced, n.patch_outcome,
               n.price_basis, n.tokens_in, n.tokens_out, n.tokens_cached, n.cost_usd, n.latency_ms
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
    ), classes AS (
        INSERT INTO batch_rollup_classes AS r (batch, model, attempt_no, class, attempts)
        SELECT batch, model, attempt_no, class, count(*) FROM a GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (batch, model, attempt_no, class) DO UPDATE SET attempts = r.attempts + EXCLUDED.attempts
    ), latency AS (
        INSERT INTO batch_rollup_latency AS r (batch, latency_ms, calls)
        SELECT batch, fixpoint_hist_bucket(latency_ms), count(*) FROM a WHERE price_basis = 'realtime'
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (batch, latency_ms) DO UPDATE SET calls = r.calls + EXCLUDED.calls
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

CREATE FUNCTION fixpoint_attempts_cost_hours() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    INSERT INTO batch_cost_hours AS r (hour, batch, calls, tokens, cost_usd)
    SELECT date_trunc('hour', n.started_at, 'UTC'), j.batch, count(*), sum(n.tokens_in + n.tokens_out), coalesce(sum(n.cost_usd), 0)
    FROM new_attempts n JOIN jobs j ON j.id = n.job_id
    WHERE j.batch IS NOT NULL AND n.started_at IS NOT NULL
    GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (hour, batch) DO UPDATE SET
        calls = r.calls + EXCLUDED.calls, tokens = r.tokens + EXCLUDED.tokens, cost_usd = r.cost_usd + EXCLUDED.cost_usd;
    RETURN NULL;
END $$;

CREATE TRIGGER attempts_rollup_hours AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_attempts FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_attempts_cost_hours();
CREATE TRIGGER attempts_spend AFTER INSERT ON attempts
    REFERENCING NEW TABLE AS new_calls FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_spend_charge();

CREATE OR REPLACE FUNCTION fixpoint_jobs_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    exprs constant text := 'batch, status, attempts, first_attempt_valid, repaired_locally, tokens_in, tokens_out, cost_usd, '
        'tokens_cached, run, coalesce(first_try, first_attempt_valid) AS ft, earlier_attempts, '
        'CASE WHEN status <> ''queued'' THEN fixpoint_hist_bucket(wall_ms) END AS wall, '
        'CASE WHEN status <> ''queued'' THEN date_trunc(''minute'', finished_at, ''UTC'') END AS minute';
    cols constant text := 'batch, status, attempts, first_attempt_valid, repaired_locally, tokens_in, tokens_out, cost_usd, '
        'tokens_cached, run, ft, earlier_attempts, wall, minute';
    src text;
    net text;
    n bigint;
BEGIN
    src := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT %s, 1 AS s FROM new_jobs', exprs)
        WHEN 'DELETE' THEN format('SELECT %s, -1 AS s FROM old_jobs', exprs)
        ELSE format('SELECT %s, 1 AS s FROM new_jobs UNION ALL SELECT %s, -1 FROM old_jobs', exprs, exprs)
    END;
    net := format('SELECT %s, sum(s) AS n FROM (%s) x WHERE batch IS NOT NULL GROUP BY %s HAVING sum(s) <> 0', cols, src, cols);
    EXECUTE format($q$
        INSERT INTO batch_rollups AS r (batch, jobs, queued, valid, invalid, failed, rejected, dead, cancelled,
                                        over_budget, first_valid, attempts, tokens_in, tokens_out, cost_usd,
                                        tokens_cached, first_try_valid, repaired, reached, reached_attempts)
        SELECT batch, sum(n),
               coalesce(sum(n) FILTER (WHERE status = 'queued'), 0), coalesce(sum(n) FILTER (WHERE status = 'valid'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'invalid'), 0), coalesce(sum(n) FILTER (WHERE status = 'failed'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'rejected'), 0), coalesce(sum(n) FILTER (WHERE status = 'dead'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'cancelled'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'over_budget'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'valid' AND first_attempt_valid), 0),
               sum(n * attempts), sum(n * tokens_in), sum(n * tokens_out), sum(n * cost_usd), sum(n * tokens_cached),
               coalesce(sum(n) FILTER (WHERE status = 'valid' AND ft), 0),
               coalesce(sum(n) FILTER (WHERE status = 'valid' AND (NOT ft OR repaired_locally)), 0),
               coalesce(sum(n) FILTER (WHERE status IN ('valid', 'invalid', 'failed')), 0),
               coalesce(sum(n * (attempts + earlier_attempts)) FILTER (WHERE status IN ('valid', 'invalid', 'failed')), 0)
        FROM (%s) d GROUP BY batch ORDER BY batch
        ON CONFLICT (batch) DO UPDATE SET
            jobs = r.jobs + EXCLUDED.jobs, queued = r.queued + EXCLUDED.queued, valid = r.valid + EXCLUDED.valid,
            invalid = r.invalid + EXCLUDED.invalid, failed = r.failed + EXCLUDED.failed,
            rejected = r.rejected + EXCLUDED.rejected, dead = r.dead + EXCLUDED.dead,
            cancelled = r.cancelled + EXCLUDED.cancelled, over_budget = r.over_budget + EXCLUDED.over_budget,
            first_valid = r.first_valid + EXCLUDED.first_valid, attempts = r.attempts + EXCLUDED.attempts,
            tokens_in = r.tokens_in + EXCLUDED.tokens_in, tokens_out = r.tokens_out + EXCLUDED.tokens_out,
            cost_usd = r.cost_usd + EXCLUDED.cost_usd, tokens_cached = r.tokens_cached + EXCLUDED.tokens_cached,
            first_try_valid = r.first_try_valid + EXCLUDED.first_try_valid, repaired = r.repaired + EXCLUDED.repaired,
            reached = r.reached + EXCLUDED.reached, reached_attempts = r.reached_attempts + EXCLUDED.reached_attempts$q$, net);
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
    EXECUTE format($q$
        INSERT INTO batch_rollup_walls AS r (batch, wall_ms, jobs)
        SELECT batch, wall, sum(n) FROM (%s) d WHERE wall IS NOT NULL
        GROUP BY 1, 2 HAVING sum(n) <> 0 ORDER BY 1, 2
        ON CONFLICT (batch, wall_ms) DO UPDATE SET jobs = r.jobs + EXCLUDED.jobs$q$, net);
    EXECUTE format($q$
        INSERT INTO batch_rollup_runs AS r (batch, run, jobs)
        SELECT batch, run, sum(n) FROM (%s) d GROUP BY 1, 2 HAVING sum(n) <> 0 ORDER BY 1, 2
        ON CONFLICT (batch, run) DO UPDATE SET jobs = r.jobs + EXCLUDED.jobs$q$, net);
    EXECUTE format($q$
        INSERT INTO batch_rollup_minutes AS r (batch, minute, valid, invalid, failed, other)
        SELECT * FROM (
            SELECT batch, minute, coalesce(sum(n) FILTER (WHERE status = 'valid'), 0) AS valid,
                   coalesce(sum(n) FILTER (WHERE status = 'invalid'), 0) AS invalid,
                   coalesce(sum(n) FILTER (WHERE status = 'failed'), 0) AS failed,
                   coalesce(sum(n) FILTER (WHERE status NOT IN ('valid', 'invalid', 'failed')), 0) AS other
            FROM (%s) d WHERE minute IS NOT NULL GROUP BY 1, 2
        ) g WHERE (valid, invalid, failed, other) <> (0, 0, 0, 0)
        ORDER BY 1, 2
        ON CONFLICT (batch, minute) DO UPDATE SET
            valid = r.valid + EXCLUDED.valid, invalid = r.invalid + EXCLUDED.invalid,
            failed = r.failed + EXCLUDED.failed, other = r.other + EXCLUDED.other$q$, net);
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

DROP TYPE fixpoint_job_delta;
