package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// cacheAttempt is an attempt with the given usage, price basis and cost;
// class "" is a valid reply, "provider" no reply.
func cacheAttempt(no int, class, basis string, in, cached, write int64, cost float64) store.Attempt {
	a := store.Attempt{No: no, Raw: fmt.Sprintf("reply %d", no), Class: class, Valid: class == "",
		TokensIn: in, TokensOut: 10, TokensCached: cached, TokensCacheWrite: write, PriceBasis: basis, CostUSD: cost,
		Model: "sim-typical", StartedAt: time.Date(2026, 1, 1, 0, 0, no, 0, time.UTC)}
	switch class {
	case "":
	case "provider":
		a.ProviderClass = "expired"
	default:
		a.Errors = json.RawMessage(`[{"path":"/name","keyword":"required","class":"shape","message":"/name: missing"}]`)
		a.Feedback = "fix /name"
	}
	return a
}

// cacheDataset builds batch "pc" (4 jobs, realtime attempts, three waves
// and a requeued run) and batch "ob" (one realtime job that must not leak
// into pc's figures). The attempts of pc's current runs
// (in/cached/write tokens, basis, cost):
//
//	pc-1 run 1  #1 provider (no reply)  500/0/0      realtime $0.002
//	            #2 valid               1000/600/0    realtime $0.010
//	pc-2 run 2  #1 valid (wave 3)      1000/500/0    batch    $0.0025
//	            (run 1's #1, 400/0/300 realtime $0.004, was requeued: left out)
//	pc-3 run 1  #1 valid (wave 1)      2000/1500/0   batch    $0.005
//	pc-4 run 1  #1 shape (wave 1)      2000/0/1800   batch    $0.006
//	            #2 expired (wave 2)       0/0/0      batch    $0
//	            #3 valid (realtime)     800/800/0    realtime $0.001
//
// Prompt tokens 6800, cached 3400 (50%), cache writes 1800; realtime 3
// attempts $0.013, batch 4 attempts $0.0135.
func cacheDataset(t *testing.T) *store.Store {
	t.Helper()
	s, hash := setup(t, "pc", 4)
	ctx := context.Background()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "ob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("ob", hash, 1)); err != nil {
		t.Fatal(err)
	}
	save := func(r store.Result) {
		t.Helper()
		if won, err := s.SaveResults(ctx, []store.Result{r}); err != nil || !won[0] {
			t.Fatalf("save %s: won %v, %v", r.JobID, won, err)
		}
	}
	save(store.Result{JobID: "ob-1", Status: fixpoint.StatusValid, Value: json.RawMessage(`{}`), Attempts: 1, Calls: 1,
		AttemptRows: []store.Attempt{cacheAttempt(1, "", "realtime", 9000, 9000, 9000, 1)}})
	save(store.Result{JobID: "pc-1", Status: fixpoint.StatusValid, Value: json.RawMessage(`{}`), Attempts: 2, Calls: 2,
		AttemptRows: []store.Attempt{cacheAttempt(1, "provider", "", 500, 0, 0, 0.002), cacheAttempt(2, "", "realtime", 1000, 600, 0, 0.010)}})
	// pc-2's first run is requeued: its attempt stays in the ledger, in run 1.
	save(store.Result{JobID: "pc-2", Status: fixpoint.StatusInvalid, FinalClass: "shape", Attempts: 1, Calls: 1,
		AttemptRows: []store.Attempt{cacheAttempt(1, "shape", "realtime", 400, 0, 300, 0.004)}})
	if res, err := s.Requeue(ctx, store.RequeueParams{Batch: "pc", Statuses: []fixpoint.Status{fixpoint.StatusInvalid}, Settings: json.RawMessage(`{}`)}); err != nil || res.Run != 2 || res.Total() != 1 {
		t.Fatalf("requeue: %+v %v", res, err)
	}

	// Wave 1: pc-3 valid, pc-4 needs another attempt.
	w1, taken, err := s.RecordWave(ctx, store.WaveParams{Batch: "pc", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("pc", 1, 3, 4), Owner: "t", Lease: time.Minute})
	if err != nil || len(taken) != 2 {
		t.Fatalf("wave 1: %v %v", taken, err)
	}
	ok := result("pc-3", "ok", "")
	ok.AttemptRows = nil
	if _, err := s.RecordWaveOutcomes(ctx, []store.WaveOutcome{
		{WaveID: w1.ID, CustomID: taken[0].CustomID, Attempt: cacheAttempt(1, "", "batch", 2000, 1500, 0, 0.005), Result: &ok},
		{WaveID: w1.ID, CustomID: taken[1].CustomID, Attempt: cacheAttempt(1, "shape", "batch", 2000, 0, 1800, 0.006),
			Totals: &store.Result{Attempts: 1, Calls: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	// Wave 2: pc-4's second attempt expires; it ends realtime.
	w2, taken2, err := s.RecordWave(ctx, store.WaveParams{Batch: "pc", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("pc", 2, 4), From: w1.ID, Owner: "t", Lease: time.Minute})
	if err != nil || len(taken2) != 1 {
		t.Fatalf("wave 2: %v %v", taken2, err)
	}
	if _, err := s.RecordWaveOutcomes(ctx, []store.WaveOutcome{
		{WaveID: w2.ID, CustomID: taken2[0].CustomID, Attempt: cacheAttempt(2, "provider", "batch", 0, 0, 0, 0),
			Totals: &store.Result{Attempts: 2, Calls: 2}},
	}); err != nil {
		t.Fatal(err)
	}
	save(store.Result{JobID: "pc-4", Status: fixpoint.StatusValid, Value: json.RawMessage(`{}`), Attempts: 3, Calls: 3, Recorded: 2,
		AttemptRows: []store.Attempt{cacheAttempt(3, "", "realtime", 800, 800, 0, 0.001)}})
	// Wave 3: pc-2's second run.
	reqs := waveReqs("pc", 1, 2)
	reqs[0].Run = 2
	w3, taken3, err := s.RecordWave(ctx, store.WaveParams{Batch: "pc", Run: 2, Provider: "openai", Model: "m",
		Requests: reqs, Owner: "t", Lease: time.Minute})
	if err != nil || len(taken3) != 1 {
		t.Fatalf("wave 3: %v %v", taken3, err)
	}
	ok2 := result("pc-2", "ok", "")
	ok2.AttemptRows, ok2.Run = nil, 2
	if _, err := s.RecordWaveOutcomes(ctx, []store.WaveOutcome{
		{WaveID: w3.ID, CustomID: taken3[0].CustomID, Attempt: cacheAttempt(1, "", "batch", 1000, 500, 0, 0.0025), Result: &ok2},
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCacheDelivery: the prompt-cache figures count only replies of the
// jobs' current runs of the batch; every attempt of those runs is split by
// its price basis.
func TestCacheDelivery(t *testing.T) {
	t.Parallel()
	s := cacheDataset(t)
	ctx := context.Background()
	got, err := s.CacheDelivery(ctx, "pc")
	if err != nil {
		t.Fatal(err)
	}
	want := store.CacheDelivery{PromptTokens: 6800, CachedTokens: 3400, CacheWriteTokens: 1800, CacheHitRate: 0.5,
		Realtime: store.BasisSpend{Attempts: 3, CostUSD: 0.013}, Batch: store.BasisSpend{Attempts: 4, CostUSD: 0.0135}}
	if !approx(got.CacheHitRate, want.CacheHitRate) || !approx(got.Realtime.CostUSD, want.Realtime.CostUSD) ||
		!approx(got.Batch.CostUSD, want.Batch.CostUSD) {
		t.Fatalf("CacheDelivery(pc) =\n%+v\nwant\n%+v", got, want)
	}
	got.CacheHitRate, got.Realtime.CostUSD, got.Batch.CostUSD = want.CacheHitRate, want.Realtime.CostUSD, want.Batch.CostUSD
	if got != want {
		t.Fatalf("CacheDelivery(pc) =\n%+v\nwant\n%+v", got, want)
	}

	// The waves the figures came through, as the summary lists them.
	waves, err := s.Waves(ctx, "pc")
	if err != nil {
		t.Fatal(err)
	}
	var nums []string
	for _, w := range waves {
		nums = append(nums, fmt.Sprintf("%d:%d", w.Number, w.Requests))
	}
	if fmt.Sprint(nums) != "[1:2 2:1 3:1]" {
		t.Errorf("waves (number:requests) = %v, want [1:2 2:1 3:1]", nums)
	}

	// A batch with no attempts has no rate, not NaN.
	if err := s.PutBatch(ctx, store.BatchParams{Name: "none"}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"none", "no such batch"} {
		if got, err := s.CacheDelivery(ctx, b); err != nil || got != (store.CacheDelivery{}) {
			t.Errorf("CacheDelivery(%q) = %+v, %v; want zero", b, got, err)
		}
	}
}
