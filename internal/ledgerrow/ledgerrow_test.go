package ledgerrow_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/ledgerrow"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A result written as rows and read back is the job's result so far: the
// attempts in order with what the step goes on from, and the totals.
func TestResultRoundTrip(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res := &fixpoint.Result{JobID: "j1", Status: fixpoint.StatusValid, StartedAt: start, Wall: 3 * time.Second,
		Attempts: []fixpoint.Attempt{
			{No: 1, Raw: `{"a":`, Class: string(fixpoint.ClassSyntax), TokensIn: 10, TokensOut: 5, CostUSD: 0.01, StartedAt: start,
				Errors: []fixpoint.ValidationError{{Path: "/a", Keyword: "type", Class: fixpoint.ClassShape}}},
			{No: 2, Raw: `{"a":1}`, Valid: true, TokensIn: 12, TokensOut: 4, CostUSD: 0.02, StartedAt: start.Add(time.Second)},
		}}
	env := &queue.Envelope{JobID: "j1", Batch: "b", Run: 2, Provider: "openai", Model: "m"}
	row := ledgerrow.Result(res, env, 3)
	if row.JobID != "j1" || row.Run != 2 || row.Deliveries != 3 || row.Attempts != 2 || len(row.AttemptRows) != 2 ||
		row.Job == nil || row.Job.Batch != "b" || !row.FinishedAt.Equal(start.Add(3*time.Second)) {
		t.Fatalf("Result = %+v", row)
	}
	back := ledgerrow.ResultFrom("j1", row.AttemptRows)
	if len(back.Attempts) != 2 || back.Calls != 2 || back.TokensIn != 22 || back.TokensOut != 9 || !back.StartedAt.Equal(start) {
		t.Fatalf("ResultFrom = %+v", back)
	}
	if a := back.Attempts[0]; a.Raw != `{"a":` || a.Class != string(fixpoint.ClassSyntax) || len(a.Errors) != 1 || a.Errors[0].Path != "/a" {
		t.Errorf("first attempt back = %+v", a)
	}
	if ledgerrow.ResultFrom("j1", []store.Attempt{}) != nil {
		t.Error("ResultFrom of no rows: a result, want nil (the job starts afresh)")
	}
}

// The ledger's value of a job that is not valid is its last attempt's
// candidate, so that the export can give it (it was always null); a job
// whose last attempt found none has none, whatever an earlier one found.
func TestResultKeepsTheLastCandidate(t *testing.T) {
	t.Parallel()
	first, last := json.RawMessage(`{"a":"x"}`), json.RawMessage(`{"a":"y"}`)
	for _, tc := range []struct {
		name string
		res  fixpoint.Result
		want string
	}{
		{"invalid", fixpoint.Result{Status: fixpoint.StatusInvalid,
			Attempts: []fixpoint.Attempt{{No: 1, Value: first}, {No: 2, Value: last}}}, `{"a":"y"}`},
		{"over budget after an invalid reply", fixpoint.Result{Status: fixpoint.StatusOverBudget,
			Attempts: []fixpoint.Attempt{{No: 1, Value: first}}}, `{"a":"x"}`},
		{"invalid, the last reply unparsed", fixpoint.Result{Status: fixpoint.StatusInvalid,
			Attempts: []fixpoint.Attempt{{No: 1, Value: first}, {No: 2, Raw: "no"}}}, ""},
		{"failed on a provider error", fixpoint.Result{Status: fixpoint.StatusFailed,
			Attempts: []fixpoint.Attempt{{No: 1, Value: first}, {No: 2, Class: fixpoint.OutcomeProvider}}}, ""},
		{"valid", fixpoint.Result{Status: fixpoint.StatusValid, Value: json.RawMessage(`{"a":1}`),
			Attempts: []fixpoint.Attempt{{No: 1, Value: first}, {No: 2, Value: json.RawMessage(`{"a":1}`), Valid: true}}}, `{"a":1}`},
		{"no attempt", fixpoint.Result{Status: fixpoint.StatusFailed}, ""},
	} {
		tc.res.JobID = "j"
		if got := ledgerrow.Result(&tc.res, nil, 1).Value; string(got) != tc.want {
			t.Errorf("%s: value %s, want %q", tc.name, got, tc.want)
		}
	}
}
