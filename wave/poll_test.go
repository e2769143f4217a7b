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

// The wait between polls of a running wave doubles from PollMin up to
// PollMax.
func TestPollBackoffIsCapped(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.PollMax = 90 * time.Second
	h := newHarness(t, llm.ProviderOpenAI, cfg)
	h.submitted(1, time.Time{})
	var waits []time.Duration
	for range 4 {
		h.drive()
		waits = append(waits, h.ledger.wave(1).NextPollAt.Sub(h.clock.Now()))
	}
	if want := []time.Duration{30 * time.Second, 60 * time.Second, 90 * time.Second, 90 * time.Second}; !slices.Equal(waits, want) {
		t.Errorf("waits between polls %v, want %v", waits, want)
	}
}

// A poll that fails is tried again later; the wave stays as it was.
func TestPollRetrieveFailureIsRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(2, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, validReply)
	h.provider.setInject(failOnce("retrieve", nil, providerError(fixpoint.ClassServer, 502)))
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveSubmitted || !strings.HasPrefix(got.Error, "retrieve: server") || got.LeaseOwner != "" {
		t.Fatalf("after a failed poll: %s, error %q, lease %q; want submitted, the failure, released", got.Status, got.Error, got.LeaseOwner)
	}
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveDone {
		t.Errorf("after the next poll: %s, want done", got.Status)
	}
}

// A provider batch that answers 404 for NotFoundGrace, counted from its
// first 404 across polls and restarts, fails its wave, naming it; its
// jobs run realtime. An answer in between starts the grace again.
func TestPollBatchNotFound(t *testing.T) {
	t.Parallel()
	t.Run("past the grace", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, llm.ProviderOpenAI, testConfig())
		w := h.submitted(2, time.Time{})
		h.provider.remove(w.ProviderBatchID)
		h.drive()
		first := h.clock.Now()
		if got := h.ledger.wave(1); got.Status != store.WaveSubmitted || !got.MissingSince.Equal(first) {
			t.Fatalf("after the first 404: %s, missing since %s; want submitted, missing since now", got.Status, got.MissingSince)
		}
		h.v = h.driver(testConfig()) // a restart does not begin the grace again
		for h.clock.Now().Sub(first) < 5*time.Minute {
			if got := h.ledger.wave(1); got.Status != store.WaveSubmitted {
				t.Fatalf("wave %s %s after the first 404, within the grace", got.Status, h.clock.Now().Sub(first))
			}
			h.drive()
		}
		got := h.ledger.wave(1)
		if got.Status != store.WaveFailed || !strings.Contains(got.Error, "has not known batch batch-1 for "+h.clock.Now().Sub(first).String()) {
			t.Fatalf("after the grace: %s, error %q; want failed, naming the batch and the grace", got.Status, got.Error)
		}
		h.checkRealtime(1, "j0", "j1")
	})
	t.Run("an answer starts it again", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, llm.ProviderOpenAI, testConfig())
		w := h.submitted(2, time.Time{})
		h.provider.setInject(func(call string, _ any) error {
			if call == "retrieve" && h.provider.calls["retrieve"]%2 == 1 {
				return notFound("batch")
			}
			return nil
		})
		for range 8 { // 404, answer, 404, ... for well past the grace
			h.drive()
		}
		got := h.ledger.wave(1)
		if got.Status != store.WaveSubmitted || h.clock.Now().Sub(w.SubmittedAt) < 10*time.Minute {
			t.Errorf("a batch answering every other poll: %s after %s, want submitted", got.Status, h.clock.Now().Sub(w.SubmittedAt))
		}
		if !got.MissingSince.IsZero() {
			t.Errorf("missing since %s after an answer, want cleared", got.MissingSince)
		}
	})
}

// A provider batch failed as a whole ran nothing: no attempt is
// recorded, the wave fails with the provider's reason, its jobs run
// realtime.
func TestPollFailedBatchRunsRealtime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(2, time.Time{})
	h.provider.fail(w.ProviderBatchID, "enqueued token limit reached")
	h.drive()
	got := h.ledger.wave(1)
	if got.Status != store.WaveFailed || !strings.Contains(got.Error, "the provider failed the batch: ") ||
		!strings.Contains(got.Error, "enqueued token limit reached") {
		t.Errorf("wave %s, error %q; want failed with the provider's reason", got.Status, got.Error)
	}
	for _, id := range []string{"j0", "j1"} {
		if as := h.ledger.jobAttempts(id); len(as) != 0 {
			t.Errorf("job %s has %d attempts of a batch that ran nothing", id, len(as))
		}
	}
	h.checkRealtime(1, "j0", "j1")
}

// A wave still running DeadlineMargin before its deadline is cancelled
// once; the replies it had are recorded, the requests the cancel stopped
// are recorded as cancelled, and every job not final runs realtime, even
// one a repair wave would take.
func TestPollDeadlineNearCancelsTheWave(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	deadline := h.clock.Now().Add(3 * time.Hour)
	w := h.submitted(3, deadline)
	h.drive()
	if n := h.provider.count("cancel"); n != 0 {
		t.Fatalf("cancelled %s before the deadline", deadline.Sub(h.clock.Now()))
	}
	h.clock.advanceTo(deadline.Add(-time.Hour + time.Second))
	h.drive()
	got := h.ledger.wave(1)
	if n := h.provider.count("cancel"); n != 1 || got.Error != waveDeadlineCancel || got.Status != store.WaveSubmitted {
		t.Fatalf("near the deadline: %d cancels, %s, error %q; want 1, submitted, %q", n, got.Status, got.Error, waveDeadlineCancel)
	}
	h.drive()
	if n := h.provider.count("cancel"); n != 1 {
		t.Errorf("the cancel was asked for %d times, want once", n)
	}
	// j0 answered (valid), j1 answered (invalid), j2 cancelled.
	h.provider.end(w.ProviderBatchID, llm.BatchCancelled, func(it llm.BatchItem) *llm.BatchResult {
		switch it.CustomID {
		case "w1-0":
			return validReply(it)
		case "w1-1":
			return invalidReply(it)
		}
		return nil
	})
	h.drive()
	got = h.ledger.wave(1)
	if got.Status != store.WaveDone || got.Error != waveDeadlineCancel {
		t.Errorf("wave %s, error %q; want done, %q", got.Status, got.Error, waveDeadlineCancel)
	}
	// The provider counts the cancelled request failed; the wave counts
	// it cancelled.
	if c := [4]int{got.Succeeded, got.Errored, got.Expired, got.Cancelled}; c != [4]int{2, 0, 0, 1} {
		t.Errorf("wave counts %v, want 2 succeeded and 1 cancelled", c)
	}
	if as := h.ledger.jobAttempts("j2"); len(as) != 1 || as[0].ProviderClass != string(fixpoint.ClassCancelled) {
		t.Errorf("the cancelled request's attempts: %+v, want one of class cancelled", as)
	}
	if j := h.ledger.job("j0"); j.status != "valid" {
		t.Errorf("j0 is %s, want valid", j.status)
	}
	h.checkRealtime(1, "j1", "j2")
	if n := h.ledger.waveCount(); n != 1 {
		t.Errorf("%d waves, want no repair wave after the deadline cancel", n)
	}
}

// A wave cancelled (for its deadline or by enqueue cancel) keeps why as
// its error when a later step fails once and is retried: the report and
// the realtime fallback read it.
func TestPollCancelReasonSurvivesARetriedStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, why, failing string
	}{
		{"deadline, results read", waveDeadlineCancel, "results"},
		{"deadline, poll", waveDeadlineCancel, "retrieve"},
		{"enqueue cancel, results read", store.CancelledReason, "results"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, llm.ProviderOpenAI, testConfig())
			deadline := h.clock.Now().Add(3 * time.Hour)
			w := h.submitted(2, deadline)
			if tc.why == waveDeadlineCancel {
				h.clock.advanceTo(deadline.Add(-time.Hour + time.Second))
			} else {
				h.ledger.cancelWaves("b")
			}
			h.drive()
			if got := h.ledger.wave(1); got.Error != tc.why {
				t.Fatalf("wave error %q, want %q", got.Error, tc.why)
			}
			h.provider.end(w.ProviderBatchID, llm.BatchCancelled, validReply)
			h.provider.setInject(failOnce(tc.failing, nil, errors.New("connection reset by peer")))
			h.drive()
			if got := h.ledger.wave(1); got.Error != tc.why || got.Status == store.WaveDone {
				t.Fatalf("after a failed %s: wave %s, error %q; want not done, %q", tc.failing, got.Status, got.Error, tc.why)
			}
			if !h.logged("connection reset by peer") {
				t.Error("the retried step's failure was not logged")
			}
			h.drive()
			if got := h.ledger.wave(1); got.Error != tc.why || got.Status != store.WaveDone {
				t.Errorf("after the retry: wave %s, error %q; want done, %q", got.Status, got.Error, tc.why)
			}
			if errs := h.ledger.errorsOf(1); !slices.Equal(errs, []string{tc.why}) {
				t.Errorf("errors recorded %q, want only %q", errs, tc.why)
			}
		})
	}
}

// A cancel that fails is asked for again at the next poll.
func TestPollCancelFailureIsRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	h.submitted(2, time.Time{})
	h.ledger.cancelWaves("b")
	h.provider.setInject(failOnce("cancel", nil, providerError(fixpoint.ClassServer, 500)))
	h.drive()
	if got := h.ledger.wave(1); !strings.HasPrefix(got.Error, "cancel: server") || h.provider.count("retrieve") != 0 {
		t.Fatalf("after a failed cancel: error %q, %d polls; want the cancel's failure, no poll", got.Error, h.provider.count("retrieve"))
	}
	h.drive()
	got := h.ledger.wave(1)
	if n := h.provider.count("cancel"); n != 2 || got.Error != store.CancelledReason {
		t.Errorf("%d cancels, error %q; want 2, %q", n, got.Error, store.CancelledReason)
	}
	if st := h.provider.status(got.ProviderBatchID); st.State != llm.BatchCancelling {
		t.Errorf("provider batch %s, want cancelling", st.State)
	}
}

// A provider that refuses to cancel a batch that has ended ("Cannot
// cancel a batch with status 'completed'") has its results read like any
// ended batch's.
func TestPollCancelOfAnEndedBatchReadsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(2, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, validReply)
	h.ledger.cancelWaves("b")
	h.drive()
	got := h.ledger.wave(1)
	if got.Status != store.WaveDone || got.Succeeded != 2 {
		t.Errorf("wave %s with %d succeeded, want done with 2", got.Status, got.Succeeded)
	}
}

// The replies a wave cancelled by enqueue cancel had are recorded apart
// from its cancelled jobs, which stay cancelled and do not run realtime.
func TestPollEnqueueCancelKeepsRepliesApart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(2, time.Time{})
	h.ledger.cancelWaves("b")
	h.ledger.setJob("j0", "cancelled")
	h.ledger.setJob("j1", "cancelled")
	h.drive()
	h.provider.end(w.ProviderBatchID, llm.BatchCancelled, func(it llm.BatchItem) *llm.BatchResult {
		if it.CustomID == "w1-0" {
			return validReply(it)
		}
		return nil
	})
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveDone {
		t.Errorf("wave %s, want done", got.Status)
	}
	if n := len(h.ledger.apart); n != 2 {
		t.Errorf("%d attempts kept apart, want 2 (the reply and the cancelled request)", n)
	}
	if s := h.statuses(2); !slices.Equal(s, all(2, "cancelled")) {
		t.Errorf("jobs %v, want cancelled", s)
	}
	if ids := h.js.jobs(); len(ids) != 0 {
		t.Errorf("cancelled jobs %v went realtime", ids)
	}
}
