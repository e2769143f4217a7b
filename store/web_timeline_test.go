package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
	"github.com/jackc/pgx/v5"
)

// The plots' data: finished jobs summed over time, realtime calls by
// latency in doubling buckets with their percentiles, and the waves.
func TestBatchTimeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := storetest.NewDB(t)
	s, err := store.Open(ctx, dsn, &store.Config{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	empty, err := s.BatchTimeline(ctx, "none")
	if err != nil || len(empty.Progress) != 0 || empty.Calls != 0 || len(empty.Waves) != 0 {
		t.Fatalf("a batch with nothing: %+v, %v; want empty plots", empty, err)
	}

	if err := s.PutBatch(ctx, store.BatchParams{Name: "tl", Settings: json.RawMessage(`{}`), TotalJobs: 5}); err != nil {
		t.Fatal(err)
	}
	hash, err := s.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("tl", hash, 5)); err != nil {
		t.Fatal(err)
	}
	// Jobs 1-3 valid, 4 invalid, 5 queued; 1+1+2+3 = 7 attempts.
	rs := []store.Result{result(jobID("tl", 1), "a", ""), result(jobID("tl", 2), "b", ""),
		result(jobID("tl", 3), "c", "shape", ""), result(jobID("tl", 4), "d", "shape", "shape", "shape")}
	// Latencies 1, 3, 3, 100, 100, 900 and 5000 ms, in job and attempt order.
	ms := []int64{1, 3, 3, 100, 100, 900, 5000}
	for i := range rs {
		for k := range rs[i].AttemptRows {
			rs[i].AttemptRows[k].LatencyMS, ms = ms[0], ms[1:]
		}
	}
	t0 := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	if _, err := conn.Exec(ctx, `INSERT INTO waves (batch, number, provider, model, status, requests, succeeded, expired, submitted_at, ended_at)
		VALUES ('tl', 1, 'openai', 'm', 'done', 4, 3, 1, $1, $2), ('tl', 2, 'openai', 'm', 'submitted', 1, 0, 0, $2, NULL)`,
		t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Jobs 1 and 2 came from wave 1, at $0.50 a call.
	var wave1 int64
	if err := conn.QueryRow(ctx, `SELECT id FROM waves WHERE batch = 'tl' AND number = 1`).Scan(&wave1); err != nil {
		t.Fatal(err)
	}
	for i := range rs[:2] {
		for k := range rs[i].AttemptRows {
			rs[i].AttemptRows[k].WaveID, rs[i].AttemptRows[k].CostUSD = wave1, 0.5
		}
	}
	if _, err := s.SaveResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
	// Finished 0 s, 1 min, 1 min and 10 min after the first.
	for i, d := range []time.Duration{0, time.Minute, time.Minute, 10 * time.Minute} {
		if _, err := conn.Exec(ctx, `UPDATE jobs SET finished_at = $2 WHERE id = $1`, jobID("tl", i+1), t0.Add(d)); err != nil {
			t.Fatal(err)
		}
	}
	tl, err := s.BatchTimeline(ctx, "tl")
	if err != nil {
		t.Fatal(err)
	}
	if tl.ByMinute || tl.Step%time.Second != 0 {
		t.Errorf("a batch of 5 jobs read by the minute (%v, step %s), want every job read to the second", tl.ByMinute, tl.Step)
	}
	// 10 minutes in fewer than 120 whole-second steps: 6 s steps, the last
	// job in step 100 (5 s steps would put it in step 120), after the
	// origin.
	if tl.Step != 6*time.Second || len(tl.Progress) != 102 {
		t.Fatalf("step %v, %d points; want 6s and 102", tl.Step, len(tl.Progress))
	}
	if o := tl.Progress[0]; !o.At.Equal(t0) || o.Valid+o.Invalid+o.Failed+o.Other != 0 {
		t.Errorf("origin %+v, want none finished at the first finish", o)
	}
	first, at1m, last := tl.Progress[1], tl.Progress[11], tl.Progress[101]
	if first.Valid != 1 || first.Invalid != 0 || at1m.Valid != 3 || at1m.Invalid != 0 || last.Valid != 3 || last.Invalid != 1 {
		t.Errorf("progress at 6 s %+v, at 66 s %+v, at the end %+v; want 1 valid at 6 s, 3 at 66 s, then 3 valid and 1 invalid", first, at1m, last)
	}
	for i := 1; i < len(tl.Progress); i++ {
		a, b := tl.Progress[i-1], tl.Progress[i]
		if b.Valid < a.Valid || b.Invalid < a.Invalid || !b.At.After(a.At) {
			t.Fatalf("progress goes back at %d: %+v then %+v", i, a, b)
		}
	}
	if tl.Calls != 7 || tl.P50 != 100 {
		t.Errorf("%d calls, p50 %v; want 7 calls, p50 100 ms", tl.Calls, tl.P50)
	}
	want := map[int64]int64{2: 1, 4: 2, 128: 2, 1024: 1, 8192: 1}
	var sum int64
	for _, b := range tl.Latency {
		if want[b.UpToMs] != b.Calls {
			t.Errorf("bucket under %d ms holds %d calls, want %d (buckets %+v)", b.UpToMs, b.Calls, want[b.UpToMs], tl.Latency)
		}
		sum += b.Calls
	}
	if sum != 7 {
		t.Errorf("buckets hold %d calls, want 7", sum)
	}
	// A batch over the bound is read by the minute: every job counted,
	// in steps of whole minutes; the latency plot reads its rollup either
	// way.
	s.SetTimelineJobs(2)
	byMinute, err := s.BatchTimeline(ctx, "tl")
	if err != nil {
		t.Fatal(err)
	}
	last = byMinute.Progress[len(byMinute.Progress)-1]
	if !byMinute.ByMinute || byMinute.Step%time.Minute != 0 || last.Valid != 3 || last.Invalid != 1 ||
		byMinute.Calls != 7 || byMinute.P50 != 100 {
		t.Errorf("by the minute: %v, step %s, at the end %+v, %d calls, p50 %v; want steps of minutes, 3 valid, 1 invalid, 7 calls, p50 100",
			byMinute.ByMinute, byMinute.Step, last, byMinute.Calls, byMinute.P50)
	}
	s.SetTimelineJobs(0)
	if w := tl.Waves; len(w) == 2 && (w[0].ValidReplies != 2 || w[0].CostUSD != 1 || w[0].CostPerValid() != 0.5 || w[0].TokensIn != 200 ||
		w[1].ValidReplies != 0 || w[1].CostUSD != 0 || w[1].CostPerValid() != 0) {
		t.Errorf("wave costs %+v: want wave 1 with 2 valid replies at $0.50, 200 tokens in; wave 2 none", w)
	}
	if len(tl.Waves) != 2 || tl.Waves[0].Number != 1 || tl.Waves[0].Expired != 1 || tl.Waves[0].Ended.IsZero() ||
		tl.Waves[1].Status != "submitted" || !tl.Waves[1].Ended.IsZero() {
		t.Errorf("waves %+v: want wave 1 done with 1 expired, wave 2 submitted and not ended", tl.Waves)
	}
}

// Calls that took under a millisecond (0 ms: a cache, a local simulator)
// are in the latency plot, so that its count is the cost table's.
func TestBatchTimelineCountsZeroMsCalls(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "z", 3)
	ctx := context.Background()
	rs := []store.Result{result(jobID("z", 1), "a", ""), result(jobID("z", 2), "b", "shape", ""), result(jobID("z", 3), "c", "shape", "shape", "")}
	for i := range rs {
		for k := range rs[i].AttemptRows {
			rs[i].AttemptRows[k].LatencyMS = int64(k * 5) // each job's first call 0 ms
		}
	}
	if _, err := s.SaveResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
	tl, err := s.BatchTimeline(ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	costs, err := s.ModelCosts(ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	var calls int64
	for _, c := range costs {
		if c.Basis == "realtime" {
			calls += c.Calls
		}
	}
	var inBuckets int64
	for _, b := range tl.Latency {
		inBuckets += b.Calls
	}
	if calls != 6 || tl.Calls != calls || inBuckets != calls {
		t.Errorf("the latency plot counts %d calls (%d in its buckets), the cost table %d; want 6 in both", tl.Calls, inBuckets, calls)
	}
	if len(tl.Latency) == 0 || tl.Latency[0].UpToMs != 1 || tl.Latency[0].Calls != 3 {
		t.Errorf("buckets %+v: want the first under 1 ms with the 3 calls of 0 ms", tl.Latency)
	}
	if tl.P50 != 2.5 {
		t.Errorf("p50 %v, want 2.5 ms (of 0, 0, 0, 5, 5, 10)", tl.P50)
	}
}
