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
)

// A model the provider does not have is a set-up error of its lane, not a
// failure of each job: the worker stops at once, saying so once, and
// hands its jobs back (they stay queued, no delivery burnt on a
// bad_request); once the model is there, a worker finishes the batch.
func TestModelNotFoundStopsTheWorker(t *testing.T) {
	t.Parallel()
	const n = 6
	h := newHarness(t, harnessConfig{})
	var have atomic.Bool
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if !have.Load() {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"message":"The model `+"`gpt-9-typo`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
			return
		}
		fmt.Fprintf(w, `{"id":"c1","model":"gpt-9-typo","choices":[{"message":{"content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":10}}`,
			`{"name":"Ann","age":30,"tier":"pro"}`)
	}))
	t.Cleanup(srv.Close)
	cfg := h.enqueueConfig("m")
	cfg.Model = "gpt-9-typo"
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	client := h.client(func(c *llm.Config) { c.BaseURL = srv.URL + "/v1" })
	wc := h.workerConfig(client)
	wc.Concurrency = 2
	rw := h.startWorker(wc, nil, nil)
	err := rw.wait(t, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), `openai has no model "gpt-9-typo"`) {
		t.Fatalf("worker on a missing model returned %v; want an error naming the model", err)
	}
	if got := strings.Count(h.logs.String(), "worker: stopping"); got != 1 {
		t.Errorf("the stop is logged %d times, want once:\n%s", got, h.logs.tail(20))
	}
	if c := calls.Load(); c > int64(wc.Concurrency) {
		t.Errorf("%d calls to a missing model, want at most one per job in flight (%d)", c, wc.Concurrency)
	}
	if p := h.progress("m"); p.Queued != n {
		t.Fatalf("after the missing model: %+v; want all %d jobs still queued", p, n)
	}
	// The calls are kept, with the provider's own code to group by.
	if got := h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'm:%' AND provider_class = 'model_not_found' AND provider_code = 'model_not_found'`); int64(got) != calls.Load() {
		t.Errorf("%d interrupted rows with class and code model_not_found, want one per call (%d)", got, calls.Load())
	}

	have.Store(true) // the model is pulled, or the name fixed
	rw = h.startWorker(h.workerConfig(client), nil, nil)
	h.waitDone("m", n, 30*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Errorf("worker once the model is there: %v", err)
	}
	for i := 1; i <= n; i++ {
		if j, _ := h.job(jobID("m", i)); j.Status != fixpoint.StatusValid {
			t.Errorf("job %d: %s (%s), want valid", i, j.Status, j.Error)
		}
	}
}
