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
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return st, fmt.Errorf("generate: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var hash string
	err = conn.QueryRow(ctx, `
		INSERT INTO schemas (hash, body) VALUES (encode(sha256('{"type":"object"}'::bytea), 'hex'), '{"type":"object"}')
		ON CONFLICT (hash) DO UPDATE SET body = EXCLUDED.body RETURNING hash`).Scan(&hash)
	if err != nil {
		return st, fmt.Errorf("generate: schema: %w", err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO batches (name, settings, total_jobs, schema_hash)
		VALUES ($1, '{"provider":"sim","model":"sim-typical","mode":"json"}', $2, $3)`, spec.Batch, spec.Jobs, hash)
	if err != nil {
		return st, fmt.Errorf("generate: batch: %w", err)
	}
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
