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
	"github.com/fixpoint-dev/fixpoint/store"
)

// A result the ledger refuses for its data is still made of paid calls:
// here a price table's typo (a dollar a token a million times over) makes
// a plausible call cost more than the ledger's cost column holds. Each
// call keeps its row, its cost clamped, and the job ends failed, saying
// why, at its first delivery, instead of being handed back to pay for
// the same call on every delivery with no row kept of any of them.
func TestRefusedResultKeepsEveryPaidCall(t *testing.T) {
	t.Parallel()
	const n = 3
	h := newHarness(t, harnessConfig{})
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","model":"typo-model","choices":[{"message":{"content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":10}}`,
			`{"name":"Ann","age":30,"tier":"pro"}`)
	}))
	t.Cleanup(srv.Close)
	cfg := h.enqueueConfig("ovf")
	cfg.Model = "typo-model"
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	wc := h.workerConfig(h.client(func(c *llm.Config) { c.BaseURL = srv.URL + "/v1" }))
	var err error
	if wc.Loop.Prices, err = repair.ParsePrices(repair.DefaultPrices(), []byte(`{"typo-model":{"input_per_mtok":1e15,"output_per_mtok":1e15}}`)); err != nil {
		t.Fatal(err)
	}
	rw := h.startWorker(wc, nil, nil)
	h.waitDone("ovf", n, 30*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Errorf("worker: %v", err)
	}
	rows := h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'ovf:%'`) +
		h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'ovf:%'`)
	if got := calls.Load(); int64(rows) != got || got != n {
		t.Errorf("%d paid calls for %d jobs and %d attempt rows; want one call per job, each with its row", got, n, rows)
	}
	for i := 1; i <= n; i++ {
		j, as := h.job(jobID("ovf", i))
		if j.Status != fixpoint.StatusFailed || !strings.Contains(j.Error, "ledger refused the result") {
			t.Errorf("job %d: %s (%q); want failed, saying the ledger refused its result", i, j.Status, j.Error)
		}
		if j.Deliveries != 1 {
			t.Errorf("job %d: final at delivery %d, want 1", i, j.Deliveries)
		}
		if len(as) != 1 {
			t.Fatalf("job %d: %d attempt rows, want 1", i, len(as))
		}
		if a := as[0]; a.TokensIn != 50 || a.TokensOut != 10 || a.CostUSD < store.MaxCostUSD-1 || !strings.Contains(a.Raw, "Ann") {
			t.Errorf("job %d: attempt %d in, %d out, $%f, reply %q; want its usage and reply kept, its cost clamped to the ledger's most", i, a.TokensIn, a.TokensOut, a.CostUSD, a.Raw)
		}
	}
	if got := strings.Count(h.logs.String(), "ledger refused the result"); got != n {
		t.Errorf("the refusal is logged %d times, want once a job:\n%s", got, h.logs.tail(20))
	}
}
