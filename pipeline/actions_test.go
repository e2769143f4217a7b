package pipeline_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
)

// completion is an OpenAI chat completion answering content.
func completion(content string, in, out int) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-x", "object": "chat.completion", "model": "sim-weak",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}},
		"usage": map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
	})
	return b
}

// modelOf returns the model a request names, leaving its body readable.
func modelOf(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	var v struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(b, &v)
	return v.Model
}

// A spend cap reached by three workers at once: together they never
// reserve past it, so the batch overshoots by less than one call per
// worker; the jobs left end over_budget, and raising the cap and
// requeueing them finishes the batch.
func TestSpendCapThreeWorkers(t *testing.T) {
	t.Parallel()
	const n, workers = 40, 3
	const cap = 4000
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("b")
	cfg.MaxTokens = 100
	limit := int64(cap)
	cfg.Cap.MaxTotalTokens = &limit
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	var rws []*runningWorker
	for range workers {
		wc := h.workerConfig(h.client(nil))
		wc.Concurrency = 4
		rws = append(rws, h.startWorker(wc, nil, nil))
	}
	h.waitDone("b", n, 60*time.Second)
	for _, rw := range rws {
		rw.stop(t, 20*time.Second)
	}
	p := h.progress("b")
	sum, err := h.st.Summary(h.ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	over := int(sum[0].OverBudget)
	if p.Valid == 0 || over == 0 || p.Valid+over != n {
		t.Fatalf("%d valid, %d over budget of %d; want both, and nothing else (%+v)", p.Valid, over, n, p)
	}
	sp, err := h.st.BatchSpend(h.ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	// The largest single call the ledger recorded bounds the overshoot.
	var biggest int64
	for i := 1; i <= n; i++ {
		j, as := h.job(jobID("b", i))
		if j.Status == fixpoint.StatusOverBudget && (strings.Count(j.Error, "spend cap reached") != 1 || !strings.Contains(j.Error, "tokens spent of") ||
			!regexp.MustCompile(`may take up to \d+ \(its prompt and all its max tokens of output\), more than the -?\d+ left`).MatchString(j.Error)) {
			t.Errorf("job %d: error %q; want the cap's reason once, with the call's worst case and what was left", i, j.Error)
		}
		for _, a := range as {
			biggest = max(biggest, a.TokensIn+a.TokensOut)
		}
	}
	c, _ := h.st.Counts(h.ctx, "b")
	spent := c.JobTokensIn + c.JobTokensOut
	if spent != sp.Tokens || sp.HeldTokens != 0 {
		t.Errorf("ledger says %d tokens spent, the spend counter %d (%d still held)", spent, sp.Tokens, sp.HeldTokens)
	}
	if spent > cap+workers*biggest {
		t.Errorf("spent %d tokens, cap %d: overshoot beyond one call (%d) per worker", spent, cap, biggest)
	}
	t.Logf("cap %d tokens: %d spent by %d valid jobs, %d over budget, largest call %d", cap, spent, p.Valid, over, biggest)
	h.checkInvariants("b", invariants{Jobs: n})

	// Raise the cap, requeue the over-budget jobs: the batch finishes.
	if _, err := enqueue.SetCap(h.ctx, h.st, "b", store.Cap{}); err != nil {
		t.Fatal(err)
	}
	rep, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "b", Statuses: []fixpoint.Status{fixpoint.StatusOverBudget}, Queue: h.q})
	if err != nil || rep.Jobs[string(fixpoint.StatusOverBudget)] != over || rep.Published != over {
		t.Fatalf("requeue: %+v %v; want %d requeued and published", rep, err, over)
	}
	rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
	h.waitDone("b", n, 60*time.Second)
	rw.stop(t, 20*time.Second)
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// A cost cap on a model the worker has no price for cannot be enforced
// (every call would count $0): no call is made, every job ends over_budget
// with a reason naming the model, and once the worker is given a price,
// requeueing them finishes the batch under the cap.
func TestCostCapNeedsAPrice(t *testing.T) {
	t.Parallel()
	const n = 12
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("u")
	cfg.Model = "fresh-model-2027" // not in the default price table ("sim-*" is, at $0)
	dollars := 5.0
	cfg.Cap.MaxCostUSD = &dollars
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
	h.waitDone("u", n, 30*time.Second)
	rw.stop(t, 20*time.Second)
	if calls := h.sim.requests(); calls != 0 {
		t.Errorf("%d calls made for a cost-capped batch of an unpriced model, want none", calls)
	}
	for i := 1; i <= n; i++ {
		j, as := h.job(jobID("u", i))
		if j.Status != fixpoint.StatusOverBudget || len(as) != 0 || !strings.Contains(j.Error, `no price for model "fresh-model-2027"`) {
			t.Fatalf("job %d: %s, %d attempts, %q; want over_budget, none, naming the model", i, j.Status, len(as), j.Error)
		}
	}

	rep, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "u", Statuses: []fixpoint.Status{fixpoint.StatusOverBudget}, Queue: h.q})
	if err != nil || rep.Published != n {
		t.Fatalf("requeue: %+v %v", rep, err)
	}
	wc := h.workerConfig(h.client(nil))
	if wc.Loop.Prices, err = repair.ParsePrices(repair.DefaultPrices(), []byte(`{"fresh-model-2027":{"input_per_mtok":1,"output_per_mtok":2}}`)); err != nil {
		t.Fatal(err)
	}
	rw = h.startWorker(wc, nil, nil)
	h.waitDone("u", n, 30*time.Second)
	rw.stop(t, 20*time.Second)
	h.checkInvariants("u", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	sp, err := h.st.BatchSpend(h.ctx, "u")
	if err != nil || sp.CostUSD <= 0 {
		t.Errorf("spend after the priced run: %+v %v; want a cost counted against the cap", sp, err)
	}
	// Without its cap the batch has spent what it had: enqueue cap --none
	// printed "spent 0 tokens, $0.000000".
	after, err := enqueue.SetCap(h.ctx, h.st, "u", store.Cap{})
	if err != nil || after.Capped() || after.Tokens != sp.Tokens || math.Abs(after.CostUSD-sp.CostUSD) > 1e-9 {
		t.Errorf("spend with the cap removed: %+v %v; want the %d tokens, $%f spent", after, err, sp.Tokens, sp.CostUSD)
	}
}

// Cancel during a run: the jobs not yet final end cancelled at once, the
// worker acks their messages unrun, the calls in flight are kept.
func TestCancelDuringRun(t *testing.T) {
	t.Parallel()
	const n = 100
	h := newHarness(t, harnessConfig{Sim: sim.Config{Latency: fixedLatency(40 * time.Millisecond)}})
	h.enqueue("b", n)
	cfg := h.workerConfig(h.client(nil))
	cfg.Concurrency = 4
	rw := h.startWorker(cfg, nil, nil)
	waitFor(t, 30*time.Second, "some jobs done", func() bool { return h.progress("b").Valid >= 10 })
	cancelled, err := enqueue.Cancel(h.ctx, h.st, "b")
	if err != nil || cancelled == 0 {
		t.Fatalf("cancel: %d jobs, %v", cancelled, err)
	}
	// Counted once the cancel committed: a job may still start a call
	// while the cancel's transaction runs (a loaded machine takes a while).
	before := h.sim.requests()
	h.waitDone("b", n, 30*time.Second)
	h.checkQueueEmpty()
	rw.stop(t, 20*time.Second)
	p := h.progress("b")
	sum, _ := h.st.Summary(h.ctx, "b")
	if int(sum[0].Cancelled) != cancelled || p.Valid+cancelled != n {
		t.Errorf("%d valid + %d cancelled (summary %d) of %d", p.Valid, cancelled, sum[0].Cancelled, n)
	}
	// At most the calls in flight when it was cancelled, and a transport
	// retry of each, were made after it (a job valid before it may have
	// taken two calls, so the count is of the calls after the cancel).
	if after := h.sim.requests() - before; after > int64(2*cfg.Concurrency) {
		t.Errorf("%d provider calls after the cancel, %d workers: cancelled jobs were called", after, cfg.Concurrency)
	}
	h.checkInvariants("b", invariants{Jobs: n})
	if again, err := enqueue.Cancel(h.ctx, h.st, "b"); err != nil || again != 0 {
		t.Errorf("second cancel: %d, %v", again, err)
	}
}

// runThenCancel starts a worker, waits until every one of batch b's jobs
// has made a call or two, cancels the batch, and returns the worker and
// the calls made by then.
func (h *harness) runThenCancel(wcfg pipeline.WorkerConfig, jobs int) (*runningWorker, int64) {
	h.t.Helper()
	rw := h.startWorker(wcfg, nil, nil)
	waitFor(h.t, 30*time.Second, "every job past its first call", func() bool { return h.sim.requests() >= int64(2*jobs) })
	if _, err := enqueue.Cancel(h.ctx, h.st, "b"); err != nil {
		h.t.Fatal(err)
	}
	return rw, h.sim.requests()
}

// keptAsCancelled checks that each of batch b's jobs ended cancelled with
// no attempt of its own, and returns the calls kept apart for each.
func (h *harness) keptAsCancelled(jobs int) [][]store.InterruptedCalls {
	h.t.Helper()
	out := make([][]store.InterruptedCalls, jobs)
	for i := 1; i <= jobs; i++ {
		j, as := h.job(jobID("b", i))
		if j.Status != fixpoint.StatusCancelled || len(as) != 0 {
			h.t.Errorf("job %d: %s with %d attempts; want cancelled, its calls kept apart", i, j.Status, len(as))
		}
		kept, err := h.st.JobInterrupted(h.ctx, jobID("b", i))
		if err != nil {
			h.t.Fatal(err)
		}
		out[i-1] = kept
	}
	return out
}

// waitQuiet waits up to timeout for a stretch of quiet with no provider
// call.
func (h *harness) waitQuiet(timeout, quiet time.Duration, what string) {
	h.t.Helper()
	waitFor(h.t, timeout, what, func() bool {
		before := h.sim.requests()
		time.Sleep(quiet)
		return h.sim.requests() == before
	})
}

// slowProse is a reply, a second late, that holds no JSON.
func slowProse() *sim.ScriptedReply {
	return &sim.ScriptedReply{Status: 200, Body: completion("Sorry, no JSON today.", 40, 8), Delay: time.Second,
		Header: http.Header{"Content-Type": {"application/json"}}}
}

// enqueueFiveAttempts enqueues jobs rows as batch b, five attempts a job,
// and returns its config.
func enqueueFiveAttempts(h *harness, jobs int) enqueue.Config {
	h.t.Helper()
	cfg := h.enqueueConfig("b")
	cfg.Limits.MaxAttempts = 5
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(jobs))); err != nil {
		h.t.Fatal(err)
	}
	return cfg
}

// A cancel reaches jobs between their repair attempts: a job in flight
// whose replies keep failing makes no call after the cancel but the one it
// had already sent, ends cancelled, and its calls are recorded as the
// cancel's. Before, each went on to its last attempt (5 calls here).
func TestCancelStopsJobsBetweenAttempts(t *testing.T) {
	t.Parallel()
	const n, jobs = 4, 4
	h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(int, *http.Request) *sim.ScriptedReply { return slowProse() }}})
	enqueueFiveAttempts(h, jobs)
	wcfg := h.workerConfig(h.client(nil))
	wcfg.Concurrency = n
	rw, atCancel := h.runThenCancel(wcfg, jobs)
	// The workers see the cancel within controlTTL (2 s): the call in
	// flight and up to two more a job, against 5 calls a job without.
	h.waitQuiet(30*time.Second, time.Second, "the jobs' calls to end")
	rw.stop(t, 20*time.Second)
	if calls := h.sim.requests(); calls > atCancel+3*jobs || calls >= 5*jobs {
		t.Errorf("%d calls (%d at the cancel): the jobs ran on after it", calls, atCancel)
	}
	var cancelledCalls int
	for i, kept := range h.keptAsCancelled(jobs) {
		for _, k := range kept {
			if k.Reason != store.InterruptCancelled || k.Hold != 0 || k.Paid != k.Calls {
				t.Errorf("job %d: interrupted calls %+v; want every call paid and recorded as cancelled", i+1, k)
			}
			cancelledCalls += k.Calls
		}
	}
	if int64(cancelledCalls) != h.sim.requests() {
		t.Errorf("%d calls recorded as cancelled, %d made", cancelledCalls, h.sim.requests())
	}
	// The results that lost to the cancel are no jobs finished.
	if n := jobsCounted(t, wcfg.Metrics); n != 0 {
		t.Errorf("fixpoint_jobs_total counts %v jobs finished; every job was cancelled", n)
	}
	h.checkInvariants("b", invariants{Jobs: jobs})
}

// jobsCounted sums fixpoint_jobs_total over its statuses.
func jobsCounted(t *testing.T, m *pipeline.Metrics) float64 {
	t.Helper()
	return counted(t, m, "fixpoint_jobs_total", "", "")
}

// counted sums the counter name over its series, those whose label is
// value when label is set.
func counted(t *testing.T, m *pipeline.Metrics, name, label, value string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, c := range mf.GetMetric() {
			if label != "" {
				for _, l := range c.GetLabel() {
					if l.GetName() == label && l.GetValue() != value {
						continue series
					}
				}
			}
			sum += c.GetCounter().GetValue()
		}
	}
	return sum
}

// A cancel reaches a call whose transport retries are under way: a job
// whose provider keeps answering 500 sends no retry once its worker has
// seen the cancel (within controlTTL), instead of running its retry policy
// out (20 retries here, about 25 s a job), and ends cancelled with its
// failed calls kept as the cancel's, none of them paid.
func TestCancelStopsTransportRetries(t *testing.T) {
	t.Parallel()
	const jobs = 4
	h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(int, *http.Request) *sim.ScriptedReply {
		return &sim.ScriptedReply{Status: 500, Delay: 200 * time.Millisecond}
	}}})
	enqueueFiveAttempts(h, jobs)
	wcfg := h.workerConfig(h.client(func(c *llm.Config) {
		c.Retry = llm.RetryConfig{NoJitter: true, InitialInterval: time.Second, MaxInterval: time.Second,
			MaxElapsedTime: time.Minute, MaxRetries: 20}
	}))
	wcfg.Concurrency = jobs
	rw, atCancel := h.runThenCancel(wcfg, jobs)
	// Seen within controlTTL (2 s) plus the wait under way (1 s): at most
	// three more requests a job (each takes 1.2 s).
	h.waitQuiet(15*time.Second, 1500*time.Millisecond, "the jobs' retries to end")
	h.waitDone("b", jobs, 10*time.Second)
	rw.stop(t, 20*time.Second)
	if calls := h.sim.requests(); calls > atCancel+3*jobs {
		t.Errorf("%d requests, %d at the cancel: the retries ran on after it", calls, atCancel)
	}
	for i, kept := range h.keptAsCancelled(jobs) {
		if len(kept) == 0 {
			t.Errorf("job %d: no interrupted calls; want its failed call kept", i+1)
		}
		for _, k := range kept {
			if k.Reason != store.InterruptCancelled || k.Paid != 0 {
				t.Errorf("job %d: interrupted calls %+v; want unpaid calls recorded as cancelled", i+1, k)
			}
		}
	}
	h.checkInvariants("b", invariants{Jobs: jobs})
}

// Cancel then requeue while jobs are between attempts: the first run's
// deliveries stop at their next call (they used to run on to their last
// attempt, paying for results that lose to the new run), the new run
// finishes, and rows enqueued into the batch after its cancel run too
// (a cancel ends the jobs it found, not the batch's future).
func TestCancelThenRequeueStopsTheOldRun(t *testing.T) {
	t.Parallel()
	const jobs = 4
	var answer atomic.Bool // false: every reply is prose; true: first calls are answered, repairs never
	h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(_ int, r *http.Request) *sim.ScriptedReply {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if answer.Load() && !bytes.Contains(body, []byte(`"role":"assistant"`)) {
			return nil
		}
		return slowProse()
	}}})
	cfg := enqueueFiveAttempts(h, jobs)
	wcfg := h.workerConfig(h.client(nil))
	wcfg.Concurrency = 2 * jobs
	rw := h.startWorker(wcfg, nil, nil)
	waitFor(t, 30*time.Second, "every job past its first call", func() bool { return h.sim.requests() >= 2*jobs })
	if _, err := enqueue.Cancel(h.ctx, h.st, "b"); err != nil {
		t.Fatal(err)
	}
	answer.Store(true)
	atRequeue := h.sim.requests()
	if _, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "b", Statuses: []fixpoint.Status{fixpoint.StatusCancelled}, Queue: h.q}); err != nil {
		t.Fatal(err)
	}
	// Rows added to the batch after its cancel are new jobs: they run.
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(2*jobs))); err != nil {
		t.Fatal(err)
	}
	h.waitDone("b", 2*jobs, 30*time.Second)
	waitFor(t, 30*time.Second, "the old run's calls to end", func() bool {
		before := h.sim.requests()
		time.Sleep(time.Second)
		return h.sim.requests() == before
	})
	rw.stop(t, 20*time.Second)
	if p := h.progress("b"); p.Valid != 2*jobs {
		t.Errorf("progress %+v, want the requeued and the added jobs valid", p)
	}
	// The new run's and the added jobs' calls (one each), and at most the
	// old run's calls in flight plus one more each before they saw the
	// requeue (controlTTL).
	if calls := h.sim.requests(); calls > atRequeue+2*jobs+2*jobs {
		t.Errorf("%d calls, %d at the requeue: the old run's deliveries went on", calls, atRequeue)
	}
	for i := 1; i <= jobs; i++ {
		kept, err := h.st.JobInterrupted(h.ctx, jobID("b", i))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kept {
			if k.Run != 1 || (k.Reason != store.InterruptSuperseded && k.Reason != store.InterruptCancelled) {
				t.Errorf("job %d: interrupted calls %+v; want run 1's, superseded or cancelled", i, k)
			}
		}
	}
	h.checkInvariants("b", invariants{Jobs: 2 * jobs, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: 2 * jobs}})
}

// Requeue of invalid jobs with another model: the new run's outcome is on
// the job row, the first run's stays in the ledger, and repeating the
// requeue does nothing.
func TestRequeueWithAnotherModel(t *testing.T) {
	t.Parallel()
	const n = 8
	h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(_ int, r *http.Request) *sim.ScriptedReply {
		if modelOf(r) == "sim-weak" {
			return &sim.ScriptedReply{Status: 200, Body: completion("Sorry, no JSON today.", 40, 8),
				Header: http.Header{"Content-Type": {"application/json"}}}
		}
		return nil
	}}})
	cfg := h.enqueueConfig("b")
	cfg.Model, cfg.Limits.MaxAttempts = "sim-weak", 2
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
	h.waitDone("b", n, 30*time.Second)
	if p := h.progress("b"); p.Invalid != n {
		t.Fatalf("first run: %+v, want every job invalid", p)
	}
	// A class no job can have is a typo, not "no job matched".
	if _, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "b", Statuses: []fixpoint.Status{fixpoint.StatusInvalid},
		Class: "shap", Queue: h.q}); !errors.Is(err, enqueue.ErrBadConfig) || !strings.Contains(err.Error(), "syntax, shape, semantic") {
		t.Errorf("requeue --class shap: %v; want a usage error listing the classes", err)
	}
	dry, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "b", Statuses: []fixpoint.Status{fixpoint.StatusInvalid},
		Model: "sim-model", MaxAttempts: 3, DryRun: true, Queue: h.q})
	if err != nil || dry.Jobs[string(fixpoint.StatusInvalid)] != n || dry.Run != 2 || dry.Published != 0 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	rep, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "b", Statuses: []fixpoint.Status{fixpoint.StatusInvalid},
		Model: "sim-model", MaxAttempts: 3, Queue: h.q})
	if err != nil || rep.Jobs[string(fixpoint.StatusInvalid)] != n || rep.Run != 2 || rep.Published != n || rep.Settings.Model != "sim-model" {
		t.Fatalf("requeue: %+v %v", rep, err)
	}
	h.waitDone("b", n, 30*time.Second)
	rw.stop(t, 20*time.Second)
	for i := 1; i <= n; i++ {
		j, as := h.job(jobID("b", i))
		if j.Status != fixpoint.StatusValid || j.Run != 2 || j.Model != "sim-model" || len(as) != 1 {
			t.Errorf("job %d after the requeue: %s, run %d, model %s, %d attempts; want valid in run 2 on sim-model", i, j.Status, j.Run, j.Model, len(as))
		}
	}
	// The ledger still answers what the first run did.
	rc, err := h.st.RunCounts(h.ctx, "b", 1)
	if err != nil || rc.Jobs[string(fixpoint.StatusInvalid)] != n || rc.Attempts != 2*n {
		t.Errorf("run 1 in the ledger: %+v %v; want %d invalid jobs and %d attempts", rc, err, n, 2*n)
	}
	again, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "b", Statuses: []fixpoint.Status{fixpoint.StatusInvalid}, Model: "sim-model", Queue: h.q})
	if err != nil || again.Run != 0 || again.Published != 0 {
		t.Errorf("second requeue: %+v %v; want nothing", again, err)
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// Finding 6: the stream's data directory is lost under a batch the ledger
// says is published; --resume republishes exactly the lost jobs and a
// worker finishes them.
func TestLostStreamThenResume(t *testing.T) {
	t.Parallel()
	const n = 20
	h := newHarness(t, harnessConfig{})
	h.enqueue("b", n)
	h.stopNATS()
	if err := os.RemoveAll(h.natsDir); err != nil {
		t.Fatal(err)
	}
	h.startNATS()
	waitFor(t, 10*time.Second, "the client reconnected", h.nc.IsConnected)
	prog, err := enqueue.Run(h.ctx, h.js, h.st, enqueue.Config{Batch: "b", Resume: true, Queue: h.q}, nil)
	if err != nil || prog.Republished != n {
		t.Fatalf("resume: %+v %v; want the %d lost jobs republished", prog, err, n)
	}
	rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
	h.waitDone("b", n, 30*time.Second)
	rw.stop(t, 20*time.Second)
	h.checkInvariants("b", invariants{Jobs: n, MaxCalls: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// Finding 8: a 429 with retry-after 3600 for one job hands that job back
// with the hour's delay; the lane is not frozen, the other jobs finish at
// once, and the call is recorded.
func TestRetryAfterAnHour(t *testing.T) {
	t.Parallel()
	const n = 12
	var target string
	h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(_ int, r *http.Request) *sim.ScriptedReply {
		if userOf(r) == target {
			return &sim.ScriptedReply{Status: 429, Header: http.Header{"Retry-After": {"3600"}}}
		}
		return nil
	}}})
	target = jobID("b", 3)
	h.enqueue("b", n)
	client := h.client(nil)
	start := time.Now()
	rw := h.startWorker(h.workerConfig(client), nil, nil)
	waitFor(t, 20*time.Second, "every other job valid", func() bool { return h.progress("b").Valid == n-1 })
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the other jobs took %s: the lane waited for the hour", took)
	}
	waitFor(t, 10*time.Second, "the call recorded", func() bool {
		c, err := h.st.Counts(h.ctx, "b")
		return err == nil && c.InterruptedRows == 1
	})
	rw.stop(t, 20*time.Second)
	if until := client.(*llm.Client).Lane("sim-model").Stats().PausedUntil; time.Until(until) > 0 {
		t.Errorf("the lane is paused for another %s", time.Until(until))
	}
	j, _ := h.job(target)
	if j.Status != fixpoint.StatusQueued {
		t.Errorf("the job asked to wait an hour is %s, want queued (handed back)", j.Status)
	}
	// Its message waits in the stream for the hour, not lost.
	if msgs := h.streamMsgs(); msgs != 1 {
		t.Errorf("stream holds %d messages, want the one handed back", msgs)
	}
	if got := h.sim.requests(); got != n {
		t.Errorf("%d calls, want %d: the job asked to wait was called again", got, n)
	}
}

// A provider whose public API needs a key, with none set: the worker stops
// at its first job of that provider, naming the variable, makes no call
// and records no attempt (it sent keyless calls, and without a network
// waited them out as an outage, job after job).
func TestMissingAPIKeyStopsTheWorker(t *testing.T) {
	t.Parallel()
	const n = 3
	h := newHarness(t, harnessConfig{})
	h.enqueue("nokey", n)
	keyless, err := llm.New(llm.Config{Provider: llm.ProviderOpenAI}) // the public API's base URL, no key
	if err != nil {
		t.Fatal(err)
	}
	rw := h.startWorker(h.workerConfig(keyless), nil, nil)
	err = rw.wait(t, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "no API key for openai") || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Fatalf("worker without a key returned %v; want an error naming OPENAI_API_KEY", err)
	}
	if p := h.progress("nokey"); p.Queued != n {
		t.Errorf("after the missing key: %+v; want all %d jobs still queued", p, n)
	}
	if c, err := h.st.Counts(h.ctx, "nokey"); err != nil || c.AttemptRows != 0 || c.InterruptedRows != 0 {
		t.Errorf("attempt rows %d, interrupted rows %d (%v); want no call recorded", c.AttemptRows, c.InterruptedRows, err)
	}
}

// A provider that refuses the API key (401) refuses it for every job: the
// worker stops at once with an error saying so, instead of ending the batch
// as failed jobs one by one, and hands its jobs back; a worker with the
// right key then finishes the batch, every job valid.
//
// Fewer jobs than the worker pulls at once: the jobs it hands back while
// stopping must not come back into its own open pull, each time a delivery
// spent, until they are dead.
func TestWrongAPIKeyStopsTheWorker(t *testing.T) {
	t.Parallel()
	const n = 6
	h := newHarness(t, harnessConfig{Sim: sim.Config{APIKey: "sk-right"}})
	h.enqueue("k", n)
	wc := h.workerConfig(h.client(nil)) // sends sk-test-SECRET123
	wc.Concurrency = 24
	rw := h.startWorker(wc, nil, nil)
	err := rw.wait(t, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "openai refused the API key") {
		t.Fatalf("worker with a wrong key returned %v; want an error naming the refused key", err)
	}
	if strings.Contains(err.Error(), "SECRET123") || strings.Contains(h.logs.String(), "SECRET123") {
		t.Errorf("the key reached the error or the logs")
	}
	if p := h.progress("k"); p.Queued != n {
		t.Fatalf("after the refused key: %+v; want all %d jobs still queued", p, n)
	}
	right := h.workerConfig(h.client(func(c *llm.Config) { c.APIKey = "sk-right" }))
	rw = h.startWorker(right, nil, nil)
	h.waitDone("k", n, 30*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Errorf("worker with the right key: %v", err)
	}
	h.checkInvariants("k", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// A worker killed mid-call leaves holds on a capped batch's budget: they
// expire after SpendHoldTTL, and a call blocked only by them waits that out
// and goes ahead, instead of handing its job back until the job is dead.
// A live worker renews its holds while its call runs longer than that.
func TestSpendHoldsOfAKilledWorker(t *testing.T) {
	t.Parallel()
	const n = 6
	h := newHarness(t, harnessConfig{Sim: sim.Config{Latency: sim.Latency{Dist: sim.DistFixed, RequestP50: 1500 * time.Millisecond}}})
	cfg := h.enqueueConfig("held")
	limit := int64(1_000_000)
	cfg.Cap.MaxTotalTokens = &limit
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	// What a worker killed with its calls in flight leaves: holds for all
	// the budget, expiring one hold time after their last renewal.
	const ttl = 600 * time.Millisecond
	if _, err := h.st.Reserve(h.ctx, "held", limit-10, 0, ttl); err != nil {
		t.Fatal(err)
	}
	wc := h.workerConfig(h.client(nil))
	wc.SpendHoldTTL, wc.Concurrency = ttl, 2
	rw := h.startWorker(wc, nil, nil)
	// While the first calls run (1.5 s each, 2.5 hold times) their holds
	// stay: seen 1.5 hold times after the first live hold, with no call
	// charged yet, they were renewed.
	var firstLive time.Time
	sawRenewed := false
	for deadline := time.Now().Add(20 * time.Second); !sawRenewed && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		sp, err := h.st.BatchSpend(h.ctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		if sp.Calls > 0 {
			break // a call finished: too late to tell
		}
		if sp.HeldTokens > 0 && sp.HeldTokens < limit-10 {
			if firstLive.IsZero() {
				firstLive = time.Now()
			}
			sawRenewed = time.Since(firstLive) > 3*ttl/2
		}
	}
	h.waitDone("held", n, 60*time.Second)
	rw.stop(t, 20*time.Second)
	if !sawRenewed {
		t.Errorf("no live hold seen 1.5 hold times into the first calls (first seen %v): holds are not renewed while a call runs", firstLive)
	}
	for i := 1; i <= n; i++ {
		j, _ := h.job(jobID("held", i))
		if j.Status != fixpoint.StatusValid || j.Deliveries != 1 {
			t.Errorf("job %d: %s after %d deliveries; want valid at the first", i, j.Status, j.Deliveries)
		}
	}
}

// A requeue to a strategy the batch's mode cannot run is a usage error:
// it said "requeued 3 jobs" (exit 0), and the workers then rejected every
// one of them.
func TestRequeueRefusesAStrategyTheModeCannotRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	cfg := h.enqueueConfig("tm")
	cfg.Mode = fixpoint.ModeTool
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(3))); err != nil {
		t.Fatal(err)
	}
	_, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "tm", Statuses: []fixpoint.Status{fixpoint.StatusInvalid},
		Strategy: fixpoint.StrategyPatch, Queue: h.q})
	if !errors.Is(err, enqueue.ErrBadConfig) || !strings.Contains(err.Error(), "strategy patch needs mode prompt, not tool") {
		t.Errorf("requeue --strategy patch of a tool-mode batch: %v; want a usage error naming the mode", err)
	}
}
