package repair_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// TestStepChargesImplausibleUsageByEstimate: a reply (or a billed body that
// did not decode) whose usage cannot be true is priced by the estimate,
// never below zero or past what the ledger holds, and the attempt keeps
// the reported counts in its provider_error; the reply itself stands.
func TestStepChargesImplausibleUsageByEstimate(t *testing.T) {
	t.Parallel()
	for _, u := range []fixpoint.Usage{
		{InputTokens: -1000000, OutputTokens: -99999999},
		{InputTokens: 1e18, OutputTokens: 1e18},
		{InputTokens: 10, OutputTokens: 2, CachedInputTokens: 1e9},
	} {
		step, err := repair.Start(costJob(t), nil, repair.Config{Prices: costPrices})
		if err != nil {
			t.Fatal(err)
		}
		req := step.Next().Request
		estIn := repair.EstimateTokens(req) - req.MaxTokens
		const text = `{"a": 1}` // 8 bytes: 2 output tokens by estimate
		a, act := step.Feed(replyWith(text, u), nil, time.Now())
		if !act.Done() || !a.Valid {
			t.Fatalf("%+v: valid=%v, next %+v; want the valid reply to stand", u, a.Valid, act)
		}
		want := (float64(estIn)*2 + 2*8) / 1e6
		if a.TokensIn != estIn || a.TokensOut != 2 || a.TokensCached != 0 || !near(a.CostUSD, want) || a.CostUSD < 0 {
			t.Errorf("%+v: charged %d in, %d out, %d cached, $%.9f; want the estimate %d in, 2 out, $%.9f", u, a.TokensIn, a.TokensOut, a.TokensCached, a.CostUSD, estIn, want)
		}
		if res := step.Result(); res.CostUSD != a.CostUSD || res.TokensIn != estIn {
			t.Errorf("%+v: result cost $%.9f, %d tokens in; want the attempt's", u, res.CostUSD, res.TokensIn)
		}
		if !strings.Contains(a.ProviderError, "usage anomaly") || !strings.Contains(a.ProviderError, "input "+strconv.Itoa(u.InputTokens)) {
			t.Errorf("%+v: provider_error %q does not keep the reported usage", u, a.ProviderError)
		}
	}

	// A body that did not decode, billed with usage that cannot be true.
	step, err := repair.Start(costJob(t), nil, repair.Config{Prices: costPrices})
	if err != nil {
		t.Fatal(err)
	}
	step.Next()
	perr := &fixpoint.ProviderError{Class: fixpoint.ClassTooLarge, Status: 200, Message: "too large", Billed: fixpoint.Usage{InputTokens: -5, OutputTokens: -1e15}}
	a, _ := step.Feed(nil, perr, time.Now())
	if a.CostUSD < 0 || a.TokensIn < 0 || a.TokensOut < 0 || !strings.Contains(a.ProviderError, "usage anomaly") {
		t.Errorf("billed anomaly: %d in, %d out, $%.9f, %q; want the estimate and a note", a.TokensIn, a.TokensOut, a.CostUSD, a.ProviderError)
	}

	// Plausible usage is charged as reported, with no note.
	step, err = repair.Start(costJob(t), nil, repair.Config{Prices: costPrices})
	if err != nil {
		t.Fatal(err)
	}
	step.Next()
	a, _ = step.Feed(replyWith(`{"a": 1}`, fixpoint.Usage{InputTokens: 5_000_000, OutputTokens: 7}), nil, time.Now())
	if a.TokensIn != 5_000_000 || a.ProviderError != "" {
		t.Errorf("plausible usage: %d in, note %q; want as reported, none", a.TokensIn, a.ProviderError)
	}
}
