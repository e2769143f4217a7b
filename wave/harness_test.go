package wave

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// harness is a wave driver on fakes of everything it reaches: the
// ledger, one provider's batch API, the worker, the queue and the clock.
// Nothing runs in the background but what the driver starts itself
// (recording a collected wave, renewing a lease), and the clock moves
// only when a test moves it.
type harness struct {
	t        *testing.T
	ctx      context.Context
	clock    *fakeClock
	ledger   *fakeLedger
	provider *fakeProvider
	worker   *fakeWorker
	js       *fakeJS
	v        *Driver
	logs     *syncBuffer
	// tracer, when set, traces the drivers' steps; baseURL, when set, is
	// the provider client's (Config().BaseURL), as an llm.Client has one.
	tracer  trace.Tracer
	baseURL string

	mu     sync.Mutex
	points []string // the crash points reached, "point wave"
}

// testConfig is the wave configuration of the tests: every wave is
// driven by waves whatever its size, unless a test says otherwise.
func testConfig() Config {
	return Config{Owner: "worker-1", MaxRequests: 100, Collect: 10 * time.Second, PollMin: 30 * time.Second,
		PollMax: 10 * time.Minute, Lease: 5 * time.Minute, Idle: 5 * time.Second, RealtimeBelow: -1,
		DeadlineMargin: time.Hour, NotFoundGrace: 5 * time.Minute}
}

func newHarness(t *testing.T, provider string, cfg Config) *harness {
	t.Helper()
	c := newFakeClock()
	h := &harness{t: t, ctx: context.Background(), clock: c, ledger: newFakeLedger(c), provider: newFakeProvider(c, provider),
		worker: newFakeWorker(t, c), js: &fakeJS{}, logs: &syncBuffer{}}
	h.v = h.driver(cfg)
	return h
}

// driver returns a driver of the harness's fakes with cfg: a worker
// started again on the same ledger and provider.
func (h *harness) driver(cfg Config) *Driver {
	var client BatchClient = h.provider
	if h.baseURL != "" {
		client = configuredProvider{h.provider, h.baseURL}
	}
	return newDriver(h.worker, Setup{Ledger: h.ledger, Clients: map[string]BatchClient{h.provider.name: client}, JS: h.js,
		Config: cfg, Log: slog.New(slog.NewTextHandler(h.logs, nil)), Tracer: h.tracer,
		Hook: func(point string, waveID int64) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.points = append(h.points, fmt.Sprintf("%s %d", point, waveID))
		}}, h.clock)
}

// envelope returns the message of job id of batch "b", recording the job
// queued in the ledger. deadline zero: none.
func (h *harness) envelope(id string, deadline time.Time) *queue.Envelope {
	h.ledger.addJob(id)
	env := &queue.Envelope{V: 1, JobID: id, Batch: "b", Prompt: "say n", SchemaHash: "s", Provider: h.provider.name,
		Model: "gpt-4o-mini", Mode: fixpoint.ModePrompt, Delivery: queue.DeliveryBatch}
	if !deadline.IsZero() {
		env.Deadline = deadline.Unix()
	}
	return env
}

// collect collects the jobs of envs, each delivered once.
func (h *harness) collect(envs ...*queue.Envelope) {
	h.t.Helper()
	for _, env := range envs {
		job, err := h.worker.Job(h.ctx, env)
		if err != nil {
			h.t.Fatal(err)
		}
		h.v.Collect(h.ctx, &fakeMsg{job: env.JobID}, env, job, 1)
	}
}

// jobs returns the messages of n jobs "j0", "j1", ... with deadline.
func (h *harness) jobs(n int, deadline time.Time) []*queue.Envelope {
	envs := make([]*queue.Envelope, n)
	for i := range envs {
		envs[i] = h.envelope(fmt.Sprintf("j%d", i), deadline)
	}
	return envs
}

// submitted collects n jobs into one wave, recorded and submitted when
// it is full, and returns the wave.
func (h *harness) submitted(n int, deadline time.Time) store.Wave {
	h.t.Helper()
	h.v.cfg.MaxRequests = n
	h.collect(h.jobs(n, deadline)...)
	h.v.flushes.Wait()
	w := h.ledger.wave(1)
	if w.Status != store.WaveSubmitted || w.ProviderBatchID == "" {
		h.t.Fatalf("wave 1 is %s with provider batch %q, want submitted", w.Status, w.ProviderBatchID)
	}
	return w
}

// drive moves the clock on to when the first open wave is due and has
// the driver claim it and move it one step on.
func (h *harness) drive() {
	h.t.Helper()
	at, ok := h.ledger.nextDue()
	if !ok {
		h.t.Fatal("no open wave to drive")
	}
	h.clock.advanceTo(at)
	if !h.v.driveDue(h.ctx) {
		h.t.Fatalf("no wave due at %s", at)
	}
}

// reached reports whether the driver passed the crash point of wave id.
func (h *harness) reached(point string, id int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.points {
		if p == fmt.Sprintf("%s %d", point, id) {
			return true
		}
	}
	return false
}

// logged reports whether a log line contains s.
func (h *harness) logged(s string) bool { return strings.Contains(h.logs.String(), s) }

// syncBuffer is a bytes.Buffer safe for the driver's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// The wave's jobs as the ledger has them.

// statuses returns the status of jobs "j0".."j<n-1>".
func (h *harness) statuses(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = h.ledger.job(fmt.Sprintf("j%d", i)).status
	}
	return out
}

// all returns n copies of s.
func all(n int, s string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// providerError is a provider's failure of class c with HTTP status.
func providerError(c fixpoint.ErrorClass, status int) error {
	return &fixpoint.ProviderError{Class: c, Status: status, Message: string(c)}
}

// startStep starts the repair step of job as the driver does.
func startStep(t *testing.T, h *harness, job *repair.Job) *repair.Step {
	t.Helper()
	step, err := repair.Start(job, nil, h.worker.StepConfig(h.provider.name, fixpoint.PriceBasisBatch))
	if err != nil {
		t.Fatal(err)
	}
	return step
}
