package wave

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
)

// An upload or create that fails in a way that can pass is tried again at
// the next poll, from where it stopped: a file recorded is not uploaded
// again, and one provider batch is made.
func TestSubmitTransientFailureIsRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider, call string
		status         string // the wave's after the failure
		uploads        int
	}{
		{llm.ProviderOpenAI, "upload", store.WaveRecorded, 2},
		{llm.ProviderOpenAI, "create", store.WaveUploaded, 1},
		{llm.ProviderAnthropic, "create", store.WaveRecorded, 0},
	} {
		t.Run(tc.provider+" "+tc.call, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.provider, testConfig())
			h.provider.setInject(failOnce(tc.call, nil, providerError(fixpoint.ClassOverloaded, 529)))
			h.submittedOrNot(2)
			w := h.ledger.wave(1)
			if w.Status != tc.status || !strings.HasPrefix(w.Error, "submit: overloaded") || w.LeaseOwner != "" ||
				w.NextPollAt.Sub(h.clock.Now()) != 30*time.Second {
				t.Fatalf("after a failed %s: %s, error %q, lease %q, next poll in %s; want %s, the failure, released, in PollMin",
					tc.call, w.Status, w.Error, w.LeaseOwner, w.NextPollAt.Sub(h.clock.Now()), tc.status)
			}
			h.drive()
			if w := h.ledger.wave(1); w.Status != store.WaveSubmitted || h.provider.batchCount() != 1 {
				t.Errorf("after the retry: %s with %d provider batches, want submitted with 1", w.Status, h.provider.batchCount())
			}
			if n := h.provider.count("upload"); n != tc.uploads {
				t.Errorf("%d uploads, want %d", n, tc.uploads)
			}
			// A claimed wave looks for a batch an earlier try made first.
			if n := h.provider.count("list"); n != 1 {
				t.Errorf("the retry listed the provider's batches %d times, want 1", n)
			}
		})
	}
}

// An upload made again (its file was never recorded) is logged: the
// first upload may have left a file behind.
func TestSubmitUploadAgainIsLogged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.ledger.setInject(failOnce("UpdateWave", statusUpdate(store.WaveUploaded), errors.New("connection reset")))
	h.submittedOrNot(2)
	if w := h.ledger.wave(1); w.Status != store.WaveRecorded || w.InputFileID != "" {
		t.Fatalf("wave %s with file %q, want recorded with none", w.Status, w.InputFileID)
	}
	h.drive()
	if !h.logged("uploading a wave again") {
		t.Error("the second upload was not logged")
	}
	if w := h.ledger.wave(1); w.Status != store.WaveSubmitted || w.InputFileID != "file-2" || h.provider.batchCount() != 1 {
		t.Errorf("wave %s with file %q and %d batches, want submitted with file-2 and 1 batch", w.Status, w.InputFileID, h.provider.batchCount())
	}
}

// A provider that refuses the wave's upload or create (a permanent
// failure) fails the wave with its reason; its jobs go to the queue to
// finish realtime, and leave the wave.
func TestSubmitRefusedFailsTheWave(t *testing.T) {
	t.Parallel()
	for _, call := range []string{"upload", "create"} {
		t.Run(call, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, llm.ProviderOpenAI, testConfig())
			h.provider.setInject(failOnce(call, nil, providerError(fixpoint.ClassBadRequest, 400)))
			h.submittedOrNot(2)
			w := h.ledger.wave(1)
			if w.Status != store.WaveFailed || w.Error != "submit: bad_request (HTTP 400): bad_request" {
				t.Errorf("wave %s, error %q; want failed, naming the refusal", w.Status, w.Error)
			}
			h.checkRealtime(1, "j0", "j1")
			if n := h.provider.batchCount(); n != 0 {
				t.Errorf("%d provider batches, want none", n)
			}
		})
	}
}

// checkRealtime checks that jobs ids, and only they, went to the queue
// from wave id and left it.
func (h *harness) checkRealtime(id int64, ids ...string) {
	h.t.Helper()
	if got := h.js.jobs(); !slices.Equal(got, ids) {
		h.t.Errorf("jobs %v went to the queue, want %v", got, ids)
	}
	for _, env := range h.js.envelopes() {
		if env.FromWave != id {
			h.t.Errorf("job %s went to the queue from wave %d, want %d", env.JobID, env.FromWave, id)
		}
	}
	for _, job := range ids {
		if j := h.ledger.job(job); j.waveID != 0 || j.status != "queued" {
			h.t.Errorf("job %s is %s in wave %d, want queued in none", job, j.status, j.waveID)
		}
	}
}

// A 401 means the key is wrong for every wave: the worker is stopped, and
// the wave waits unchanged for a worker with a good key.
func TestSubmitRefusedKeyStopsTheWorker(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.provider.setInject(failOnce("upload", nil, providerError(fixpoint.ClassAuth, 401)))
	h.submittedOrNot(2)
	if len(h.worker.aborted) != 1 || !strings.Contains(h.worker.aborted[0].Error(), "refused the API key") {
		t.Errorf("worker aborted with %v, want once for the key", h.worker.aborted)
	}
	w := h.ledger.wave(1)
	if w.Status != store.WaveRecorded || w.LeaseOwner != "" || !strings.Contains(w.Error, "auth") {
		t.Errorf("wave %s, lease %q, error %q; want recorded, released, the refusal", w.Status, w.LeaseOwner, w.Error)
	}
	if ids := h.js.jobs(); len(ids) != 0 {
		t.Errorf("jobs %v went realtime on a wrong key", ids)
	}
}

// A create whose answer was lost may still land at the provider: the next
// try waits a lease, finds the batch by the wave it names, and creates
// none again.
func TestSubmitMaybeCreatedIsReconciled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.provider.afterCreate = &fixpoint.ProviderError{Class: fixpoint.ClassTimeout, Message: "timeout", Err: llm.ErrBatchMaybeCreated}
	h.submittedOrNot(2)
	w := h.ledger.wave(1)
	if w.Status != store.WaveUploaded || w.NextPollAt.Sub(h.clock.Now()) != 5*time.Minute {
		t.Fatalf("after a lost create: %s, next in %s; want uploaded, in a lease (5m)", w.Status, w.NextPollAt.Sub(h.clock.Now()))
	}
	h.drive()
	w = h.ledger.wave(1)
	if w.Status != store.WaveSubmitted || w.ProviderBatchID != "batch-1" || h.provider.batchCount() != 1 {
		t.Errorf("wave %s with batch %q, %d batches made; want submitted with batch-1, the only one", w.Status, w.ProviderBatchID, h.provider.batchCount())
	}
}

// A worker that died after the create and before recording it leaves a
// wave the next finds its batch for (OpenAI: by its metadata).
func TestSubmitCrashAfterCreateIsReconciled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.ledger.setInject(failOnce("UpdateWave", statusUpdate(store.WaveSubmitted), errors.New("connection reset")))
	h.submittedOrNot(2)
	if w := h.ledger.wave(1); w.ProviderBatchID != "" {
		t.Fatalf("the batch was recorded: %q", w.ProviderBatchID)
	}
	other := h.provider.addForeign(2) // another wave's, or client's, of the same size
	h.v = h.driver(testConfig())
	h.drive()
	w := h.ledger.wave(1)
	if w.Status != store.WaveSubmitted || w.ProviderBatchID != "batch-1" || h.provider.batchCount() != 2 {
		t.Errorf("wave %s with batch %q, %d batches; want submitted with batch-1 (not %s), none made again",
			w.Status, w.ProviderBatchID, h.provider.batchCount(), other)
	}
}

// Anthropic batches name no wave: a batch of the wave's size that no
// wave recorded is the wave's only if its results are; while one runs,
// the wave waits rather than create a second.
func TestReconcileAnthropic(t *testing.T) {
	t.Parallel()
	t.Run("its own batch", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, llm.ProviderAnthropic, testConfig())
		h.ledger.setInject(failOnce("UpdateWave", statusUpdate(store.WaveSubmitted), errors.New("connection reset")))
		h.submittedOrNot(2)
		h.drive()
		w := h.ledger.wave(1)
		if w.Status != store.WaveRecorded || h.provider.batchCount() != 1 || !h.logged("wave waits for a provider batch of its size") {
			t.Fatalf("while a batch of its size runs: %s, %d batches; want recorded and waiting, no second batch", w.Status, h.provider.batchCount())
		}
		h.provider.end("batch-1", llm.BatchCompleted, validReply)
		h.drive()
		if w := h.ledger.wave(1); w.Status != store.WaveSubmitted || w.ProviderBatchID != "batch-1" || h.provider.batchCount() != 1 {
			t.Errorf("once it ended: %s with %q, %d batches; want submitted with batch-1", w.Status, w.ProviderBatchID, h.provider.batchCount())
		}
	})
	t.Run("another's batch", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, llm.ProviderAnthropic, testConfig())
		h.worker.stopping = true
		h.submittedOrNot(2)
		h.worker.stopping = false
		foreign := h.provider.addForeign(2)
		h.provider.end(foreign, llm.BatchCompleted, validReply)
		h.provider.addForeign(3) // another size: never the wave's
		h.drive()
		w := h.ledger.wave(1)
		if w.Status != store.WaveSubmitted || w.ProviderBatchID == foreign || h.provider.batchCount() != 3 {
			t.Errorf("wave %s with batch %q of %d: want submitted with a batch of its own, not %s", w.Status, w.ProviderBatchID, h.provider.batchCount(), foreign)
		}
	})
	t.Run("a batch another wave recorded", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, llm.ProviderAnthropic, testConfig())
		h.submittedOrNot(2) // wave 1 and its batch-1, running
		h.worker.stopping = true
		h.v.cfg.MaxRequests = 2
		h.collect(h.envelope("k0", time.Time{}), h.envelope("k1", time.Time{}))
		h.v.flushes.Wait()
		h.worker.stopping = false
		h.clock.advance(time.Millisecond)
		if !h.v.driveDue(h.ctx) {
			t.Fatal("wave 2 not due")
		}
		if w := h.ledger.wave(2); w.Status != store.WaveSubmitted || w.ProviderBatchID != "batch-2" {
			t.Errorf("wave 2 %s with %q, want submitted with a batch of its own (batch-1 is wave 1's)", w.Status, w.ProviderBatchID)
		}
	})
}

// A failure to list the provider's batches is retried: nothing is
// created while it is not known whether the wave has a batch.
func TestReconcileListFailureIsRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.worker.stopping = true
	h.submittedOrNot(2)
	h.worker.stopping = false
	h.provider.setInject(failOnce("list", nil, providerError(fixpoint.ClassServer, 500)))
	h.drive()
	if w := h.ledger.wave(1); w.Status != store.WaveRecorded || !strings.HasPrefix(w.Error, "reconcile: list batches") ||
		h.provider.count("upload") != 0 {
		t.Fatalf("wave %s, error %q, %d uploads; want recorded, the list's failure, nothing sent", w.Status, w.Error, h.provider.count("upload"))
	}
	h.drive()
	if w := h.ledger.wave(1); w.Status != store.WaveSubmitted {
		t.Errorf("wave %s after the retry, want submitted", w.Status)
	}
}

// A wave cancelled before it reached the provider ends failed, saying
// so, and its jobs finish realtime; one whose create may have landed is
// looked for first, and its batch cancelled.
func TestCancelBeforeSubmit(t *testing.T) {
	t.Parallel()
	t.Run("never sent", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, llm.ProviderOpenAI, testConfig())
		h.worker.stopping = true
		h.submittedOrNot(2)
		h.ledger.cancelWaves("b")
		h.drive()
		if w := h.ledger.wave(1); w.Status != store.WaveFailed || w.Error != "cancelled before it was submitted" {
			t.Errorf("wave %s, error %q; want failed, cancelled before it was submitted", w.Status, w.Error)
		}
		h.checkRealtime(1, "j0", "j1")
		if n := h.provider.count("list") + h.provider.count("upload"); n != 0 {
			t.Errorf("%d calls to the provider for a wave never sent", n)
		}
	})
	t.Run("maybe created", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, llm.ProviderOpenAI, testConfig())
		h.provider.afterCreate = &fixpoint.ProviderError{Class: fixpoint.ClassTimeout, Message: "timeout", Err: llm.ErrBatchMaybeCreated}
		h.submittedOrNot(2)
		h.provider.setInject(failOnce("list", nil, providerError(fixpoint.ClassServer, 500)))
		h.drive() // not found again: the list failed
		h.ledger.cancelWaves("b")
		h.drive() // cancelled: it is looked for, and found
		if w := h.ledger.wave(1); w.Status != store.WaveCancelling || w.ProviderBatchID != "batch-1" {
			t.Fatalf("wave %s with batch %q, want cancelling with the batch found", w.Status, w.ProviderBatchID)
		}
		if ids := h.js.jobs(); len(ids) != 0 {
			t.Errorf("jobs %v went realtime while the wave's batch may run", ids)
		}
		h.drive()
		if n := h.provider.count("cancel"); n != 1 {
			t.Fatalf("the batch found was cancelled %d times, want once", n)
		}
		if w := h.ledger.wave(1); w.Error != store.CancelledReason {
			t.Errorf("wave error %q, want %q", w.Error, store.CancelledReason)
		}
	})
	// Cancelled before the wave's next claim after a lost create: its
	// batch, made and billed, is looked for and cancelled all the same (it
	// was left running, neither cancelled nor read, the jobs run realtime
	// beside it).
	t.Run("maybe created, cancelled at once", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, llm.ProviderOpenAI, testConfig())
		h.provider.afterCreate = &fixpoint.ProviderError{Class: fixpoint.ClassTimeout, Message: "timeout", Err: llm.ErrBatchMaybeCreated}
		h.submittedOrNot(2)
		h.ledger.cancelWaves("b")
		h.drive()
		if w := h.ledger.wave(1); w.Status != store.WaveCancelling || w.ProviderBatchID != "batch-1" {
			t.Fatalf("wave %s with batch %q, error %q; want cancelling with the batch found", w.Status, w.ProviderBatchID, w.Error)
		}
		if ids := h.js.jobs(); len(ids) != 0 {
			t.Errorf("jobs %v went realtime while the wave's batch may run", ids)
		}
		h.drive()
		if n := h.provider.count("cancel"); n != 1 {
			t.Errorf("the batch found was cancelled %d times, want once", n)
		}
	})
}
