package wave

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// fakeClock is a clock that moves only when the test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	// changed is closed, and replaced, whenever a waiter is added.
	changed chan struct{}
}

// fakeWaiter is an After channel or an AfterFunc func due at a time.
type fakeWaiter struct {
	at time.Time
	ch chan time.Time
	f  func()
}

var _ clock = (*fakeClock)(nil)

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	w := &fakeWaiter{ch: make(chan time.Time, 1)}
	c.add(w, d)
	return w.ch
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	w := &fakeWaiter{f: f}
	c.add(w, d)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.waiters, w)
		if i < 0 {
			return false
		}
		c.waiters = slices.Delete(c.waiters, i, i+1)
		return true
	}
}

func (c *fakeClock) add(w *fakeWaiter, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.at = c.now.Add(d)
	c.waiters = append(c.waiters, w)
	close(c.changed)
	c.changed = make(chan struct{})
}

// advance moves the clock on by d and fires what is due by then: After
// channels receive, AfterFunc funcs run in the caller's goroutine.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeWaiter
	c.waiters = slices.DeleteFunc(c.waiters, func(w *fakeWaiter) bool {
		if w.at.After(c.now) {
			return false
		}
		due = append(due, w)
		return true
	})
	now := c.now
	c.mu.Unlock()
	for _, w := range due {
		if w.ch != nil {
			w.ch <- now
		} else {
			w.f()
		}
	}
}

// advanceTo moves the clock on to t (not back).
func (c *fakeClock) advanceTo(t time.Time) {
	if d := t.Sub(c.Now()); d > 0 {
		c.advance(d)
	}
}

// waitWaiters waits until at least n waiters wait on the clock.
func (c *fakeClock) waitWaiters(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		k, changed := len(c.waiters), c.changed
		c.mu.Unlock()
		if k >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%d waiters on the clock, want %d", k, n)
		}
	}
}

// fakeJS is the queue a wave hands jobs back to, to finish realtime.
type fakeJS struct {
	jetstream.JetStream // nil: only PublishMsg is used
	mu                  sync.Mutex
	published           []*queue.Envelope
	fail                error
}

func (js *fakeJS) PublishMsg(ctx context.Context, msg *nats.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	js.mu.Lock()
	defer js.mu.Unlock()
	if js.fail != nil {
		return nil, js.fail
	}
	env, err := queue.DecodeEnvelope(msg.Data)
	if err != nil {
		return nil, err
	}
	js.published = append(js.published, env)
	return &jetstream.PubAck{}, nil
}

// jobs returns the ids of the jobs published, in order.
func (js *fakeJS) jobs() []string {
	js.mu.Lock()
	defer js.mu.Unlock()
	var ids []string
	for _, e := range js.published {
		ids = append(ids, e.JobID)
	}
	return ids
}

// envelopes returns the envelopes published.
func (js *fakeJS) envelopes() []*queue.Envelope {
	js.mu.Lock()
	defer js.mu.Unlock()
	return slices.Clone(js.published)
}

// fakeMsg is a job's message; only its identity matters to the driver.
type fakeMsg struct {
	jetstream.Msg
	job string
}

// testSchema is the schema of every test job: {"n": an integer}.
const testSchema = `{"type": "object", "required": ["n"], "additionalProperties": false, "properties": {"n": {"type": "integer"}}}`

// fakeWorker is the worker as the driver sees it: it records what
// becomes of each job's message and counts the driver's steps.
type fakeWorker struct {
	t      *testing.T
	clock  *fakeClock
	schema *validate.Schema
	prices repair.Prices

	mu sync.Mutex
	// disposed are the dispositions of each job's messages, in order.
	disposed map[string][]queue.Disposition
	// handedBack are the causes each job's message was handed back for.
	handedBack map[string][]error
	finished   map[string]*fixpoint.Result
	// beats counts heartbeats running.
	beats    int
	stopping bool
	aborted  []error
	steps    map[string]int // "provider step"
	observed []store.WaveOutcome
	// badJobs are jobs Job cannot build.
	badJobs map[string]bool
	// documents are the texts of the jobs' documents, by hash.
	documents map[string]string
	// ledgerTries is how many times RetryLedger tries an op before it
	// gives up (the worker stopping).
	ledgerTries int
}

var _ Worker = (*fakeWorker)(nil)

func newFakeWorker(t *testing.T, c *fakeClock) *fakeWorker {
	s, err := validate.Compile([]byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	prices := repair.DefaultPrices()
	// A price typo no ledger column can hold the cost of.
	prices["priceless"] = repair.Price{InputPerMTok: 1e15, OutputPerMTok: 1e15}
	return &fakeWorker{t: t, clock: c, schema: s, prices: prices, disposed: map[string][]queue.Disposition{},
		handedBack: map[string][]error{}, finished: map[string]*fixpoint.Result{}, steps: map[string]int{},
		badJobs: map[string]bool{}, documents: map[string]string{}, ledgerTries: 5}
}

func (w *fakeWorker) Dispose(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, d queue.Disposition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m, ok := msg.(*fakeMsg); !ok || m.job != env.JobID {
		w.t.Errorf("job %s disposed of with the message %v", env.JobID, msg)
	}
	w.disposed[env.JobID] = append(w.disposed[env.JobID], d)
}

func (w *fakeWorker) HandBack(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, delivered int, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handedBack[env.JobID] = append(w.handedBack[env.JobID], cause)
}

func (w *fakeWorker) Finish(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, res *fixpoint.Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finished[env.JobID] = res
}

func (w *fakeWorker) Heartbeat(msg jetstream.Msg) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.beats++
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.beats--
		})
	}
}

func (w *fakeWorker) Stopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping
}

func (w *fakeWorker) Abort(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.aborted = append(w.aborted, err)
}

func (w *fakeWorker) Job(ctx context.Context, env *queue.Envelope) (*repair.Job, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.badJobs[env.JobID] {
		return nil, errors.New("schema not found")
	}
	return &repair.Job{ID: env.JobID, Prompt: env.Prompt, Schema: w.schema, SchemaRaw: json.RawMessage(testSchema),
		Model: env.Model, Mode: env.Mode, Limits: env.Limits, Document: w.documents[env.Document]}, nil
}

func (w *fakeWorker) StepConfig(provider string, basis fixpoint.PriceBasis) repair.Config {
	return repair.Config{Prices: w.prices, PriceBasis: basis, NowFunc: w.clock.Now}
}

// RetryLedger tries op until it succeeds, the ledger refuses it, or
// ledgerTries tries failed (the worker stopped meanwhile).
func (w *fakeWorker) RetryLedger(ctx context.Context, log *slog.Logger, op func() error) error {
	var err error
	for range w.ledgerTries {
		if err = op(); err == nil || store.IsRefused(err) {
			return err
		}
	}
	return err
}

func (w *fakeWorker) WaveStep(provider, step string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.steps[provider+" "+step]++
}

func (w *fakeWorker) Observe(outs []store.WaveOutcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.observed = append(w.observed, outs...)
}

// dispositions returns the kinds of a job's dispositions, in order.
func (w *fakeWorker) dispositions(job string) []queue.DispositionKind {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []queue.DispositionKind
	for _, d := range w.disposed[job] {
		out = append(out, d.Kind)
	}
	return out
}

// step returns how many times the driver counted a provider's step.
func (w *fakeWorker) step(provider, step string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.steps[provider+" "+step]
}

// heartbeats is how many heartbeats run.
func (w *fakeWorker) heartbeats() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.beats
}
