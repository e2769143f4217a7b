package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// What the calls cost over time: by step and batch, a call where it
// started, the range bounded; the hourly rollup it reads is exact.
func TestCostsOverTime(t *testing.T) {
	t.Parallel()
	s, hash := setup(t, "ca", 2)
	ctx := context.Background()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "cb", Settings: []byte(`{}`), TotalJobs: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("cb", hash, 1)); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	at := func(r store.Result, cost float64, starts ...time.Time) store.Result {
		for i := range r.AttemptRows {
			r.AttemptRows[i].CostUSD, r.AttemptRows[i].StartedAt = cost, starts[i]
		}
		return r
	}
	// ca-1: 2 calls on day 1 ($0.25 each); ca-2: 1 on day 2 and 1 on day 4
	// (outside the range); cb-1: 1 on day 1 ($1).
	rs := []store.Result{
		at(result(jobID("ca", 1), "a", "shape", ""), 0.25, day.Add(time.Hour), day.Add(2*time.Hour)),
		at(result(jobID("ca", 2), "b", "shape", ""), 0.5, day.Add(25*time.Hour), day.Add(73*time.Hour)),
		at(result(jobID("cb", 1), "c", ""), 1, day.Add(23*time.Hour)),
	}
	if _, err := s.SaveResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
	// A paid call of cb-1 kept apart (handed back) on day 2: not one of
	// the attempts, which the batch page's cost table counts, so not here.
	if err := s.SaveInterrupted(ctx, []store.Interruption{
		{JobID: jobID("cb", 1), Delivery: 1, Reason: store.InterruptHandedBack, Attempts: []store.Attempt{{No: 1, Raw: "x", CostUSD: 0.125, TokensIn: 7, TokensOut: 1, StartedAt: day.Add(30 * time.Hour)}}},
		{JobID: jobID("cb", 1), Delivery: 2, Reason: store.InterruptOutage, Hold: 1, Attempts: []store.Attempt{{No: 1, StartedAt: day.Add(30 * time.Hour)}}},
	}); err != nil {
		t.Fatal(err)
	}
	ps, err := s.CostsOverTime(ctx, day, day.Add(3*24*time.Hour), store.CostStepDay)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.CostPoint{
		{At: day, Batch: "ca", CostUSD: 0.5, Calls: 2, Tokens: 220},
		{At: day, Batch: "cb", CostUSD: 1, Calls: 1, Tokens: 110},
		{At: day.Add(24 * time.Hour), Batch: "ca", CostUSD: 0.5, Calls: 1, Tokens: 110},
	}
	if len(ps) != len(want) {
		t.Fatalf("points %+v, want %+v", ps, want)
	}
	for i := range want {
		if !ps[i].At.Equal(want[i].At) || ps[i].Batch != want[i].Batch || ps[i].CostUSD != want[i].CostUSD || ps[i].Calls != want[i].Calls || ps[i].Tokens != want[i].Tokens {
			t.Errorf("point %d: %+v, want %+v", i, ps[i], want[i])
		}
	}
	// By hour: the day's first call at 01:00, its second at 02:00.
	hours, err := s.CostsOverTime(ctx, day, day.Add(3*time.Hour), store.CostStepHour)
	if err != nil || len(hours) != 2 || !hours[0].At.Equal(day.Add(time.Hour)) || hours[1].CostUSD != 0.25 {
		t.Errorf("by hour: %+v (%v); want ca's 2 calls at 01:00 and 02:00", hours, err)
	}
	if drift, err := s.RollupDrift(ctx); err != nil || len(drift) != 0 {
		t.Errorf("the rollups drift from a recount (%v):\n%s", err, strings.Join(drift, "\n"))
	}
	for _, bad := range []struct {
		from, to time.Time
		step     string
	}{{day, day.Add(time.Hour), "week"}, {day, day, store.CostStepDay}, {day, day.Add(401 * 24 * time.Hour), store.CostStepDay},
		{day, day.Add(401 * time.Hour), store.CostStepHour}} {
		if _, err := s.CostsOverTime(ctx, bad.from, bad.to, bad.step); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("range %s to %s by %s: %v, want ErrInvalid", bad.from, bad.to, bad.step, err)
		}
	}
}
