package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A result read back from JSON (a worker's spill file) has JSON null for
// an attempt's absent tool calls and conflicts: the ledger takes it as
// none (it refused the result, failing a valid job), and stores NULL.
func TestStepColumnsTakeJSONNull(t *testing.T) {
	s, _ := setup(t, "sn", 1)
	ctx := context.Background()
	r := result(jobID("sn", 1), "ok", "")
	r.AttemptRows[0].Errors = json.RawMessage(`[]`) // as ledgerrow.Attempt gives it
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back store.Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if string(back.AttemptRows[0].ToolCalls) != "null" {
		t.Fatalf("tool calls through JSON: %q, want null (what a spill file holds)", back.AttemptRows[0].ToolCalls)
	}
	if _, err := s.SaveResults(ctx, []store.Result{back}); err != nil {
		t.Fatalf("SaveResults: %v", err)
	}
	var status string
	var nulls bool
	if err := s.QueryRowForTest(ctx, `SELECT j.status, a.tool_calls IS NULL AND a.conflicts IS NULL FROM jobs j JOIN attempts a ON a.job_id = j.id WHERE j.id = 'sn-1'`,
		&status, &nulls); err != nil || status != string(fixpoint.StatusValid) || !nulls {
		t.Errorf("job %s, tool calls and conflicts NULL %v (%v); want valid, NULL", status, nulls, err)
	}
}
