package wave

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A wave goes recorded, uploaded, submitted, polled while it runs (each
// wait twice the last), ended, its results recorded, done: each job
// final with its attempt, each message acked once the wave was recorded.
func TestWaveLifecycleOpenAI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderOpenAI, testConfig())
	w := h.submitted(3, time.Time{})

	for _, id := range []string{"j0", "j1", "j2"} {
		if got := h.worker.dispositions(id); !slices.Equal(got, []queue.DispositionKind{queue.DispWave}) {
			t.Errorf("job %s's message: %v, want acked for the wave once", id, got)
		}
		if j := h.ledger.job(id); j.waveID != 1 {
			t.Errorf("job %s is placed in wave %d, want 1", id, j.waveID)
		}
	}
	if n := h.worker.heartbeats(); n != 0 {
		t.Errorf("%d heartbeats still run after the wave was recorded", n)
	}
	if w.InputFileID == "" || w.Requests != 3 || w.LeaseOwner != "" || !w.NextPollAt.Equal(h.clock.Now().Add(30*time.Second)) {
		t.Errorf("submitted wave: file %q, %d requests, lease %q, next poll %s; want its file, 3, released, in PollMin",
			w.InputFileID, w.Requests, w.LeaseOwner, w.NextPollAt.Sub(h.clock.Now()))
	}
	for _, p := range []string{"recorded", "upload", "upload_done", "uploaded", "create", "created"} {
		if !h.reached(p, 1) {
			t.Errorf("the submit never passed %q", p)
		}
	}
	st := h.provider.status(w.ProviderBatchID)
	if st.Metadata[waveMetadataKey] != "1" || st.InputFileID != w.InputFileID {
		t.Errorf("provider batch: metadata %v, file %q; want it to name wave 1 and its file %q", st.Metadata, st.InputFileID, w.InputFileID)
	}
	// The batch carries the requests the ledger holds, by their custom ids.
	reqs := h.ledger.requests(1)
	for i, it := range h.provider.itemsOf(w.ProviderBatchID) {
		var want fixpoint.Request
		if err := json.Unmarshal(reqs[i].Request, &want); err != nil {
			t.Fatal(err)
		}
		if it.CustomID != reqs[i].CustomID || it.Request.Model != want.Model || it.Request.User != reqs[i].JobID {
			t.Errorf("batch item %d: %s for %s, want %s for %s", i, it.CustomID, it.Request.User, reqs[i].CustomID, reqs[i].JobID)
		}
	}

	// Polls while it runs: the wait doubles.
	for _, wait := range []time.Duration{30 * time.Second, 60 * time.Second, 120 * time.Second} {
		h.drive()
		got := h.ledger.wave(1)
		if got.Status != store.WaveSubmitted || got.NextPollAt.Sub(h.clock.Now()) != wait {
			t.Errorf("a poll of a running wave: %s, next in %s; want submitted, next in %s", got.Status, got.NextPollAt.Sub(h.clock.Now()), wait)
		}
	}

	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, validReply)
	h.drive()
	got := h.ledger.wave(1)
	if got.Status != store.WaveDone || got.Succeeded != 3 || got.EndedAt.IsZero() {
		t.Fatalf("wave after its batch ended: %s, %d succeeded; want done, 3", got.Status, got.Succeeded)
	}
	if s := h.statuses(3); !slices.Equal(s, all(3, "valid")) {
		t.Errorf("jobs: %v, want all valid", s)
	}
	for _, id := range []string{"j0", "j1", "j2"} {
		as := h.ledger.jobAttempts(id)
		if len(as) != 1 || as[0].WaveID != 1 || as[0].PriceBasis != string(fixpoint.PriceBasisBatch) || !as[0].Valid {
			t.Errorf("job %s's attempts: %+v, want one valid attempt of wave 1 at the batch price", id, as)
		}
		if j := h.ledger.job(id); j.waveID != 0 {
			t.Errorf("job %s is still placed in wave %d", id, j.waveID)
		}
	}
	finished := 0
	for _, o := range h.worker.observed {
		if o.Finished {
			finished++
		}
	}
	if len(h.worker.observed) != 3 || finished != 3 {
		t.Errorf("the worker observed %d outcomes (%d finished), want 3 (3)", len(h.worker.observed), finished)
	}
	for _, step := range []string{"recorded", "submitted", "done"} {
		if n := h.worker.step(llm.ProviderOpenAI, step); n != 1 {
			t.Errorf("step %s counted %d times, want 1", step, n)
		}
	}
	if ids := h.js.jobs(); len(ids) != 0 {
		t.Errorf("jobs %v went to the queue, want none", ids)
	}
}

// Anthropic has no input file: the requests go in the create, and its
// batches carry no metadata.
func TestWaveLifecycleAnthropic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llm.ProviderAnthropic, testConfig())
	w := h.submitted(2, time.Time{})
	if h.provider.count("upload") != 0 || w.InputFileID != "" {
		t.Errorf("%d uploads, input file %q: want none", h.provider.count("upload"), w.InputFileID)
	}
	if items := h.provider.itemsOf(w.ProviderBatchID); len(items) != 2 || items[0].CustomID != "w1-0" {
		t.Errorf("batch items %+v, want the wave's 2 requests", items)
	}
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, validReply)
	h.drive()
	if got := h.ledger.wave(1); got.Status != store.WaveDone {
		t.Errorf("wave %s, want done", got.Status)
	}
}
