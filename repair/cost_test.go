package repair_test

import (
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const costSchema = `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`

// costPrices price the test model: input 2, output 8, cache reads 0.5,
// cache writes 2.5 dollars per million tokens (batch: half of each).
var costPrices = repair.Prices{"m-test": {InputPerMTok: 2, OutputPerMTok: 8, CachedInputPerMTok: 0.5, CacheWritePerMTok: 2.5}}

func costJob(t *testing.T) *repair.Job {
	t.Helper()
	schema, err := validate.Compile([]byte(costSchema))
	if err != nil {
		t.Fatal(err)
	}
	return &repair.Job{ID: "job-1", Schema: schema, SchemaRaw: []byte(costSchema), Model: "m-test", Prompt: "give a",
		Limits: fixpoint.Limits{MaxAttempts: 3}}
}

func replyWith(text string, u fixpoint.Usage) *fixpoint.Response {
	// The provider reports a dated model: attempts are priced by the
	// job's model all the same.
	return &fixpoint.Response{Text: text, FinishReason: fixpoint.FinishStop, Usage: u, Model: "m-test-2026-01-01", Status: 200}
}

// TestStepAttemptCosts: each attempt records its cache writes, its basis
// and its cost on that basis; the result's cost is their sum.
func TestStepAttemptCosts(t *testing.T) {
	t.Parallel()
	// Attempt 1 writes the cache and is invalid; attempt 2 reads it and is
	// valid.
	u1 := fixpoint.Usage{InputTokens: 1000, OutputTokens: 50, CacheWriteTokens: 800}
	u2 := fixpoint.Usage{InputTokens: 1100, OutputTokens: 20, CachedInputTokens: 800}
	tests := []struct {
		basis  fixpoint.PriceBasis // Config.PriceBasis
		want   fixpoint.PriceBasis // recorded
		c1, c2 float64
	}{
		{"", fixpoint.PriceBasisRealtime, (200*2 + 800*2.5 + 50*8) / 1e6, (300*2 + 800*0.5 + 20*8) / 1e6},
		{fixpoint.PriceBasisRealtime, fixpoint.PriceBasisRealtime, (200*2 + 800*2.5 + 50*8) / 1e6, (300*2 + 800*0.5 + 20*8) / 1e6},
		{fixpoint.PriceBasisBatch, fixpoint.PriceBasisBatch, (200*1 + 800*1.25 + 50*4) / 1e6, (300*1 + 800*0.25 + 20*4) / 1e6},
	}
	for _, tt := range tests {
		step, err := repair.Start(costJob(t), nil, repair.Config{Prices: costPrices, PriceBasis: tt.basis})
		if err != nil {
			t.Fatal(err)
		}
		step.Next()
		a1, act := step.Feed(replyWith(`{}`, u1), nil, time.Now())
		if act.Request == nil || a1.Valid {
			t.Fatalf("basis %q: attempt 1 valid=%v, next %+v; want a repair request", tt.basis, a1.Valid, act)
		}
		a2, act := step.Feed(replyWith(`{"a": 1}`, u2), nil, time.Now())
		if !act.Done() || !a2.Valid {
			t.Fatalf("basis %q: attempt 2 valid=%v, next %+v; want done", tt.basis, a2.Valid, act)
		}
		res := step.Result()
		for i, want := range []struct {
			write int
			cost  float64
		}{{800, tt.c1}, {0, tt.c2}} {
			a := res.Attempts[i]
			if a.TokensCacheWrite != want.write || a.PriceBasis != tt.want || !near(a.CostUSD, want.cost) {
				t.Errorf("basis %q: attempt %d: cache write %d, basis %q, cost %.9f; want %d, %q, %.9f",
					tt.basis, a.No, a.TokensCacheWrite, a.PriceBasis, a.CostUSD, want.write, tt.want, want.cost)
			}
		}
		if res.TokensCacheWrite != 800 || res.TokensCached != 800 || res.TokensIn != 2100 {
			t.Errorf("basis %q: result tokens in %d, cached %d, cache write %d; want 2100, 800, 800", tt.basis, res.TokensIn, res.TokensCached, res.TokensCacheWrite)
		}
		if !near(res.CostUSD, tt.c1+tt.c2) {
			t.Errorf("basis %q: result cost %.9f, want the attempts' sum %.9f", tt.basis, res.CostUSD, tt.c1+tt.c2)
		}
	}
}

// TestStepCostAsBefore: realtime attempts without cache writes cost what
// the result cost before attempts were priced, Cost of its token totals.
func TestStepCostAsBefore(t *testing.T) {
	t.Parallel()
	step, err := repair.Start(costJob(t), nil, repair.Config{Prices: costPrices})
	if err != nil {
		t.Fatal(err)
	}
	step.Next()
	step.Feed(replyWith(`not json`, fixpoint.Usage{InputTokens: 1234, OutputTokens: 77, CachedInputTokens: 1000}), nil, time.Now())
	step.Feed(nil, &fixpoint.ProviderError{Class: fixpoint.ClassServer, Status: 503, Message: "busy"}, time.Now())
	step.Next()
	step.Feed(replyWith(`{"a": "x"}`, fixpoint.Usage{InputTokens: 1500, OutputTokens: 31, CachedInputTokens: 1200}), nil, time.Now())
	_, act := step.Feed(replyWith(`{"a": 2}`, fixpoint.Usage{InputTokens: 1700, OutputTokens: 12}), nil, time.Now())
	if !act.Done() {
		t.Fatalf("not done: %+v", act)
	}
	res := step.Result()
	if len(res.Attempts) != 4 || res.Status != fixpoint.StatusValid {
		t.Fatalf("%d attempts, status %s; want 4, valid", len(res.Attempts), res.Status)
	}
	if a := res.Attempts[1]; a.Class != fixpoint.OutcomeProvider || a.CostUSD != 0 || a.PriceBasis != fixpoint.PriceBasisRealtime {
		t.Errorf("the failed call: class %s, cost %v, basis %q; want provider, 0, realtime", a.Class, a.CostUSD, a.PriceBasis)
	}
	want := costPrices.Cost("m-test", res.TokensIn, res.TokensOut, res.TokensCached)
	if !near(res.CostUSD, want) || want == 0 {
		t.Errorf("cost %.12f, want %.12f as before", res.CostUSD, want)
	}
}

// TestStepCostAcrossBases: a job continued on another basis (a batch
// job's remainder run realtime near its deadline) keeps each attempt's
// cost on its own basis.
func TestStepCostAcrossBases(t *testing.T) {
	t.Parallel()
	job := costJob(t)
	batch, err := repair.Start(job, nil, repair.Config{Prices: costPrices, PriceBasis: fixpoint.PriceBasisBatch})
	if err != nil {
		t.Fatal(err)
	}
	batch.Next()
	batch.Feed(replyWith(`{}`, fixpoint.Usage{InputTokens: 1000, OutputTokens: 100}), nil, time.Now())
	if _, act := batch.Feed(nil, &fixpoint.ProviderError{Class: fixpoint.ClassServer, Status: 500, Message: "expired"}, time.Now()); act.Err == nil {
		t.Fatalf("want a transient failure, got %+v", act)
	}
	realtime, err := repair.Start(job, batch.Result(), repair.Config{Prices: costPrices})
	if err != nil {
		t.Fatal(err)
	}
	realtime.Next()
	realtime.Feed(replyWith(`{"a": 3}`, fixpoint.Usage{InputTokens: 1200, OutputTokens: 10}), nil, time.Now())
	res := realtime.Result()
	var bases []fixpoint.PriceBasis
	for _, a := range res.Attempts {
		bases = append(bases, a.PriceBasis)
	}
	if len(bases) != 3 || bases[0] != fixpoint.PriceBasisBatch || bases[1] != fixpoint.PriceBasisBatch || bases[2] != fixpoint.PriceBasisRealtime {
		t.Fatalf("bases %v, want batch, batch, realtime", bases)
	}
	want := (1000*1+100*4)/1e6 + (1200*2+10*8)/1e6
	if !near(res.CostUSD, want) {
		t.Errorf("cost %.9f, want %.9f", res.CostUSD, want)
	}
}

// TestStepRequestCacheFields: a job's CacheKey goes on every request it
// makes, with CacheSystem; without one, neither is set. The recorded
// request and its hash do not depend on them.
func TestStepRequestCacheFields(t *testing.T) {
	t.Parallel()
	run := func(key string) *fixpoint.Result {
		job := costJob(t)
		job.CacheKey = key
		step, err := repair.Start(job, nil, repair.Config{Prices: costPrices})
		if err != nil {
			t.Fatal(err)
		}
		act := step.Next()
		for i := 0; !act.Done(); i++ {
			if act.Request.CacheKey != key || act.Request.CacheSystem != (key != "") {
				t.Fatalf("key %q, request %d: CacheKey %q, CacheSystem %v", key, i+1, act.Request.CacheKey, act.Request.CacheSystem)
			}
			text := `{}`
			if i == 2 {
				text = `{"a": 1}`
			}
			_, act = step.Feed(replyWith(text, fixpoint.Usage{InputTokens: 10, OutputTokens: 1}), nil, time.Now())
		}
		return step.Result()
	}
	with, without := run("tickets/3fa1"), run("")
	if len(with.Attempts) != 3 || len(without.Attempts) != 3 {
		t.Fatalf("%d and %d attempts, want 3 each", len(with.Attempts), len(without.Attempts))
	}
	for i := range with.Attempts {
		if with.Attempts[i].RequestHash != without.Attempts[i].RequestHash || string(with.Attempts[i].Request) != string(without.Attempts[i].Request) {
			t.Errorf("attempt %d: the recorded request depends on the cache key", i+1)
		}
	}
}

// An attempt on a model the prices have no row for is marked unpriced: its
// cost is 0 for want of a price, which a report must not show as free.
func TestStepMarksUnpricedAttempts(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]bool{"m-test": false, "fresh-model-2027": true} {
		job := costJob(t)
		job.Model = model
		step, err := repair.Start(job, nil, repair.Config{Prices: costPrices})
		if err != nil {
			t.Fatal(err)
		}
		step.Next()
		a, _ := step.Feed(replyWith(`{"a":1}`, fixpoint.Usage{InputTokens: 100, OutputTokens: 10}), nil, time.Now())
		if a.Unpriced != want || (want && a.CostUSD != 0) || (!want && a.CostUSD == 0) {
			t.Errorf("%s: unpriced %v, cost %v; want unpriced %v", model, a.Unpriced, a.CostUSD, want)
		}
	}
}

// TestFirstAnsweredAttemptValid: a batch request that never ran (an
// errored or expired request: an attempt of class provider, no reply) is
// no try; a job valid on the next is valid on its first answered attempt,
// as a realtime job whose call failed in transport first is. One that
// answered wrong first is not.
func TestFirstAnsweredAttemptValid(t *testing.T) {
	t.Parallel()
	job := costJob(t)
	run := func(first func(s *repair.Step)) fixpoint.Result {
		s, err := repair.Start(job, nil, repair.Config{Prices: costPrices, PriceBasis: fixpoint.PriceBasisBatch})
		if err != nil {
			t.Fatal(err)
		}
		s.Next()
		first(s)
		s.Next()
		s.Feed(replyWith(`{"a": 3}`, fixpoint.Usage{InputTokens: 10, OutputTokens: 5}), nil, time.Now())
		return *s.Result()
	}
	res := run(func(s *repair.Step) {
		s.Feed(nil, &fixpoint.ProviderError{Class: fixpoint.ClassServer, Status: 500, Message: "errored in the batch"}, time.Now())
	})
	if res.Status != fixpoint.StatusValid || len(res.Attempts) != 2 || !res.FirstAttemptValid {
		t.Errorf("after a request that never ran: %s, %d attempts, first attempt valid %v; want valid on its first answered attempt", res.Status, len(res.Attempts), res.FirstAttemptValid)
	}
	res = run(func(s *repair.Step) {
		s.Feed(replyWith(`{}`, fixpoint.Usage{InputTokens: 10, OutputTokens: 5}), nil, time.Now())
	})
	if res.Status != fixpoint.StatusValid || len(res.Attempts) != 2 || res.FirstAttemptValid {
		t.Errorf("after a wrong reply: %s, %d attempts, first attempt valid %v; want repaired", res.Status, len(res.Attempts), res.FirstAttemptValid)
	}
}

// TestStepFlex: a step billed on basis flex asks for the flex tier on
// every request and prices each attempt by the tier the provider says it
// served: flex at batch rates, the default tier (a fallback) or no word
// of a tier at the realtime price.
func TestStepFlex(t *testing.T) {
	t.Parallel()
	u := fixpoint.Usage{InputTokens: 1000, OutputTokens: 100, CachedInputTokens: 400}
	flexCost := (600*1 + 400*0.25 + 100*4) / 1e6
	fullCost := (600*2 + 400*0.5 + 100*8) / 1e6
	for _, tc := range []struct {
		served    string
		wantBasis fixpoint.PriceBasis
		wantCost  float64
	}{
		{"flex", fixpoint.PriceBasisFlex, flexCost},
		{"default", fixpoint.PriceBasisRealtime, fullCost},
		{"", fixpoint.PriceBasisRealtime, fullCost},
	} {
		step, err := repair.Start(costJob(t), nil, repair.Config{Prices: costPrices, PriceBasis: fixpoint.PriceBasisFlex})
		if err != nil {
			t.Fatal(err)
		}
		act := step.Next()
		if act.Request == nil || act.Request.ServiceTier != fixpoint.ServiceTierFlex {
			t.Fatalf("served %q: first request %+v, want one asking for flex", tc.served, act.Request)
		}
		reply := replyWith(`{}`, u)
		reply.ServiceTier = tc.served
		a, act := step.Feed(reply, nil, time.Now())
		if act.Request == nil || act.Request.ServiceTier != fixpoint.ServiceTierFlex {
			t.Fatalf("served %q: repair request %+v, want one asking for flex", tc.served, act.Request)
		}
		if a.ServiceTier != tc.served || a.PriceBasis != tc.wantBasis || !near(a.CostUSD, tc.wantCost) {
			t.Errorf("served %q: attempt tier %q, basis %q, cost %.9f; want %q, %q, %.9f",
				tc.served, a.ServiceTier, a.PriceBasis, a.CostUSD, tc.served, tc.wantBasis, tc.wantCost)
		}
	}
	// A realtime step asks for no tier.
	step, err := repair.Start(costJob(t), nil, repair.Config{Prices: costPrices})
	if err != nil {
		t.Fatal(err)
	}
	if act := step.Next(); act.Request.ServiceTier != "" {
		t.Errorf("realtime request asks for tier %q", act.Request.ServiceTier)
	}
}
