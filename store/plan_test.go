package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// TestApplyResultsPlanIsLinear asks Postgres how it runs the statement that
// sets a batch of job rows, on a ledger where most jobs are already final,
// as in any ledger that has run a few batches. The statistics then say that
// few rows are queued, and a plan that joins the batch's rows with the
// locked rows by a nested loop rescans one for each row of the other:
// quadratic in the batch size. Measured in the bench, such a plan took 40 to
// 80 ms per 256-job batch instead of a few. The test leaves the planner
// nested loops only, the join it picks on such statistics; both the generic
// plan (what a prepared statement settles on) and the custom one must still
// visit each row a bounded number of times, and find the batch's jobs by
// primary key even when a new batch has been queued since the statistics
// were taken.
func TestApplyResultsPlanIsLinear(t *testing.T) {
	t.Parallel()
	const final, batchSize, stale = 3840, 256, 5000
	ctx := context.Background()
	dsn := storetest.NewDB(t)
	s, err := store.Open(ctx, dsn, &store.Config{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "plan"}); err != nil {
		t.Fatal(err)
	}
	hash, err := s.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("plan", hash, final+batchSize)); err != nil {
		t.Fatal(err)
	}
	var done, batch []store.Result
	for i := 1; i <= final+batchSize; i++ {
		r := result(jobID("plan", i), "x", "")
		if i <= final {
			done = append(done, r)
		} else {
			batch = append(batch, r)
		}
	}
	if _, err := s.SaveResults(ctx, done); err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	// A new batch enqueued since the statistics were taken, as every night
	// before autovacuum catches up: the planner believes few jobs are
	// queued, and an index over the queued jobs would look cheap.
	if err := s.PutBatch(ctx, store.BatchParams{Name: "plan-next"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("plan-next", hash, stale)); err != nil {
		t.Fatal(err)
	}
	args := store.ApplyResultsArgs(batch)
	params := ""
	for i := range args {
		if i > 0 {
			params += ", "
		}
		params += fmt.Sprintf("$%d", i+1)
	}
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		t.Run(mode, func(t *testing.T) {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }() // the plan is run for real: keep the rows queued
			// Nested loops only, the join the planner picks when its
			// statistics say one row is queued: every join must then still
			// have an index on its inner side.
			for _, set := range []string{"plan_cache_mode = " + mode, "enable_hashjoin = off", "enable_mergejoin = off"} {
				if _, err := tx.Exec(ctx, "SET LOCAL "+set); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tx.Exec(ctx, "PREPARE apply AS "+store.ApplyResultsSQL); err != nil {
				t.Fatal(err)
			}
			defer func() { _, _ = tx.Exec(ctx, "DEALLOCATE apply") }()
			var out []byte
			// EXPLAIN takes no bind parameters: the simple protocol writes
			// the arguments into the statement as literals.
			qargs := append([]any{pgx.QueryExecModeSimpleProtocol}, args...)
			if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE apply("+params+")", qargs...).Scan(&out); err != nil {
				t.Fatal(err)
			}
			var plans []struct{ Plan planNode }
			if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
				t.Fatalf("decode plan: %v\n%s", err, out)
			}
			var removed, updated float64
			plans[0].Plan.walk(func(n *planNode) {
				removed += n.RowsRemovedByJoinFilter * n.ActualLoops
				if n.RelationName == "jobs" && n.IndexName != "" && n.IndexName != "jobs_pkey" {
					t.Errorf("%s of jobs by %s (visits %v rows, %d other jobs queued): jobs must be found by primary key",
						n.NodeType, n.IndexName, (n.ActualRows+n.RowsRemovedByFilter)*n.ActualLoops, stale)
				}
				if n.NodeType == "ModifyTable" {
					updated += n.ActualRows
				}
				if n.NodeType == "CTE Scan" && n.ActualLoops > 1 {
					t.Errorf("CTE Scan on %s runs %v times (a nested loop rescans it)", n.CTEName, n.ActualLoops)
				}
			})
			if updated != batchSize {
				t.Errorf("plan updated %v rows, want %d", updated, batchSize)
			}
			if removed > batchSize {
				t.Errorf("join filters discarded %v rows for a batch of %d: the join is not linear", removed, batchSize)
			}
			if t.Failed() {
				t.Logf("plan:\n%s", out)
			}
		})
	}
}

// planNode is the part of a node of EXPLAIN (FORMAT JSON) the test reads.
type planNode struct {
	NodeType                string     `json:"Node Type"`
	RelationName            string     `json:"Relation Name"`
	IndexName               string     `json:"Index Name"`
	RowsRemovedByFilter     float64    `json:"Rows Removed by Filter"`
	CTEName                 string     `json:"CTE Name"`
	ActualRows              float64    `json:"Actual Rows"`
	ActualLoops             float64    `json:"Actual Loops"`
	RowsRemovedByJoinFilter float64    `json:"Rows Removed by Join Filter"`
	Plans                   []planNode `json:"Plans"`
}

func (n *planNode) walk(fn func(*planNode)) {
	fn(n)
	for i := range n.Plans {
		n.Plans[i].walk(fn)
	}
}
