package wave

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Jobs whose reply the schema refused go into a repair wave with their
// feedback, as their second attempt; that wave is recorded and submitted
// at once, and its valid replies finish the jobs.
func TestResultsRepairWave(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(2, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, invalidReply)
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveDone || got.Succeeded != 2 {
		t.Fatalf("wave 1 %s with %d succeeded, want done with 2", got.Status, got.Succeeded)
	}
	w2 := h.ledger.wave(2)
	if w2.Status != store.WaveSubmitted || w2.Number != 2 || w2.Requests != 2 || w2.Home != w.Home {
		t.Fatalf("repair wave: %s, number %d, %d requests, home %q; want submitted, 2, 2, %q", w2.Status, w2.Number, w2.Requests, w2.Home, w.Home)
	}
	for _, r := range h.ledger.requests(2) {
		var req fixpoint.Request
		if err := json.Unmarshal(r.Request, &req); err != nil {
			t.Fatal(err)
		}
		last := req.Messages[len(req.Messages)-1].Content
		if r.AttemptNo != 2 || len(req.Messages) < 3 || !strings.Contains(last, "/n") {
			t.Errorf("repair request of %s: attempt %d, %d messages, last %q; want attempt 2 with the feedback naming /n",
				r.JobID, r.AttemptNo, len(req.Messages), last)
		}
		if j := h.ledger.job(r.JobID); j.waveID != 2 || j.status != "queued" {
			t.Errorf("job %s is %s in wave %d, want queued in wave 2", r.JobID, j.status, j.waveID)
		}
	}
	if ids := h.js.jobs(); len(ids) != 0 {
		t.Errorf("jobs %v went realtime", ids)
	}
	h.provider.end(w2.ProviderBatchID, llm.BatchCompleted, validReply)
	h.drive()
	for _, id := range []string{"j0", "j1"} {
		j := h.ledger.job(id)
		as := h.ledger.jobAttempts(id)
		if j.status != "valid" || len(as) != 2 || as[0].Valid || !as[1].Valid || as[1].WaveID != 2 {
			t.Errorf("job %s: %s with %d attempts; want valid on its second, of wave 2", id, j.status, len(as))
		}
		if j.result == nil || j.result.Attempts != 2 {
			t.Errorf("job %s's result counts %v attempts, want 2", id, j.result)
		}
	}
}

// A repair wave smaller than RealtimeBelow is not worth its wait: its
// jobs go on realtime.
func TestResultsSmallRepairWaveRunsRealtime(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RealtimeBelow = 3
	h := newHarness(t, llm.ProviderOpenAI, cfg)
	w := h.submitted(2, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, invalidReply)
	h.drive()
	if n := h.ledger.waveCount(); n != 1 {
		t.Errorf("%d waves, want no repair wave of 2 jobs under RealtimeBelow 3", n)
	}
	h.checkRealtime(1, "j0", "j1")
	if got := h.ledger.wave(1); got.Status != store.WaveDone {
		t.Errorf("wave %s, want done", got.Status)
	}
}

// A repair wave that could not end before the deadline (twice the last
// wave's time plus the margin) is not started: its jobs go on realtime.
func TestResultsLateRepairWaveRunsRealtime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	deadline := h.clock.Now().Add(4 * time.Hour)
	w := h.submitted(2, deadline)
	h.clock.advance(70 * time.Minute) // the wave took 70m: 2h50m left, one more needs 2h20m and the margin
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, invalidReply)
	h.drive()
	if n := h.ledger.waveCount(); n != 1 {
		t.Errorf("%d waves, want no repair wave that could not end before the deadline", n)
	}
	h.checkRealtime(1, "j0", "j1")
}

// A results file that lacks some requests' results, holds results of
// requests the wave does not have, or one result twice: each request of
// the wave gets one outcome; the missing ones count expired and go into
// the next wave; the strays are logged and recorded nowhere.
func TestResultsPartialAndUnknown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(3, time.Time{})
	stray := *validReply(llm.BatchItem{CustomID: "w9-0"})
	again := *invalidReply(llm.BatchItem{CustomID: "w1-0"})
	h.provider.end(w.ProviderBatchID, llm.BatchExpired, func(it llm.BatchItem) *llm.BatchResult {
		if it.CustomID == "w1-2" {
			return nil
		}
		return validReply(it)
	}, stray, again)
	h.drive()
	got := h.ledger.wave(1)
	if c := [4]int{got.Succeeded, got.Errored, got.Expired, got.Cancelled}; c != [4]int{2, 0, 1, 0} {
		t.Errorf("wave counts %v, want 2 succeeded and 1 expired", c)
	}
	if as := h.ledger.jobAttempts("j0"); len(as) != 1 || !as[0].Valid {
		t.Errorf("j0's attempts %+v, want its first result's only", as)
	}
	as := h.ledger.jobAttempts("j2")
	if len(as) != 1 || as[0].Class != string(fixpoint.OutcomeProvider) || as[0].ProviderClass != string(fixpoint.ClassExpired) ||
		as[0].ProviderCode != "missing_result" {
		t.Errorf("the request with no result: %+v, want one expired attempt", as)
	}
	if !h.logged("wave result for a request the wave does not have") || !h.logged("custom_id=w9-0") || !h.logged("custom_id=w1-0") {
		t.Error("the stray and the repeated result were not logged")
	}
	if s := h.statuses(3); !slices.Equal(s, []string{"valid", "valid", "queued"}) {
		t.Errorf("jobs %v, want valid, valid, queued", s)
	}
	if r := h.ledger.requests(2); len(r) != 1 || r[0].JobID != "j2" || r[0].AttemptNo != 2 {
		t.Errorf("next wave's requests %+v, want j2's second attempt", r)
	}
}

// A job whose requests got no reply in two waves (expired, cancelled,
// errored) goes on realtime instead of a third wave.
func TestResultsNoReplyTwiceRunsRealtime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(1, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, classReply(fixpoint.ClassServer))
	h.drive()
	w2 := h.ledger.wave(2)
	if w2.Status != store.WaveSubmitted {
		t.Fatalf("after one request with no reply: wave 2 %s, want submitted", w2.Status)
	}
	if got := h.ledger.wave(1); got.Errored != 1 {
		t.Errorf("wave 1 counts %d errored, want 1", got.Errored)
	}
	h.provider.end(w2.ProviderBatchID, llm.BatchExpired, noReply)
	h.drive()
	if n := h.ledger.waveCount(); n != 2 {
		t.Errorf("%d waves, want no third for a job with no reply in two", n)
	}
	h.checkRealtime(2, "j0")
	if as := h.ledger.jobAttempts("j0"); len(as) != 2 {
		t.Errorf("j0 has %d attempts, want 2", len(as))
	}
}

// A request the provider refused for good (a bad request) ends its job
// failed.
func TestResultsPermanentErrorEndsTheJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(1, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, classReply(fixpoint.ClassBadRequest))
	h.drive()
	j := h.ledger.job("j0")
	if j.status != string(fixpoint.StatusFailed) || j.result == nil || !strings.Contains(j.result.Error, "bad_request") {
		t.Errorf("job %s with result %+v, want failed naming the refusal", j.status, j.result)
	}
	if h.ledger.waveCount() != 1 || len(h.js.jobs()) != 0 {
		t.Error("a job failed for good went on")
	}
}

// Outcomes are recorded in chunks, the lease renewed after each.
func TestResultsAreRecordedInChunks(t *testing.T) {
	t.Parallel()
	const n = waveOutcomesChunk + 10
	cfg := testConfig()
	cfg.MaxRequests = n
	h := newHarness(t, llm.ProviderOpenAI, cfg)
	w := h.submitted(n, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, validReply)
	var chunks []int
	h.ledger.setInject(func(call string, arg any) error {
		if outs, ok := arg.([]store.WaveOutcome); ok {
			chunks = append(chunks, len(outs))
		}
		return nil
	})
	h.drive()
	if !slices.Equal(chunks, []int{waveOutcomesChunk, 10}) {
		t.Errorf("outcomes recorded in chunks of %v, want [%d 10]", chunks, waveOutcomesChunk)
	}
	if got := h.ledger.wave(1); got.Status != store.WaveDone || got.Succeeded != n || len(h.worker.observed) != n {
		t.Errorf("wave %s, %d succeeded, %d observed; want done, %d, %d", got.Status, got.Succeeded, len(h.worker.observed), n, n)
	}
}

// An outcome the ledger refuses for its data (a cost beyond its columns)
// is recorded as the ledger can take it, its job failed naming the
// refusal; the chunk's other outcomes are recorded as they are, and the
// wave goes on.
func TestResultsRefusedOutcomeIsSalvaged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// refuse refuses more than the cost: "" nothing more, "text" the
		// attempt with its text, "all" every row of the job.
		refuse string
	}{{"clamped", ""}, {"counts only", "text"}, {"refused even so", "all"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, llm.ProviderOpenAI, testConfig())
			envs := h.jobs(3, time.Time{})
			for _, e := range envs {
				e.Model = "priceless" // a price typo no cost column holds
			}
			h.v.cfg.MaxRequests = 3
			h.collect(envs...)
			h.v.flushes.Wait()
			w := h.ledger.wave(1)
			// Only j1's reply reports tokens: its cost is beyond the
			// ledger's columns.
			h.provider.end(w.ProviderBatchID, llm.BatchCompleted, func(it llm.BatchItem) *llm.BatchResult {
				r := validReply(it)
				if it.CustomID != "w1-1" {
					r.Response.Usage = fixpoint.Usage{}
				}
				return r
			})
			h.ledger.setInject(func(call string, arg any) error {
				outs, ok := arg.([]store.WaveOutcome)
				if !ok || len(outs) != 1 || outs[0].CustomID != "w1-1" {
					return nil
				}
				if tc.refuse == "all" || (tc.refuse == "text" && outs[0].Attempt.Raw != "") {
					return refused("value too long")
				}
				return nil
			})
			h.drive()
			if s := h.statuses(3); s[0] != "valid" || s[2] != "valid" {
				t.Errorf("jobs %v: the chunk's other outcomes were not recorded", s)
			}
			as := h.ledger.jobAttempts("j1")
			if tc.refuse == "all" {
				if got := h.ledger.wave(1); got.Status != store.WaveEnded || !strings.Contains(got.Error, "value too long") || len(as) != 0 {
					t.Errorf("an outcome refused even with its counts: wave %s, error %q, %d attempts; want ended (processed again later), the refusal, none",
						got.Status, got.Error, len(as))
				}
				if len(h.worker.observed) != 2 {
					t.Errorf("%d outcomes observed, want the 2 recorded", len(h.worker.observed))
				}
				return
			}
			if got := h.ledger.wave(1); got.Status != store.WaveDone {
				t.Errorf("wave %s, want done", got.Status)
			}
			j := h.ledger.job("j1")
			if j.status != string(fixpoint.StatusFailed) || !strings.Contains(j.result.Error, "the ledger refused the result") {
				t.Errorf("j1 %s with error %q, want failed naming the refusal", j.status, j.result.Error)
			}
			if len(as) != 1 || as[0].CostUSD > store.MaxCostUSD || (tc.refuse == "text") != (as[0].Raw == "") {
				t.Errorf("j1's attempts %+v: want one, its cost clamped, its text kept unless refused", as)
			}
			if len(h.worker.observed) != 3 {
				t.Errorf("%d outcomes observed, want 3", len(h.worker.observed))
			}
		})
	}
}

// A ledger down while the results are recorded leaves the wave ended; the
// next poll records them, each once.
func TestResultsLedgerDownIsRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(3, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, validReply)
	h.ledger.setInject(failOnce("RecordWaveOutcomes", nil, errors.New("connection refused")))
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveEnded || !strings.Contains(got.Error, "connection refused") {
		t.Fatalf("wave %s, error %q; want ended, the failure", got.Status, got.Error)
	}
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveDone || got.Succeeded != 3 {
		t.Errorf("wave %s, %d succeeded; want done, 3", got.Status, got.Succeeded)
	}
	if n := h.provider.count("retrieve"); n != 2 {
		t.Errorf("%d retrieves, want 2 (an ended wave is retrieved again)", n)
	}
	if len(h.worker.observed) != 3 {
		t.Errorf("%d outcomes observed, want 3", len(h.worker.observed))
	}
}

// A result of a job the worker cannot rebuild (its schema gone) is not
// recorded; the job leaves the wave for the queue, which reports it.
func TestResultsOfAJobThatCannotBeRebuilt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(2, time.Time{})
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, validReply)
	h.worker.badJobs["j1"] = true
	h.drive()
	if as := h.ledger.jobAttempts("j1"); len(as) != 0 {
		t.Errorf("j1 has attempts %+v, want none", as)
	}
	if !h.logged("wave result of a job that cannot be rebuilt") {
		t.Error("not logged")
	}
	h.checkRealtime(1, "j1")
	if j := h.ledger.job("j0"); j.status != "valid" {
		t.Errorf("j0 %s, want valid", j.status)
	}
}
