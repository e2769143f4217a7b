-- 009_ledger_rollups: every question a report, a view of the ledger's or
-- the dashboard asks of a batch reads rollups or an index, never a scan
-- that grows with the batch or the ledger.
--
-- batch_rollups gains what batch_summary needs beyond its counts: cached
-- tokens, the valid jobs valid on their first try (of their first run
-- that made a call) and those repaired, and the attempts of the jobs that
-- reached the model, every run's (jobs.first_try and
-- jobs.earlier_attempts carry a requeued job's first try and earlier
-- attempts into its latest row). New rollups, kept by the same triggers:
-- batch_rollup_walls (finished jobs by wall time), batch_rollup_runs (jobs
-- by run), batch_rollup_minutes (finished jobs by minute and status, the
-- dashboard's progress plot), batch_rollup_classes (attempts by model,
-- number and class: failure_classes) and batch_rollup_latency (realtime
-- calls by latency: the latency plot). Wall times and latencies are kept
-- at three significant digits (exact below 1000 ms), so that a histogram
-- has a few thousand rows at most whatever the batch's size.
--
-- The views batch_summary, failure_classes, repair_effectiveness and
-- error_paths read the rollups; batch_summary's jobs of no batch (a
-- message rejected before its batch was known) are counted apart, through
-- the index on jobs (batch).

-- A requeued job's first try (the first_attempt_valid of its first run
-- that made a call; NULL while that is the latest run) and the attempts
-- of its earlier runs: set by the requeue and the revalidation that end a
-- run, so that the jobs trigger counts them without reading job_runs.
ALTER TABLE jobs ADD COLUMN first_try boolean;
ALTER TABLE jobs ADD COLUMN earlier_attempts integer NOT NULL DEFAULT 0;

ALTER TABLE batch_rollups
    ADD COLUMN tokens_cached bigint NOT NULL DEFAULT 0,
    -- valid jobs valid on their first try (coalesce(first_try, first_attempt_valid))
    ADD COLUMN first_try_valid bigint NOT NULL DEFAULT 0,
    -- the other valid jobs, and those repaired locally
    ADD COLUMN repaired bigint NOT NULL DEFAULT 0,
    -- valid, invalid and failed jobs, and their attempts of every run
    ADD COLUMN reached bigint NOT NULL DEFAULT 0,
    ADD COLUMN reached_attempts bigint NOT NULL DEFAULT 0;

-- Finished jobs by wall time (fixpoint_hist_bucket of wall_ms).
CREATE TABLE batch_rollup_walls (
    batch    text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    wall_ms  bigint NOT NULL,
    jobs     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, wall_ms)
);

-- Jobs by the run they are in (batch_summary's runs: the latest with one).
CREATE TABLE batch_rollup_runs (
    batch  text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    run    integer NOT NULL,
    jobs   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, run)
);

-- Finished jobs by the minute they finished in (UTC) and status.
CREATE TABLE batch_rollup_minutes (
    batch    text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    minute   timestamptz NOT NULL,
    valid    bigint NOT NULL DEFAULT 0,
    invalid  bigint NOT NULL DEFAULT 0,
    failed   bigint NOT NULL DEFAULT 0,
    other    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, minute)
);

-- Attempts of every run by model (the attempt's, else its job's when the
-- attempt was recorded), number and class ('' for a valid one).
CREATE TABLE batch_rollup_classes (
    batch       text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    model       text NOT NULL,
    attempt_no  integer NOT NULL,
    class       text NOT NULL,
    attempts    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, model, attempt_no, class)
);

-- Realtime calls (price basis realtime) by latency (fixpoint_hist_bucket
-- of latency_ms).
CREATE TABLE batch_rollup_latency (
    batch       text NOT NULL REFERENCES batches (name) ON DELETE CASCADE,
    latency_ms  bigint NOT NULL,
    calls       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch, latency_ms)
);

-- report summary's lanes whose model was not found, and attempts with no
-- price: rare rows, found without reading every attempt.
CREATE INDEX attempts_model_not_found ON attempts (job_id) WHERE provider_class = 'model_not_found';
CREATE INDEX interrupted_model_not_found ON interrupted_attempts (job_id) WHERE provider_class = 'model_not_found';
CREATE INDEX attempts_unpriced ON attempts (job_id) WHERE unpriced;

-- What batch_spend adds to the jobs' latest runs: the runs a requeue or a
-- revalidation replaced (job_runs) and the calls kept apart from the
-- results (interrupted_attempts; answered: those that got a reply), per
-- batch. Kept by triggers on the two tables, which lock the batch's
-- batch_rollups row first, as the attempts trigger does.
CREATE TABLE batch_rollup_spend (
    batch                   text PRIMARY KEY REFERENCES batches (name) ON DELETE CASCADE,
    earlier_calls           bigint NOT NULL DEFAULT 0,
    earlier_tokens_in       bigint NOT NULL DEFAULT 0,
    earlier_tokens_out      bigint NOT NULL DEFAULT 0,
    earlier_cost_usd        numeric NOT NULL DEFAULT 0,
    interrupted_calls       bigint NOT NULL DEFAULT 0,
    interrupted_answered    bigint NOT NULL DEFAULT 0,
    interrupted_tokens_in   bigint NOT NULL DEFAULT 0,
    interrupted_tokens_out  bigint NOT NULL DEFAULT 0,
    interrupted_cost_usd    numeric NOT NULL DEFAULT 0
);

CREATE FUNCTION fixpoint_job_runs_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_runs r JOIN jobs j ON j.id = r.job_id)
    ORDER BY batch FOR UPDATE;
    INSERT INTO batch_rollup_spend AS s (batch, earlier_calls, earlier_tokens_in, earlier_tokens_out, earlier_cost_usd)
    SELECT j.batch, sum(r.calls), sum(r.tokens_in), sum(r.tokens_out), sum(r.cost_usd)
    FROM new_runs r JOIN jobs j ON j.id = r.job_id
    WHERE j.batch IS NOT NULL GROUP BY 1 ORDER BY 1
    ON CONFLICT (batch) DO UPDATE SET
        earlier_calls = s.earlier_calls + EXCLUDED.earlier_calls,
        earlier_tokens_in = s.earlier_tokens_in + EXCLUDED.earlier_tokens_in,
        earlier_tokens_out = s.earlier_tokens_out + EXCLUDED.earlier_tokens_out,
        earlier_cost_usd = s.earlier_cost_usd + EXCLUDED.earlier_cost_usd;
    RETURN NULL;
END $$;

CREATE FUNCTION fixpoint_interrupted_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    PERFORM 1 FROM batch_rollups
    WHERE batch IN (SELECT j.batch FROM new_calls n JOIN jobs j ON j.id = n.job_id)
    ORDER BY batch FOR UPDATE;
    INSERT INTO batch_rollup_spend AS s (batch, interrupted_calls, interrupted_answered, interrupted_tokens_in,
                                         interrupted_tokens_out, interrupted_cost_usd)
    SELECT j.batch, count(*), count(*) FILTER (WHERE n.raw <> '' OR n.tokens_out > 0 OR n.cost_usd > 0),
           sum(n.tokens_in), sum(n.tokens_out), sum(n.cost_usd)
    FROM new_calls n JOIN jobs j ON j.id = n.job_id
    WHERE j.batch IS NOT NULL GROUP BY 1 ORDER BY 1
    ON CONFLICT (batch) DO UPDATE SET
        interrupted_calls = s.interrupted_calls + EXCLUDED.interrupted_calls,
        interrupted_answered = s.interrupted_answered + EXCLUDED.interrupted_answered,
        interrupted_tokens_in = s.interrupted_tokens_in + EXCLUDED.interrupted_tokens_in,
        interrupted_tokens_out = s.interrupted_tokens_out + EXCLUDED.interrupted_tokens_out,
        interrupted_cost_usd = s.interrupted_cost_usd + EXCLUDED.interrupted_cost_usd;
    RETURN NULL;
END $$;

CREATE TRIGGER job_runs_rollup AFTER INSERT ON job_runs
    REFERENCING NEW TABLE AS new_runs FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_job_runs_rollup();
CREATE TRIGGER interrupted_attempts_rollup AFTER INSERT ON interrupted_attempts
    REFERENCING NEW TABLE AS new_calls FOR EACH STATEMENT EXECUTE FUNCTION fixpoint_interrupted_rollup();

-- A cancelled job's totals are those of its run when the cancel came, and
-- batch_spend counts its run's attempts when they are more. Only a job
-- with running totals when it was cancelled can have attempt rows in that
-- run (a call answered after the cancel is kept in interrupted_attempts,
-- and a wave's attempts are recorded with the job's running totals): the
-- cancelled jobs with totals of a batch, read through this index.
CREATE INDEX jobs_batch_cancelled ON jobs (batch)
    WHERE status = 'cancelled' AND (attempts > 0 OR tokens_in > 0 OR tokens_out > 0 OR cost_usd > 0);
-- report wait's jobs the queue owes: the batch's queued jobs (its rollup)
-- less those in a wave, counted through this index.
CREATE INDEX jobs_batch_in_wave ON jobs (batch) WHERE status = 'queued' AND wave_id IS NOT NULL;

-- v rounded down to three significant digits (v itself below 1000): a
-- histogram's bucket, within 1% of each value in it.
CREATE FUNCTION fixpoint_hist_bucket(v bigint) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN v < 1000 THEN v ELSE v - v % (10 ^ (length(v::text) - 3))::bigint END
$$;

-- percentile_cont(p) of a histogram: vs[i] counted ns[i] times (counts of
-- 0 or less left out); NULL when it counts nothing.
CREATE FUNCTION fixpoint_hist_percentile(vs bigint[], ns bigint[], p float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    sv bigint[];
    sn bigint[];
    total numeric;
    pos float8;
    cum numeric := 0;
    lo float8;
BEGIN
    SELECT array_agg(v ORDER BY v), array_agg(n ORDER BY v), sum(n) INTO sv, sn, total
    FROM unnest(vs, ns) AS u (v, n) WHERE n > 0;
    IF total IS NULL THEN
        RETURN NULL;
    END IF;
    -- The values at ranks floor(pos) and ceil(pos), 0-based, interpolated.
    pos := p * (total - 1);
    FOR i IN 1 .. array_length(sv, 1) LOOP
        cum := cum + sn[i];
        IF lo IS NULL AND cum > floor(pos) THEN
            lo := sv[i];
        END IF;
        IF cum > ceil(pos) THEN
            RETURN lo + (sv[i] - lo) * (pos - floor(pos));
        END IF;
    END LOOP;
    RETURN lo;
END $$;

-- The rollups triggers are not fired while this migration fills the new
-- columns: it recounts batch_rollups whole below.
ALTER TABLE jobs DISABLE TRIGGER jobs_rollup_update;
UPDATE jobs j SET earlier_attempts = e.attempts, first_try = e.first_try
FROM (
    SELECT r.job_id, sum(r.attempts) AS attempts,
           (array_agg(r.first_attempt_valid ORDER BY r.run) FILTER (WHERE r.calls > 0))[1] AS first_try
    FROM job_runs r JOIN jobs j ON j.id = r.job_id AND r.run < j.run
    GROUP BY r.job_id
) e
WHERE j.id = e.job_id;
ALTER TABLE jobs ENABLE TRIGGER jobs_rollup_update;

-- As 003's, with the new columns and tables: the statement's changes
-- netted per batch and counted values, rollup rows locked in batch order,
-- batch_rollups first.
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

-- As 003's, with batch_rollup_classes and batch_rollup_latency.
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

-- The ledger as it is (the triggers hold their tables' locks until this
-- migration commits: no write falls between them and these counts).
UPDATE batch_rollups r SET tokens_cached = c.tokens_cached, first_try_valid = c.first_try_valid, repaired = c.repaired,
                           reached = c.reached, reached_attempts = c.reached_attempts
FROM (
    SELECT batch, sum(tokens_cached) AS tokens_cached,
           count(*) FILTER (WHERE status = 'valid' AND coalesce(first_try, first_attempt_valid)) AS first_try_valid,
           count(*) FILTER (WHERE status = 'valid' AND (NOT coalesce(first_try, first_attempt_valid) OR repaired_locally)) AS repaired,
           count(*) FILTER (WHERE status IN ('valid', 'invalid', 'failed')) AS reached,
           coalesce(sum(attempts + earlier_attempts) FILTER (WHERE status IN ('valid', 'invalid', 'failed')), 0) AS reached_attempts
    FROM jobs WHERE batch IS NOT NULL GROUP BY batch
) c
WHERE r.batch = c.batch;
INSERT INTO batch_rollup_walls (batch, wall_ms, jobs)
SELECT batch, fixpoint_hist_bucket(wall_ms), count(*) FROM jobs
WHERE batch IS NOT NULL AND status <> 'queued' AND wall_ms IS NOT NULL GROUP BY 1, 2;
INSERT INTO batch_rollup_runs (batch, run, jobs)
SELECT batch, run, count(*) FROM jobs WHERE batch IS NOT NULL GROUP BY 1, 2;
INSERT INTO batch_rollup_minutes (batch, minute, valid, invalid, failed, other)
SELECT batch, date_trunc('minute', finished_at, 'UTC'), count(*) FILTER (WHERE status = 'valid'),
       count(*) FILTER (WHERE status = 'invalid'), count(*) FILTER (WHERE status = 'failed'),
       count(*) FILTER (WHERE status NOT IN ('valid', 'invalid', 'failed'))
FROM jobs WHERE batch IS NOT NULL AND status <> 'queued' AND finished_at IS NOT NULL GROUP BY 1, 2;
INSERT INTO batch_rollup_classes (batch, model, attempt_no, class, attempts)
SELECT j.batch, coalesce(nullif(a.model, ''), j.model), a.attempt_no, a.class, count(*)
FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch IS NOT NULL GROUP BY 1, 2, 3, 4;
INSERT INTO batch_rollup_latency (batch, latency_ms, calls)
SELECT j.batch, fixpoint_hist_bucket(a.latency_ms), count(*)
FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch IS NOT NULL AND a.price_basis = 'realtime' GROUP BY 1, 2;

INSERT INTO batch_rollup_spend (batch, earlier_calls, earlier_tokens_in, earlier_tokens_out, earlier_cost_usd,
                                interrupted_calls, interrupted_answered, interrupted_tokens_in, interrupted_tokens_out,
                                interrupted_cost_usd)
SELECT batch, sum(ec), sum(eti), sum(eto), sum(ecost), sum(ic), sum(ia), sum(iti), sum(ito), sum(icost)
FROM (
    SELECT j.batch, r.calls AS ec, r.tokens_in AS eti, r.tokens_out AS eto, r.cost_usd AS ecost,
           0 AS ic, 0 AS ia, 0 AS iti, 0 AS ito, 0 AS icost
    FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.batch IS NOT NULL
    UNION ALL
    SELECT j.batch, 0, 0, 0, 0, 1, (n.raw <> '' OR n.tokens_out > 0 OR n.cost_usd > 0)::int, n.tokens_in, n.tokens_out, n.cost_usd
    FROM interrupted_attempts n JOIN jobs j ON j.id = n.job_id WHERE j.batch IS NOT NULL
) x
GROUP BY batch;

---------------------------------------------------------------------- views

-- batch_summary: as 001's (see there for the columns), from the rollups;
-- p50_wall_ms and p95_wall_ms of wall times kept at three significant
-- digits (exact below 1000 ms, within 1% above).
DROP VIEW batch_summary;
CREATE VIEW batch_summary AS
SELECT
    s.*,
    s.valid::float8 / nullif(s.finished, 0)                     AS valid_rate,
    s.first_attempt_valid::float8 / nullif(s.finished, 0)       AS first_attempt_valid_rate,
    s.repaired::float8 / nullif(s.valid, 0)                     AS repair_rate,
    (s.tokens_in + s.tokens_out)::float8 / nullif(s.valid, 0)   AS tokens_per_valid_job,
    s.cost_usd / nullif(s.valid, 0)                             AS cost_per_valid_job
FROM (
    SELECT r.batch, r.jobs, r.queued, r.valid, r.invalid, r.failed, r.rejected, r.dead, r.jobs - r.queued AS finished,
           r.first_try_valid AS first_attempt_valid, r.repaired,
           coalesce(r.reached_attempts::float8 / nullif(r.reached, 0), 0) AS mean_attempts,
           r.tokens_in, r.tokens_out, r.tokens_cached, r.cost_usd::float8 AS cost_usd,
           w.p50 AS p50_wall_ms, w.p95 AS p95_wall_ms, r.cancelled, r.over_budget,
           coalesce((SELECT max(u.run) FROM batch_rollup_runs u WHERE u.batch = r.batch AND u.jobs > 0), 1) AS runs
    FROM batch_rollups r
    CROSS JOIN LATERAL (
        SELECT fixpoint_hist_percentile(array_agg(h.wall_ms), array_agg(h.jobs), 0.5) AS p50,
               fixpoint_hist_percentile(array_agg(h.wall_ms), array_agg(h.jobs), 0.95) AS p95
        FROM batch_rollup_walls h WHERE h.batch = r.batch
    ) w
    WHERE r.jobs > 0
    UNION ALL
    -- Jobs of no batch: rejected before their batch was known, read
    -- through the index on jobs (batch).
    SELECT '', count(*), count(*) FILTER (WHERE j.status = 'queued'), count(*) FILTER (WHERE j.status = 'valid'),
           count(*) FILTER (WHERE j.status = 'invalid'), count(*) FILTER (WHERE j.status = 'failed'),
           count(*) FILTER (WHERE j.status = 'rejected'), count(*) FILTER (WHERE j.status = 'dead'),
           count(*) FILTER (WHERE j.status <> 'queued'),
           count(*) FILTER (WHERE j.status = 'valid' AND coalesce(j.first_try, j.first_attempt_valid)),
           count(*) FILTER (WHERE j.status = 'valid' AND (NOT coalesce(j.first_try, j.first_attempt_valid) OR j.repaired_locally)),
           coalesce(avg(j.attempts + j.earlier_attempts) FILTER (WHERE j.status IN ('valid', 'invalid', 'failed')), 0)::float8,
           coalesce(sum(j.tokens_in), 0)::bigint, coalesce(sum(j.tokens_out), 0)::bigint,
           coalesce(sum(j.tokens_cached), 0)::bigint, coalesce(sum(j.cost_usd), 0)::float8,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY j.wall_ms) FILTER (WHERE j.status <> 'queued' AND j.wall_ms IS NOT NULL),
           percentile_cont(0.95) WITHIN GROUP (ORDER BY j.wall_ms) FILTER (WHERE j.status <> 'queued' AND j.wall_ms IS NOT NULL),
           count(*) FILTER (WHERE j.status = 'cancelled'), count(*) FILTER (WHERE j.status = 'over_budget'),
           coalesce(max(j.run), 1)
    FROM jobs j WHERE j.batch IS NULL
    HAVING count(*) > 0
) s;

-- failure_classes: as 001's, from batch_rollup_classes.
CREATE OR REPLACE VIEW failure_classes AS
SELECT batch, model, attempt_no, class, attempts, attempts::float8 / total AS share
FROM (
    SELECT batch, model, attempt_no, class, attempts,
           sum(attempts) OVER (PARTITION BY batch, model, attempt_no) AS total
    FROM batch_rollup_classes
    WHERE attempts > 0
) c
WHERE class <> '';

-- repair_effectiveness: as 001's, from batch_rollup_repairs.
CREATE OR REPLACE VIEW repair_effectiveness AS
SELECT batch, attempt_no, class, failed, retried, valid_next,
       valid_next::float8 / nullif(retried, 0) AS repair_rate
FROM batch_rollup_repairs
WHERE failed > 0;

-- error_paths: from batch_rollup_errors, one row per batch, folded path
-- and keyword; class is the least class of its errors (an error's class
-- follows from its keyword, validate.KeywordClass).
CREATE OR REPLACE VIEW error_paths AS
SELECT batch, path, keyword, class, errors, jobs
FROM batch_rollup_errors
WHERE errors > 0;

-- batch_spend: as 001's (see there for the columns), from batch_rollups
-- and batch_rollup_spend, and the cancelled jobs' attempts.
CREATE OR REPLACE VIEW batch_spend AS
SELECT r.batch,
       (r.tokens_in + x.tokens_in + coalesce(s.earlier_tokens_in, 0))::bigint     AS final_tokens_in,
       (r.tokens_out + x.tokens_out + coalesce(s.earlier_tokens_out, 0))::bigint  AS final_tokens_out,
       (r.cost_usd + x.cost_usd + coalesce(s.earlier_cost_usd, 0))::float8        AS final_cost_usd,
       coalesce(s.interrupted_calls, 0)                                         AS interrupted_calls,
       coalesce(s.interrupted_tokens_in, 0)                                     AS interrupted_tokens_in,
       coalesce(s.interrupted_tokens_out, 0)                                    AS interrupted_tokens_out,
       coalesce(s.interrupted_cost_usd, 0)::float8                              AS interrupted_cost_usd,
       (r.cost_usd + x.cost_usd + coalesce(s.earlier_cost_usd, 0) + coalesce(s.interrupted_cost_usd, 0))::float8 AS cost_usd,
       coalesce(s.earlier_calls, 0)                                             AS earlier_runs_calls,
       coalesce(s.earlier_cost_usd, 0)::float8                                  AS earlier_runs_cost_usd
FROM batch_rollups r
LEFT JOIN batch_rollup_spend s ON s.batch = r.batch
-- What a cancelled job's run's attempts add to its totals.
CROSS JOIN LATERAL (
    SELECT coalesce(sum(greatest(c.tokens_in - j.tokens_in, 0)), 0) AS tokens_in,
           coalesce(sum(greatest(c.tokens_out - j.tokens_out, 0)), 0) AS tokens_out,
           coalesce(sum(greatest(c.cost_usd - j.cost_usd, 0)), 0) AS cost_usd
    FROM jobs j
    CROSS JOIN LATERAL (
        SELECT sum(a.tokens_in) AS tokens_in, sum(a.tokens_out) AS tokens_out, sum(a.cost_usd) AS cost_usd
        FROM attempts a WHERE a.job_id = j.id AND a.run = j.run
    ) c
    WHERE j.batch = r.batch AND j.status = 'cancelled'
      AND (j.attempts > 0 OR j.tokens_in > 0 OR j.tokens_out > 0 OR j.cost_usd > 0)
) x
WHERE r.jobs > 0;

---- create above / drop below ----

DROP VIEW batch_summary;
CREATE OR REPLACE VIEW batch_spend AS
SELECT b.batch,
       (b.tokens_in + coalesce(r.tokens_in, 0))::bigint   AS final_tokens_in,
       (b.tokens_out + coalesce(r.tokens_out, 0))::bigint AS final_tokens_out,
       (b.cost_usd + coalesce(r.cost_usd, 0))::float8     AS final_cost_usd,
       coalesce(i.calls, 0) AS interrupted_calls,
       coalesce(i.tokens_in, 0) AS interrupted_tokens_in, coalesce(i.tokens_out, 0) AS interrupted_tokens_out,
       coalesce(i.cost_usd, 0)::float8 AS interrupted_cost_usd,
       (b.cost_usd + coalesce(r.cost_usd, 0) + coalesce(i.cost_usd, 0))::float8 AS cost_usd,
       coalesce(r.calls, 0) AS earlier_runs_calls,
       coalesce(r.cost_usd, 0)::float8 AS earlier_runs_cost_usd
FROM (
    -- A cancelled job's totals are the running totals of its run when the
    -- cancel came: its run's attempts, a superset, count instead.
    SELECT coalesce(j.batch, '') AS batch,
           coalesce(sum(greatest(j.tokens_in, c.tokens_in)), 0)::bigint AS tokens_in,
           coalesce(sum(greatest(j.tokens_out, c.tokens_out)), 0)::bigint AS tokens_out,
           coalesce(sum(greatest(j.cost_usd, c.cost_usd)), 0) AS cost_usd
    FROM jobs j
    LEFT JOIN LATERAL (
        SELECT sum(a.tokens_in) AS tokens_in, sum(a.tokens_out) AS tokens_out, sum(a.cost_usd) AS cost_usd
        FROM attempts a WHERE j.status = 'cancelled' AND a.job_id = j.id AND a.run = j.run
    ) c ON true
    GROUP BY 1
) b
LEFT JOIN (
    SELECT coalesce(j.batch, '') AS batch, sum(r.calls)::bigint AS calls, sum(r.tokens_in)::bigint AS tokens_in,
           sum(r.tokens_out)::bigint AS tokens_out, sum(r.cost_usd) AS cost_usd
    FROM job_runs r JOIN jobs j ON j.id = r.job_id GROUP BY 1
) r ON r.batch = b.batch
LEFT JOIN (
    SELECT coalesce(j.batch, '') AS batch, count(*) AS calls, sum(a.tokens_in)::bigint AS tokens_in,
           sum(a.tokens_out)::bigint AS tokens_out, sum(a.cost_usd) AS cost_usd
    FROM interrupted_attempts a JOIN jobs j ON j.id = a.job_id GROUP BY 1
) i ON i.batch = b.batch;
DROP INDEX jobs_batch_in_wave;
DROP INDEX jobs_batch_cancelled;
DROP TRIGGER interrupted_attempts_rollup ON interrupted_attempts;
DROP TRIGGER job_runs_rollup ON job_runs;
DROP FUNCTION fixpoint_interrupted_rollup();
DROP FUNCTION fixpoint_job_runs_rollup();
DROP TABLE batch_rollup_spend;

CREATE OR REPLACE VIEW error_paths AS
SELECT
    coalesce(j.batch, '')                                                   AS batch,
    regexp_replace(coalesce(e->>'path', e->>'pointer', ''),
                   '/[0-9]+(?=/|$)', '/*', 'g')                             AS path,
    coalesce(e->>'keyword', '')                                             AS keyword,
    coalesce(e->>'class', '')                                               AS class,
    count(*)                                                                AS errors,
    count(DISTINCT a.job_id)                                                AS jobs
FROM attempts a
JOIN jobs j ON j.id = a.job_id
CROSS JOIN LATERAL jsonb_array_elements(a.errors) e
GROUP BY 1, 2, 3, 4;

CREATE OR REPLACE VIEW repair_effectiveness AS
SELECT
    coalesce(j.batch, '')                                                      AS batch,
    a.attempt_no,
    a.class,
    count(*)                                                                   AS failed,
    count(n.job_id)                                                            AS retried,
    count(*) FILTER (WHERE n.valid)                                            AS valid_next,
    (count(*) FILTER (WHERE n.valid))::float8 / nullif(count(n.job_id), 0)     AS repair_rate
FROM attempts a
JOIN jobs j ON j.id = a.job_id
LEFT JOIN attempts n ON n.job_id = a.job_id AND n.run = a.run AND n.attempt_no = a.attempt_no + 1
WHERE NOT a.valid
GROUP BY 1, 2, 3;

CREATE OR REPLACE VIEW failure_classes AS
SELECT batch, model, attempt_no, class, attempts, attempts::float8 / total AS share
FROM (
    SELECT
        coalesce(j.batch, '')                                           AS batch,
        coalesce(nullif(a.model, ''), j.model)                          AS model,
        a.attempt_no,
        a.class,
        count(*)                                                        AS attempts,
        sum(count(*)) OVER (PARTITION BY coalesce(j.batch, ''),
                            coalesce(nullif(a.model, ''), j.model),
                            a.attempt_no)                               AS total
    FROM attempts a
    JOIN jobs j ON j.id = a.job_id
    GROUP BY 1, 2, 3, 4
) c
WHERE class <> '';

CREATE OR REPLACE FUNCTION fixpoint_attempts_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
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

CREATE OR REPLACE FUNCTION fixpoint_jobs_rollup() RETURNS trigger LANGUAGE plpgsql SET jit = off AS $$
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

DROP FUNCTION fixpoint_hist_percentile(bigint[], bigint[], float8);
DROP FUNCTION fixpoint_hist_bucket(bigint);
DROP INDEX attempts_unpriced;
DROP INDEX interrupted_model_not_found;
DROP INDEX attempts_model_not_found;
DROP TABLE batch_rollup_latency;
DROP TABLE batch_rollup_classes;
DROP TABLE batch_rollup_minutes;
DROP TABLE batch_rollup_runs;
DROP TABLE batch_rollup_walls;
ALTER TABLE batch_rollups DROP COLUMN reached_attempts, DROP COLUMN reached, DROP COLUMN repaired,
    DROP COLUMN first_try_valid, DROP COLUMN tokens_cached;
ALTER TABLE jobs DROP COLUMN earlier_attempts;
ALTER TABLE jobs DROP COLUMN first_try;

CREATE VIEW batch_summary AS
SELECT
    s.*,
    s.valid::float8 / nullif(s.finished, 0)                     AS valid_rate,
    s.first_attempt_valid::float8 / nullif(s.finished, 0)       AS first_attempt_valid_rate,
    s.repaired::float8 / nullif(s.valid, 0)                     AS repair_rate,
    (s.tokens_in + s.tokens_out)::float8 / nullif(s.valid, 0)   AS tokens_per_valid_job,
    s.cost_usd / nullif(s.valid, 0)                             AS cost_per_valid_job
FROM (
    SELECT
        coalesce(j.batch, '')                                               AS batch,
        count(*)                                                            AS jobs,
        count(*) FILTER (WHERE j.status = 'queued')                         AS queued,
        count(*) FILTER (WHERE j.status = 'valid')                          AS valid,
        count(*) FILTER (WHERE j.status = 'invalid')                        AS invalid,
        count(*) FILTER (WHERE j.status = 'failed')                         AS failed,
        count(*) FILTER (WHERE j.status = 'rejected')                       AS rejected,
        count(*) FILTER (WHERE j.status = 'dead')                           AS dead,
        count(*) FILTER (WHERE j.status <> 'queued')                        AS finished,
        count(*) FILTER (WHERE j.status = 'valid' AND j.first_try)          AS first_attempt_valid,
        count(*) FILTER (WHERE j.status = 'valid'
                           AND (NOT j.first_try OR j.repaired_locally))     AS repaired,
        coalesce(avg(j.attempts + j.earlier_attempts) FILTER (
            WHERE j.status IN ('valid', 'invalid', 'failed')), 0)::float8   AS mean_attempts,
        coalesce(sum(j.tokens_in), 0)::bigint                               AS tokens_in,
        coalesce(sum(j.tokens_out), 0)::bigint                              AS tokens_out,
        coalesce(sum(j.tokens_cached), 0)::bigint                           AS tokens_cached,
        coalesce(sum(j.cost_usd), 0)::float8                                AS cost_usd,
        percentile_cont(0.5) WITHIN GROUP (ORDER BY j.wall_ms)
            FILTER (WHERE j.status <> 'queued' AND j.wall_ms IS NOT NULL)   AS p50_wall_ms,
        percentile_cont(0.95) WITHIN GROUP (ORDER BY j.wall_ms)
            FILTER (WHERE j.status <> 'queued' AND j.wall_ms IS NOT NULL)   AS p95_wall_ms,
        count(*) FILTER (WHERE j.status = 'cancelled')                      AS cancelled,
        count(*) FILTER (WHERE j.status = 'over_budget')                    AS over_budget,
        coalesce(max(j.run), 1)                                             AS runs
    FROM (
        -- A requeued job's first try was in its first run that made a
        -- call (valid there or not), and its attempts are those of every
        -- run.
        SELECT j.*,
               CASE WHEN j.run = 1 THEN j.first_attempt_valid
                    ELSE coalesce((SELECT r.first_attempt_valid FROM job_runs r
                                   WHERE r.job_id = j.id AND r.run < j.run AND r.calls > 0
                                   ORDER BY r.run LIMIT 1), j.first_attempt_valid) END AS first_try,
               CASE WHEN j.run > 1 THEN coalesce((
                   SELECT sum(r.attempts) FROM job_runs r WHERE r.job_id = j.id AND r.run < j.run), 0)
               ELSE 0 END AS earlier_attempts
        FROM jobs j
    ) j
    GROUP BY coalesce(j.batch, '')
) s;
