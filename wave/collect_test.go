package wave

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A wave not full is recorded when its first job has waited Collect, not
// before.
func TestCollectRecordsAfterTheCollectWindow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.collect(h.jobs(2, time.Time{})...)
	h.clock.advance(10*time.Second - time.Millisecond)
	h.v.flushes.Wait()
	if n := h.ledger.waveCount(); n != 0 {
		t.Fatalf("%d waves recorded before the collection window ended", n)
	}
	if !h.v.Open(h.ctx) {
		t.Error("a wave being collected does not count as open")
	}
	h.clock.advance(time.Millisecond)
	h.v.flushes.Wait()
	if w := h.ledger.wave(1); w.Requests != 2 || w.Status != store.WaveSubmitted {
		t.Errorf("wave after the window: %d requests, %s; want 2, submitted", w.Requests, w.Status)
	}
}

// A wave holds at most what the provider takes, in requests and in
// bytes, and at most MaxRequests: the job that does not fit starts the
// next wave.
func TestCollectSplitsAtTheLimits(t *testing.T) {
	t.Parallel()
	for name, limit := range map[string]func(h *harness){
		"MaxRequests":         func(h *harness) { h.v.cfg.MaxRequests = 2 },
		"provider's requests": func(h *harness) { h.provider.maxReq = 2 },
		"provider's bytes": func(h *harness) {
			env := h.envelope("probe", time.Time{})
			job, _ := h.worker.Job(h.ctx, env)
			step := startStep(t, h, job)
			item, _ := h.provider.EncodeBatchItem(llm.BatchItem{CustomID: "w0-0", Request: *step.Next().Request})
			size := int64(len(item)) + 16
			h.provider.maxBytes = 2*size + size/2
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, llm.ProviderOpenAI, testConfig())
			limit(h)
			h.collect(h.jobs(5, time.Time{})...)
			h.v.flushes.Wait()
			if n := h.ledger.waveCount(); n != 2 {
				t.Fatalf("%d waves recorded of 5 jobs at 2 a wave, want 2 (the fifth still collecting)", n)
			}
			h.clock.advance(10 * time.Second)
			h.v.flushes.Wait()
			var sizes []int
			for id := int64(1); id <= 3; id++ {
				sizes = append(sizes, h.ledger.wave(id).Requests)
			}
			if !slices.Equal(sizes, []int{2, 2, 1}) {
				t.Errorf("wave sizes %v, want [2 2 1]", sizes)
			}
		})
	}
}

// Jobs of other batches or models go into waves of their own.
func TestCollectSeparatesModels(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	a, b, c := h.envelope("a", time.Time{}), h.envelope("b", time.Time{}), h.envelope("c", time.Time{})
	b.Model = "gpt-4o"
	c.Batch = "other"
	h.collect(a, b, c)
	h.clock.advance(10 * time.Second)
	h.v.flushes.Wait()
	if n := h.ledger.waveCount(); n != 3 {
		t.Fatalf("%d waves of 3 jobs of different models or batches, want 3", n)
	}
	for id := int64(1); id <= 3; id++ {
		if w := h.ledger.wave(id); w.Requests != 1 {
			t.Errorf("wave %d (%s, %s) holds %d requests, want 1", id, w.Batch, w.Model, w.Requests)
		}
	}
}

// A wave the ledger cannot record hands its jobs' messages back for
// another delivery, as a transient failure; the messages are not acked.
func TestCollectRecordFailureHandsJobsBack(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err   error
		tries int
	}{
		"ledger down":    {errors.New("connection refused"), 5},
		"ledger refuses": {refused("no"), 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, llm.ProviderOpenAI, testConfig())
			h.ledger.setInject(func(call string, _ any) error {
				if call == "RecordWave" {
					return tc.err
				}
				return nil
			})
			h.submittedOrNot(2)
			if n := h.ledger.count("RecordWave"); n != tc.tries {
				t.Errorf("the record was tried %d times, want %d", n, tc.tries)
			}
			for _, id := range []string{"j0", "j1"} {
				causes := h.worker.handedBack[id]
				if len(causes) != 1 || !errors.Is(causes[0], fixpoint.ErrTransient) || !errors.Is(causes[0], tc.err) {
					t.Errorf("job %s handed back for %v, want once for the transient %v", id, causes, tc.err)
				}
				if d := h.worker.dispositions(id); len(d) != 0 {
					t.Errorf("job %s's message was also %v", id, d)
				}
			}
			if n := h.worker.heartbeats(); n != 0 {
				t.Errorf("%d heartbeats still run", n)
			}
			if n := h.provider.count("create"); n != 0 {
				t.Errorf("%d provider batches created for a wave not recorded", n)
			}
		})
	}
}

// submittedOrNot collects n jobs into one wave and waits for its record
// (or the failure of it).
func (h *harness) submittedOrNot(n int) {
	h.v.cfg.MaxRequests = n
	h.collect(h.jobs(n, time.Time{})...)
	h.v.flushes.Wait()
}

// A job the ledger does not place in the wave (final already, requeued,
// or in another worker's wave) is acked unrun; the others are acked for
// the wave.
func TestCollectSkipsJobsTheWaveDidNotTake(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	envs := h.jobs(2, time.Time{})
	h.ledger.setJob("j1", "valid")
	h.v.cfg.MaxRequests = 2
	h.collect(envs...)
	h.v.flushes.Wait()
	if d := h.worker.dispositions("j0"); !slices.Equal(d, []queue.DispositionKind{queue.DispWave}) {
		t.Errorf("j0: %v, want acked for the wave", d)
	}
	if d := h.worker.dispositions("j1"); !slices.Equal(d, []queue.DispositionKind{queue.DispSkip}) {
		t.Errorf("j1 (final already): %v, want acked unrun", d)
	}
	if w := h.ledger.wave(1); w.Requests != 1 {
		t.Errorf("wave of %d requests, want 1", w.Requests)
	}
}

// A wave of jobs none of which the ledger places is no wave: the
// messages are acked unrun and nothing is sent.
func TestCollectOfJobsAllTakenRecordsNoWave(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	envs := h.jobs(2, time.Time{})
	h.ledger.setJob("j0", "cancelled")
	h.ledger.setJob("j1", "valid")
	h.v.cfg.MaxRequests = 2
	h.collect(envs...)
	h.v.flushes.Wait()
	if h.ledger.waveCount() != 0 || h.provider.count("create") != 0 || h.worker.step(llm.ProviderOpenAI, "recorded") != 0 {
		t.Errorf("%d waves, %d creates: want none", h.ledger.waveCount(), h.provider.count("create"))
	}
	for _, id := range []string{"j0", "j1"} {
		if d := h.worker.dispositions(id); !slices.Equal(d, []queue.DispositionKind{queue.DispSkip}) {
			t.Errorf("%s: %v, want acked unrun", id, d)
		}
	}
}

// A wave recorded while the worker stops is left for the next worker to
// submit: its lease released, nothing sent; a worker started again
// submits it.
func TestCollectWhileStoppingLeavesTheSubmitToTheNextWorker(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.worker.stopping = true
	h.submittedOrNot(2)
	w := h.ledger.wave(1)
	if w.Status != store.WaveRecorded || w.LeaseOwner != "" || h.provider.count("upload")+h.provider.count("create") != 0 {
		t.Fatalf("wave recorded while stopping: %s, lease %q, %d uploads and creates; want recorded, released, nothing sent",
			w.Status, w.LeaseOwner, h.provider.count("upload")+h.provider.count("create"))
	}
	if d := h.worker.dispositions("j0"); !slices.Equal(d, []queue.DispositionKind{queue.DispWave}) {
		t.Errorf("j0: %v, want acked for the wave", d)
	}
	h.worker.stopping = false
	h.v = h.driver(testConfig())
	h.drive()
	if w := h.ledger.wave(1); w.Status != store.WaveSubmitted || h.provider.batchCount() != 1 {
		t.Errorf("the next worker left it %s with %d provider batches, want submitted with 1", w.Status, h.provider.batchCount())
	}
}

// Stop hands back the jobs of waves still being collected, and they are
// not recorded later.
func TestStopHandsBackCollectedJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.collect(h.jobs(2, time.Time{})...)
	h.v.Stop(h.ctx)
	for _, id := range []string{"j0", "j1"} {
		if d := h.worker.dispositions(id); !slices.Equal(d, []queue.DispositionKind{queue.DispRelease}) {
			t.Errorf("%s: %v, want released", id, d)
		}
	}
	if n := h.worker.heartbeats(); n != 0 {
		t.Errorf("%d heartbeats still run", n)
	}
	if h.v.Open(h.ctx) {
		t.Error("the driver is open after its collections were handed back")
	}
	h.clock.advance(time.Minute)
	h.v.flushes.Wait()
	if n := h.ledger.waveCount(); n != 0 {
		t.Errorf("%d waves recorded after Stop", n)
	}
}

// A job final before any call (a token budget too small for one) is
// finished, not collected; a job its step refuses is rejected.
func TestCollectOfAJobWithNoCallToMake(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	small, bad := h.envelope("small", time.Time{}), h.envelope("bad", time.Time{})
	small.Limits.TokenBudget = 1
	bad.Limits.MaxAttempts = 1000
	h.collect(small, bad)
	if r := h.worker.finished["small"]; r == nil || r.Status != fixpoint.StatusFailed || r.Class != fixpoint.OutcomeBudget {
		t.Errorf("a job over its token budget: %+v, want finished failed for its budget", r)
	}
	d := h.worker.disposed["bad"]
	if len(d) != 1 || d[0].Kind != queue.DispReject || !errors.Is(d[0].Cause, fixpoint.ErrBadJob) {
		t.Errorf("a job its step refuses: %+v, want rejected as a bad job", d)
	}
	if h.v.Open(h.ctx) || h.worker.heartbeats() != 0 {
		t.Error("a job with no call to make was collected")
	}
}

// A job goes into a wave only on a provider with a batch client and when
// its deadline leaves DeadlineMargin.
func TestCanCollect(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	now := h.clock.Now()
	for _, tc := range []struct {
		provider string
		deadline time.Time
		want     bool
	}{
		{llm.ProviderOpenAI, time.Time{}, true},
		{llm.ProviderOpenAI, now.Add(2 * time.Hour), true},
		{llm.ProviderOpenAI, now.Add(time.Hour), false},
		{llm.ProviderOpenAI, now.Add(30 * time.Minute), false},
		{llm.ProviderAnthropic, time.Time{}, false},
	} {
		env := &queue.Envelope{JobID: "x", Provider: tc.provider}
		if !tc.deadline.IsZero() {
			env.Deadline = tc.deadline.Unix()
		}
		if got := h.v.CanCollect(env); got != tc.want {
			t.Errorf("CanCollect(%s, deadline in %s) = %t, want %t", tc.provider, tc.deadline.Sub(now), got, tc.want)
		}
	}
	var none *Driver
	if none.CanCollect(&queue.Envelope{Provider: llm.ProviderOpenAI}) || none.Drives() || none.Open(h.ctx) {
		t.Error("a nil driver collects, drives or is open")
	}
}
