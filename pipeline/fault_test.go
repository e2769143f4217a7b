package pipeline_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
)

// userOf returns the job id a request carries (OpenAI's "user").
func userOf(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	var v struct {
		User string `json:"user"`
	}
	_ = json.Unmarshal(b, &v)
	return v.User
}

func fixedLatency(d time.Duration) sim.Latency {
	return sim.Latency{Dist: sim.DistFixed, RequestP50: d}
}

// SIGTERM mid-batch (Run's ctx cancelled): no new pulls, jobs in flight
// finish within the grace period, Run returns nil, and a second worker
// finishes the rest with nothing lost or paid twice.
func TestStopMidBatch(t *testing.T) {
	t.Parallel()
	const n = 80
	h := newHarness(t, harnessConfig{Sim: sim.Config{Latency: fixedLatency(200 * time.Millisecond)}})
	h.enqueue("b", n)
	cfg := h.workerConfig(h.client(nil))
	rw := h.startWorker(cfg, nil, nil)
	waitFor(t, 20*time.Second, "jobs in flight after some are done", func() bool {
		return h.progress("b").Valid >= 10 && rw.w.InFlight() > 0
	})
	stopAt := time.Now()
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("Run after stop: %v", err)
	}
	if took := time.Since(stopAt); took > cfg.Grace {
		t.Errorf("Run returned %s after the stop, over the grace period %s", took, cfg.Grace)
	}
	if got := h.sim.inFlight.Load(); got != 0 {
		t.Errorf("%d provider calls still in flight after Run returned", got)
	}
	if got := metricValue(cfg.Metrics.Dispositions.WithLabelValues("nak")); got > float64(cfg.Prefetch+cfg.Concurrency) {
		t.Errorf("%v naks on a graceful stop, want at most the buffered messages", got)
	}
	callsAfterStop := h.sim.requests()
	done := h.progress("b").Valid
	// Acks and naks travel asynchronously. Known gap: a message the client
	// iterator had buffered when pulling stopped may not be handed back and
	// then waits out AckWait; at most the prefetch buffer.
	if !poll(2*time.Second, func() bool { return h.consumerInfo().NumAckPending <= cfg.WithDefaults().Prefetch }) {
		t.Errorf("%d messages still pending ack after a graceful stop: jobs in flight were not finished", h.consumerInfo().NumAckPending)
	}
	if done == n {
		t.Fatalf("the batch finished before the stop; the test needs jobs left")
	}
	if int64(done) != callsAfterStop {
		t.Errorf("%d jobs done but %d calls made: a job in flight was abandoned", done, callsAfterStop)
	}
	cfg2 := h.workerConfig(h.client(nil))
	rw2 := h.startWorker(cfg2, nil, nil)
	h.waitDone("b", n, 60*time.Second)
	rw2.stop(t, 20*time.Second)
	if got := metricValue(cfg2.Metrics.Dispositions.WithLabelValues("skip")); got != 0 {
		t.Errorf("%v jobs redelivered after being finished", got)
	}
	h.checkInvariants("b", invariants{Jobs: n, MaxCalls: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	if re, buf := redelivered(h, "b", n), cfg.WithDefaults().Prefetch; re > buf {
		t.Errorf("%d jobs redelivered after a graceful stop, want at most the %d buffered", re, buf)
	}
}

// redelivered counts the jobs of batch finished on a later delivery.
func redelivered(h *harness, batch string, n int) int {
	re := 0
	for i := 1; i <= n; i++ {
		if j, _ := h.job(jobID(batch, i)); j.Deliveries > 1 {
			re++
		}
	}
	return re
}

// A grace period too short for the jobs in flight: they are handed back and
// redelivered at once; none is lost.
func TestGraceTooShort(t *testing.T) {
	t.Parallel()
	const n, slow = 30, 4
	var calls atomic.Int64
	h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(int, *http.Request) *sim.ScriptedReply {
		if calls.Add(1) <= slow {
			return &sim.ScriptedReply{Delay: 30 * time.Second}
		}
		return nil
	}}})
	h.enqueue("b", n)
	cfg := h.workerConfig(h.client(nil))
	cfg.Concurrency = slow
	cfg.Grace = 300 * time.Millisecond
	rw := h.startWorker(cfg, nil, nil)
	waitFor(t, 10*time.Second, "slow calls in flight", func() bool { return h.sim.inFlight.Load() == slow })
	stopAt := time.Now()
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(stopAt); took > 5*time.Second {
		t.Errorf("Run took %s to return with a grace period of %s", took, cfg.Grace)
	}
	if p := h.progress("b"); p.Queued != n {
		t.Fatalf("%d jobs final after the hard stop; the slow jobs must not be recorded", n-p.Queued)
	}
	// Their calls, cut off by the grace period, are recorded as
	// interrupted, not thrown away (issue 13, finding 9).
	if c, err := h.st.Counts(h.ctx, "b"); err != nil || c.InterruptedRows != slow {
		t.Errorf("%d interrupted calls recorded (%v), want the %d cut off at shutdown", c.InterruptedRows, err, slow)
	}
	cfg2 := h.workerConfig(h.client(nil))
	rw2 := h.startWorker(cfg2, nil, nil)
	h.waitDone("b", n, 30*time.Second)
	rw2.stop(t, 20*time.Second)
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	for i := 1; i <= n; i++ {
		if j, _ := h.job(jobID("b", i)); j.Deliveries > 2 {
			t.Errorf("job %d delivered %d times", i, j.Deliveries)
		}
	}
}

// NATS restarted mid-batch on the same port and store: the worker carries
// on without a restart.
func TestNATSRestart(t *testing.T) {
	t.Parallel()
	const n = 200
	h := newHarness(t, harnessConfig{Sim: sim.Config{Latency: fixedLatency(5 * time.Millisecond)}})
	h.enqueue("b", n)
	nc, js := h.connect()
	defer nc.Close()
	cfg := h.workerConfig(h.client(nil))
	rw := h.startWorker(cfg, js, nil)
	waitFor(t, 30*time.Second, "a quarter of the batch", func() bool { return h.progress("b").Valid >= n/4 })
	h.stopNATS()
	h.startNATS()
	h.waitDone("b", n, 60*time.Second)
	h.checkQueueEmpty()
	rw.stop(t, 20*time.Second)
	// Jobs whose ack was lost in the restart come back and are acked as
	// already final, at no cost.
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// NATS restarted without its data (no persistent volume): the stream and
// consumer are gone. A running worker makes them again and runs the next
// batch; it pulled from the missing consumer, got nothing and no error,
// and sat idle and ready while enqueue filled the new stream.
func TestNATSLosesItsData(t *testing.T) {
	t.Parallel()
	const n = 20
	h := newHarness(t, harnessConfig{})
	h.enqueue("a", n)
	nc, js := h.connect()
	defer nc.Close()
	rw := h.startWorker(h.workerConfig(h.client(nil)), js, nil)
	h.waitDone("a", n, 30*time.Second)
	h.stopNATS()
	if err := os.RemoveAll(h.natsDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(h.natsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	h.startNATS()
	h.enqueue("b", n) // makes the stream, not the workers' consumer
	h.waitDone("b", n, 30*time.Second)
	rw.stop(t, 20*time.Second)
	if !strings.Contains(h.logs.String(), "the queue is gone from NATS") {
		t.Errorf("the worker did not say it made the queue again:\n%s", h.logs.String())
	}
	// Batch a's n calls are the simulator's too.
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}, ExtraCalls: n})
}

// Postgres cut away for two seconds mid-batch: writes are retried, nothing
// is acked before its commit, every job ends final.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	const n = 120
	proxy := &pgProxy{}
	h := newHarness(t, harnessConfig{
		Sim: sim.Config{Latency: fixedLatency(5 * time.Millisecond)},
		DSN: proxy.dsn(t),
	})
	h.enqueue("b", n)
	ws, err := store.Open(h.ctx, h.workDSN, &store.Config{MaxConns: 4, RetryMaxElapsed: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	cfg := h.workerConfig(h.client(nil))
	cfg.NakDelayMin = 500 * time.Millisecond
	rw := h.startWorker(cfg, nil, ws)
	waitFor(t, 30*time.Second, "a quarter of the batch", func() bool { return h.progress("b").Valid >= n/4 })
	proxy.cut()
	cutAt := time.Now()
	before := h.progress("b").Valid
	waitFor(t, 10*time.Second, "two seconds of outage", func() bool { return time.Since(cutAt) >= 2*time.Second })
	// Nothing committed while the database was away, so nothing acked.
	if ci := h.consumerInfo(); int(ci.AckFloor.Stream) > before+cfg.Concurrency && h.progress("b").Valid == before {
		t.Errorf("acks advanced during the outage without commits")
	}
	proxy.restore()
	h.waitDone("b", n, 60*time.Second)
	h.checkQueueEmpty()
	rw.stop(t, 20*time.Second)
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// Calls that end while Postgres is down are charged to the batch's spend
// counter with their rows, when those are written: the counter equals the
// ledger, and no hold is left behind. The charge was a transaction of its
// own, made right after each call: the calls that ended during a 20 s
// crash were recorded later but never charged, and their holds were left.
func TestPostgresOutageKeepsTheSpendCounter(t *testing.T) {
	t.Parallel()
	const n = 60
	proxy := &pgProxy{}
	// Once gated, calls wait at the provider until the gate opens: they
	// end (paid) while Postgres is cut away.
	var gated atomic.Bool
	var waiting atomic.Int64
	gate := make(chan struct{})
	h := newHarness(t, harnessConfig{
		Sim: sim.Config{Latency: fixedLatency(20 * time.Millisecond), Script: func(int, *http.Request) *sim.ScriptedReply {
			if gated.Load() {
				waiting.Add(1)
				<-gate
			}
			return nil
		}},
		DSN: proxy.dsn(t),
	})
	cfg := h.enqueueConfig("b")
	dollars := 1000.0
	cfg.Cap.MaxCostUSD = &dollars
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	// The worker's ledger gives up a write after a second: an outage of
	// three outlasts every retry inside one.
	ws, err := store.Open(h.ctx, h.workDSN, &store.Config{MaxConns: 4, RetryMaxElapsed: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	wc := h.workerConfig(h.client(nil))
	if wc.Loop.Prices, err = repair.ParsePrices(repair.DefaultPrices(), []byte(`{"sim-model":{"input_per_mtok":1,"output_per_mtok":2}}`)); err != nil {
		t.Fatal(err)
	}
	wc.SpendHoldTTL = 2 * time.Second
	rw := h.startWorker(wc, nil, ws)
	waitFor(t, 30*time.Second, "jobs done", func() bool { return h.progress("b").Valid >= 8 })
	gated.Store(true)
	waitFor(t, 30*time.Second, "calls held at the provider", func() bool { return waiting.Load() >= 2 })
	proxy.cut()
	cutAt := time.Now()
	close(gate)
	waitFor(t, 10*time.Second, "three seconds of outage", func() bool { return time.Since(cutAt) >= 3*time.Second })
	proxy.restore()
	h.waitDone("b", n, 60*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	// The holds of the calls written went with their rows. One whose
	// reserve the cut caught committing (the worker never learned of it)
	// is renewed by no one: it expires, and the next reserve clears it.
	waitFor(t, 10*time.Second, "the holds left to expire", func() bool {
		return h.sqlInt(`SELECT count(*) FROM spend_holds WHERE batch = 'b' AND expires_at > now()`) == 0
	})
	hold, err := h.st.Reserve(h.ctx, "b", 1, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if left := h.sqlInt(`SELECT count(*) FROM spend_holds WHERE batch = 'b' AND id <> $1`, hold.ID); left != 0 {
		t.Errorf("%d expired holds left after a reserve; want them cleared", left)
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// A slow Postgres (300 ms before every reply) with a short AckWait: pulling
// slows down, and nothing is redelivered for lack of progress reports.
func TestSlowPostgres(t *testing.T) {
	t.Parallel()
	const n = 40
	proxy := &pgProxy{}
	h := newHarness(t, harnessConfig{
		Queue: queue.Config{AckWait: 2 * time.Second},
		DSN:   proxy.dsn(t),
	})
	h.enqueue("b", n)
	ws, err := store.Open(h.ctx, h.workDSN, &store.Config{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	proxy.setLatency(300 * time.Millisecond)
	cfg := h.workerConfig(h.client(nil))
	cfg.Concurrency = 8
	cfg.FlushMax = 4
	rw := h.startWorker(cfg, nil, ws)
	h.waitDone("b", n, 90*time.Second)
	h.checkQueueEmpty()
	rw.stop(t, 30*time.Second)
	// NumRedelivered only counts redelivered messages still pending, so the
	// ledger's delivery count and the skip counter say what came back.
	// Known gap: messages the pull iterator prefetched wait for a free slot
	// while their AckWait runs, so under a slow database a few are
	// redelivered; the ledger keeps the first result and the extra calls
	// are bounded by the redeliveries. The heartbeat covers everything
	// from the first read to the ack.
	skips := int(metricValue(cfg.Metrics.Dispositions.WithLabelValues("skip")))
	re := redelivered(h, "b", n) + skips
	if re > n/4 {
		t.Errorf("%d of %d jobs redelivered under a slow database", re, n)
	}
	h.checkInvariants("b", invariants{Jobs: n, MaxCalls: int64(n + n/4), Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	t.Logf("slow database: %d redelivered (%d acked as already final), %d calls for %d jobs", re, skips, h.sim.requests(), n)
}

// Provider 429 with Retry-After on 30% of calls: the lane waits, observed
// RPM stays under its budget, no job fails for it.
func TestRateLimited429(t *testing.T) {
	t.Parallel()
	const n, rpm = 40, 1200
	h := newHarness(t, harnessConfig{Sim: sim.Config{Seed: 3, Transport: sim.Transport{RateLimited: 0.3}, RetryAfter: 200 * time.Millisecond}})
	h.enqueue("b", n)
	cfg := h.workerConfig(h.client(func(c *llm.Config) {
		c.Lane.RPM = rpm
		c.Retry.MaxRetries = 8
	}))
	rw := h.startWorker(cfg, nil, nil)
	h.waitDone("b", n, 60*time.Second)
	rw.stop(t, 20*time.Second)
	st := h.sim.srv.Stats()
	if st.Transport[sim.EventInjected429] == 0 {
		t.Fatalf("no 429 injected; the scenario did not run")
	}
	// Evenly spaced at rpm/60 per second, with one call of slack for the
	// window edges.
	if got, limit := h.sim.maxPerWindow(time.Second), rpm/60+1; got > limit {
		t.Errorf("%d calls within one second, the lane budget allows %d", got, limit)
	}
	h.checkInvariants("b", invariants{Jobs: n,
		Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// Quota exhausted: no retry storm, jobs delayed rather than failed or
// burned through MaxDeliver, a metric and a log line say why; once the quota
// returns the batch finishes.
func TestQuotaExhausted(t *testing.T) {
	t.Parallel()
	const n = 20
	var quota atomic.Bool
	quota.Store(true)
	var quotaCalls atomic.Int64
	quotaBody := []byte(`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	h := newHarness(t, harnessConfig{
		Queue: queue.Config{MaxDeliver: 3},
		Sim: sim.Config{Script: func(int, *http.Request) *sim.ScriptedReply {
			if quota.Load() {
				quotaCalls.Add(1)
				return &sim.ScriptedReply{Status: 429, Body: quotaBody, Header: http.Header{"Content-Type": {"application/json"}}}
			}
			return nil
		}},
	})
	h.enqueue("b", n)
	cfg := h.workerConfig(h.client(func(c *llm.Config) { c.Lane.QuotaCooldown = 300 * time.Millisecond }))
	cfg.Concurrency = 4
	cfg.QuotaPause = 300 * time.Millisecond
	rw := h.startWorker(cfg, nil, nil)
	gauge := cfg.Metrics.QuotaExhausted.WithLabelValues(llm.ProviderOpenAI)
	waitFor(t, 10*time.Second, "the quota metric and log line", func() bool {
		return metricValue(gauge) == 1 && strings.Contains(h.logs.String(), "quota exhausted")
	})
	// Keep the quota exhausted for longer than MaxDeliver pauses.
	start := time.Now()
	hold := time.Duration(cfg.Queue.WithDefaults().MaxDeliver+2) * cfg.QuotaPause
	waitFor(t, 10*time.Second, "the quota outage", func() bool { return time.Since(start) >= hold })
	quota.Store(false)
	spent := quotaCalls.Load()
	h.waitDone("b", n, 60*time.Second)
	rw.stop(t, 20*time.Second)
	// No storm: at most one call per slot per pause (plus the first round).
	pauses := int64(hold/cfg.QuotaPause) + 2
	if limit := int64(cfg.Concurrency) * pauses; spent > limit {
		t.Errorf("%d calls while the quota was exhausted, want at most %d", spent, limit)
	}
	if metricValue(gauge) != 0 {
		t.Errorf("quota gauge still set after the quota returned")
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// Provider faults that end: 500/503/529 bursts, a provider that never
// answers, one that trickles. Timeouts fire, slots are freed, and the jobs
// finish once it recovers.
func TestProviderFaultsThenRecovery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		burst int
		reply func(n int) *sim.ScriptedReply
	}{
		{name: "5xx burst", burst: 30, reply: func(n int) *sim.ScriptedReply {
			return &sim.ScriptedReply{Status: []int{500, 503, 529}[n%3]}
		}},
		{name: "never answers", burst: 8, reply: func(int) *sim.ScriptedReply { return &sim.ScriptedReply{Hang: true} }},
		{name: "trickles", burst: 8, reply: func(int) *sim.ScriptedReply { return &sim.ScriptedReply{Trickle: true} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n = 30
			h := newHarness(t, harnessConfig{Sim: sim.Config{TrickleInterval: time.Second, Script: func(k int, _ *http.Request) *sim.ScriptedReply {
				if k <= tc.burst {
					return tc.reply(k)
				}
				return nil
			}}})
			h.enqueue("b", n)
			cfg := h.workerConfig(h.client(func(c *llm.Config) {
				c.FirstByteTimeout = 300 * time.Millisecond
				c.IdleTimeout = 300 * time.Millisecond
				c.TotalTimeout = 2 * time.Second
				c.Retry.MaxRetries = 2
			}))
			cfg.Concurrency = 4
			rw := h.startWorker(cfg, nil, nil)
			h.waitDone("b", n, 60*time.Second)
			h.checkQueueEmpty()
			rw.stop(t, 20*time.Second)
			if got := h.sim.inFlight.Load(); got != 0 {
				t.Errorf("%d provider calls left hanging", got)
			}
			h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
			// The faults are on record: some attempt counts transport
			// retries, with their class.
			retried := 0
			for i := 1; i <= n; i++ {
				_, as := h.job(jobID("b", i))
				for _, a := range as {
					retried += a.TransportRetries
				}
			}
			if retried == 0 && int64(tc.burst) > h.sim.requests()-int64(n) {
				t.Errorf("no transport retry recorded after a burst of %d faults", tc.burst)
			}
		})
	}
}

// A model that never produces valid output: invalid after MaxAttempts,
// every attempt's tokens recorded.
func TestNeverValid(t *testing.T) {
	t.Parallel()
	const n = 20
	h := newHarness(t, harnessConfig{Sim: sim.Config{Mix: sim.Mix{MissingRequired: 1}, FixProb: -1}})
	h.enqueue("b", n)
	cfg := h.workerConfig(h.client(nil))
	rw := h.startWorker(cfg, nil, nil)
	h.waitDone("b", n, 30*time.Second)
	rw.stop(t, 20*time.Second)
	for i := 1; i <= n; i++ {
		j, as := h.job(jobID("b", i))
		if j.Status != fixpoint.StatusInvalid || len(as) != 3 || j.Attempts != 3 {
			t.Errorf("job %d: %s after %d attempts (%d rows), want invalid after 3", i, j.Status, j.Attempts, len(as))
			continue
		}
		var in, out int64
		for _, a := range as {
			if a.TokensIn == 0 || a.TokensOut == 0 {
				t.Errorf("job %d attempt %d: tokens %d/%d not recorded", i, a.No, a.TokensIn, a.TokensOut)
			}
			in += a.TokensIn
			out += a.TokensOut
		}
		if in != j.TokensIn || out != j.TokensOut {
			t.Errorf("job %d: tokens %d/%d, attempts sum to %d/%d", i, j.TokensIn, j.TokensOut, in, out)
		}
	}
	h.checkInvariants("b", invariants{Jobs: n, MaxCalls: 3 * n, Statuses: map[fixpoint.Status]int{fixpoint.StatusInvalid: n}})
}

// A reply cut off at max_tokens is classified as truncation and the job
// ends after its attempts; a 5 MB reply is capped and bounded by the
// retries, never retried endlessly.
func TestHugeAndTruncatedReplies(t *testing.T) {
	t.Parallel()
	t.Run("truncated", func(t *testing.T) {
		t.Parallel()
		const n = 10
		// Every first reply is cut off at max_tokens; the correction turn
		// says so and the model answers in full.
		h := newHarness(t, harnessConfig{Sim: sim.Config{Mix: sim.Mix{Truncation: 1}}})
		h.enqueue("b", n)
		rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
		h.waitDone("b", n, 30*time.Second)
		rw.stop(t, 20*time.Second)
		for i := 1; i <= n; i++ {
			j, as := h.job(jobID("b", i))
			if len(as) != 2 || j.FirstAttemptValid {
				t.Errorf("job %d: %d attempts, first valid %v; want the truncated first attempt and one more", i, len(as), j.FirstAttemptValid)
				continue
			}
			if a := as[0]; a.Class != fixpoint.OutcomeTruncated || a.FinishReason != string(fixpoint.FinishLength) || a.Valid {
				t.Errorf("job %d attempt 1: class %q finish %q valid %v, want truncated, length, not valid", i, a.Class, a.FinishReason, a.Valid)
			}
		}
		h.checkInvariants("b", invariants{Jobs: n, MaxCalls: 2 * n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	})
	t.Run("always truncated", func(t *testing.T) {
		t.Parallel()
		const n = 10
		h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(_ int, r *http.Request) *sim.ScriptedReply {
			// A reply cut off mid-object with finish_reason length, every time.
			body := `{"id":"c","object":"chat.completion","model":"sim-model","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"{\"name\": \"Ada\", \"age\": 3"}}],"usage":{"prompt_tokens":50,"completion_tokens":1024,"total_tokens":1074}}`
			return &sim.ScriptedReply{Status: 200, Body: []byte(body), Header: http.Header{"Content-Type": {"application/json"}}}
		}}})
		h.enqueue("b", n)
		rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
		h.waitDone("b", n, 30*time.Second)
		rw.stop(t, 20*time.Second)
		for i := 1; i <= n; i++ {
			j, as := h.job(jobID("b", i))
			if j.Status != fixpoint.StatusInvalid || j.FinalClass != fixpoint.OutcomeTruncated || len(as) != 3 {
				t.Errorf("job %d: %s/%s after %d attempts, want invalid/%s after 3", i, j.Status, j.FinalClass, len(as), fixpoint.OutcomeTruncated)
			}
		}
		h.checkInvariants("b", invariants{Jobs: n, MaxCalls: 3 * n, Statuses: map[fixpoint.Status]int{fixpoint.StatusInvalid: n}})
	})
	t.Run("5 MB", func(t *testing.T) {
		t.Parallel()
		const n = 10
		huge := hugeReply(5 << 20)
		var target string
		h := newHarness(t, harnessConfig{
			Queue: queue.Config{MaxDeliver: 2},
			Sim: sim.Config{Script: func(_ int, r *http.Request) *sim.ScriptedReply {
				if userOf(r) == target {
					return &sim.ScriptedReply{Status: 200, Body: huge, Header: http.Header{"Content-Type": {"application/json"}}}
				}
				return nil
			}},
		})
		target = jobID("b", 2)
		h.enqueue("b", n)
		cfg := h.workerConfig(h.client(func(c *llm.Config) { c.Retry.MaxRetries = 1 }))
		rw := h.startWorker(cfg, nil, nil)
		h.waitDone("b", n, 30*time.Second)
		h.checkQueueEmpty()
		rw.stop(t, 20*time.Second)
		// The reply was made and billed: it is one recorded attempt, not a
		// retry storm (it was 1 + MaxRetries calls per delivery, MaxDeliver
		// deliveries, and no attempt row).
		j, as := h.job(target)
		if j.Status != fixpoint.StatusFailed || !strings.Contains(j.Error, string(fixpoint.ClassTooLarge)) {
			t.Errorf("huge reply job: %s %q, want failed naming %s", j.Status, j.Error, fixpoint.ClassTooLarge)
		}
		if len(as) != 1 || as[0].Class != fixpoint.OutcomeProvider || !strings.Contains(as[0].ProviderError, "bytes") {
			t.Errorf("huge reply job: %d attempts (%+v), want one provider attempt naming the size", len(as), as)
		}
		h.checkInvariants("b", invariants{Jobs: n, MaxCalls: int64(n),
			Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n - 1, fixpoint.StatusFailed: 1}})
	})
}

// hugeReply is an OpenAI chat completion of about size bytes.
func hugeReply(size int) []byte {
	content := strings.Repeat("x", size)
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-huge", "object": "chat.completion", "model": "sim-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": size / 4, "total_tokens": 10 + size/4},
	})
	return b
}

// A job that keeps failing transiently is recorded dead with its last
// error after MaxDeliver deliveries.
func TestMaxDeliverDead(t *testing.T) {
	t.Parallel()
	t.Run("worker running", func(t *testing.T) {
		t.Parallel()
		const n = 10
		var target string
		h := newHarness(t, harnessConfig{
			Queue: queue.Config{MaxDeliver: 3},
			Sim: sim.Config{Script: func(_ int, r *http.Request) *sim.ScriptedReply {
				if userOf(r) == target {
					return &sim.ScriptedReply{Status: 503}
				}
				return nil
			}},
		})
		target = jobID("b", 4)
		h.enqueue("b", n)
		cfg := h.workerConfig(h.client(func(c *llm.Config) { c.Retry.MaxRetries = 1 }))
		rw := h.startWorker(cfg, nil, nil)
		h.waitDone("b", n, 30*time.Second)
		h.checkQueueEmpty()
		rw.stop(t, 20*time.Second)
		j, _ := h.job(target)
		if j.Status != fixpoint.StatusDead || !strings.Contains(j.Error, "delivered 3 times") || !strings.Contains(j.Error, "503") || j.Deliveries != 3 {
			t.Errorf("job: %s %q after %d deliveries, want dead after 3 deliveries with the last error (503)", j.Status, j.Error, j.Deliveries)
		}
		// Each delivery of the target: its call and one retry, then again
		// after each of the waits it holds through before it is handed back.
		h.checkInvariants("b", invariants{Jobs: n, MaxCalls: int64(n - 1 + 3*(pipeline.OutageHoldsMax+1)*2),
			Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n - 1, fixpoint.StatusDead: 1}})
	})
	t.Run("worker down at the limit", func(t *testing.T) {
		t.Parallel()
		const n = 3
		h := newHarness(t, harnessConfig{Queue: queue.Config{MaxDeliver: 2, AckWait: time.Second}})
		h.enqueue("b", n)
		// A worker that takes the jobs and dies on every delivery: the test
		// sets up the queue as a worker does at start, then fetches without
		// acking until the server gives up.
		ctx := h.ctx
		if _, _, err := queue.Ensure(ctx, h.js, h.q); err != nil {
			t.Fatal(err)
		}
		cons, err := h.js.Consumer(ctx, h.q.Stream, h.q.Consumer)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		waitFor(t, 20*time.Second, "every delivery taken and dropped", func() bool {
			b, err := cons.FetchNoWait(n)
			if err != nil {
				return false
			}
			for range b.Messages() {
				got++
			}
			return got == n*2
		})
		adv, err := h.js.Stream(ctx, h.q.Stream+"_DEAD")
		if err != nil {
			t.Fatal(err)
		}
		// The server raises MAX_DELIVERIES when it next looks for work for
		// the consumer, which is when a worker comes back: the jobs stay
		// queued (nothing silently dropped) until then.
		if p := h.progress("b"); p.Queued != n {
			t.Fatalf("jobs final before any worker ran: %+v", p)
		}
		cfg := h.workerConfig(h.client(nil))
		rw := h.startWorker(cfg, nil, nil)
		h.waitDone("b", n, 30*time.Second)
		h.checkQueueEmpty()
		waitFor(t, 10*time.Second, "the advisories consumed", func() bool {
			si, err := adv.Info(ctx)
			return err == nil && si.State.Msgs == 0
		})
		rw.stop(t, 20*time.Second)
		for i := 1; i <= n; i++ {
			j, _ := h.job(jobID("b", i))
			if j.Status != fixpoint.StatusDead || !strings.Contains(j.Error, "delivered 2 times") || j.Deliveries != 2 {
				t.Errorf("job %d: %s %q after %d deliveries, want dead after 2 deliveries, recorded", i, j.Status, j.Error, j.Deliveries)
			}
		}
		h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusDead: n}})
	})
}

// A provider outage in the middle of jobs that already paid for a reply:
// the worker keeps the messages, waits, and resumes each job where it was,
// so every paid attempt reaches the ledger and no job is redelivered; the
// failed call is kept apart from its attempts.
func TestProviderOutageMidJob(t *testing.T) {
	t.Parallel()
	const n = 10
	var mu sync.Mutex
	corrections := map[string]int{}
	h := newHarness(t, harnessConfig{Sim: sim.Config{Mix: sim.Mix{MissingRequired: 1}, FixProb: 1,
		Script: func(_ int, r *http.Request) *sim.ScriptedReply {
			// First replies go through (paid, invalid); each job's first
			// two corrections fail: its correction and its one transport
			// retry. (Counted per job: a global count let a job resumed
			// early on a busy machine take another job's failures.)
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if !bytes.Contains(body, []byte(`"role":"assistant"`)) {
				return nil
			}
			var req struct {
				User string `json:"user"`
			}
			_ = json.Unmarshal(body, &req)
			mu.Lock()
			defer mu.Unlock()
			corrections[req.User]++
			if corrections[req.User] <= 2 {
				return &sim.ScriptedReply{Status: 503}
			}
			return nil
		}}})
	h.enqueue("b", n)
	cfg := h.workerConfig(h.client(func(c *llm.Config) { c.Retry.MaxRetries = 1 }))
	cfg.Concurrency = n
	rw := h.startWorker(cfg, nil, nil)
	h.waitDone("b", n, 60*time.Second)
	h.checkQueueEmpty()
	rw.stop(t, 20*time.Second)
	if !strings.Contains(h.logs.String(), "resuming the job after a pause") {
		t.Errorf("no job was resumed; the scenario did not happen:\n%s", h.logs.String())
	}
	h.checkInvariants("b", invariants{Jobs: n, OneDelivery: true, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	for i := 1; i <= n; i++ {
		j, as := h.job(jobID("b", i))
		if len(as) != 2 || as[0].Class != "shape" || as[0].TokensIn == 0 || !as[1].Valid || j.Attempts != 2 || j.Calls != 2 {
			t.Fatalf("job %d: %d attempts, %d calls, rows %+v: want the paid first reply kept, then the fix", i, j.Attempts, j.Calls, as)
		}
		// The call that failed in the outage is kept apart, before the
		// job's one wait.
		kept, err := h.st.JobInterrupted(h.ctx, jobID("b", i))
		if err != nil || len(kept) != 1 || kept[0].Reason != store.InterruptOutage || kept[0].Hold != 1 || kept[0].Calls != 1 || kept[0].Paid != 0 {
			t.Errorf("job %d interrupted calls %+v %v; want the failed call as an unpaid outage call before wait 1", i, kept, err)
		}
	}
}

// A provider down for longer than a job's deliveries' retries used to
// last: the jobs in flight wait it out inside their delivery (pulling
// paused) and finish once it is back, none spending a second delivery, so
// none ends dead.
func TestProviderOutageSpendsNoDeliveries(t *testing.T) {
	t.Parallel()
	const n = 12
	var mu sync.Mutex
	var upAt time.Time
	h := newHarness(t, harnessConfig{
		Queue: queue.Config{MaxDeliver: 2},
		Sim: sim.Config{Script: func(_ int, _ *http.Request) *sim.ScriptedReply {
			mu.Lock()
			defer mu.Unlock()
			if time.Now().Before(upAt) {
				return &sim.ScriptedReply{Status: 503}
			}
			return nil
		}},
	})
	h.enqueue("b", n)
	mu.Lock()
	upAt = time.Now().Add(2 * time.Second)
	mu.Unlock()
	cfg := h.workerConfig(h.client(func(c *llm.Config) { c.Retry.MaxRetries = 1 }))
	rw := h.startWorker(cfg, nil, nil)
	h.waitDone("b", n, 60*time.Second)
	rw.stop(t, 20*time.Second)
	outageCalls := 0
	for i := 1; i <= n; i++ {
		j, as := h.job(jobID("b", i))
		if j.Status != fixpoint.StatusValid || j.Deliveries != 1 {
			t.Errorf("job %d: %s after %d deliveries; want valid at its first", i, j.Status, j.Deliveries)
		}
		// The calls that failed in the outage are not the job's attempts:
		// it is valid on its first, as the provider answered it.
		if j.Attempts != 1 || j.Calls != 1 || len(as) != 1 || !j.FirstAttemptValid {
			t.Errorf("job %d: %d attempts, %d calls, %d attempt rows, first valid %v; want valid on its first attempt",
				i, j.Attempts, j.Calls, len(as), j.FirstAttemptValid)
		}
		kept, err := h.st.JobInterrupted(h.ctx, jobID("b", i))
		if err != nil {
			t.Fatal(err)
		}
		for w, k := range kept {
			if k.Reason != store.InterruptOutage || k.Hold != w+1 || k.Calls != 1 || k.Paid != 0 || k.LastError == "" {
				t.Errorf("job %d: interrupted calls %d: %+v; want one unpaid outage call before wait %d", i, w, k, w+1)
			}
			outageCalls += k.Calls
		}
	}
	if outageCalls == 0 {
		t.Error("no outage call recorded")
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}, OneDelivery: true})
}

// A worker stopped while Postgres is away: the jobs in flight finish their
// calls within the grace, their results cannot be written, and the worker
// keeps them on disk (its spill directory) as it hands the jobs back; the
// next worker started with the directory writes them before it pulls. Every
// provider call leaves a row, the ones paid for before the stop included.
func TestStopWithTheLedgerDownKeepsThePaidCalls(t *testing.T) {
	t.Parallel()
	const n = 16
	proxy := &pgProxy{}
	h := newHarness(t, harnessConfig{
		Sim: sim.Config{Latency: fixedLatency(700 * time.Millisecond)},
		DSN: proxy.dsn(t),
	})
	h.enqueue("b", n)
	spillDir := t.TempDir()
	ws, err := store.Open(h.ctx, h.workDSN, &store.Config{MaxConns: 4, RetryMaxElapsed: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	cfg := h.workerConfig(h.client(nil))
	cfg.SpillDir, cfg.Concurrency = spillDir, 4
	rw := h.startWorker(cfg, nil, ws)
	waitFor(t, 30*time.Second, "a job done and the next ones in flight", func() bool { return h.progress("b").Valid >= 1 })
	proxy.cut()
	rw.stop(t, 30*time.Second)
	files, _ := filepath.Glob(filepath.Join(spillDir, "unwritten-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("spill files %v, want one holding the results the ledger could not take", files)
	}
	proxy.restore()
	cfg2 := h.workerConfig(h.client(nil))
	cfg2.SpillDir = spillDir
	rw2 := h.startWorker(cfg2, nil, nil)
	h.waitDone("b", n, 60*time.Second)
	h.checkQueueEmpty() // the handed-back messages come again and are acked as final
	rw2.stop(t, 20*time.Second)
	if left, _ := filepath.Glob(filepath.Join(spillDir, "unwritten-*.jsonl")); len(left) != 0 {
		t.Errorf("spill files left after the next start wrote them: %v", left)
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// StopNow during the grace period (a second signal): the jobs in flight
// are handed back at once, their calls recorded, instead of after the
// grace; the next worker finishes them.
func TestStopNowEndsTheGrace(t *testing.T) {
	t.Parallel()
	const n = 4
	// The first worker's calls take 30 s; the next worker's are instant.
	h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(call int, _ *http.Request) *sim.ScriptedReply {
		if call <= n {
			return &sim.ScriptedReply{Delay: 30 * time.Second}
		}
		return nil
	}}})
	h.enqueue("b", n)
	cfg := h.workerConfig(h.client(nil))
	cfg.Grace = time.Minute
	rw := h.startWorker(cfg, nil, nil)
	waitFor(t, 10*time.Second, "calls in flight", func() bool { return h.sim.requests() >= n })
	rw.cancel()
	stopped := time.Now()
	rw.w.StopNow()
	select {
	case <-rw.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Run still running 10s after StopNow, with a minute of grace")
	}
	if d := time.Since(stopped); d > 5*time.Second {
		t.Errorf("Run returned %s after StopNow", d)
	}
	rw.ended = true
	rw2 := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
	h.waitDone("b", n, 60*time.Second)
	h.checkQueueEmpty()
	rw2.stop(t, 20*time.Second)
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// A spill file is written only into the ledger its jobs are in: a file of
// another ledger's jobs, or one that is not a spill file, is kept, with an
// error, and makes no batch appear.
func TestSpillOfAnotherLedgerIsKept(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	for name, body := range map[string]string{
		"foreign": `{"hello":"world"}` + "\n",
		"other":   `{"result":{"JobID":"elsewhere:1","Status":"valid","Job":{"ID":"elsewhere:1","Batch":"elsewhere"}}}` + "\n",
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "unwritten-1-1.jsonl")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		n, err := pipeline.ReplaySpill(h.ctx, dir, h.st, slog.New(slog.DiscardHandler))
		if err == nil || n != 0 {
			t.Errorf("%s: replay wrote %d, error %v; want an error", name, n, err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: the file is gone: %v", name, err)
		}
	}
	if _, err := h.st.Batch(h.ctx, "elsewhere"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("batch of the other ledger's job: %v, want none", err)
	}
}

// A three-server JetStream cluster, the job stream at three replicas,
// workers on different servers. Mid-batch the server leading the
// consumer is killed (SIGKILL) and restarted 20 s later; then the
// stream's and the consumer's leaders are moved. The work goes on while the
// server is down (the workers on it reconnect to the others), and every job
// ends final once, none acked before its result was committed, none lost.
func TestClusterServerDownAndLeadersMoved(t *testing.T) {
	t.Parallel()
	// Four workers (one on each server, one process) of 2 calls of 600 ms:
	// at most 13 jobs a second, so the batch outlasts the outage and the
	// leader moves.
	const n, serverDown = 400, 20 * time.Second
	h := newHarness(t, harnessConfig{Cluster: 3, Sim: sim.Config{Latency: fixedLatency(600 * time.Millisecond)}})
	buildWorker(t)
	start := time.Now()
	h.enqueue("b", n)
	acks := h.watchAcks(h.nc, n)
	cw := h.startClusterWorkers(2)
	waitFor(t, 60*time.Second, "a tenth of the batch", func() bool { return h.progress("b").Valid >= n/10 })
	h.checkReplicas(3)

	// The consumer's leader is the server the pulls and acks go to.
	leader := consumerLeader(h.ctx, h.js, h.q.Stream, h.q.Consumer)
	k := h.cluster.index(leader)
	if k < 0 {
		t.Fatalf("consumer leader %q is no server of the cluster", leader)
	}
	ledStream, _ := streamLeader(h.ctx, h.js, h.q.Stream)
	ackedAtKill := cw.messages("ack")
	h.cluster.kill(k)
	killedAt, doneAtKill := time.Now(), h.progress("b").Valid
	waitFor(t, serverDown+30*time.Second, "jobs finished while the server is down, for 20 s", func() bool {
		return time.Since(killedAt) >= serverDown && h.progress("b").Valid >= doneAtKill+n/10
	})
	doneWhileDown := h.progress("b").Valid - doneAtKill
	h.cluster.start(k)
	restartedAt := time.Now()
	waitFor(t, 60*time.Second, "the restarted server caught up with the stream", func() bool {
		_, current := streamLeader(h.ctx, h.js, h.q.Stream)
		return current
	})
	caughtUp := time.Since(restartedAt)

	sFrom, sTo := stepDown(t, h.nc, "$JS.API.STREAM.LEADER.STEPDOWN."+h.q.Stream, func() string {
		l, _ := streamLeader(h.ctx, h.js, h.q.Stream)
		return l
	})
	cFrom, cTo := stepDown(t, h.nc, "$JS.API.CONSUMER.LEADER.STEPDOWN."+h.q.Stream+"."+h.q.Consumer, func() string {
		return consumerLeader(h.ctx, h.js, h.q.Stream, h.q.Consumer)
	})
	if p := h.progress("b"); p.Queued == 0 {
		t.Fatalf("the batch finished before the leaders moved; the test needs jobs left")
	}
	h.waitDone("b", n, 90*time.Second)
	left := h.checkClusterQueueDrained(doneWhileDown + n/10)
	acked, skipped := cw.stop(t)
	for i, name := range cw.names(h.cluster) {
		// Each worker, the one on the killed server too, went on.
		if acked[i] <= ackedAtKill[i] {
			t.Errorf("%s acked %v jobs by %s's kill and %v in all: none after", name, ackedAtKill[i], leader, acked[i])
		}
	}
	seen, early, errs := acks.stop(t)
	if early > 0 || len(errs) > 0 {
		t.Errorf("%d of %d acks seen were of jobs not final in the ledger:\n%s", early, seen, strings.Join(errs, "\n"))
	}
	// Acks sent while a worker reconnected are not seen; most are.
	if seen < n/2 {
		t.Errorf("the watch saw %d acks of %d jobs: it did not watch", seen, n)
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	if os.Getenv("FIXPOINT_CLUSTER_LOGS") == "1" {
		t.Logf("worker warnings:\n%s\nworker process:\n%s", warnLines(h.logs.String()), warnLines(cw.proc.out.String()))
	}
	t.Logf("%s killed (the consumer's leader; the stream's: %s) with %d jobs done, %d done while it was down for %s, caught up %s after its restart; "+
		"stream leader moved %s -> %s, consumer leader %s -> %s; %d acks checked; jobs acked by worker %v, redeliveries acked as final %v; "+
		"%d acked messages the stream kept; %s in all",
		leader, ledStream, doneAtKill, doneWhileDown, serverDown, caughtUp.Round(time.Millisecond), sFrom, sTo, cFrom, cTo, seen,
		acked, skipped, left, time.Since(start).Round(time.Second))
}

func warnLines(logs string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, "level=ERROR") ||
			strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, "NATS") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
