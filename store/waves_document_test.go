package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// TestWaveOfDocumentJob: a document job's chunk requests go into one wave
// together, each its own attempt and custom id, and a stale copy of them
// is not taken again; the outcome of its last chunk records the merge made
// with it, an attempt of no call (so of no wave), in the same transaction,
// once.
func TestWaveOfDocumentJob(t *testing.T) {
	s, _ := setup(t, "wd", 2)
	ctx := context.Background()
	doc := append(append(waveReqs("wd", 1, 1), waveReqs("wd", 2, 1)...), waveReqs("wd", 3, 1)...)
	reqs := append(append(doc, waveReqs("wd", 1, 2)...), doc...) // the job's requests again: a stale delivery
	w, taken, err := s.RecordWave(ctx, store.WaveParams{Batch: "wd", Run: 1, Provider: "openai", Model: "m",
		Requests: reqs, Owner: "a", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(taken) != 4 || w.Requests != 4 {
		t.Fatalf("%d requests taken, want 4: the document job's 3 chunks once and the other job's", len(taken))
	}
	seen := map[string]bool{}
	for _, r := range taken {
		if seen[r.CustomID] {
			t.Fatalf("custom id %s twice", r.CustomID)
		}
		seen[r.CustomID] = true
	}
	// Another wave cannot take any of the job's requests, nor a part.
	if w2, again, err := s.RecordWave(ctx, store.WaveParams{Batch: "wd", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("wd", 4, 1)}); err != nil || w2 != nil || len(again) != 0 {
		t.Fatalf("a placed job's next request: %v %v %v, want nothing recorded", w2, again, err)
	}

	chunkAt := func(no, n int) store.Attempt {
		a := waveAttempt(no, "")
		a.Step, a.Chunk = string(fixpoint.StepChunk), &fixpoint.ChunkRef{N: n, Start: n * 10, End: n*10 + 10}
		return a
	}
	merged := store.Attempt{No: 4, Step: string(fixpoint.StepMerge), Valid: true, PriceBasis: "batch",
		StartedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	final := result(jobID("wd", 1), "ok", "")
	final.Attempts, final.Calls = 4, 3
	outs := []store.WaveOutcome{
		{WaveID: w.ID, CustomID: taken[0].CustomID, Attempt: chunkAt(1, 0), Totals: &store.Result{Attempts: 1, Calls: 1}},
		{WaveID: w.ID, CustomID: taken[1].CustomID, Attempt: chunkAt(2, 1), Totals: &store.Result{Attempts: 2, Calls: 2}},
		{WaveID: w.ID, CustomID: taken[2].CustomID, Attempt: chunkAt(3, 2), Also: []store.Attempt{merged}, Result: &final},
	}
	for range 2 {
		if _, err := s.RecordWaveOutcomes(ctx, outs); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.JobAttempts(ctx, jobID("wd", 1), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"chunk", "chunk", "chunk", "merge"}
	if len(rows) != len(want) {
		t.Fatalf("%d attempt rows, want %d", len(rows), len(want))
	}
	for i, a := range rows {
		wantWave := w.ID
		if a.Step == "merge" {
			wantWave = 0 // no call of the wave
		}
		if a.Step != want[i] || a.No != i+1 || a.WaveID != wantWave || a.PriceBasis != "batch" {
			t.Errorf("attempt %d: step %s no %d wave %d basis %s, want %s %d wave %d batch", i, a.Step, a.No, a.WaveID, a.PriceBasis, want[i], i+1, wantWave)
		}
	}
	// The driver reads them once, not once per request of the wave.
	if by, err := s.WaveAttempts(ctx, w.ID); err != nil || len(by[jobID("wd", 1)]) != 4 {
		t.Errorf("WaveAttempts: %d attempts of the document job (%v), want 4", len(by[jobID("wd", 1)]), err)
	}
	var status string
	var attempts int
	if err := s.QueryRowForTest(ctx, `SELECT status, attempts FROM jobs WHERE id = 'wd-1'`, &status, &attempts); err != nil || status != "valid" || attempts != 4 {
		t.Errorf("job: %s with %d attempts (%v), want valid with 4", status, attempts, err)
	}
}
