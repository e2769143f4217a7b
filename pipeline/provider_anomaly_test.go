package pipeline_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// usageServer is an OpenAI-compatible server that answers every chat
// completion with a valid record and the usage given, counting the calls.
func usageServer(t *testing.T, usage string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.Error(w, `{"error":{"message":"no route"}}`, http.StatusNotFound)
			return
		}
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","model":"m","choices":[{"message":{"content":%q},"finish_reason":"stop"}],"usage":%s}`,
			`{"name":"Ann","age":30,"tier":"pro"}`, usage)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// A reply claiming 10^18 tokens is a provider anomaly: the attempt is
// charged by estimate and its row written, once per call. Priced as
// reported it overflowed the ledger's cost column: the result was refused,
// the call paid for again on every delivery, and no row kept any of them.
func TestHugeUsageStillLeavesAnAttemptRow(t *testing.T) {
	t.Parallel()
	const n = 3
	h := newHarness(t, harnessConfig{})
	srv, calls := usageServer(t, `{"prompt_tokens":1000000000000000000,"completion_tokens":1000000000000000000}`)
	cfg := h.enqueueConfig("b")
	cfg.Model = "anomaly-model"
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	wc := h.workerConfig(h.client(func(c *llm.Config) { c.BaseURL = srv.URL + "/v1" }))
	var err error
	if wc.Loop.Prices, err = repair.ParsePrices(repair.DefaultPrices(), []byte(`{"anomaly-model":{"input_per_mtok":3,"output_per_mtok":15}}`)); err != nil {
		t.Fatal(err)
	}
	rw := h.startWorker(wc, nil, nil)
	h.waitDone("b", n, 30*time.Second)
	rw.stop(t, 20*time.Second)
	if got := calls.Load(); got != n {
		t.Errorf("%d calls for %d jobs, want one each", got, n)
	}
	for i := 1; i <= n; i++ {
		j, as := h.job(jobID("b", i))
		if j.Status != fixpoint.StatusValid || len(as) != 1 {
			t.Fatalf("job %d: %s with %d attempt rows (%s); want valid with 1", i, j.Status, len(as), j.Error)
		}
		a := as[0]
		if a.TokensIn <= 0 || a.TokensIn > fixpoint.MaxCallTokens || a.TokensOut <= 0 || a.CostUSD <= 0 || a.CostUSD > 1 {
			t.Errorf("job %d: attempt charged %d in, %d out, $%f; want the estimate", i, a.TokensIn, a.TokensOut, a.CostUSD)
		}
		if !strings.Contains(a.ProviderError, "1000000000000000000") {
			t.Errorf("job %d: provider_error %q does not keep the reported usage", i, a.ProviderError)
		}
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// Negative usage neither lifts a batch's spend cap nor takes the worker
// down (a Prometheus counter panics on a negative Add): every call is
// charged by estimate, the cap stops the batch, nothing spent is below
// zero.
func TestNegativeUsageKeepsTheCap(t *testing.T) {
	t.Parallel()
	const n = 12
	h := newHarness(t, harnessConfig{})
	srv, calls := usageServer(t, `{"prompt_tokens":-1000000,"completion_tokens":-99999999}`)
	cfg := h.enqueueConfig("b")
	cfg.Model = "anomaly-model"
	// Each call is a few hundred input tokens by estimate, some $0.03 at
	// $100 a million (output is free, so what a call holds is what it
	// costs): the cap pays for a few.
	dollars := 0.1
	cfg.Cap.MaxCostUSD = &dollars
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	wc := h.workerConfig(h.client(func(c *llm.Config) { c.BaseURL = srv.URL + "/v1" }))
	wc.Concurrency = 1
	var err error
	if wc.Loop.Prices, err = repair.ParsePrices(repair.DefaultPrices(), []byte(`{"anomaly-model":{"input_per_mtok":100,"output_per_mtok":0}}`)); err != nil {
		t.Fatal(err)
	}
	rw := h.startWorker(wc, nil, nil)
	h.waitDone("b", n, 30*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	p := h.progress("b")
	if p.Valid == 0 || p.Valid == n || p.OverBudget != n-p.Valid || calls.Load() != int64(p.Valid) {
		t.Errorf("%d valid, %d over budget of %d jobs after %d calls; want the cap to stop the batch partway", p.Valid, p.OverBudget, n, calls.Load())
	}
	sp, err := h.st.BatchSpend(h.ctx, "b")
	if err != nil || sp.CostUSD <= 0 || sp.CostUSD > dollars || sp.Tokens <= 0 {
		t.Errorf("spend %+v %v; want above zero, within the $%g cap", sp, err, dollars)
	}
	h.checkInvariants("b", invariants{Jobs: n})
}
