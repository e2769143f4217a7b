package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// The batch rollups (migrations 003, 005 and 009) are kept by triggers on
// jobs and attempts, in the transaction of each write: batch_rollups (job
// counts by status, spend, what batch_summary counts), batch_rollup_attempts
// (finished jobs by attempt count), job_facets (the job list's error
// paths, coercions and patches), batch_cost_hours (the calls by batch and
// hour), and the histograms and counts of 009 (wall times, runs, minutes,
// failure classes, latencies), and 010's (the current runs' attempts,
// the ended jobs by reason, the rule failures, the grades of the final
// checks), and 015's (document jobs' calls by step, chunk fields, merge
// conflicts by path).
// RollupDrift recounts them from the rows.

// rollupRecounts recount each rollup table from the jobs and attempts and
// return a line for each row where the count and the rollup differ.
var rollupRecounts = []struct{ what, sql string }{
	{"batch_rollups", `
			WITH c AS (
			    SELECT batch, count(*) AS jobs, count(*) FILTER (WHERE status = 'queued') AS queued,
			           count(*) FILTER (WHERE status = 'valid') AS valid, count(*) FILTER (WHERE status = 'invalid') AS invalid,
			           count(*) FILTER (WHERE status = 'failed') AS failed, count(*) FILTER (WHERE status = 'rejected') AS rejected,
			           count(*) FILTER (WHERE status = 'dead') AS dead, count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
			           count(*) FILTER (WHERE status = 'over_budget') AS over_budget,
			           count(*) FILTER (WHERE status = 'valid' AND first_attempt_valid) AS first_valid,
			           sum(attempts) AS attempts, sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out,
			           sum(cost_usd) AS cost_usd, sum(tokens_cached) AS tokens_cached,
			           count(*) FILTER (WHERE status = 'valid' AND coalesce(first_try, first_attempt_valid)) AS first_try_valid,
			           count(*) FILTER (WHERE status = 'valid' AND (NOT coalesce(first_try, first_attempt_valid) OR repaired_locally)) AS repaired,
			           count(*) FILTER (WHERE status IN ('valid', 'invalid', 'failed')) AS reached,
			           coalesce(sum(attempts + earlier_attempts) FILTER (WHERE status IN ('valid', 'invalid', 'failed')), 0) AS reached_attempts
			    FROM jobs WHERE batch IS NOT NULL GROUP BY batch
			), z AS (
			    SELECT coalesce(c.batch, r.batch) AS batch,
			           ARRAY[coalesce(c.jobs, 0), coalesce(c.queued, 0), coalesce(c.valid, 0), coalesce(c.invalid, 0),
			                 coalesce(c.failed, 0), coalesce(c.rejected, 0), coalesce(c.dead, 0), coalesce(c.cancelled, 0),
			                 coalesce(c.over_budget, 0), coalesce(c.first_valid, 0), coalesce(c.attempts, 0),
			                 coalesce(c.tokens_in, 0), coalesce(c.tokens_out, 0), coalesce(c.cost_usd, 0),
			                 coalesce(c.tokens_cached, 0), coalesce(c.first_try_valid, 0), coalesce(c.repaired, 0),
			                 coalesce(c.reached, 0), coalesce(c.reached_attempts, 0)]::numeric[] AS counted,
			           ARRAY[coalesce(r.jobs, 0), coalesce(r.queued, 0), coalesce(r.valid, 0), coalesce(r.invalid, 0),
			                 coalesce(r.failed, 0), coalesce(r.rejected, 0), coalesce(r.dead, 0), coalesce(r.cancelled, 0),
			                 coalesce(r.over_budget, 0), coalesce(r.first_valid, 0), coalesce(r.attempts, 0),
			                 coalesce(r.tokens_in, 0), coalesce(r.tokens_out, 0), coalesce(r.cost_usd, 0),
			                 coalesce(r.tokens_cached, 0), coalesce(r.first_try_valid, 0), coalesce(r.repaired, 0),
			                 coalesce(r.reached, 0), coalesce(r.reached_attempts, 0)]::numeric[] AS kept
			    FROM c FULL JOIN batch_rollups r ON r.batch = c.batch
			)
			SELECT format('batch %s: counted (jobs, queued, valid, invalid, failed, rejected, dead, cancelled, over_budget, first_valid, attempts, tokens_in, tokens_out, cost_usd, tokens_cached, first_try_valid, repaired, reached, reached_attempts) %s, rollup %s',
			              batch, counted, kept)
			FROM z WHERE counted <> kept ORDER BY batch`},
	{"batch_rollup_attempts", `
			WITH c AS (
			    SELECT batch, attempts, count(*) AS finished, count(*) FILTER (WHERE status = 'valid') AS valid,
			           count(*) FILTER (WHERE status = 'valid' AND repaired_locally) AS local
			    FROM jobs WHERE batch IS NOT NULL AND status <> 'queued' GROUP BY batch, attempts
			)
			SELECT format('batch %s, %s attempts: counted (finished, valid, local) (%s, %s, %s), rollup (%s, %s, %s)',
			              coalesce(c.batch, r.batch), coalesce(c.attempts, r.attempts),
			              coalesce(c.finished, 0), coalesce(c.valid, 0), coalesce(c.local, 0),
			              coalesce(r.finished, 0), coalesce(r.valid, 0), coalesce(r.local, 0))
			FROM c FULL JOIN batch_rollup_attempts r ON r.batch = c.batch AND r.attempts = c.attempts
			WHERE (coalesce(c.finished, 0), coalesce(c.valid, 0), coalesce(c.local, 0))
			      <> (coalesce(r.finished, 0), coalesce(r.valid, 0), coalesce(r.local, 0))
			ORDER BY 1`},
	{"batch_rollup_costs", `
			WITH c AS (
			    SELECT j.batch, coalesce(nullif(a.model, ''), j.model) AS model, a.price_basis AS basis,
			           ARRAY[count(*), sum(a.tokens_in), sum(a.tokens_out), sum(a.tokens_cached), coalesce(sum(a.cost_usd), 0),
			                 count(*) FILTER (WHERE a.valid AND a.run = j.run AND j.status = 'valid')]::numeric[] AS v
			    FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch IS NOT NULL GROUP BY 1, 2, 3
			), r AS (
			    SELECT batch, model, basis, ARRAY[calls, tokens_in, tokens_out, tokens_cached, cost_usd, valid_jobs]::numeric[] AS v
			    FROM batch_rollup_costs WHERE (calls, valid_jobs) <> (0, 0)
			)
			SELECT format('batch %s, model %s, basis %s: counted (calls, tokens_in, tokens_out, tokens_cached, cost_usd, valid_jobs) %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.model, r.model), coalesce(c.basis, r.basis), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.model = c.model AND r.basis = c.basis
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_repairs", `
			WITH c AS (
			    SELECT j.batch, a.attempt_no, a.class,
			           ARRAY[count(*), count(n.job_id), count(*) FILTER (WHERE n.valid)] AS v
			    FROM attempts a JOIN jobs j ON j.id = a.job_id
			    LEFT JOIN attempts n ON n.job_id = a.job_id AND n.run = a.run AND n.attempt_no = a.attempt_no + 1
			    WHERE j.batch IS NOT NULL AND NOT a.valid GROUP BY 1, 2, 3
			), r AS (
			    SELECT batch, attempt_no, class, ARRAY[failed, retried, valid_next] AS v
			    FROM batch_rollup_repairs WHERE (failed, retried, valid_next) <> (0, 0, 0)
			)
			SELECT format('batch %s, attempt %s, class %s: counted (failed, retried, valid_next) %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.attempt_no, r.attempt_no), coalesce(c.class, r.class), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.attempt_no = c.attempt_no AND r.class = c.class
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_errors", `
			WITH c AS (
			    SELECT j.batch, regexp_replace(coalesce(e->>'path', e->>'pointer', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
			           coalesce(e->>'keyword', '') AS keyword,
			           format('%s errors, %s jobs, class %s, example %s', count(*), count(DISTINCT a.job_id),
			                  min(coalesce(e->>'class', '')), min(a.job_id)) AS v
			    FROM attempts a JOIN jobs j ON j.id = a.job_id CROSS JOIN LATERAL jsonb_array_elements(a.errors) e
			    WHERE j.batch IS NOT NULL GROUP BY 1, 2, 3
			), r AS (
			    SELECT batch, path, keyword, format('%s errors, %s jobs, class %s, example %s', errors, jobs, class, example_job) AS v
			    FROM batch_rollup_errors
			)
			SELECT format('batch %s, path %s, keyword %s: counted %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.path, r.path), coalesce(c.keyword, r.keyword), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.path = c.path AND r.keyword = c.keyword
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"job_facets", `
			WITH c AS (
			    SELECT DISTINCT j.batch, f.facet, j.row_no, a.job_id, a.run
			    FROM attempts a JOIN jobs j ON j.id = a.job_id
			    CROSS JOIN LATERAL (
			        SELECT 'path:' || regexp_replace(coalesce(e->>'path', e->>'pointer', ''), '/[0-9]+(?=/|$)', '/*', 'g')
			        FROM jsonb_array_elements(a.errors) e
			        UNION ALL SELECT 'coerced' WHERE a.coerced > 0
			        UNION ALL SELECT 'patched' WHERE a.patch_outcome = 'applied'
			    ) f (facet)
			    WHERE j.batch IS NOT NULL
			)
			(SELECT format('facet missing: %s %s row %s job %s run %s', batch, facet, row_no, job_id, run)
			 FROM (SELECT * FROM c EXCEPT SELECT * FROM job_facets) m ORDER BY 1 LIMIT 20)
			UNION ALL
			(SELECT format('facet not counted: %s %s row %s job %s run %s', batch, facet, row_no, job_id, run)
			 FROM (SELECT * FROM job_facets EXCEPT SELECT * FROM c) m ORDER BY 1 LIMIT 20)`},
	{"batch_cost_hours", `
			WITH c AS (
			    SELECT date_trunc('hour', a.started_at, 'UTC') AS hour, j.batch,
			           ARRAY[count(*), sum(a.tokens_in + a.tokens_out), coalesce(sum(a.cost_usd), 0)]::numeric[] AS v
			    FROM attempts a JOIN jobs j ON j.id = a.job_id
			    WHERE j.batch IS NOT NULL AND a.started_at IS NOT NULL GROUP BY 1, 2
			), r AS (
			    SELECT hour, batch, ARRAY[calls, tokens, cost_usd]::numeric[] AS v FROM batch_cost_hours
			)
			SELECT format('batch %s, hour %s: counted (calls, tokens, cost_usd) %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.hour, r.hour), c.v, r.v)
			FROM c FULL JOIN r ON r.hour = c.hour AND r.batch = c.batch
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_walls", histRecount("batch_rollup_walls", "wall_ms", "jobs", `
			    SELECT batch, fixpoint_hist_bucket(wall_ms) AS k, count(*) AS v FROM jobs
			    WHERE batch IS NOT NULL AND status <> 'queued' AND wall_ms IS NOT NULL GROUP BY 1, 2`)},
	{"batch_rollup_runs", histRecount("batch_rollup_runs", "run", "jobs", `
			    SELECT batch, run AS k, count(*) AS v FROM jobs WHERE batch IS NOT NULL GROUP BY 1, 2`)},
	{"batch_rollup_latency", histRecount("batch_rollup_latency", "latency_ms", "calls", `
			    SELECT j.batch, fixpoint_hist_bucket(a.latency_ms) AS k, count(*) AS v
			    FROM attempts a JOIN jobs j ON j.id = a.job_id
			    WHERE j.batch IS NOT NULL AND a.price_basis = 'realtime' GROUP BY 1, 2`)},
	{"batch_rollup_minutes", `
			WITH c AS (
			    SELECT batch, date_trunc('minute', finished_at, 'UTC') AS minute,
			           ARRAY[count(*) FILTER (WHERE status = 'valid'), count(*) FILTER (WHERE status = 'invalid'),
			                 count(*) FILTER (WHERE status = 'failed'),
			                 count(*) FILTER (WHERE status NOT IN ('valid', 'invalid', 'failed'))] AS v
			    FROM jobs WHERE batch IS NOT NULL AND status <> 'queued' AND finished_at IS NOT NULL GROUP BY 1, 2
			), r AS (
			    SELECT batch, minute, ARRAY[valid, invalid, failed, other] AS v FROM batch_rollup_minutes
			    WHERE (valid, invalid, failed, other) <> (0, 0, 0, 0)
			)
			SELECT format('batch %s, minute %s: counted (valid, invalid, failed, other) %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.minute, r.minute), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.minute = c.minute
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_classes", `
			WITH c AS (
			    SELECT j.batch, coalesce(nullif(a.model, ''), j.model) AS model, a.attempt_no, a.class, count(*) AS v
			    FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch IS NOT NULL GROUP BY 1, 2, 3, 4
			), r AS (
			    SELECT batch, model, attempt_no, class, attempts AS v FROM batch_rollup_classes WHERE attempts <> 0
			)
			SELECT format('batch %s, model %s, attempt %s, class %s: counted %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.model, r.model), coalesce(c.attempt_no, r.attempt_no),
			              coalesce(c.class, r.class), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.model = c.model AND r.attempt_no = c.attempt_no AND r.class = c.class
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_spend", `
			WITH c AS (
			    SELECT batch, ARRAY[sum(ec), sum(eti), sum(eto), sum(ecost), sum(ic), sum(ia), sum(iti), sum(ito), sum(icost)]::numeric[] AS v
			    FROM (
			        SELECT j.batch, r.calls AS ec, r.tokens_in AS eti, r.tokens_out AS eto, r.cost_usd AS ecost,
			               0 AS ic, 0 AS ia, 0 AS iti, 0 AS ito, 0 AS icost
			        FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE j.batch IS NOT NULL
			        UNION ALL
			        SELECT j.batch, 0, 0, 0, 0, 1, (n.raw <> '' OR n.tokens_out > 0 OR n.cost_usd > 0)::int,
			               n.tokens_in, n.tokens_out, n.cost_usd
			        FROM interrupted_attempts n JOIN jobs j ON j.id = n.job_id WHERE j.batch IS NOT NULL
			    ) x GROUP BY batch
			), r AS (
			    SELECT batch, ARRAY[earlier_calls, earlier_tokens_in, earlier_tokens_out, earlier_cost_usd, interrupted_calls,
			                        interrupted_answered, interrupted_tokens_in, interrupted_tokens_out, interrupted_cost_usd]::numeric[] AS v
			    FROM batch_rollup_spend
			)
			SELECT format('batch %s: counted (earlier runs calls, tokens in, out, cost; interrupted calls, answered, tokens in, out, cost) %s, rollup %s',
			              coalesce(c.batch, r.batch), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_current", `
			WITH c AS (
			    SELECT j.batch,
			           ARRAY[count(*) FILTER (WHERE a.price_basis = 'realtime'),
			                 coalesce(sum(a.cost_usd) FILTER (WHERE a.price_basis = 'realtime'), 0),
			                 count(*) FILTER (WHERE a.price_basis = 'batch'),
			                 coalesce(sum(a.cost_usd) FILTER (WHERE a.price_basis = 'batch'), 0),
			                 coalesce(sum(a.tokens_in) FILTER (WHERE a.class <> 'provider'), 0),
			                 coalesce(sum(a.tokens_cached) FILTER (WHERE a.class <> 'provider'), 0),
			                 coalesce(sum(a.tokens_cache_write) FILTER (WHERE a.class <> 'provider'), 0),
			                 count(*) FILTER (WHERE a.valid AND a.coerced > 0),
			                 count(*) FILTER (WHERE a.valid AND a.repaired_locally AND a.coerced = 0),
			                 count(DISTINCT a.job_id) FILTER (WHERE a.attempt_no > 1),
			                 coalesce(sum(a.tokens_out) FILTER (WHERE a.attempt_no > 1), 0)]::numeric[] AS v
			    FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run WHERE j.batch IS NOT NULL GROUP BY 1
			), r AS (
			    SELECT batch, ARRAY[realtime_attempts, realtime_cost_usd, batch_attempts, batch_cost_usd, prompt_tokens,
			                        cached_tokens, cache_write_tokens, calls_saved, text_saved, retried_jobs,
			                        retry_tokens_out]::numeric[] AS v
			    FROM batch_rollup_current WHERE (realtime_attempts, batch_attempts) <> (0, 0)
			)
			SELECT format('batch_rollup_current: batch %s: counted (realtime attempts, cost, batch attempts, cost, prompt, cached, cache write, calls saved, text saved, retried jobs, retry tokens out) %s, rollup %s',
			              coalesce(c.batch, r.batch), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_current_kinds", `
			WITH c AS (
			    SELECT batch, kind, name, count(*) AS n FROM (
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
			    ) k GROUP BY 1, 2, 3
			), r AS (
			    SELECT batch, kind, name, n FROM batch_rollup_current_kinds WHERE n <> 0
			)
			SELECT format('batch_rollup_current_kinds: batch %s, %s %s: counted %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.kind, r.kind), coalesce(c.name, r.name), c.n, r.n)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.kind = c.kind AND r.name = c.name
			WHERE c.n IS DISTINCT FROM r.n ORDER BY 1`},
	{"batch_rollup_end_reasons", `
			WITH c AS (
			    SELECT batch, status, fixpoint_end_reason(error) AS reason, count(*) AS n FROM jobs
			    WHERE batch IS NOT NULL AND status IN ('dead', 'rejected', 'failed', 'cancelled', 'over_budget')
			    GROUP BY 1, 2, 3
			), r AS (
			    SELECT batch, status, reason, jobs AS n FROM batch_rollup_end_reasons WHERE jobs <> 0
			)
			SELECT format('batch_rollup_end_reasons: batch %s, %s %s: counted %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.status, r.status), coalesce(c.reason, r.reason), c.n, r.n)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.status = c.status AND r.reason = c.reason
			WHERE c.n IS DISTINCT FROM r.n ORDER BY 1`},
	{"batch_rollup_rules", `
			WITH c AS (
			    SELECT j.batch, coalesce(f.e->>'rule', '') AS rule,
			           regexp_replace(coalesce(f.e->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path, f.severity,
			           ARRAY[count(*), count(DISTINCT j.id),
			                 count(DISTINCT j.id) FILTER (WHERE c.run = j.run AND (c.attempt_no IS NULL OR c.attempt_no = fin.attempt_no))]::numeric[] AS v
			    FROM jobs j
			    JOIN (SELECT job_id, run, attempt_no, errors, warnings FROM attempts
			          UNION ALL SELECT job_id, run, NULL, errors, warnings FROM revalidations) c ON c.job_id = j.id
			    CROSS JOIN LATERAL (
			        SELECT 'error' AS severity, e FROM jsonb_array_elements(CASE WHEN jsonb_typeof(c.errors) = 'array' THEN c.errors END) e WHERE e->>'keyword' = 'x-fixpoint-rules'
			        UNION ALL
			        SELECT 'warn', w FROM jsonb_array_elements(CASE WHEN jsonb_typeof(c.warnings) = 'array' THEN c.warnings END) w WHERE w->>'keyword' = 'x-fixpoint-rules'
			    ) f
			    LEFT JOIN LATERAL (
			        SELECT l.attempt_no FROM attempts l WHERE l.job_id = j.id AND l.run = j.run
			        ORDER BY l.valid DESC, l.attempt_no DESC LIMIT 1
			    ) fin ON true
			    WHERE j.batch IS NOT NULL GROUP BY 1, 2, 3, 4
			), r AS (
			    SELECT batch, rule, path, severity, ARRAY[failures, jobs, final_jobs]::numeric[] AS v
			    FROM batch_rollup_rules WHERE (failures, jobs, final_jobs) <> (0, 0, 0)
			)
			SELECT format('batch_rollup_rules: batch %s, rule %s, path %s, %s: counted (failures, jobs, final jobs) %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.rule, r.rule), coalesce(c.path, r.path),
			              coalesce(c.severity, r.severity), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.rule = c.rule AND r.path = c.path AND r.severity = c.severity
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_grades", `
			WITH c AS (
			    SELECT j.batch, regexp_replace(coalesce(g->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
			           ARRAY[count(*), count(*) FILTER (WHERE g->>'grade' = 'exact'),
			                 count(*) FILTER (WHERE g->>'grade' = 'normalized'), count(*) FILTER (WHERE g->>'grade' = 'fuzzy'),
			                 count(*) FILTER (WHERE g->>'grade' = 'none')]::numeric[] AS v
			    FROM jobs j
			    CROSS JOIN LATERAL (
			        SELECT r.evidence FROM revalidations r WHERE r.job_id = j.id AND r.run = j.run
			        UNION ALL
			        (SELECT a.evidence FROM attempts a WHERE a.job_id = j.id AND a.run = j.run
			         ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1)
			        LIMIT 1
			    ) f
			    CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(f.evidence) = 'array' THEN f.evidence END) g
			    WHERE j.batch IS NOT NULL GROUP BY 1, 2
			), r AS (
			    SELECT batch, path, ARRAY[leaves, exact, normalized, fuzzy, none]::numeric[] AS v
			    FROM batch_rollup_grades WHERE leaves <> 0
			)
			SELECT format('batch_rollup_grades: batch %s, path %s: counted (leaves, exact, normalized, fuzzy, none) %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.path, r.path), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.path = c.path
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_steps", `
			WITH c AS (
			    SELECT j.batch, a.step, a.class,
			           ARRAY[count(*), count(*) FILTER (WHERE a.valid), sum(a.tokens_in), sum(a.tokens_out), sum(a.tokens_cached),
			                 coalesce(sum(a.cost_usd), 0), count(*) FILTER (WHERE a.unpriced),
			                 coalesce(sum(jsonb_array_length(a.tool_calls)), 0), coalesce(sum(jsonb_array_length(a.conflicts)), 0),
			                 count(*) FILTER (WHERE jsonb_array_length(a.conflicts) > 0), count(a.evidence),
			                 coalesce(sum(jsonb_array_length(a.evidence)), 0),
			                 coalesce(sum(g.exact), 0), coalesce(sum(g.normalized), 0), coalesce(sum(g.fuzzy), 0), coalesce(sum(g.none), 0)]::numeric[] AS v
			    FROM attempts a JOIN jobs j ON j.id = a.job_id
			    LEFT JOIN LATERAL (
			        SELECT count(*) FILTER (WHERE e->>'grade' = 'exact') AS exact, count(*) FILTER (WHERE e->>'grade' = 'normalized') AS normalized,
			               count(*) FILTER (WHERE e->>'grade' = 'fuzzy') AS fuzzy, count(*) FILTER (WHERE e->>'grade' = 'none') AS none
			        FROM jsonb_array_elements(a.evidence) e
			    ) g ON true
			    WHERE j.batch IS NOT NULL AND a.step IS NOT NULL GROUP BY 1, 2, 3
			), r AS (
			    SELECT batch, step, class, ARRAY[attempts, valid, tokens_in, tokens_out, tokens_cached, cost_usd, unpriced, tool_calls,
			                                     conflicts, conflicted, graded, leaves, exact, normalized, fuzzy, none]::numeric[] AS v
			    FROM batch_rollup_steps WHERE attempts <> 0
			)
			SELECT format('batch_rollup_steps: batch %s, step %s, class %s: counted %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.step, r.step), coalesce(c.class, r.class), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.step = c.step AND r.class = c.class
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_chunks", `
			WITH c AS (
			    SELECT j.batch, a.chunk_n,
			           ARRAY[count(*), count(*) FILTER (WHERE a.valid), count(a.fields), coalesce(sum(a.fields), 0),
			                 count(*) FILTER (WHERE a.fields = 0)]::numeric[] AS v
			    FROM attempts a JOIN jobs j ON j.id = a.job_id
			    WHERE j.batch IS NOT NULL AND a.step = 'chunk' AND a.chunk_n IS NOT NULL GROUP BY 1, 2
			), r AS (
			    SELECT batch, chunk, ARRAY[attempts, valid, with_value, fields, empty]::numeric[] AS v
			    FROM batch_rollup_chunks WHERE attempts <> 0
			)
			SELECT format('batch_rollup_chunks: batch %s, chunk %s: counted (attempts, valid, with_value, fields, empty) %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.chunk_n, r.chunk), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.chunk = c.chunk_n
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"batch_rollup_conflicts", `
			WITH c AS (
			    SELECT j.batch, regexp_replace(coalesce(e->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
			           ARRAY[count(*), count(DISTINCT (a.job_id, a.run, a.attempt_no))]::numeric[] AS v
			    FROM attempts a JOIN jobs j ON j.id = a.job_id CROSS JOIN LATERAL jsonb_array_elements(a.conflicts) e
			    WHERE j.batch IS NOT NULL AND a.conflicts IS NOT NULL GROUP BY 1, 2
			), r AS (
			    SELECT batch, path, ARRAY[conflicts, merges]::numeric[] AS v FROM batch_rollup_conflicts WHERE conflicts <> 0
			)
			SELECT format('batch_rollup_conflicts: batch %s, path %s: counted (conflicts, merges) %s, rollup %s',
			              coalesce(c.batch, r.batch), coalesce(c.path, r.path), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.path = c.path
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
	{"wave_rollups", `
			WITH c AS (
			    SELECT a.wave_id, ARRAY[sum(a.tokens_in), sum(a.tokens_out), count(*) FILTER (WHERE a.valid),
			                            coalesce(sum(a.cost_usd), 0)]::numeric[] AS v
			    FROM attempts a JOIN waves w ON w.id = a.wave_id GROUP BY 1
			), r AS (
			    SELECT wave_id, ARRAY[tokens_in, tokens_out, valid, cost_usd]::numeric[] AS v FROM wave_rollups
			)
			SELECT format('wave_rollups: wave %s: counted (tokens_in, tokens_out, valid, cost_usd) %s, rollup %s',
			              coalesce(c.wave_id, r.wave_id), c.v, r.v)
			FROM c FULL JOIN r ON r.wave_id = c.wave_id
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`},
}

// histRecount is the recount of a rollup of one count by batch and key
// (column key of table, its count in column n), counted by the query
// count (columns batch, k, v).
func histRecount(table, key, n, count string) string {
	return fmt.Sprintf(`
			WITH c AS (%s
			), r AS (
			    SELECT batch, %[2]s AS k, %[3]s AS v FROM %[4]s WHERE %[3]s <> 0
			)
			SELECT format('%[4]s: batch %%s, %[2]s %%s: counted %%s, rollup %%s',
			              coalesce(c.batch, r.batch), coalesce(c.k, r.k), c.v, r.v)
			FROM c FULL JOIN r ON r.batch = c.batch AND r.k = c.k
			WHERE c.v IS DISTINCT FROM r.v ORDER BY 1`, count, key, n, table)
}

// RollupDrift recounts every batch's rollups and facets from its jobs and
// attempts and returns one line per difference ("" lines none: the
// rollups are exact). It reads every job and attempt of the ledger: for
// tests and for checking a ledger by hand, not for a page.
func (s *Store) RollupDrift(ctx context.Context) ([]string, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var out []string
	for _, q := range rollupRecounts {
		rows, err := s.pool.Query(ctx, q.sql)
		if err != nil {
			return nil, fmt.Errorf("recount %s: %w", q.what, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("recount %s: %w", q.what, err)
		}
		out = append(out, lines...)
	}
	return out, nil
}

// LedgerSize is how many jobs and attempts the ledger holds and the bytes
// (tables, indexes and TOAST) they and the rollups take.
type LedgerSize struct {
	Jobs, Attempts                        int64
	JobsBytes, AttemptsBytes, RollupBytes int64
}

// BytesPerJob is every byte counted over the jobs (0 for none).
func (l LedgerSize) BytesPerJob() int64 {
	if l.Jobs == 0 {
		return 0
	}
	return (l.JobsBytes + l.AttemptsBytes + l.RollupBytes) / l.Jobs
}

// rollupRelations are the tables the rollup triggers keep.
var rollupRelations = []string{"batch_rollups", "batch_rollup_attempts", "batch_rollup_costs", "batch_rollup_repairs",
	"batch_rollup_errors", "job_error_keys", "job_facets", "batch_cost_hours", "batch_rollup_walls", "batch_rollup_runs",
	"batch_rollup_minutes", "batch_rollup_classes", "batch_rollup_latency", "batch_rollup_spend", "batch_rollup_current",
	"batch_rollup_current_kinds", "batch_rollup_end_reasons", "batch_rollup_rules", "job_rule_keys", "batch_rollup_grades",
	"wave_rollups", "batch_rollup_steps", "batch_rollup_chunks", "batch_rollup_conflicts"}

// ledgerRelations are the tables LedgerSize counts beside jobs and
// attempts: the rollups, and the final checks kept for purged jobs.
var ledgerRelations = append(slices.Clip(rollupRelations), "job_final_checks")

// LedgerSize counts the ledger's jobs (from the rollups: no scan) and
// attempts (the planner's estimate after ANALYZE) and sizes them.
func (s *Store) LedgerSize(ctx context.Context) (LedgerSize, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var l LedgerSize
	err := s.pool.QueryRow(ctx, `
		SELECT coalesce((SELECT sum(jobs) FROM batch_rollups), 0)::int8,
		       (SELECT greatest(reltuples, 0)::int8 FROM pg_class WHERE oid = 'attempts'::regclass),
		       pg_total_relation_size('jobs'), pg_total_relation_size('attempts'),
		       (SELECT sum(pg_total_relation_size(r::regclass)) FROM unnest($1::text[]) r)::int8`, ledgerRelations).
		Scan(&l.Jobs, &l.Attempts, &l.JobsBytes, &l.AttemptsBytes, &l.RollupBytes)
	if err != nil {
		return l, fmt.Errorf("ledger size: %w", err)
	}
	return l, nil
}
