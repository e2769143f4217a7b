package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
)

// Repairs counts calls, the calls schema-guided fixes saved, the fixes by
// kind, the output of re-asks and the patch outcomes, over the current run.
func TestRepairFigures(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "rp", 3)
	ctx := context.Background()
	// Job 1: valid on its first attempt after two fixes (a call saved).
	r1 := result(jobID("rp", 1), "a", "")
	r1.AttemptRows[0].Coerced = 2
	r1.AttemptRows[0].Repairs = json.RawMessage(`[{"kind":"trailing_comma","offset":3},
		{"kind":"coerce_number","offset":0,"pointer":"/age","before":"\"42\"","after":"42"},
		{"kind":"enum_case","offset":0,"pointer":"/tier","before":"\"Pro\"","after":"\"pro\""}]`)
	// Job 2: a failed attempt, then a patch applied (re-ask output 10).
	r2 := result(jobID("rp", 2), "b", "shape", "")
	r2.AttemptRows[1].PatchOutcome = "applied"
	r2.AttemptRows[0].Repairs = json.RawMessage(`[{"kind":"enum_case","offset":0,"pointer":"/tier","before":"\"X\"","after":"\"x\""}]`)
	// Job 3: three attempts, a patch out of scope then a full re-ask.
	r3 := result(jobID("rp", 3), "c", "shape", "shape", "")
	r3.AttemptRows[1].PatchOutcome = "out_of_scope"
	if _, err := s.SaveResults(ctx, []store.Result{r1, r2, r3}); err != nil {
		t.Fatal(err)
	}
	f, err := s.Repairs(ctx, "rp")
	if err != nil {
		t.Fatal(err)
	}
	if f.Calls != 6 || f.CallsSaved != 1 {
		t.Errorf("calls %d saved %d, want 6 and 1", f.Calls, f.CallsSaved)
	}
	if f.Coercions["enum_case"] != 2 || f.Coercions["coerce_number"] != 1 || len(f.Coercions) != 2 || f.Kinds[0] != "enum_case" {
		t.Errorf("coercions %v in order %v, want enum_case 2 first, coerce_number 1, no syntax repairs", f.Coercions, f.Kinds)
	}
	if f.RepairedJobs != 2 || f.RepairTokensOut != 30 {
		t.Errorf("repaired jobs %d with %d output tokens, want 2 and 30", f.RepairedJobs, f.RepairTokensOut)
	}
	if f.Patches["applied"] != 1 || f.Patches["out_of_scope"] != 1 || len(f.Patches) != 2 {
		t.Errorf("patches %v", f.Patches)
	}
}
