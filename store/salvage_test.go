package store_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

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

// A wave outcome the ledger refuses is taken once salvaged, whether it
// finished its job or the job was to go on: the attempt kept with its
// usage (and its reply, unless only its counts can be kept), the job final,
// failed, naming the refusal, its place in the wave ended.
func TestSalvageRefusedWaveOutcome(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "swo", 3)
	ctx := context.Background()
	w, taken, err := s.RecordWave(ctx, store.WaveParams{Batch: "swo", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("swo", 1, 1, 2, 3), Owner: "a", Lease: time.Minute})
	if err != nil || len(taken) != 3 {
		t.Fatalf("record wave: %d requests, %v", len(taken), err)
	}
	final := result(jobID("swo", 1), "x", "")
	final.CostUSD = 5e10
	costly := waveAttempt(1, "")
	costly.CostUSD = 5e10
	unholdable := waveAttempt(1, "shape")
	unholdable.Errors = json.RawMessage(`[1e200000]`)
	outs := []store.WaveOutcome{
		{WaveID: w.ID, CustomID: taken[0].CustomID, Attempt: costly, Result: &final},
		{WaveID: w.ID, CustomID: taken[1].CustomID, Attempt: costly,
			Totals: &store.Result{Attempts: 1, Calls: 1, TokensIn: 100, TokensOut: 10, CostUSD: 5e10}},
		{WaveID: w.ID, CustomID: taken[2].CustomID, Attempt: unholdable,
			Totals: &store.Result{Attempts: 1, Calls: 1, TokensIn: 100, TokensOut: 10, CostUSD: 0.001}},
	}
	for i, o := range outs {
		one := []store.WaveOutcome{o}
		_, refusal := s.RecordWaveOutcomes(ctx, one)
		if !store.IsRefused(refusal) {
			t.Fatalf("outcome %d: RecordWaveOutcomes = %v, want a refusal", i, refusal)
		}
		for _, bare := range []bool{false, true} {
			one[0] = o.Salvage(refusal, bare)
			if _, err = s.RecordWaveOutcomes(ctx, one); !store.IsRefused(err) {
				break
			}
		}
		if err != nil || !one[0].Inserted || !one[0].Finished {
			t.Fatalf("outcome %d salvaged: inserted %v, finished %v, %v; want both", i, one[0].Inserted, one[0].Finished, err)
		}
		if n, err := s.RecordWaveOutcomes(ctx, one); n != 0 || err != nil {
			t.Errorf("outcome %d recorded again: %d attempts inserted (%v), want none", i, n, err)
		}
		j, as, err := s.Job(ctx, jobID("swo", i+1))
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != fixpoint.StatusFailed || !strings.Contains(j.Error, "ledger refused the result") || len(j.Value) != 0 || j.Attempts != 1 {
			t.Errorf("outcome %d: job %s %q value %s, %d attempts; want failed, naming the refusal, its one attempt", i, j.Status, j.Error, j.Value, j.Attempts)
		}
		if len(as) != 1 || as[0].TokensIn != 100 || as[0].CostUSD < 0 || as[0].CostUSD > store.MaxCostUSD || (i < 2) != (as[0].Raw != "") {
			t.Errorf("outcome %d: attempts %+v; want its one, with usage, its cost in range, its reply unless bare", i, as)
		}
	}
	if placed, err := s.PlacedJobs(ctx, w.ID); err != nil || len(placed) != 0 {
		t.Errorf("placed in the wave after the salvage: %v (%v), want none", placed, err)
	}
}
