package pipeline_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
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

// A spill file (what a worker stopped while the ledger was down kept)
// holding records the ledger refuses is written as the ledger can take
// them, not kept to fail at every start with its paid calls unrecorded.
func TestSpillOfRefusedRecordsIsSalvaged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	h.enqueue("sp", 2)
	call := store.Attempt{No: 1, Raw: `{"name":"Ann"}`, Class: "shape", TokensIn: 50, TokensOut: 10, CostUSD: 5e10, Model: "typo-model", StartedAt: time.Now()}
	recs := []any{
		map[string]any{"result": store.Result{JobID: jobID("sp", 1), Status: fixpoint.StatusValid, Value: []byte(`{"name":"Ann"}`),
			Attempts: 1, Calls: 1, CostUSD: 5e10, Deliveries: 1, AttemptRows: []store.Attempt{call}}},
		map[string]any{"interrupted": store.Interruption{JobID: jobID("sp", 2), Delivery: 1, Reason: store.InterruptShutdown, Attempts: []store.Attempt{call}}},
	}
	var body []byte
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		body = append(append(body, line...), '\n')
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "unwritten-1-1.jsonl")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := pipeline.ReplaySpill(h.ctx, dir, h.st, slog.New(slog.DiscardHandler))
	if err != nil || n != 2 {
		t.Fatalf("replay wrote %d records, error %v; want both", n, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the spill file is still there (%v)", err)
	}
	if j, as := h.job(jobID("sp", 1)); j.Status != fixpoint.StatusFailed || len(as) != 1 || as[0].TokensIn != 50 {
		t.Errorf("spilled result: %s (%q) with %d attempts; want failed with its call", j.Status, j.Error, len(as))
	}
	if got := h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id = $1 AND tokens_in = 50`, jobID("sp", 2)); got != 1 {
		t.Errorf("%d interrupted rows of the spilled call, want 1", got)
	}
}

// A wave whose replies the ledger refuses (the price table's typo again,
// at batch prices) keeps every paid reply: the outcomes the ledger takes
// (requests the provider errored, unpaid) are recorded as they are, each
// refused one with its cost clamped, its job failed saying why. The wave
// ends; it was processed again at every poll, its results downloaded and
// refused each time, none of the chunk's outcomes recorded, and a
// draining worker never exited.
func TestBatchDeliveryRefusedOutcomeKeepsEveryPaidReply(t *testing.T) {
	t.Parallel()
	const n = 8
	h := newHarness(t, harnessConfig{Sim: waveSim(50*time.Millisecond, 0, 0.125)})
	h.enqueueBatch("wr", llm.ProviderOpenAI, n, time.Hour)
	cfg := h.waveWorker(llm.ProviderOpenAI, h.batchClient(llm.ProviderOpenAI))
	var err error
	if cfg.Loop.Prices, err = repair.ParsePrices(repair.DefaultPrices(), []byte(`{"sim-model":{"input_per_mtok":1e17,"output_per_mtok":1e17}}`)); err != nil {
		t.Fatal(err)
	}
	cfg.Drain = true
	if err := h.startWorker(cfg, nil, nil).wait(t, 60*time.Second); err != nil {
		t.Fatalf("worker: %v\n%s", err, h.logs.tail(20))
	}
	h.checkWaveLedger("wr", n)
	st := h.sim.srv.Stats()
	if st.Batch.Errored == 0 || st.Batch.Succeeded == 0 {
		t.Fatalf("provider batches: %+v; want both errored requests and replies", st.Batch)
	}
	if st.Batch.Succeeded != n || st.Replies != 0 {
		t.Errorf("%d replies in waves, %d realtime; want one a job in its waves, each ending it", st.Batch.Succeeded, st.Replies)
	}
	if got := h.sqlInt(`SELECT count(*) FROM jobs WHERE batch = 'wr' AND status = 'failed' AND error LIKE '%ledger refused the result%'`); got != n {
		t.Errorf("%d of %d jobs failed naming the refusal\n%s", got, n, h.logs.tail(20))
	}
	if got := h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'wr:%' AND class <> 'provider' AND tokens_in > 0 AND cost_usd >= $1`, store.MaxCostUSD-1); got != n {
		t.Errorf("%d reply rows with their usage, their cost clamped; want the %d replies", got, n)
	}
	if got := h.sqlInt(`SELECT count(*) FROM attempts WHERE job_id LIKE 'wr:%' AND class = 'provider' AND provider_class = 'server'`); int64(got) != st.Batch.Errored {
		t.Errorf("%d rows of errored requests, kept as they were; the provider errored %d", got, st.Batch.Errored)
	}
	if got := strings.Count(h.logs.String(), "ledger refused a wave outcome"); int64(got) != st.Batch.Succeeded {
		t.Errorf("the refusal is logged %d times, want once a refused reply (%d)", got, st.Batch.Succeeded)
	}
}
