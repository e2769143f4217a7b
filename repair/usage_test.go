package repair_test

import (
	"reflect"
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
	a, _ = step.Feed(replyWith(`{"a": 1}`, fixpoint.Usage{InputTokens: 3000, OutputTokens: 7}), nil, time.Now())
	if a.TokensIn != 3000 || a.ProviderError != "" {
		t.Errorf("plausible usage: %d in, note %q; want as reported, none", a.TokensIn, a.ProviderError)
	}
}

// Usage within fixpoint.MaxCallTokens but beyond what the request could
// cost (input past its bytes, output past its max_tokens) is charged by
// estimate, from any driver: priced as reported it spent a batch's cap
// several times over.
func TestStepChargesUsageBeyondTheRequestByEstimate(t *testing.T) {
	t.Parallel()
	for _, u := range []fixpoint.Usage{
		{InputTokens: 5_000_000, OutputTokens: 5_000_000},
		{InputTokens: 100, OutputTokens: fixpoint.MaxTokensDefault + 1},
		{InputTokens: 5_000_000, OutputTokens: 1},
	} {
		step, err := repair.Start(costJob(t), nil, repair.Config{Prices: costPrices})
		if err != nil {
			t.Fatal(err)
		}
		req := step.Next().Request
		est := fixpoint.EstimateUsage(req, 8)
		a, _ := step.Feed(replyWith(`{"a": 1}`, u), nil, time.Now())
		if !a.Valid || int(a.TokensIn) != est.InputTokens || int(a.TokensOut) != est.OutputTokens {
			t.Errorf("%+v: valid %v, charged %d in, %d out; want the reply to stand, charged %+v", u, a.Valid, a.TokensIn, a.TokensOut, est)
		}
		if !strings.Contains(a.ProviderError, "usage anomaly") || !strings.Contains(a.ProviderError, "over") {
			t.Errorf("%+v: provider_error %q; want the reported usage and why it cannot be", u, a.ProviderError)
		}
	}
}

// A 2xx reply that could not be read was made and billed: it is an
// attempt like any failed one, charged (by estimate when its usage is
// not known), counted against MaxAttempts, and the same request goes
// again; after the last attempt the job fails with class provider. It
// was a transient failure, waited out and paid for again without end.
func TestStepBoundsPaidRepliesItCannotRead(t *testing.T) {
	t.Parallel()
	step, err := repair.Start(costJob(t), nil, repair.Config{Prices: costPrices})
	if err != nil {
		t.Fatal(err)
	}
	act := step.Next()
	first := act.Request
	html := "<html>502 bad gateway</html>"
	for i := 1; i <= 3; i++ {
		if act.Request == nil {
			t.Fatalf("call %d: no request (%+v); want the same request again", i, act)
		}
		if act.Request != first && (len(act.Request.Messages) != len(first.Messages) || !reflect.DeepEqual(act.Request.Messages[0], first.Messages[0])) {
			t.Errorf("call %d: request %+v; want the first one again", i, act.Request.Messages)
		}
		perr := &fixpoint.ProviderError{Class: fixpoint.ClassBadResponse, Status: 200, Message: "decode: not JSON",
			Size: int64(len(html)), Head: html}
		var a *fixpoint.Attempt
		a, act = step.Feed(nil, perr, time.Now())
		est := fixpoint.EstimateUsage(act.Request, int64(len(html)))
		if act.Request == nil {
			est = fixpoint.EstimateUsage(first, int64(len(html)))
		}
		if a.Class != fixpoint.OutcomeProvider || a.Raw != html || int(a.TokensIn) != est.InputTokens || a.CostUSD <= 0 {
			t.Errorf("call %d: class %q, raw %q, %d in, $%f; want a provider attempt keeping the body, charged %+v", i, a.Class, a.Raw, a.TokensIn, a.CostUSD, est)
		}
		if act.Err != nil {
			t.Fatalf("call %d: %v; a paid reply is no transient failure", i, act.Err)
		}
	}
	if !act.Done() {
		t.Fatalf("after 3 paid replies: %+v; want the job final (MaxAttempts 3)", act)
	}
	res := step.Result()
	if res.Status != fixpoint.StatusFailed || res.Class != fixpoint.OutcomeProvider || len(res.Attempts) != 3 || res.Calls != 3 || res.CostUSD <= 0 {
		t.Errorf("result %s/%s, %d attempts, %d calls, $%f; want failed/provider after 3 charged attempts", res.Status, res.Class, len(res.Attempts), res.Calls, res.CostUSD)
	}

	// Continued from its attempts (a later wave, a redelivery), the paid
	// replies still count.
	step, err = repair.Start(costJob(t), res, repair.Config{Prices: costPrices})
	if err != nil {
		t.Fatal(err)
	}
	if act := step.Next(); !act.Done() {
		t.Errorf("resumed after 3 paid replies: %+v; want no further call", act)
	}

	// A reply too large is not asked for again: the same reply would come.
	step, err = repair.Start(costJob(t), nil, repair.Config{Prices: costPrices})
	if err != nil {
		t.Fatal(err)
	}
	step.Next()
	a, act := step.Feed(nil, &fixpoint.ProviderError{Class: fixpoint.ClassTooLarge, Status: 200, Size: 50 << 20, Head: "{"}, time.Now())
	if !act.Done() || a.TokensOut != fixpoint.MaxTokensDefault || a.CostUSD <= 0 {
		t.Errorf("too large: next %+v, %d out, $%f; want final, charged the output cap", act, a.TokensOut, a.CostUSD)
	}
}
