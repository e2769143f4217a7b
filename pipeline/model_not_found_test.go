package pipeline_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
)

// A model the provider does not have is a set-up error of its lane (its
// provider and model), not a failure of each job: the worker stops that
// lane, saying so once, holds its jobs without a call (they stay queued,
// no delivery burnt on a bad_request) and goes on with its other lanes;
// readiness names the lane. A drain that cannot finish for it exits with
// an error naming the model. Once the model is there, a worker finishes
// the batch.
func TestModelNotFoundStopsItsLane(t *testing.T) {
	t.Parallel()
	const n = 6
	h := newHarness(t, harnessConfig{})
	var have atomic.Bool
	var missingCalls atomic.Int64
	srv := modelServer(t, &missingCalls, func(model string) bool { return model == "gpt-9-typo" && !have.Load() },
		`{"error":{"message":"The model `+"`gpt-9-typo`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
	// The missing model's jobs first: the worker meets them before the
	// other lane's.
	for _, b := range []struct{ batch, model string }{{"m", "gpt-9-typo"}, {"o", "gpt-ok"}} {
		cfg := h.enqueueConfig(b.batch)
		cfg.Model = b.model
		if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
			t.Fatal(err)
		}
	}
	client := h.client(func(c *llm.Config) { c.BaseURL = srv.URL + "/v1" })
	wc := h.workerConfig(client)
	rw := h.startWorker(wc, nil, nil)

	// The other lane goes on.
	h.waitDone("o", n, 30*time.Second)
	waitFor(t, 10*time.Second, "readiness naming the stopped lane", func() bool { return rw.w.Refusing() != nil })
	if err := rw.w.Refusing(); !strings.Contains(err.Error(), "lane openai/gpt-9-typo stopped") || !strings.Contains(err.Error(), `openai has no model "gpt-9-typo"`) {
		t.Errorf("readiness: %v; want it to name the lane and the model", err)
	}
	if got := strings.Count(h.logs.String(), "worker: lane stopped"); got != 1 {
		t.Errorf("the lane's stop is logged %d times, want once:\n%s", got, h.logs.tail(20))
	}
	if strings.Contains(h.logs.String(), "worker: stopping") {
		t.Errorf("the worker stopped for one lane's missing model:\n%s", h.logs.tail(20))
	}
	if c := missingCalls.Load(); c > int64(wc.Concurrency) {
		t.Errorf("%d calls to a missing model, want at most one per job in flight (%d)", c, wc.Concurrency)
	}
	if p := h.progress("m"); p.Queued != n {
		t.Fatalf("after the missing model: %+v; want all %d jobs still queued", p, n)
	}
	// Held, not handed back: each delivered once.
	waitFor(t, 10*time.Second, "the other lane's acks", func() bool { return h.consumerInfo().NumAckPending == n })
	if ci := h.consumerInfo(); ci.NumRedelivered != 0 || ci.NumPending != 0 {
		t.Errorf("consumer: %d redelivered, %d pending; want the stopped lane's jobs held, none delivered again", ci.NumRedelivered, ci.NumPending)
	}
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Errorf("worker stopped with a lane stopped: %v; want nil (stopped by a signal)", err)
	}
	// The calls are kept, with the provider's own code to group by.
	if got := h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'm:%' AND provider_class = 'model_not_found' AND provider_code = 'model_not_found'`); int64(got) != missingCalls.Load() {
		t.Errorf("%d interrupted rows with class and code model_not_found, want one per call (%d)", got, missingCalls.Load())
	}

	// A drain cannot finish while the model is missing: it says so, and
	// the jobs stay queued.
	before := missingCalls.Load()
	dc := h.workerConfig(client)
	dc.Drain = true
	rw = h.startWorker(dc, nil, nil)
	err := rw.wait(t, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "drain cannot finish") || !strings.Contains(err.Error(), `openai has no model "gpt-9-typo"`) {
		t.Fatalf("drain with a missing model returned %v; want an error naming the model", err)
	}
	if c := missingCalls.Load() - before; c > int64(dc.Concurrency) {
		t.Errorf("the drain made %d calls to a missing model, want at most one per job in flight (%d)", c, dc.Concurrency)
	}
	if p := h.progress("m"); p.Queued != n {
		t.Fatalf("after the drain: %+v; want all %d jobs still queued", p, n)
	}

	have.Store(true) // the model is pulled, or the name fixed
	rw = h.startWorker(dc, nil, nil)
	if err := rw.wait(t, 30*time.Second); err != nil {
		t.Errorf("drain once the model is there: %v", err)
	}
	for i := 1; i <= n; i++ {
		if j, _ := h.job(jobID("m", i)); j.Status != fixpoint.StatusValid {
			t.Errorf("job %d: %s (%s), want valid", i, j.Status, j.Error)
		}
	}
}

// A worker holds at most its concurrency of a stopped lane's jobs: then it
// stops pulling, and a drain, with the rest still on the queue, ends
// saying why instead of waiting forever.
func TestModelNotFoundHoldsAtMostItsConcurrency(t *testing.T) {
	t.Parallel()
	const n = 6
	h := newHarness(t, harnessConfig{})
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"invalid_request_error","code":"model_not_found"}}`)
	}))
	t.Cleanup(srv.Close)
	cfg := h.enqueueConfig("m")
	cfg.Model = "llama9"
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	wc := h.workerConfig(h.client(func(c *llm.Config) { c.BaseURL = srv.URL + "/v1" }))
	wc.Concurrency, wc.Drain = 2, true
	err := h.startWorker(wc, nil, nil).wait(t, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "drain cannot finish") || !strings.Contains(err.Error(), `has no model "llama9"`) {
		t.Fatalf("drain: %v; want an error naming the model", err)
	}
	if c := calls.Load(); c > int64(wc.Concurrency) {
		t.Errorf("%d calls to a missing model, want at most %d", c, wc.Concurrency)
	}
	if p := h.progress("m"); p.Queued != n {
		t.Errorf("after the drain: %+v; want all %d jobs still queued", p, n)
	}
	if ci := h.consumerInfo(); ci.NumPending+uint64(ci.NumAckPending) != n {
		t.Errorf("consumer: %d pending, %d held or handed back; want the %d jobs on the queue", ci.NumPending, ci.NumAckPending, n)
	}
}

// A stopped lane tries one of its held jobs every LaneProbe: while the
// model is still missing the probe is held again (no delivery spent, the
// stop not logged again); once the model answers, the lane resumes and
// its held jobs finish, without a restart and without being delivered
// again.
func TestStoppedLaneResumesWhenTheModelIsThere(t *testing.T) {
	t.Parallel()
	const n = 6
	h := newHarness(t, harnessConfig{})
	var have atomic.Bool
	var missingCalls atomic.Int64
	srv := modelServer(t, &missingCalls, func(string) bool { return !have.Load() },
		`{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"invalid_request_error","code":"model_not_found"}}`)
	cfg := h.enqueueConfig("m")
	cfg.Model = "llama9"
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	wc := h.workerConfig(h.client(func(c *llm.Config) { c.BaseURL = srv.URL + "/v1" }))
	wc.LaneProbe = 100 * time.Millisecond
	rw := h.startWorker(wc, nil, nil)

	waitFor(t, 10*time.Second, "the lane stopped", func() bool { return rw.w.Refusing() != nil })
	waitFor(t, 10*time.Second, "every job held", func() bool { return h.consumerInfo().NumAckPending == n })
	// Probes while the model is missing: each is held again.
	seen := missingCalls.Load()
	waitFor(t, 10*time.Second, "two probes", func() bool { return missingCalls.Load() >= seen+2 })
	if p := h.progress("m"); p.Queued != n {
		t.Fatalf("while the model is missing: %+v; want all %d jobs still queued", p, n)
	}
	if ci := h.consumerInfo(); ci.NumRedelivered != 0 {
		t.Errorf("consumer: %d redelivered while probing; want the held jobs kept", ci.NumRedelivered)
	}
	stopped := wc.Metrics.LaneStopped.WithLabelValues(llm.ProviderOpenAI, "llama9")
	if g := gaugeOf(t, stopped); g != 1 {
		t.Errorf("fixpoint_lane_stopped %v while the model is missing, want 1", g)
	}

	have.Store(true) // the model is pulled
	h.waitDone("m", n, 30*time.Second)
	for i := 1; i <= n; i++ {
		if j, _ := h.job(jobID("m", i)); j.Status != fixpoint.StatusValid {
			t.Errorf("job %d: %s (%s), want valid", i, j.Status, j.Error)
		}
	}
	if err := rw.w.Refusing(); err != nil {
		t.Errorf("readiness after the lane resumed: %v, want ready", err)
	}
	if g := gaugeOf(t, stopped); g != 0 {
		t.Errorf("fixpoint_lane_stopped %v after the lane resumed, want 0", g)
	}
	logs := h.logs.String()
	if s, r := strings.Count(logs, "worker: lane stopped"), strings.Count(logs, "worker: lane resumed"); s != 1 || r != 1 {
		t.Errorf("the lane's stop logged %d times and its resume %d, want once each:\n%s", s, r, h.logs.tail(20))
	}
	if ci := h.consumerInfo(); ci.NumRedelivered != 0 || ci.NumAckPending != 0 {
		t.Errorf("consumer: %d redelivered, %d unacked; want each job run on its first delivery", ci.NumRedelivered, ci.NumAckPending)
	}
	if got := h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'm:%' AND provider_class = 'model_not_found'`); int64(got) != missingCalls.Load() {
		t.Errorf("%d interrupted rows of class model_not_found, want one per call to the missing model (%d)", got, missingCalls.Load())
	}
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Errorf("worker: %v\n%s", err, h.logs.tail(40))
	}
}

// modelServer is an OpenAI-compatible provider that answers a model for
// which missing is true with 404 and notFound (counting those calls), and
// any other with a valid reply.
func modelServer(t *testing.T, missingCalls *atomic.Int64, missing func(model string) bool, notFound string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct{ Model string }
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		if missing(req.Model) {
			missingCalls.Add(1)
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, notFound)
			return
		}
		fmt.Fprintf(w, `{"id":"c1","model":%q,"choices":[{"message":{"content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":10}}`,
			req.Model, `{"name":"Ann","age":30,"tier":"pro"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// gaugeOf is the value of a gauge.
func gaugeOf(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
