package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
)

func typical(t testing.TB, seed uint64) sim.Config {
	t.Helper()
	cfg, err := sim.Preset("typical")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = seed
	return cfg
}

// Every enqueued job ends in exactly one final row, on an embedded NATS and
// on the machine's NATS.
func TestEveryJobEndsInOneFinalRow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		external bool
		jobs     int
	}{
		{name: "embedded NATS", jobs: 300},
		{name: "machine NATS", external: true, jobs: 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{Sim: typical(t, 7), ExternalNATS: tc.external})
			prog := h.enqueue("b", tc.jobs)
			if prog.Published != tc.jobs || prog.Recorded != tc.jobs {
				t.Fatalf("enqueue: %+v, want %d recorded and published", prog, tc.jobs)
			}
			cfg := h.workerConfig(h.client(nil))
			cfg.Concurrency = 16
			cfg.ProgressEvery = 20 * time.Millisecond
			rw := h.startWorker(cfg, nil, nil)
			h.waitDone("b", tc.jobs, 60*time.Second)
			waitFor(t, 10*time.Second, "a progress line counting every job", func() bool {
				return strings.Contains(h.logs.String(), fmt.Sprintf("msg=\"worker: progress\" finished=%d ", tc.jobs))
			})
			if err := rw.stop(t, 30*time.Second); err != nil {
				t.Fatalf("Run: %v", err)
			}
			p := h.progress("b")
			if p.Valid < tc.jobs*8/10 {
				t.Errorf("only %d of %d jobs valid on the typical preset", p.Valid, tc.jobs)
			}
			h.checkInvariants("b", invariants{Jobs: tc.jobs})
			if ci := h.consumerInfo(); ci.NumRedelivered != 0 {
				t.Errorf("%d messages redelivered in a clean run", ci.NumRedelivered)
			}
			m := cfg.Metrics
			if got := metricValue(m.Dispositions.WithLabelValues("ack")); int(got) != tc.jobs {
				t.Errorf("acks = %v, want %d", got, tc.jobs)
			}
		})
	}
}

// Enqueueing the same batch again adds no rows, no messages and no provider
// calls, inside the duplicates window and beyond it.
func TestEnqueueTwiceAddsNothing(t *testing.T) {
	t.Parallel()
	const n = 40
	t.Run("inside the window", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessConfig{})
		h.enqueue("b", n)
		again := h.enqueue("b", n)
		if again.Recorded != 0 || again.Published != 0 || again.Existing != n {
			t.Fatalf("second enqueue: %+v, want nothing recorded or published, %d existing", again, n)
		}
		// Publishing the same envelopes again is dropped by the stream.
		cfg := h.enqueueConfig("b")
		cfg.Resume = true
		if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, nil); err != nil {
			t.Fatalf("resume: %v", err)
		}
		for i := 1; i <= 3; i++ {
			env := h.envelope("b", i)
			dup, err := queue.Publish(h.ctx, h.js, h.q, env)
			if err != nil || !dup {
				t.Fatalf("republish %s: duplicate %v, err %v; want a duplicate", env.JobID, dup, err)
			}
		}
		if msgs := h.streamMsgs(); msgs != n {
			t.Fatalf("stream holds %d messages, want %d", msgs, n)
		}
		rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
		h.waitDone("b", n, 30*time.Second)
		rw.stop(t, 30*time.Second)
		if got := h.sim.requests(); got != n {
			t.Errorf("%d provider calls, want one per job (%d) on a clean model", got, n)
		}
		h.checkInvariants("b", invariants{Jobs: n, MaxCalls: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	})
	t.Run("beyond the window", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessConfig{Queue: queue.Config{Duplicates: time.Second, MaxAge: time.Hour}})
		h.enqueue("b", n)
		cfg := h.workerConfig(h.client(nil))
		rw := h.startWorker(cfg, nil, nil)
		h.waitDone("b", n, 30*time.Second)
		h.checkQueueEmpty()
		calls := h.sim.requests()
		// Wait until the stream forgets the ids, then publish every job
		// again: the stream takes them, the worker acks them unpaid.
		start := time.Now()
		first := h.envelope("b", 1)
		waitFor(t, 10*time.Second, "the duplicates window to pass", func() bool {
			if time.Since(start) < time.Second {
				return false
			}
			dup, err := queue.Publish(h.ctx, h.js, h.q, first)
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
			return !dup
		})
		for i := 2; i <= n; i++ {
			if dup, err := queue.Publish(h.ctx, h.js, h.q, h.envelope("b", i)); err != nil || dup {
				t.Fatalf("publish job %d beyond the window: duplicate %v, err %v", i, dup, err)
			}
		}
		waitFor(t, 30*time.Second, "the republished jobs acked", func() bool {
			return metricValue(cfg.Metrics.Dispositions.WithLabelValues("skip")) == n
		})
		rw.stop(t, 30*time.Second)
		if got := h.sim.requests(); got != calls {
			t.Errorf("republishing cost %d provider calls, want 0", got-calls)
		}
		h.checkInvariants("b", invariants{Jobs: n, MaxCalls: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	})
}

// envelope is the message Enqueue publishes for row i of batch.
func (h *harness) envelope(batch string, i int) *queue.Envelope {
	h.t.Helper()
	hash, err := store.SchemaHash([]byte(testSchema))
	if err != nil {
		h.t.Fatal(err)
	}
	j, _ := h.job(jobID(batch, i))
	return &queue.Envelope{V: queue.EnvelopeVersion, JobID: j.ID, Batch: batch, RowNo: j.RowNo, Prompt: j.Prompt,
		SchemaHash: hash, Provider: llm.ProviderOpenAI, Model: "sim-model", Mode: fixpoint.ModePrompt,
		Limits: fixpoint.Limits{MaxAttempts: 3}.WithDefaults()}
}

func (h *harness) streamMsgs() uint64 {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, h.q.Stream)
	if err != nil {
		h.t.Fatal(err)
	}
	si, err := s.Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return si.State.Msgs
}

// A crash after the commit and before the ack: the redelivered message is
// acked without a provider call.
func TestCrashBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	const n = 30
	t.Run("connection lost", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessConfig{Queue: queue.Config{AckWait: time.Second}})
		h.enqueue("b", n)
		// The first worker loses its NATS connection right after its first
		// commit, as a process dying there would: nothing it holds is acked.
		nc1, js1 := h.connect()
		defer nc1.Close()
		var crashed atomic.Bool
		var crashedID atomic.Value
		cfg := h.workerConfig(h.client(nil))
		pipeline.SetAfterCommitFunc(&cfg, func(id string) {
			if crashed.CompareAndSwap(false, true) {
				crashedID.Store(id)
				nc1.Close()
			}
		})
		w1 := h.startWorker(cfg, js1, nil)
		waitFor(t, 20*time.Second, "the crash", crashed.Load)
		w1.stop(t, 30*time.Second)
		id := crashedID.Load().(string)
		j, _ := h.job(id)
		if j.Status != fixpoint.StatusValid {
			t.Fatalf("crashed job %s is %s, want its committed valid result", id, j.Status)
		}
		callsBefore := h.sim.requests()

		cfg2 := h.workerConfig(h.client(nil))
		w2 := h.startWorker(cfg2, nil, nil)
		h.waitDone("b", n, 30*time.Second)
		h.checkQueueEmpty()
		w2.stop(t, 30*time.Second)
		skips := metricValue(cfg2.Metrics.Dispositions.WithLabelValues("skip"))
		if skips < 1 {
			t.Errorf("no redelivered job was acked as already final")
		}
		final := 0
		_ = h.st.Export(h.ctx, "b", func(r store.ExportRow) error {
			if r.Status != fixpoint.StatusQueued {
				final++
			}
			return nil
		})
		// Every call made is accounted for by exactly one job: the crashed
		// job's redelivery cost nothing.
		if got := h.sim.requests(); got != n {
			t.Errorf("%d provider calls for %d jobs on a clean model (before the restart: %d)", got, n, callsBefore)
		}
		j2, _ := h.job(id)
		if j2.Calls != 1 || j2.Deliveries != 1 {
			t.Errorf("crashed job after redelivery: calls %d, deliveries %d; want the first result kept", j2.Calls, j2.Deliveries)
		}
		h.checkInvariants("b", invariants{Jobs: n, MaxCalls: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	})
	t.Run("panic after commit", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessConfig{})
		h.enqueue("b", n)
		target := jobID("b", 3)
		cfg := h.workerConfig(h.client(nil))
		pipeline.SetAfterCommitFunc(&cfg, func(id string) {
			if id == target {
				panic("crash after commit")
			}
		})
		rw := h.startWorker(cfg, nil, nil)
		h.waitDone("b", n, 30*time.Second)
		h.checkQueueEmpty()
		rw.stop(t, 30*time.Second)
		j, _ := h.job(target)
		if j.Status != fixpoint.StatusValid {
			t.Errorf("job that panicked after its commit is %s (%s), want the committed valid result kept", j.Status, j.Error)
		}
		h.checkInvariants("b", invariants{Jobs: n, MaxCalls: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
	})
}

// Poison messages are recorded as rejected with their reason and
// terminated; the other jobs finish.
func TestPoisonMessages(t *testing.T) {
	t.Parallel()
	const n = 40
	h := newHarness(t, harnessConfig{})
	h.enqueue("b", n)
	badHash, err := h.st.PutSchema(h.ctx, []byte(`{"type": 12}`))
	if err != nil {
		t.Fatalf("store a schema that does not compile: %v", err)
	}
	good := h.envelope("b", 1)
	mk := func(id string, mod func(*queue.Envelope)) []byte {
		e := *good
		e.JobID = id
		mod(&e)
		b, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	poison := []struct {
		id, reason string
		data       []byte
	}{
		{"b:notjson", "not valid JSON", []byte(`{"v":1,"job_id":`)},
		{"b:unknown-schema", "unknown schema", mk("b:unknown-schema", func(e *queue.Envelope) { e.SchemaHash = strings.Repeat("ab", 32) })},
		{"b:bad-schema", "does not compile", mk("b:bad-schema", func(e *queue.Envelope) { e.SchemaHash = badHash })},
		{"b:huge-prompt", "over the limit", mk("b:huge-prompt", func(e *queue.Envelope) { e.Prompt = strings.Repeat("x", 4096) })},
		{"b:version", "version", mk("b:version", func(e *queue.Envelope) { e.V = 99 })},
	}
	// Enqueue records every job before publishing it; a worker refuses a
	// job its ledger never recorded. The unparseable one has no id to
	// record.
	var rows []store.NewJob
	for _, p := range poison[1:] {
		rows = append(rows, store.NewJob{ID: p.id, Batch: "b", Prompt: "poison"})
	}
	if _, err := h.st.InsertJobs(h.ctx, rows); err != nil {
		t.Fatal(err)
	}
	for _, p := range poison {
		if _, err := h.js.Publish(h.ctx, h.q.Subject, p.data, jetstream.WithMsgID(p.id)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := h.workerConfig(h.client(nil))
	cfg.MaxPromptBytes = 2048
	rw := h.startWorker(cfg, nil, nil)
	h.waitDone("b", n+len(poison)-1, 30*time.Second) // the unparseable one has no batch
	waitFor(t, 10*time.Second, "the unparseable job recorded", func() bool {
		_, final, err := h.st.JobFinal(h.ctx, "b:notjson")
		return err == nil && final
	})
	h.checkQueueEmpty()
	rw.stop(t, 30*time.Second)
	for _, p := range poison {
		j, as := h.job(p.id)
		if j.Status != fixpoint.StatusRejected || !strings.Contains(j.Error, p.reason) || len(as) != 0 {
			t.Errorf("%s: status %s, error %q, %d attempts; want rejected for %q, no attempt", p.id, j.Status, j.Error, len(as), p.reason)
		}
		if len(j.Payload) == 0 {
			t.Errorf("%s: payload not kept for inspection", p.id)
		}
	}
	if got := metricValue(cfg.Metrics.Dispositions.WithLabelValues("term")); int(got) != len(poison) {
		t.Errorf("terminated %v messages, want %d", got, len(poison))
	}
	h.checkInvariants("b", invariants{Jobs: n + len(poison) - 1, MaxCalls: n,
		Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n, fixpoint.StatusRejected: len(poison) - 1}})
}

// A panic inside one job is recovered and recorded; the pool keeps going.
func TestPanicInOneJob(t *testing.T) {
	t.Parallel()
	const n = 60
	h := newHarness(t, harnessConfig{})
	h.enqueue("b", n)
	target := jobID("b", 7)
	cfg := h.workerConfig(h.client(nil))
	cfg.Concurrency = 4
	pipeline.SetBeforeJobFunc(&cfg, func(e *queue.Envelope) {
		if e.JobID == target {
			panic("boom in job")
		}
	})
	rw := h.startWorker(cfg, nil, nil)
	h.waitDone("b", n, 30*time.Second)
	h.checkQueueEmpty()
	if err := rw.stop(t, 30*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	j, _ := h.job(target)
	if j.Status != fixpoint.StatusFailed || j.FinalClass != "panic" || !strings.Contains(j.Error, "boom in job") {
		t.Errorf("panicked job: status %s, class %q, error %q; want failed, panic, the panic value", j.Status, j.FinalClass, j.Error)
	}
	h.checkInvariants("b", invariants{Jobs: n, MaxCalls: n - 1,
		Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n - 1, fixpoint.StatusFailed: 1}})
}

// metricValue reads a counter or gauge.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return -1
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	return -1
}
