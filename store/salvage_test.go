package store_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A result the ledger refuses, for a number beyond a column's range or a
// value jsonb cannot hold, is taken once salvaged: the job failed with the
// refusal as its error, every attempt kept with its usage, its cost
// clamped.
func TestSalvageRefusedResult(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "salv", 2)
	ctx := context.Background()
	for i, mod := range []func(*store.Result){
		func(r *store.Result) { r.AttemptRows[1].CostUSD, r.CostUSD = 5e10, 5e10 },
		func(r *store.Result) {
			r.Value, r.AttemptRows[0].CostUSD = json.RawMessage(`{"n":1e200000}`), math.NaN()
		},
	} {
		r := result(jobID("salv", i+1), "x", "shape", "")
		mod(&r)
		_, refusal := s.SaveResults(ctx, []store.Result{r})
		if !store.IsRefused(refusal) {
			t.Fatalf("case %d: SaveResults = %v, want a refusal", i, refusal)
		}
		won, err := s.SaveResults(ctx, []store.Result{r.Salvage(refusal, false)})
		if err != nil || !won[0] {
			t.Fatalf("case %d: salvaged result: %v, %v", i, won, err)
		}
		j, as, err := s.Job(ctx, r.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != fixpoint.StatusFailed || !strings.Contains(j.Error, "ledger refused the result") || len(j.Value) != 0 {
			t.Errorf("case %d: job %s %q value %s; want failed, naming the refusal, no value", i, j.Status, j.Error, j.Value)
		}
		if len(as) != 2 || as[0].TokensIn != 100 || as[1].TokensOut != 10 || as[1].Raw != "x" {
			t.Errorf("case %d: attempts %+v; want both, with usage and reply", i, as)
		}
		for _, a := range as {
			if a.CostUSD < 0 || a.CostUSD > store.MaxCostUSD {
				t.Errorf("case %d: attempt %d cost %v, want within the ledger's range", i, a.No, a.CostUSD)
			}
		}
	}
	// Bare: counts only, whatever the text held.
	r := result(jobID("salv", 3), "y", "shape")
	b := r.Salvage(errString("refused"), true)
	if a := b.AttemptRows[0]; a.Raw != "" || a.Request != nil || a.Errors != nil || a.TokensIn != 100 || !strings.Contains(a.ProviderError, "refused") {
		t.Errorf("bare salvage: %+v; want counts only, saying why", a)
	}
	if r.AttemptRows[0].Raw != "y" {
		t.Errorf("Salvage changed the result it was given")
	}
}

type errString string

func (e errString) Error() string { return string(e) }
