package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// simBatch enqueues 20 reviews and runs them to the end on the messy
// simulator with the built enqueue and worker, and returns the ledger's
// URL and the batch.
func simBatch(t *testing.T) (string, string) {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, "github.com/fixpoint-dev/fixpoint/cmd/enqueue", "github.com/fixpoint-dev/fixpoint/cmd/worker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	work := t.TempDir()
	if err := os.CopyFS(filepath.Join(work, "examples"), os.DirFS(filepath.Join("..", "..", "examples"))); err != nil {
		t.Fatal(err)
	}
	var rows strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&rows, `{"id":"r%d","text":"Review %d: the battery lasts %d days, support answered in %d hours."}`+"\n", i, i, i%5+1, i%7+1)
	}
	if err := os.WriteFile(filepath.Join(work, "rows.jsonl"), []byte(rows.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn := storetest.NewDB(t)
	const batch = "js1"
	// Seed 5 gives the 20 rows both valid and not valid jobs: on most
	// seeds the messy preset's faults are all repaired within 3 attempts.
	for _, line := range []string{
		"enqueue --batch " + batch + " --schema examples/schema.json --template examples/template.txt --model gpt-4o-mini --id-field id rows.jsonl",
		"worker --drain --batch " + batch + " --max-failure-rate 1 --sim messy --sim-seed 5",
	} {
		cmd := exec.Command("sh", "-c", bin+"/"+line)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "NATS_URL=", "FIXPOINT_NATS_LISTEN=127.0.0.1:0", "FIXPOINT_METRICS_ADDR=off", "LOG_LEVEL=warn")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	return dsn, batch
}

// reportJSON runs report args --format json and decodes its output into v,
// which must hold every field: an unknown one fails.
func reportJSON(t *testing.T, dsn string, v any, args ...string) map[string]any {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), append(args, "--format", "json", "--database-url", dsn), &out, &errOut); code != 0 {
		t.Fatalf("report %v --format json: exit %d, %s", args, code, errOut.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("report %v --format json: %v\n%s", args, err, out.String())
	}
	var generic map[string]any
	if err := json.Unmarshal(out.Bytes(), &generic); err != nil {
		t.Fatal(err)
	}
	return generic
}

// documented fails for each key of obj (and of the objects its keys hold,
// named parent.key) that docs/report.md does not list, as `key` or "key".
// A job's input and value are the user's, not report's.
func documented(t *testing.T, doc, where string, obj map[string]any) {
	t.Helper()
	for k, v := range obj {
		if !strings.Contains(doc, "`"+k+"`") && !strings.Contains(doc, `"`+k+`"`) {
			t.Errorf("%s: field %s is not in docs/report.md", where, k)
		}
		if k == "input" || k == "value" {
			continue
		}
		switch v := v.(type) {
		case map[string]any:
			documented(t, doc, where+"."+k, v)
		case []any:
			if len(v) > 0 {
				if o, ok := v[0].(map[string]any); ok {
					documented(t, doc, where+"."+k+"[]", o)
				}
			}
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// The JSON of summary, failures and job after a run on the simulator: its
// fields are the documented ones, and their values are the ledger's.
func TestReportJSON(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs enqueue and worker")
	}
	dsn, batch := simBatch(t)
	docBytes, err := os.ReadFile(filepath.Join("..", "..", "docs", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(docBytes)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	var sum struct {
		Batches []struct {
			Batch                                                           string
			Jobs, Valid, Invalid, Failed, Rejected, Dead, Queued, Cancelled int64
			OverBudget                                                      int64 `json:"over_budget"`
			Finished, Runs                                                  int64
			FirstAttemptValid                                               int64    `json:"first_attempt_valid"`
			Repaired                                                        int64    `json:"repaired"`
			ValidRate                                                       *float64 `json:"valid_rate"`
			FirstAttemptValidRate                                           *float64 `json:"first_attempt_valid_rate"`
			RepairRate                                                      *float64 `json:"repair_rate"`
			MeanAttempts                                                    *float64 `json:"mean_attempts"`
			TokensIn                                                        int64    `json:"tokens_in"`
			TokensOut                                                       int64    `json:"tokens_out"`
			TokensCached                                                    int64    `json:"tokens_cached"`
			CostUSD                                                         float64  `json:"cost_usd"`
			TokensPerValidJob                                               *float64 `json:"tokens_per_valid_job"`
			CostPerValidJobUSD                                              *float64 `json:"cost_per_valid_job_usd"`
			P50WallMS                                                       *float64 `json:"p50_wall_ms"`
			P95WallMS                                                       *float64 `json:"p95_wall_ms"`
			Cost                                                            struct {
				TotalUSD            float64  `json:"total_usd"`
				PerValidRowUSD      *float64 `json:"per_valid_row_usd"`
				AttemptsUSD         float64  `json:"attempts_usd"`
				EarlierRunsUSD      float64  `json:"earlier_runs_usd"`
				InterruptedUSD      float64  `json:"interrupted_usd"`
				InterruptedCalls    int64    `json:"interrupted_calls"`
				InterruptedAnswered int64    `json:"interrupted_answered"`
			}
			CostUnpriced bool `json:"cost_unpriced"`
			Unpriced     []struct {
				Model    string
				Attempts int64
			}
			MissingModels []struct {
				Provider, Model string
				Calls, Queued   int64
				LastCallAt      *string `json:"last_call_at"`
			} `json:"missing_models"`
			Cap   *json.RawMessage
			Notes []string
			Cache json.RawMessage
			Waves []json.RawMessage
		}
	}
	generic := reportJSON(t, dsn, &sum, "summary", batch)
	documented(t, doc, "summary", generic)
	if len(sum.Batches) != 1 || sum.Batches[0].Batch != batch {
		t.Fatalf("summary %s: %+v; want the one batch", batch, sum)
	}
	b := sum.Batches[0]
	if b.MissingModels == nil || len(b.MissingModels) != 0 {
		t.Errorf("missing_models of a batch whose model was there: %+v; want []", b.MissingModels)
	}
	var jobs, valid, invalid, failed, queued, firstValid, tokensIn, tokensOut int64
	var cost, attemptsCost float64
	if err := conn.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE status = 'valid'), count(*) FILTER (WHERE status = 'invalid'),
		       count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'queued'),
		       count(*) FILTER (WHERE status = 'valid' AND first_attempt_valid),
		       sum(tokens_in), sum(tokens_out), sum(cost_usd)::float8,
		       (SELECT coalesce(sum(a.cost_usd), 0)::float8 FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch = $1)
		FROM jobs WHERE batch = $1`, batch).Scan(&jobs, &valid, &invalid, &failed, &queued, &firstValid, &tokensIn, &tokensOut, &cost, &attemptsCost); err != nil {
		t.Fatal(err)
	}
	if jobs != 20 || b.Jobs != jobs || b.Valid != valid || b.Invalid != invalid || b.Failed != failed || b.Queued != queued || b.Finished != jobs-queued ||
		b.FirstAttemptValid != firstValid || b.TokensIn != tokensIn || b.TokensOut != tokensOut || b.Runs != 1 {
		t.Errorf("summary counts %+v; the ledger has %d jobs: %d valid, %d invalid, %d failed, %d queued, %d first try, %d/%d tokens",
			b, jobs, valid, invalid, failed, queued, firstValid, tokensIn, tokensOut)
	}
	if valid == 0 || invalid+failed == 0 || cost == 0 {
		t.Fatalf("the messy run made %d valid and %d not valid jobs for $%f: want both, and a cost", valid, invalid+failed, cost)
	}
	if b.ValidRate == nil || !near(*b.ValidRate, float64(valid)/float64(jobs)) {
		t.Errorf("valid_rate %v, want %d/%d", b.ValidRate, valid, jobs)
	}
	if !near(b.CostUSD, cost) || b.CostPerValidJobUSD == nil || !near(*b.CostPerValidJobUSD, cost/float64(valid)) {
		t.Errorf("cost_usd %v, cost_per_valid_job_usd %v; the ledger: $%v over %d valid", b.CostUSD, b.CostPerValidJobUSD, cost, valid)
	}
	if !near(b.Cost.AttemptsUSD, attemptsCost) || !near(b.Cost.TotalUSD, attemptsCost+b.Cost.InterruptedUSD) ||
		b.Cost.PerValidRowUSD == nil || !near(*b.Cost.PerValidRowUSD, b.Cost.TotalUSD/float64(valid)) {
		t.Errorf("cost %+v; the ledger's attempts cost $%v", b.Cost, attemptsCost)
	}
	if b.Cap != nil || len(b.Notes) != 0 || len(b.Unpriced) != 0 || b.CostUnpriced || len(b.Waves) != 0 {
		t.Errorf("cap %v, notes %q, unpriced %v (cost_unpriced %v), waves %d: want none for a plain priced batch", b.Cap, b.Notes, b.Unpriced, b.CostUnpriced, len(b.Waves))
	}

	var fail struct {
		Batch          string
		FailureClasses []struct {
			Model    string
			Attempt  int
			Class    string
			Attempts int64
			Share    float64
		} `json:"failure_classes"`
		RepairEffectiveness []struct {
			Attempt         int
			Class           string
			Failed, Retried int64
			ValidNext       int64 `json:"valid_next"`
			Rate            *float64
		} `json:"repair_effectiveness"`
		ErrorPaths []struct {
			Path, Keyword, Class string
			Errors, Jobs         int64
		} `json:"error_paths"`
		EndReasons []struct {
			Status string
			Jobs   int64
			Reason string
		} `json:"end_reasons"`
		RuleFailures []json.RawMessage `json:"rule_failures"`
		Grounding    []groundingRowJSON
	}
	generic = reportJSON(t, dsn, &fail, "failures", batch)
	documented(t, doc, "failures", generic)
	// Every failed attempt of the ledger, by attempt number and class.
	want := map[string]int64{}
	rows, err := conn.Query(ctx, `SELECT a.attempt_no, a.class, count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run
		WHERE j.batch = $1 AND NOT a.valid GROUP BY 1, 2`, batch)
	if err != nil {
		t.Fatal(err)
	}
	var no int
	var class string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&no, &class, &n}, func() error { want[fmt.Sprint(no, class)] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, c := range fail.FailureClasses {
		if c.Class != "" {
			got[fmt.Sprint(c.Attempt, c.Class)] += c.Attempts
		}
	}
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("failure_classes by attempt and class %v; the ledger's failed attempts %v", got, want)
	}
	var pathErrors int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(errors), 0) FROM error_paths WHERE batch = $1`, batch).Scan(&pathErrors); err != nil {
		t.Fatal(err)
	}
	var gotErrors int64
	for _, p := range fail.ErrorPaths {
		gotErrors += p.Errors
	}
	if gotErrors != pathErrors {
		t.Errorf("error_paths count %d errors; the ledger's error_paths %d", gotErrors, pathErrors)
	}
	checkTruthJSON(t, conn, batch, fail.RuleFailures, fail.Grounding)

	// The job with the most attempts.
	var id string
	var attempts int
	if err := conn.QueryRow(ctx, `SELECT id, attempts FROM jobs WHERE batch = $1 ORDER BY attempts DESC, id LIMIT 1`, batch).Scan(&id, &attempts); err != nil {
		t.Fatal(err)
	}
	var job struct {
		ID, Batch               string
		Row, Run                int
		Status, Provider, Model string
		Mode, Strategy          string
		Input, Value            json.RawMessage
		Error                   string
		FinalClass              string `json:"final_class"`
		Attempts, Calls         int
		FirstAttemptValid       bool    `json:"first_attempt_valid"`
		RepairedLocally         bool    `json:"repaired_locally"`
		TokensIn                int64   `json:"tokens_in"`
		TokensOut               int64   `json:"tokens_out"`
		TokensCached            int64   `json:"tokens_cached"`
		CostUSD                 float64 `json:"cost_usd"`
		WallMS                  *int64  `json:"wall_ms"`
		Deliveries              int
		StartedAt               *string          `json:"started_at"`
		FinishedAt              *string          `json:"finished_at"`
		AttemptList             []map[string]any `json:"attempt_list"`
		Interrupted             []map[string]any
	}
	generic = reportJSON(t, dsn, &job, "job", id)
	documented(t, doc, "job", generic)
	var status, raws string
	var value []byte
	var jobCost float64
	if err := conn.QueryRow(ctx, `SELECT status, value, cost_usd::float8,
		(SELECT string_agg(raw, '|' ORDER BY attempt_no) FROM attempts a WHERE a.job_id = j.id AND a.run = j.run)
		FROM jobs j WHERE id = $1`, id).Scan(&status, &value, &jobCost, &raws); err != nil {
		t.Fatal(err)
	}
	var gotRaws []string
	for _, a := range job.AttemptList {
		gotRaws = append(gotRaws, fmt.Sprint(a["raw"]))
	}
	if job.ID != id || job.Batch != batch || job.Status != status || job.Attempts != attempts || len(job.AttemptList) != attempts ||
		strings.Join(gotRaws, "|") != raws || !near(job.CostUSD, jobCost) || job.Input == nil {
		t.Errorf("job %s: %+v; the ledger: %s, %d attempts, $%v", id, job, status, attempts, jobCost)
	}
	if (value == nil) != (string(job.Value) == "null") || value != nil && !jsonEqual(t, value, job.Value) {
		t.Errorf("job %s value %s; the ledger's %s", id, job.Value, value)
	}
	if attempts < 2 || !slices.ContainsFunc(job.AttemptList, func(a map[string]any) bool {
		return a["valid"] == false && len(a["errors"].([]any)) > 0 || a["class"] != ""
	}) {
		t.Errorf("job %s: %d attempts, none failed with errors; want the messy run's job with the most attempts to show one", id, attempts)
	}
}

// groundingRowJSON is a row of report failures' grounding.
type groundingRowJSON struct {
	Path                                   string
	Leaves, Exact, Normalized, Fuzzy, None int64
	ExactShare                             float64 `json:"exact_share"`
	NormalizedShare                        float64 `json:"normalized_share"`
	FuzzyShare                             float64 `json:"fuzzy_share"`
	NoneShare                              float64 `json:"none_share"`
}

// checkTruthJSON checks report failures' rule_failures and grounding of
// the simulator's batch against the ledger: the schema has no rules; the
// evidence stage (check, the default) graded the final values' strings
// and numbers.
func checkTruthJSON(t *testing.T, conn *pgx.Conn, batch string, ruleFailures []json.RawMessage, grounding []groundingRowJSON) {
	t.Helper()
	ctx := context.Background()
	var leaves int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs j CROSS JOIN LATERAL (SELECT a.evidence FROM attempts a
		WHERE a.job_id = j.id AND a.run = j.run ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1) f
		CROSS JOIN LATERAL jsonb_array_elements(f.evidence) WHERE j.batch = $1`, batch).Scan(&leaves); err != nil {
		t.Fatal(err)
	}
	var gotLeaves int64
	for _, g := range grounding {
		gotLeaves += g.Leaves
		if g.Exact+g.Normalized+g.Fuzzy+g.None != g.Leaves || !near(g.NoneShare, float64(g.None)/float64(g.Leaves)) {
			t.Errorf("grounding of %s: %+v; the grades do not add up to the leaves, or the share is not theirs", g.Path, g)
		}
	}
	if ruleFailures == nil || len(ruleFailures) != 0 || leaves == 0 || gotLeaves != leaves {
		t.Errorf("rule_failures %s, grounding of %d leaves; want [] and the %d leaves of the final attempts", ruleFailures, gotLeaves, leaves)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
