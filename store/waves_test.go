package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

func waveReqs(batch string, attempt int, ids ...int) []store.WaveRequest {
	out := make([]store.WaveRequest, len(ids))
	for i, n := range ids {
		out[i] = store.WaveRequest{JobID: jobID(batch, n), Run: 1, AttemptNo: attempt,
			Request:  json.RawMessage(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"row %d"}]}`, n)),
			Envelope: json.RawMessage(fmt.Sprintf(`{"job_id":%q}`, jobID(batch, n)))}
	}
	return out
}

func waveAttempt(no int, class string) store.Attempt {
	a := store.Attempt{No: no, Raw: fmt.Sprintf("reply %d", no), Class: class, Valid: class == "",
		TokensIn: 100, TokensOut: 10, Model: "sim-typical", PriceBasis: "batch", CostUSD: 0.001,
		StartedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if class != "" {
		a.Errors = json.RawMessage(`[{"path":"/name","keyword":"required","class":"shape","message":"/name: missing"}]`)
		a.Feedback = "fix /name"
	}
	return a
}

// TestWaveLedger walks a wave through its life: recorded with the jobs'
// places, leased by one worker only, results recorded once even when the
// results are processed twice, a repair attempt going on from the ledger,
// and the jobs of a failed wave taken back.
func TestWaveLedger(t *testing.T) {
	s, _ := setup(t, "wv", 4)
	ctx := context.Background()

	w, taken, err := s.RecordWave(ctx, store.WaveParams{Batch: "wv", Run: 1, Provider: "openai", Model: "m",
		Requests: append(waveReqs("wv", 1, 1, 2, 3), waveReqs("wv", 1, 3)...), Owner: "a", Lease: time.Minute, Home: "stream J, openai https://x"})
	if err != nil {
		t.Fatal(err)
	}
	if w.Number != 1 || len(taken) != 3 || w.Requests != 3 {
		t.Fatalf("wave %+v with %d requests, want number 1 with 3 (a job is in a wave once)", w, len(taken))
	}
	for i, r := range taken {
		if want := fmt.Sprintf("w%d-%d", w.ID, i); r.CustomID != want {
			t.Errorf("custom id %q, want %q", r.CustomID, want)
		}
	}
	// A job already in a wave is not taken again.
	if w2, again, err := s.RecordWave(ctx, store.WaveParams{Batch: "wv", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("wv", 1, 1)}); err != nil || w2 != nil || len(again) != 0 {
		t.Fatalf("second wave of a placed job: %v %v %v, want nothing recorded", w2, again, err)
	}

	// The lease: the recorder holds it, no one else can claim or update.
	if got, err := s.ClaimWave(ctx, "b", time.Minute, []string{"stream J, openai https://x"}); err != nil || got != nil {
		t.Fatalf("claim of a leased wave by b: %v %v", got, err)
	}
	if err := s.UpdateWave(ctx, w.ID, "b", store.WaveUpdate{Status: store.WaveSubmitted}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("update by a non-holder: %v, want ErrLeaseLost", err)
	}
	// Released and due at once: a next poll in a nanosecond is now, the
	// ledger keeping microseconds. The claims below find it due.
	if err := s.UpdateWave(ctx, w.ID, "a", store.WaveUpdate{Status: store.WaveSubmitted, ProviderBatchID: "batch_1", NextPoll: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	// Only a worker with the wave's home (its queue, its endpoint) may
	// drive it: one on another queue or endpoint (the simulator) may not.
	for _, other := range [][]string{nil, {"stream K, openai https://x"}, {"stream J, openai http://127.0.0.1:9"}} {
		if got, err := s.ClaimWave(ctx, "c", time.Minute, other); err != nil || got != nil {
			t.Fatalf("claim by a worker of homes %q: %+v %v, want none", other, got, err)
		}
	}
	// Such a worker is told which open waves it does not drive.
	if stray, err := s.StrayWaves(ctx, []string{"stream K, openai https://x"}); err != nil || stray[[2]string{"wv", "stream J, openai https://x"}] != 1 || len(stray) != 1 {
		t.Errorf("stray waves for another home: %v %v, want wave 1 of wv", stray, err)
	}
	if stray, err := s.StrayWaves(ctx, []string{"stream J, openai https://x"}); err != nil || len(stray) != 0 {
		t.Errorf("stray waves for its own home: %v %v, want none", stray, err)
	}
	got, err := s.ClaimWave(ctx, "b", time.Minute, []string{"stream K, anthropic y", "stream J, openai https://x"})
	if err != nil || got == nil || got.ID != w.ID || got.ProviderBatchID != "batch_1" || got.Status != store.WaveSubmitted || got.Home != "stream J, openai https://x" {
		t.Fatalf("claim after release: %+v %v", got, err)
	}

	// Results: job 1 valid, job 2 needs another attempt; processed twice.
	final := result(jobID("wv", 1), "ok", "")
	outs := []store.WaveOutcome{
		{WaveID: w.ID, CustomID: taken[0].CustomID, Attempt: waveAttempt(1, ""), Result: &final},
		{WaveID: w.ID, CustomID: taken[1].CustomID, Attempt: waveAttempt(1, "shape"),
			Totals: &store.Result{Attempts: 1, Calls: 1, TokensIn: 100, TokensOut: 10, CostUSD: 0.001}},
	}
	for range 2 {
		if _, err := s.RecordWaveOutcomes(ctx, outs); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := s.QueryRowForTest(ctx, `SELECT count(*) FROM attempts WHERE job_id LIKE 'wv-%'`, &n); err != nil || n != 2 {
		t.Fatalf("%d attempt rows after processing twice (%v), want 2", n, err)
	}
	var status, basis string
	var wave *int64
	if err := s.QueryRowForTest(ctx, `SELECT j.status, j.wave_id, a.price_basis FROM jobs j JOIN attempts a ON a.job_id = j.id WHERE j.id = 'wv-1'`,
		&status, &wave, &basis); err != nil || status != "valid" || wave != nil || basis != "batch" {
		t.Fatalf("job 1: %s wave %v basis %s (%v), want valid, no wave, batch", status, wave, basis, err)
	}
	// Its time runs from its wave, not from when the results were read
	// (wall_ms was about 0 and started_at the reading's time).
	var fromWave bool
	var wall int64
	if err := s.QueryRowForTest(ctx, fmt.Sprintf(`SELECT j.started_at = w.created_at, j.wall_ms FROM jobs j, waves w WHERE j.id = 'wv-1' AND w.id = %d`, w.ID),
		&fromWave, &wall); err != nil || !fromWave || wall < 20 {
		t.Errorf("job 1: started with its wave %v, wall %d ms (%v); want its wave's start and at least the 20 ms slept", fromWave, wall, err)
	}

	// Jobs 2 and 3 keep their place in wave 1 until moved on.
	placedIDs := func(wave int64) []string {
		t.Helper()
		placed, err := s.PlacedJobs(ctx, wave)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range placed {
			if len(p.Envelope) == 0 || len(p.Request) == 0 {
				t.Errorf("placed request %+v lacks its envelope or request", p)
			}
			ids = append(ids, p.JobID)
		}
		return ids
	}
	if got := fmt.Sprint(placedIDs(w.ID)); got != "[wv-2 wv-3]" {
		t.Fatalf("placed in wave 1: %s, want [wv-2 wv-3]", got)
	}
	// Job 2 goes on from the ledger: its attempt with its feedback.
	prev, err := s.WaveAttempts(ctx, w.ID)
	if err != nil || len(prev["wv-2"]) != 1 || prev["wv-2"][0].Feedback != "fix /name" || prev["wv-2"][0].Class != "shape" ||
		prev["wv-2"][0].WaveID != w.ID || len(prev["wv-1"]) != 1 || len(prev["wv-3"]) != 0 {
		t.Fatalf("WaveAttempts: %+v %v", prev, err)
	}
	if ja, err := s.JobAttempts(ctx, "wv-2", 1); err != nil || len(ja) != 1 || ja[0].Feedback != "fix /name" {
		t.Fatalf("JobAttempts: %+v %v", ja, err)
	}
	// A repair wave must name the wave its jobs come from.
	if w2, _, err := s.RecordWave(ctx, store.WaveParams{Batch: "wv", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("wv", 2, 2)}); err != nil || w2 != nil {
		t.Fatalf("repair wave without From: %+v %v, want nothing recorded", w2, err)
	}
	w2, taken2, err := s.RecordWave(ctx, store.WaveParams{Batch: "wv", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("wv", 2, 2), From: w.ID, Owner: "b", Lease: time.Minute})
	if err != nil || w2 == nil || w2.Number != 2 || len(taken2) != 1 {
		t.Fatalf("repair wave: %+v %v %v", w2, taken2, err)
	}
	if got := fmt.Sprint(placedIDs(w.ID)); got != "[wv-3]" {
		t.Fatalf("placed in wave 1 after the repair wave: %s, want [wv-3]", got)
	}
	// Job 3 goes back to the queue.
	if err := s.ReleaseWaveJobs(ctx, w.ID, []string{"wv-3"}); err != nil {
		t.Fatal(err)
	}
	if got := placedIDs(w.ID); len(got) != 0 {
		t.Fatalf("placed in wave 1 after release: %v", got)
	}
	// A stale delivery of job 3's first message, collected with job 4's:
	// job 3 had its place (the queue runs it realtime now), so the new
	// wave takes job 4 alone. Taking job 3 failed the whole wave on the
	// one-place-per-attempt index, and its jobs went back to the queue to
	// fail again with it.
	w3, taken3, err := s.RecordWave(ctx, store.WaveParams{Batch: "wv", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("wv", 1, 3, 4), Owner: "a", Lease: time.Minute, Home: "stream J, openai https://x"})
	if err != nil || w3 == nil || len(taken3) != 1 || taken3[0].JobID != "wv-4" {
		t.Fatalf("wave of a released job and a new one: %+v %v %v, want job 4 alone", w3, taken3, err)
	}
	if n, err := s.OpenWaves(ctx, []string{"openai"}, []string{"stream J, openai https://x"}); err != nil || n != 3 {
		t.Fatalf("OpenWaves: %d %v, want 3", n, err)
	}
	if n, err := s.OpenWaves(ctx, []string{"anthropic"}, []string{"stream J, openai https://x"}); err != nil || n != 0 {
		t.Fatalf("OpenWaves of another provider: %d %v, want 0", n, err)
	}

	// Cancel asks for the open waves (wave 1 is still submitted, waves 2 and 3 recorded).
	if n, err := s.CancelWaves(ctx, "wv"); err != nil || n != 3 {
		t.Fatalf("CancelWaves: %d %v", n, err)
	}
	ws, err := s.Waves(ctx, "wv")
	if err != nil || len(ws) != 3 || ws[0].Status != store.WaveCancelling || ws[1].Status != store.WaveCancelling || ws[2].Status != store.WaveCancelling {
		t.Fatalf("Waves: %+v %v", ws, err)
	}
}

// Waves of one batch recorded at the same time (two collections, two
// workers) take distinct numbers, every one recorded at the first try.
func TestRecordWavesAtOnce(t *testing.T) {
	const waves = 8
	s, _ := setup(t, "wn", waves)
	ctx := context.Background()
	numbers := make(chan int, waves)
	errs := make(chan error, waves)
	start := make(chan struct{})
	for i := 1; i <= waves; i++ {
		go func() {
			<-start
			w, _, err := s.RecordWave(ctx, store.WaveParams{Batch: "wn", Run: 1, Provider: "openai", Model: "m",
				Requests: waveReqs("wn", 1, i), Owner: fmt.Sprint("w", i), Lease: time.Minute})
			if err != nil {
				errs <- err
				return
			}
			numbers <- w.Number
		}()
	}
	close(start)
	seen := map[int]bool{}
	for range waves {
		select {
		case err := <-errs:
			t.Fatalf("record a wave: %v", err)
		case n := <-numbers:
			if seen[n] || n < 1 || n > waves {
				t.Errorf("wave number %d twice or out of 1..%d", n, waves)
			}
			seen[n] = true
		}
	}
}

// OwedByQueue counts the queued jobs whose messages the queue should hold:
// published, and not in a provider batch still running.
func TestOwedByQueue(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "owe", 4)
	ctx := context.Background()
	owed := func() int {
		t.Helper()
		n, err := s.OwedByQueue(ctx, "owe")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := owed(); n != 0 {
		t.Errorf("nothing published: %d owed, want 0", n)
	}
	if err := s.MarkPublished(ctx, []string{jobID("owe", 1), jobID("owe", 2), jobID("owe", 3)}); err != nil {
		t.Fatal(err)
	}
	if n := owed(); n != 3 {
		t.Errorf("3 published: %d owed, want 3", n)
	}
	w, taken, err := s.RecordWave(ctx, store.WaveParams{Batch: "owe", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("owe", 1, 1), Owner: "a", Lease: time.Minute, Home: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if n := owed(); n != 2 {
		t.Errorf("one in a running wave: %d owed, want 2", n)
	}
	// A wave of another queue or endpoint is not a draining worker's to
	// wait for (one waited three minutes on another batch's wave).
	if n, err := s.OpenWaves(ctx, []string{"openai"}, []string{"q2"}); err != nil || n != 0 {
		t.Errorf("OpenWaves of another home: %d %v, want 0", n, err)
	}
	if n, err := s.OpenWaves(ctx, []string{"openai"}, []string{"q2", "h"}); err != nil || n != 1 {
		t.Errorf("OpenWaves of its home: %d %v, want 1", n, err)
	}
	// Its result recorded, it waits in the wave for its next attempt: the
	// wave still owns it (counted as owed, report wait called a resting
	// wave's jobs lost).
	if _, err := s.RecordWaveOutcomes(ctx, []store.WaveOutcome{{WaveID: w.ID, CustomID: taken[0].CustomID, Attempt: waveAttempt(1, "shape")}}); err != nil {
		t.Fatal(err)
	}
	if n := owed(); n != 2 {
		t.Errorf("one resting in its wave after its result: %d owed, want 2", n)
	}
	if jobs, err := s.PublishedQueued(ctx, "owe", "", 0); err != nil || len(jobs) != 2 {
		t.Errorf("published queued jobs for --resume: %d (%v), want 2 (not the one in the wave)", len(jobs), err)
	}
	if _, err := s.SaveResults(ctx, []store.Result{result(jobID("owe", 2), "a", "")}); err != nil {
		t.Fatal(err)
	}
	if n := owed(); n != 1 {
		t.Errorf("one final: %d owed, want 1", n)
	}
}

// A job placed in a wave keeps the deliveries its message had: every job
// a wave finished read 0 deliveries, though its message was delivered.
func TestRecordWaveNotesDeliveries(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "wd", 2)
	ctx := context.Background()
	reqs := waveReqs("wd", 1, 1, 2)
	reqs[0].Delivered, reqs[1].Delivered = 1, 3
	if _, taken, err := s.RecordWave(ctx, store.WaveParams{Batch: "wd", Run: 1, Provider: "openai", Model: "m",
		Requests: reqs, Owner: "a", Lease: time.Minute}); err != nil || len(taken) != 2 {
		t.Fatal(taken, err)
	}
	for i, want := range []int{1, 3} {
		var n int
		if err := s.QueryRowForTest(ctx, fmt.Sprintf(`SELECT deliveries FROM jobs WHERE id = '%s'`, jobID("wd", i+1)), &n); err != nil || n != want {
			t.Errorf("job %d: %d deliveries (%v), want %d", i+1, n, err, want)
		}
	}
}
