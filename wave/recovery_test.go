package wave

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A worker that stopped after recording some of a wave's results (the
// next step failed, or it died) leaves the rest to whoever holds the wave
// next: its lease lapses, another worker claims it, records the rest and
// moves the jobs on; nothing is recorded twice.
func TestRecoveryAfterResultsWereRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(3, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, func(it llm.BatchItem) *llm.BatchResult {
		if it.CustomID == "w1-1" {
			return invalidReply(it)
		}
		return validReply(it)
	})
	// The first worker records the results and dies before it moves the
	// jobs on (its PlacedJobs never answers).
	h.ledger.setInject(failOnce("PlacedJobs", nil, errors.New("connection refused")))
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveEnded {
		t.Fatalf("wave %s, want ended", got.Status)
	}
	h.v = h.driver(Config{Owner: "worker-2", RealtimeBelow: -1})
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveDone || got.Succeeded != 3 {
		t.Errorf("wave %s with %d succeeded, want done with 3", got.Status, got.Succeeded)
	}
	for _, id := range []string{"j0", "j1", "j2"} {
		if as := h.ledger.jobAttempts(id); len(as) != 1 {
			t.Errorf("job %s has %d attempts, want 1", id, len(as))
		}
	}
	if r := h.ledger.requests(2); len(r) != 1 || r[0].JobID != "j1" {
		t.Errorf("repair wave %+v, want j1's", r)
	}
	if n := len(h.worker.observed); n != 3 {
		t.Errorf("%d outcomes observed, want 3", n)
	}
}

// A worker that recorded the repair wave but not the end of the wave its
// jobs came from leaves both to the next: the first is done with no job
// left in it, the repair wave submitted once.
func TestRecoveryAfterTheJobsWereHandedOn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(2, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, invalidReply)
	h.ledger.setInject(failOnce("UpdateWave", statusUpdate(store.WaveDone), errors.New("connection refused")))
	h.drive()
	if w1, w2 := h.ledger.wave(1), h.ledger.wave(2); w1.Status != store.WaveEnded || w2.Status != store.WaveRecorded {
		t.Fatalf("waves %s and %s, want ended and recorded", w1.Status, w2.Status)
	}
	h.v = h.driver(Config{Owner: "worker-2", RealtimeBelow: -1})
	h.drive()
	h.drive()
	if w1, w2 := h.ledger.wave(1), h.ledger.wave(2); w1.Status != store.WaveDone || w2.Status != store.WaveSubmitted {
		t.Errorf("waves %s and %s, want done and submitted", w1.Status, w2.Status)
	}
	if n, b := h.ledger.waveCount(), h.provider.batchCount(); n != 2 || b != 2 {
		t.Errorf("%d waves, %d provider batches; want 2 and 2", n, b)
	}
	for _, id := range []string{"j0", "j1"} {
		if j := h.ledger.job(id); j.waveID != 2 {
			t.Errorf("job %s in wave %d, want 2", id, j.waveID)
		}
	}
	if ids := h.js.jobs(); len(ids) != 0 {
		t.Errorf("jobs %v went realtime", ids)
	}
}

// A step whose lease passed to another worker meanwhile stops there and
// writes nothing over the new holder's wave.
func TestDriveLeaseLostWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.ledger.setInject(failOnce("UpdateWave", statusUpdate(store.WaveSubmitted), fmt.Errorf("update wave 1: %w", store.ErrLeaseLost)))
	h.submittedOrNot(2)
	if errs := h.ledger.errorsOf(1); len(errs) != 0 {
		t.Errorf("errors %q written by a worker that lost the lease", errs)
	}
	if got := h.ledger.wave(1); got.LeaseOwner != "worker-1" || got.ProviderBatchID != "" {
		t.Errorf("wave leased by %q with batch %q, want left as it was", got.LeaseOwner, got.ProviderBatchID)
	}
}

// A wave of a provider this worker has no batch client for is left to a
// worker that has one, for PollMax.
func TestDriveWaveOfAnotherProvider(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.ledger.addJob("a")
	if _, _, err := h.ledger.RecordWave(h.ctx, store.WaveParams{Batch: "b", Provider: llm.ProviderAnthropic, Model: "m",
		Requests: []store.WaveRequest{{JobID: "a", AttemptNo: 1}}}); err != nil {
		t.Fatal(err)
	}
	h.drive()
	got := h.ledger.wave(1)
	if got.Status != store.WaveRecorded || got.LeaseOwner != "" || got.NextPollAt.Sub(h.clock.Now()) != 10*time.Minute {
		t.Errorf("wave %s, lease %q, next in %s; want recorded, released, in PollMax", got.Status, got.LeaseOwner, got.NextPollAt.Sub(h.clock.Now()))
	}
	if n := h.provider.count("list") + h.provider.count("create"); n != 0 {
		t.Errorf("%d calls to this worker's provider for another's wave", n)
	}
}

// A wave this worker still acts on (its lease lapsed on a loaded
// machine) is not driven twice: the claim only renews its lease.
func TestDriveDueSkipsAWaveItHolds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.worker.stopping = true
	h.submittedOrNot(2)
	h.clock.advance(time.Second)
	if !h.v.take(1) {
		t.Fatal("wave 1 is held")
	}
	if !h.v.driveDue(h.ctx) {
		t.Fatal("wave 1 not due")
	}
	if n := h.provider.count("list") + h.provider.count("upload"); n != 0 {
		t.Errorf("a held wave was driven: %d calls", n)
	}
	if got := h.ledger.wave(1); got.LeaseOwner != "worker-1" {
		t.Errorf("lease %q, want the claim's", got.LeaseOwner)
	}
}

// Run drives the waves that are due until its context ends, warns of open
// waves no worker like it drives, and waits Idle between looks when none
// is due.
func TestRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(2, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, validReply)
	h.ledger.addJob("x")
	if _, _, err := h.ledger.RecordWave(h.ctx, store.WaveParams{Batch: "elsewhere", Provider: llm.ProviderOpenAI, Model: "m",
		Home: "stream OTHER, openai", Requests: []store.WaveRequest{{JobID: "x", AttemptNo: 1}}}); err != nil {
		t.Fatal(err)
	}
	h.clock.advance(time.Minute)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.v.Run(ctx)
	}()
	// Once nothing is due it warns of the wave it does not drive.
	waitFor(t, "the warning of another home's wave", func() bool {
		return h.logged("open provider batches this worker does not drive") && h.logged(`their_home="stream OTHER, openai"`)
	})
	if got := h.ledger.wave(1); got.Status != store.WaveDone {
		t.Errorf("wave %s, want done", got.Status)
	}
	if got := h.ledger.wave(2); got.Status != store.WaveRecorded || got.Polls != 0 {
		t.Errorf("another home's wave was claimed: %s, %d polls", got.Status, got.Polls)
	}
	cancel()
	<-done
}

// keepLease renews the lease every third of it while a step acts, until
// it is stopped.
func TestKeepLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.ledger.addJob("a")
	w, _, err := h.ledger.RecordWave(h.ctx, store.WaveParams{Batch: "b", Provider: llm.ProviderOpenAI, Model: "m",
		Requests: []store.WaveRequest{{JobID: "a", AttemptNo: 1}}, Owner: "worker-1", Lease: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	stop := h.v.keepLease(h.ctx, slog.Default(), w)
	for range 3 {
		h.clock.waitWaiters(t, 1)
		h.clock.advance(100 * time.Second)
	}
	h.clock.waitWaiters(t, 1) // renewed, waiting for the next
	if got := h.ledger.wave(1); !got.LeaseUntil.Equal(h.clock.Now().Add(5 * time.Minute)) {
		t.Errorf("lease until %s after 5m of work, want 5m from now (%s)", got.LeaseUntil, h.clock.Now().Add(5*time.Minute))
	}
	if n := h.ledger.count("UpdateWave"); n != 3 {
		t.Errorf("%d renewals in 5m, want 3", n)
	}
	stop()
	stop() // stop twice is no fault
	h.clock.advance(time.Hour)
	if n := h.ledger.count("UpdateWave"); n != 3 {
		t.Errorf("%d renewals, want none after stop", n)
	}
}

// Open counts the waves being collected and the open waves of this
// worker's providers and homes; a ledger that cannot say counts as open.
func TestOpen(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	if h.v.Open(h.ctx) {
		t.Error("open with no wave")
	}
	for i, p := range []store.WaveParams{
		{Batch: "b", Provider: llm.ProviderAnthropic, Model: "m"},
		{Batch: "b", Provider: llm.ProviderOpenAI, Model: "m", Home: "stream OTHER, openai"},
	} {
		id := fmt.Sprintf("x%d", i)
		h.ledger.addJob(id)
		p.Requests = []store.WaveRequest{{JobID: id, AttemptNo: 1}}
		if _, _, err := h.ledger.RecordWave(h.ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if h.v.Open(h.ctx) {
		t.Error("open with only another provider's wave and another home's")
	}
	h.ledger.setInject(failOnce("OpenWaves", nil, errors.New("connection refused")))
	if !h.v.Open(h.ctx) {
		t.Error("not open when the ledger could not say")
	}
	h.worker.stopping = true
	h.submittedOrNot(1)
	if !h.v.Open(h.ctx) {
		t.Error("not open with a wave of this worker's open")
	}
}

// A worker's home is its queue stream and its provider's endpoint; a
// client that cannot deliver in batches is left out.
func TestNewHomes(t *testing.T) {
	t.Parallel()
	c := newFakeClock()
	v := newDriver(newFakeWorker(t, c), Setup{Ledger: newFakeLedger(c), Clients: map[string]BatchClient{
		llm.ProviderOpenAI:    endpointClient{newFakeProvider(c, llm.ProviderOpenAI), "https://user:secret@llm.example/v1"},
		llm.ProviderAnthropic: noBatch{newFakeProvider(c, llm.ProviderAnthropic)},
	}, Config: testConfig()}, c)
	if !v.Drives() || len(v.clients) != 1 {
		t.Fatalf("drives %d providers, want openai's only", len(v.clients))
	}
	home := v.homes[llm.ProviderOpenAI]
	if !strings.HasPrefix(home, "stream FIXPOINT_JOBS, openai https://") || !strings.Contains(home, "llm.example/v1") || strings.Contains(home, "secret") {
		t.Errorf("home %q, want the stream and the endpoint, its secret redacted", home)
	}
	if got := v.homeList(); !slices.Equal(got, []string{home}) {
		t.Errorf("homes %q, want [%q]", got, home)
	}
}

// endpointClient is a batch client that says its endpoint.
type endpointClient struct {
	*fakeProvider
	url string
}

func (c endpointClient) Config() llm.Config { return llm.Config{BaseURL: c.url} }

// noBatch is a client of a server without batch endpoints.
type noBatch struct{ *fakeProvider }

func (noBatch) SupportsBatch() bool { return false }

// JobAttempts reads a job's run from the ledger; a nil driver has none.
func TestJobAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(1, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, invalidReply)
	h.drive()
	env := &queue.Envelope{JobID: "j0"}
	as, err := h.v.JobAttempts(h.ctx, env)
	if err != nil || len(as) != 1 || as[0].WaveID != 1 {
		t.Errorf("JobAttempts: %+v, %v; want the attempt of wave 1", as, err)
	}
	var none *Driver
	if as, err := none.JobAttempts(h.ctx, env); as != nil || err != nil {
		t.Errorf("a nil driver's JobAttempts: %v, %v", as, err)
	}
}

// waitFor waits until cond holds, failing the test if it does not within
// a long while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("waited in vain for %s", what)
		}
	}
}

// Jobs leave a wave for the queue only once the queue has them: a queue
// down while a failed batch hands them on leaves them placed, and the
// next poll hands them on.
func TestRealtimeHandOverWaitsForTheQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(2, time.Time{})
	h.provider.fail(w.ProviderBatchID, "invalid input line")
	h.js.mu.Lock()
	h.js.fail = errors.New("nats: no responders available for request")
	h.js.mu.Unlock()
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveSubmitted || !strings.Contains(got.Error, "no responders") {
		t.Fatalf("wave %s, error %q; want submitted, the queue's failure", got.Status, got.Error)
	}
	for _, id := range []string{"j0", "j1"} {
		if j := h.ledger.job(id); j.waveID != 1 {
			t.Errorf("job %s left the wave (placed in %d) before the queue had it", id, j.waveID)
		}
	}
	h.js.mu.Lock()
	h.js.fail = nil
	h.js.mu.Unlock()
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveFailed {
		t.Errorf("wave %s, want failed", got.Status)
	}
	h.checkRealtime(1, "j0", "j1")
	if !h.reached("published", 1) {
		t.Error("the hand-over's crash point was not passed")
	}
}
