package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

// GenSpec describes a generated batch: Jobs job rows (row_no 1..Jobs, ids
// in no particular order) with their attempts, written straight into the
// ledger by COPY, for benchmarks and for checks of the dashboard's
// queries at sizes a real run would take too long to make.
type GenSpec struct {
	// Batch names the batch; it is created (settings of a sim batch).
	Batch string
	// Jobs is how many job rows to write.
	Jobs int
	// Seed makes the mix reproducible (the same seed, the same rows).
	Seed uint64
}

// GenStats is what Generate wrote, for the caller to check against.
type GenStats struct {
	Jobs, Attempts int64
	// ByStatus counts the jobs by status.
	ByStatus map[string]int64
}

// GenPaths are the error paths (as written; FailureClusters folds array
// indices to '*') a generated failed attempt draws from: a few common,
// the last ones rare.
var GenPaths = []string{"/name", "/address/zip", "/items/0/price", "/items/1/price", "/email", "/age",
	"/address/city", "/tags/2", "/phone", "/rare/path"}

// genPathWeights weigh GenPaths (sum 1000).
var genPathWeights = []int{300, 200, 120, 80, 100, 80, 60, 40, 19, 1}

// Generate writes a batch of spec.Jobs jobs and their attempts into the
// ledger at dsn with COPY, in chunks of 50,000 jobs per transaction: a
// realistic mix of statuses (mostly valid, some invalid, failed, queued,
// a few rejected, dead, cancelled, over budget), 0 to 3 attempts, failed
// attempts of every class with validation errors at GenPaths, coercions
// and patch replies, tokens and costs.
func Generate(ctx context.Context, dsn string, spec GenSpec) (GenStats, error) {
	st := GenStats{ByStatus: map[string]int64{}}
	conn, hash, err := genBatch(ctx, dsn, spec)
	if err != nil {
		return st, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rng := rand.New(rand.NewPCG(spec.Seed, spec.Seed^0x9e3779b97f4a7c15))
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	const chunk = 50_000
	for lo := 0; lo < spec.Jobs; lo += chunk {
		hi := min(lo+chunk, spec.Jobs)
		var jobs, attempts [][]any
		for i := lo; i < hi; i++ {
			j, as := genJob(rng, spec.Batch, hash, i+1, t0)
			jobs = append(jobs, j)
			attempts = append(attempts, as...)
			st.ByStatus[j[3].(string)]++
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"}, genJobColumns, pgx.CopyFromRows(jobs)); err != nil {
				return fmt.Errorf("copy jobs: %w", err)
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"attempts"}, genAttemptColumns, pgx.CopyFromRows(attempts)); err != nil {
				return fmt.Errorf("copy attempts: %w", err)
			}
			return nil
		})
		if err != nil {
			return st, fmt.Errorf("generate rows %d..%d: %w", lo+1, hi, err)
		}
		st.Jobs += int64(len(jobs))
		st.Attempts += int64(len(attempts))
	}
	if _, err := conn.Exec(ctx, `ANALYZE jobs; ANALYZE attempts`); err != nil {
		return st, fmt.Errorf("generate: analyze: %w", err)
	}
	return st, nil
}

var genJobColumns = []string{"id", "batch", "row_no", "status", "schema_hash", "prompt", "provider", "model", "mode", "strategy",
	"metadata", "value", "error", "attempts", "calls", "first_attempt_valid", "repaired_locally",
	"tokens_in", "tokens_out", "cost_usd", "started_at", "finished_at", "wall_ms", "deliveries", "final_class", "published"}

var genAttemptColumns = []string{"job_id", "attempt_no", "request_hash", "raw", "source", "errors", "class", "valid",
	"repaired_locally", "finish_reason", "latency_ms", "tokens_in", "tokens_out", "model", "started_at", "coerced",
	"patch_outcome", "cost_usd"}

var genClasses = []string{"syntax", "shape", "shape", "shape", "semantic", "semantic", "truncated", "refusal"}

func pick(rng *rand.Rand, weights []int) int {
	n := rng.IntN(1000)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	return len(weights) - 1
}

// genJob makes one job row and its attempt rows.
func genJob(rng *rand.Rand, batch, hash string, row int, t0 time.Time) ([]any, [][]any) {
	id := fmt.Sprintf("%s:%016x", batch, rng.Uint64())
	status := []string{"valid", "invalid", "failed", "queued", "rejected", "dead", "cancelled", "over_budget"}[pick(rng, []int{800, 100, 40, 30, 10, 5, 10, 5})]
	n := 0 // attempts
	switch status {
	case "valid":
		n = 1 + pick(rng, []int{700, 200, 100})
	case "invalid":
		n = 3
	case "failed", "dead":
		n = 1 + rng.IntN(2)
	case "over_budget":
		n = 1
	}
	start := t0.Add(time.Duration(row) * 10 * time.Millisecond)
	var started, finished any
	var wall any
	if n > 0 {
		started = start
	}
	if status != "queued" {
		finished = start.Add(time.Duration(200+rng.IntN(3000)) * time.Millisecond)
		wall = int64(finished.(time.Time).Sub(start) / time.Millisecond)
	}
	local := status == "valid" && rng.IntN(100) < 3
	var value any
	errText, finalClass := "", ""
	var attempts [][]any
	var tin, tout int64
	var cost float64
	for a := 1; a <= n; a++ {
		valid := status == "valid" && a == n
		class := ""
		errs := "[]"
		switch {
		case valid:
		case status == "failed" || status == "dead" || status == "over_budget":
			class = "provider"
		default:
			class = genClasses[rng.IntN(len(genClasses))]
			var es []map[string]string
			for k := 0; k < 1+rng.IntN(2); k++ {
				p := GenPaths[pick(rng, genPathWeights)]
				es = append(es, map[string]string{"path": p, "keyword": "required", "class": class, "message": p + ": missing"})
			}
			b, _ := json.Marshal(es)
			errs = string(b)
		}
		if class != "" {
			finalClass = class
		}
		coerced := 0
		if valid && rng.IntN(100) < 5 {
			coerced = 1
		}
		patch := ""
		if a > 1 && rng.IntN(100) < 10 {
			patch = "applied"
		}
		ti, to := int64(300+rng.IntN(200)), int64(40+rng.IntN(60))
		c := float64(ti)*0.15e-6 + float64(to)*0.6e-6
		tin, tout, cost = tin+ti, tout+to, cost+c
		attempts = append(attempts, []any{id, a, "", `{"name":"x"}`, "object", errs, class, valid,
			valid && local, "stop", int64(100 + rng.IntN(900)), ti, to, "sim-typical",
			start.Add(time.Duration(a) * 100 * time.Millisecond), coerced, patch, c})
	}
	switch status {
	case "valid":
		value = `{"name":"x"}`
		finalClass = ""
	case "invalid":
		errText = "attempts exhausted: /name: missing"
	case "failed":
		errText = "provider: bad request"
	case "rejected":
		errText = "bad input: prompt too long"
	case "dead":
		errText = "delivered too often"
	case "cancelled":
		errText = "batch cancelled"
	case "over_budget":
		errText = "spend cap reached"
	}
	job := []any{id, batch, row, status, hash, fmt.Sprintf("extract row %d", row), "sim", "sim-typical", "json", "exact",
		fmt.Sprintf(`{"row":%d}`, row), value, errText, n, n, status == "valid" && n == 1, local,
		tin, tout, cost, started, finished, wall, 1, finalClass, true}
	return job, attempts
}

// genBatch connects to the ledger at dsn and records spec's batch with
// the generators' schema, whose hash it returns beside the connection.
func genBatch(ctx context.Context, dsn string, spec GenSpec) (*pgx.Conn, string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, "", fmt.Errorf("generate: connect: %w", err)
	}
	fail := func(what string, err error) (*pgx.Conn, string, error) {
		conn.Close(context.WithoutCancel(ctx))
		return nil, "", fmt.Errorf("generate: %s: %w", what, err)
	}
	var hash string
	err = conn.QueryRow(ctx, `
		INSERT INTO schemas (hash, body) VALUES (encode(sha256('{"type":"object"}'::bytea), 'hex'), '{"type":"object"}')
		ON CONFLICT (hash) DO UPDATE SET body = EXCLUDED.body RETURNING hash`).Scan(&hash)
	if err != nil {
		return fail("schema", err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO batches (name, settings, total_jobs, schema_hash)
		VALUES ($1, '{"provider":"sim","model":"sim-typical","mode":"json"}', $2, $3)`, spec.Batch, spec.Jobs, hash)
	if err != nil {
		return fail("batch", err)
	}
	return conn, hash, nil
}

// GenerateInServer writes a batch like Generate's (the same mix of
// statuses, attempts, classes, error paths, coercions, patches, tokens and
// costs, drawn by Postgres's random(), seeded by spec.Seed) with INSERT ...
// SELECT generate_series: no row crosses the wire, so that a ledger of ten
// million jobs takes minutes rather than hours. The rollup triggers fire
// as for any writer, once per statement of chunk jobs, so the rollups are
// exact by the same code that keeps them in production.
func GenerateInServer(ctx context.Context, dsn string, spec GenSpec) (GenStats, error) {
	st := GenStats{ByStatus: map[string]int64{}}
	conn, hash, err := genBatch(ctx, dsn, spec)
	if err != nil {
		return st, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// One backend draws every number: a parallel plan would not follow
	// the seed.
	seed := float64(spec.Seed%1000) / 1000
	if _, err := conn.Exec(ctx, `SET max_parallel_workers_per_gather = 0; SET jit = off`); err != nil {
		return st, fmt.Errorf("generate: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT setseed($1)`, seed); err != nil {
		return st, fmt.Errorf("generate: seed: %w", err)
	}
	const chunk = 200_000
	for lo := 1; lo <= spec.Jobs; lo += chunk {
		hi := min(lo+chunk-1, spec.Jobs)
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			args := [][]any{{spec.Batch, lo, hi}, nil, {spec.Batch, hash}, nil}
			for i, q := range genInServerSQL {
				if _, err := tx.Exec(ctx, q, args[i]...); err != nil {
					return fmt.Errorf("%.60s...: %w", q, err)
				}
			}
			return nil
		})
		if err != nil {
			return st, fmt.Errorf("generate rows %d..%d: %w", lo, hi, err)
		}
	}
	rows, err := conn.Query(ctx, `SELECT status, count(*), sum(attempts) FROM jobs WHERE batch = $1 GROUP BY 1`, spec.Batch)
	if err != nil {
		return st, fmt.Errorf("generate: count: %w", err)
	}
	var status string
	var n, a int64
	if _, err := pgx.ForEachRow(rows, []any{&status, &n, &a}, func() error {
		st.ByStatus[status] = n
		st.Jobs += n
		st.Attempts += a
		return nil
	}); err != nil {
		return st, fmt.Errorf("generate: count: %w", err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE jobs; ANALYZE attempts`); err != nil {
		return st, fmt.Errorf("generate: analyze: %w", err)
	}
	return st, nil
}

// genInServerSQL are the statements of one chunk of GenerateInServer: the
// jobs' draws ($1 the batch, $2..$3 the rows), their attempts, then the
// jobs ($1 the batch, $2 the schema hash) and attempts inserted.
var genInServerSQL = []string{
	`CREATE TEMP TABLE gen_j ON COMMIT DROP AS
	SELECT i, $1::text || ':' || left(md5($1::text || i), 16) AS id, status,
	       CASE status WHEN 'valid' THEN CASE WHEN r2 < 0.7 THEN 1 WHEN r2 < 0.9 THEN 2 ELSE 3 END
	                   WHEN 'invalid' THEN 3 WHEN 'failed' THEN 1 + (r2 < 0.5)::int WHEN 'dead' THEN 1 + (r2 < 0.5)::int
	                   WHEN 'over_budget' THEN 1 ELSE 0 END AS n,
	       status = 'valid' AND r3 < 0.03 AS local,
	       timestamptz '2026-12-01 09:00:00+00' + i * interval '10 ms' AS start,
	       CASE WHEN status <> 'queued' THEN (200 + floor(r4 * 3000))::bigint END AS wall
	FROM (
	    SELECT i, r2, r3, r4,
	           CASE WHEN r1 < 0.8 THEN 'valid' WHEN r1 < 0.9 THEN 'invalid' WHEN r1 < 0.94 THEN 'failed'
	                WHEN r1 < 0.97 THEN 'queued' WHEN r1 < 0.98 THEN 'rejected' WHEN r1 < 0.985 THEN 'dead'
	                WHEN r1 < 0.995 THEN 'cancelled' ELSE 'over_budget' END AS status
	    FROM (SELECT i, random() AS r1, random() AS r2, random() AS r3, random() AS r4
	          FROM generate_series($2::int, $3::int) i) r
	) s`,
	`CREATE TEMP TABLE gen_a ON COMMIT DROP AS
	SELECT id AS job_id, a AS attempt_no, valid, class,
	       CASE WHEN class IN ('', 'provider') THEN '[]'::jsonb
	            ELSE jsonb_build_array(jsonb_build_object('path', p1, 'keyword', 'required', 'class', class, 'message', p1 || ': missing'))
	                 || CASE WHEN two THEN jsonb_build_array(jsonb_build_object('path', p2, 'keyword', 'required', 'class', class,
	                                                                           'message', p2 || ': missing'))
	                         ELSE '[]'::jsonb END END AS errors,
	       (valid AND rc < 0.05)::int AS coerced, CASE WHEN a > 1 AND rp < 0.1 THEN 'applied' ELSE '' END AS patch,
	       ti, tout, ti * 0.15e-6 + tout * 0.6e-6 AS cost, latency, start + a * interval '100 ms' AS started, local AND valid AS local
	FROM (
	    SELECT j.id, j.start, j.local, a, j.status = 'valid' AND a = j.n AS valid,
	           CASE WHEN j.status = 'valid' AND a = j.n THEN ''
	                WHEN j.status IN ('failed', 'dead', 'over_budget') THEN 'provider'
	                ELSE (ARRAY['syntax', 'shape', 'shape', 'shape', 'semantic', 'semantic', 'truncated', 'refusal'])[1 + floor(x.rk * 8)::int] END AS class,
	           (SELECT p FROM (VALUES (0.3, '/name'), (0.5, '/address/zip'), (0.62, '/items/0/price'), (0.7, '/items/1/price'),
	                                  (0.8, '/email'), (0.88, '/age'), (0.94, '/address/city'), (0.98, '/tags/2'),
	                                  (0.999, '/phone'), (1.01, '/rare/path')) w (upto, p)
	            WHERE x.rp1 < w.upto ORDER BY w.upto LIMIT 1) AS p1,
	           (SELECT p FROM (VALUES (0.3, '/name'), (0.5, '/address/zip'), (0.62, '/items/0/price'), (0.7, '/items/1/price'),
	                                  (0.8, '/email'), (0.88, '/age'), (0.94, '/address/city'), (0.98, '/tags/2'),
	                                  (0.999, '/phone'), (1.01, '/rare/path')) w (upto, p)
	            WHERE x.rp2 < w.upto ORDER BY w.upto LIMIT 1) AS p2,
	           x.r2 < 0.5 AS two, x.rc, x.rp,
	           300 + floor(x.rt * 200)::bigint AS ti, 40 + floor(x.ro * 60)::bigint AS tout, 100 + floor(x.rl * 900)::bigint AS latency
	    FROM gen_j j CROSS JOIN LATERAL generate_series(1, j.n) a
	    CROSS JOIN LATERAL (SELECT random() AS rk, random() AS rp1, random() AS rp2, random() AS r2, random() AS rc, random() AS rp,
	                               random() AS rt, random() AS ro, random() AS rl, a AS dep) x
	) g`,
	`INSERT INTO jobs (id, batch, row_no, status, schema_hash, prompt, provider, model, mode, strategy, metadata, value, error,
	                  attempts, calls, first_attempt_valid, repaired_locally, tokens_in, tokens_out, cost_usd, started_at,
	                  finished_at, wall_ms, deliveries, final_class, published)
	SELECT j.id, $1, j.i, j.status, $2, 'extract row ' || j.i, 'sim', 'sim-typical', 'json', 'exact',
	       jsonb_build_object('row', j.i), CASE WHEN j.status = 'valid' THEN '{"name":"x"}'::jsonb END,
	       CASE j.status WHEN 'invalid' THEN 'attempts exhausted: /name: missing' WHEN 'failed' THEN 'provider: bad request'
	                     WHEN 'rejected' THEN 'bad input: prompt too long' WHEN 'dead' THEN 'delivered too often'
	                     WHEN 'cancelled' THEN 'batch cancelled' WHEN 'over_budget' THEN 'spend cap reached' ELSE '' END,
	       j.n, j.n, j.status = 'valid' AND j.n = 1, j.local, coalesce(s.ti, 0), coalesce(s.tout, 0), coalesce(s.cost, 0),
	       CASE WHEN j.n > 0 THEN j.start END, CASE WHEN j.status <> 'queued' THEN j.start + j.wall * interval '1 ms' END,
	       j.wall, 1, CASE WHEN j.status = 'valid' THEN '' ELSE coalesce(s.last_class, '') END, true
	FROM gen_j j LEFT JOIN (
	    SELECT job_id, sum(ti) AS ti, sum(tout) AS tout, sum(cost) AS cost,
	           (array_agg(class ORDER BY attempt_no DESC) FILTER (WHERE class <> ''))[1] AS last_class
	    FROM gen_a GROUP BY 1
	) s ON s.job_id = j.id`,
	`INSERT INTO attempts (job_id, attempt_no, request_hash, raw, source, errors, class, valid, repaired_locally, finish_reason,
	                      latency_ms, tokens_in, tokens_out, model, started_at, coerced, patch_outcome, cost_usd)
	SELECT job_id, attempt_no, '', '{"name":"x"}', 'object', errors, class, valid, local, 'stop', latency, ti, tout, 'sim-typical',
	       started, coerced, patch, cost
	FROM gen_a`,
}
