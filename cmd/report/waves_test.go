package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/store"
)

// seedWaves writes batch "bw", delivered in three waves, and batch "plain",
// run realtime:
//
//	wave 1 (bw-1, bw-2): done, submitted 00:00, ended 01:30; bw-1 valid
//	       (3000 prompt tokens, 2400 cached, $0.004), bw-2 expired (no reply)
//	wave 2 (bw-2): submitted 02:00, running
//	wave 3 (bw-4): recorded, not sent
//	bw-3 realtime: valid (1000 prompt tokens, 600 cached, 400 written, $0.01)
//	plain-1 realtime: valid
func seedWaves(t *testing.T) string {
	t.Helper()
	dsn, st := newLedger(t)
	ctx := context.Background()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	for _, b := range []struct {
		name string
		n    int
	}{{"bw", 4}, {"plain", 1}} {
		if err := st.PutBatch(ctx, store.BatchParams{Name: b.name, Settings: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= b.n; i++ {
			jobs = append(jobs, store.NewJob{ID: fmt.Sprintf("%s-%d", b.name, i), Batch: b.name, RowNo: i, SchemaHash: hash,
				Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt", Strategy: "conversation", Metadata: json.RawMessage(`{}`)})
		}
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	attempt := func(no int, class, basis string, in, cached, write int64, cost float64) store.Attempt {
		a := store.Attempt{No: no, Raw: "{}", Class: class, Valid: class == "", TokensIn: in, TokensOut: 50,
			TokensCached: cached, TokensCacheWrite: write, PriceBasis: basis, CostUSD: cost, StartedAt: now}
		if class == "provider" {
			a.Raw, a.ProviderClass = "", "expired"
		}
		return a
	}
	valid := func(id string, attempts int) *store.Result {
		return &store.Result{JobID: id, Status: fixpoint.StatusValid, Value: json.RawMessage(`{}`), Attempts: attempts, Calls: attempts,
			FirstAttemptValid: attempts == 1, StartedAt: now, FinishedAt: now, Deliveries: 1}
	}
	request := func(id string, no int) store.WaveRequest {
		return store.WaveRequest{JobID: id, Run: 1, AttemptNo: no, Request: json.RawMessage(`{}`), Envelope: json.RawMessage(`{}`)}
	}
	record := func(from int64, reqs ...store.WaveRequest) (*store.Wave, []store.WaveRequest) {
		t.Helper()
		w, taken, err := st.RecordWave(ctx, store.WaveParams{Batch: "bw", Run: 1, Provider: "openai", Model: "m",
			Requests: reqs, From: from, Owner: "t", Lease: time.Minute})
		if err != nil || len(taken) != len(reqs) {
			t.Fatalf("record wave: %v %v", taken, err)
		}
		return w, taken
	}
	update := func(w *store.Wave, u store.WaveUpdate) {
		t.Helper()
		if err := st.UpdateWave(ctx, w.ID, "t", u); err != nil {
			t.Fatal(err)
		}
	}

	w1, taken1 := record(0, request("bw-1", 1), request("bw-2", 1))
	update(w1, store.WaveUpdate{Status: store.WaveSubmitted, ProviderBatchID: "batch_1"})
	update(w1, store.WaveUpdate{Status: store.WaveEnded, Counts: &[4]int{1, 0, 1, 0}})
	if _, err := st.RecordWaveOutcomes(ctx, []store.WaveOutcome{
		{WaveID: w1.ID, CustomID: taken1[0].CustomID, Attempt: attempt(1, "", "batch", 3000, 2400, 0, 0.004), Result: valid("bw-1", 1)},
		{WaveID: w1.ID, CustomID: taken1[1].CustomID, Attempt: attempt(1, "provider", "batch", 0, 0, 0, 0),
			Totals: &store.Result{Attempts: 1, Calls: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	update(w1, store.WaveUpdate{Status: store.WaveDone})
	w2, _ := record(w1.ID, request("bw-2", 2))
	update(w2, store.WaveUpdate{Status: store.WaveSubmitted, ProviderBatchID: "batch_2"})
	w3, _ := record(0, request("bw-4", 1))
	update(w3, store.WaveUpdate{Status: store.WaveFailed, Error: "the provider failed the batch: token_limit_exceeded"})

	bw3, plain := valid("bw-3", 1), valid("plain-1", 1)
	bw3.AttemptRows = []store.Attempt{attempt(1, "", "realtime", 1000, 600, 400, 0.01)}
	plain.AttemptRows = []store.Attempt{attempt(1, "", "", 1000, 500, 0, 0.01)}
	if _, err := st.SaveResults(ctx, []store.Result{*bw3, *plain}); err != nil {
		t.Fatal(err)
	}

	// Times the provider took, fixed so that the report shows known durations.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`UPDATE waves SET submitted_at = '2026-01-01T00:00:00Z', ended_at = '2026-01-01T01:30:00Z' WHERE batch = 'bw' AND number = 1`,
		`UPDATE waves SET submitted_at = '2026-01-01T02:00:00Z' WHERE batch = 'bw' AND number = 2`,
		// Wave 2's batch is gone, and no worker polls it.
		`UPDATE waves SET missing_since = '2026-01-01T02:10:00Z', next_poll_at = '2026-01-01T02:11:00Z', lease_until = NULL, lease_owner = NULL WHERE batch = 'bw' AND number = 2`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return dsn
}

const bwSection = `
Waves of batch bw (TIME: submitted to ended at the provider)
WAVE   PROVIDER  STATUS     REQUESTS  SUCCEEDED  ERRORED  EXPIRED  CANCELLED  TIME
1      openai    done       2         1          0        1        0          1h30m0s
2      openai    submitted  1         0          0        0        0          running
3      openai    failed     1         0          0        0        0          -
total                       4         1          0        1        0          running
wave 2: the provider has not known its batch batch_2 since 2026-01-01T02:10:00Z (404); it is given up 5 minutes after that and its jobs run realtime
wave 2: due to be polled since 2026-01-01T02:11:00Z and no worker has: is a worker of its home (any) running on this ledger?
wave 3 failed: the provider failed the batch: token_limit_exceeded

prompt cache  75.0% hit: 3000 of 4000 prompt tokens read from the cache, 400 written to it
delivery      batch: 2 attempts $0.004000, realtime: 1 attempt $0.010000
`

// TestReportSummaryWaves: the summary of a batch delivered in waves lists
// its waves, its prompt-cache hit rate over the replies and its attempts
// and cost by price basis; a batch without waves prints what it printed
// before.
func TestReportSummaryWaves(t *testing.T) {
	t.Parallel()
	dsn := seedWaves(t)
	ctx := context.Background()
	summary := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, append(append([]string{"summary"}, args...), "--database-url", dsn), &out, &errOut); code != 0 {
			t.Fatalf("summary %v: exit %d; stderr %q", args, code, errOut.String())
		}
		return out.String()
	}
	// The summary table as it was: what WriteSummary alone prints.
	table := func(batch string) string {
		t.Helper()
		st, err := store.Open(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rows, err := st.Summary(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		cli.WriteSummary(&buf, rows, nil)
		return buf.String()
	}

	// Every batch has its cost line (nothing in these seeds is priced).
	costLine := func(batch string) string {
		return "\nbatch " + batch + " cost $0.000000 in all ($0.000000 a valid row): $0.000000 in recorded attempts (of which $0.000000 in runs a requeue replaced)" +
			" and $0.000000 in 0 calls kept apart from the results (interrupted_attempts: see report job)\n"
	}
	if got, want := summary("bw"), table("bw")+costLine("bw")+bwSection; got != want {
		t.Errorf("summary bw:\n%s\nwant:\n%s", got, want)
	}
	// A realtime batch that read its prompt cache: the table and that line.
	plainCache := "\nplain: prompt cache 50.0% hit: 500 of 1000 prompt tokens read from the cache, 0 written to it\n"
	if got, want := summary("plain"), table("plain")+costLine("plain")+plainCache; got != want {
		t.Errorf("summary of a batch without waves:\n%s\nwant the table and its cache line:\n%s", got, want)
	}
	// Every batch: the table of both, then bw's waves, then plain's cache.
	if got, want := summary(), table("")+costLine("bw")+costLine("plain")+bwSection+plainCache; got != want {
		t.Errorf("summary of every batch:\n%s\nwant:\n%s", got, want)
	}
}

func TestWaveTimes(t *testing.T) {
	t.Parallel()
	at := func(h, m int) time.Time { return time.Date(2026, 1, 1, h, m, 0, 0, time.UTC) }
	sent := store.Wave{SubmittedAt: at(0, 0)}
	ended := store.Wave{SubmittedAt: at(1, 0), EndedAt: at(1, 20)}
	failedUnsent := store.Wave{EndedAt: at(0, 5)} // failed before it was submitted
	tests := []struct {
		name      string
		waves     []store.Wave
		wantEach  []string
		wantTotal string
	}{
		{name: "none sent", waves: []store.Wave{{}, failedUnsent}, wantEach: []string{"-", "-"}, wantTotal: "-"},
		{name: "one running", waves: []store.Wave{ended, sent}, wantEach: []string{"20m0s", "running"}, wantTotal: "running"},
		{name: "all ended: first submission to last end", waves: []store.Wave{ended, {SubmittedAt: at(0, 30), EndedAt: at(0, 45)}, failedUnsent},
			wantEach: []string{"20m0s", "15m0s", "-"}, wantTotal: "50m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var each []string
			for _, w := range tt.waves {
				each = append(each, waveTime(w))
			}
			if strings.Join(each, " ") != strings.Join(tt.wantEach, " ") {
				t.Errorf("waveTime = %v, want %v", each, tt.wantEach)
			}
			if got := wavesTime(tt.waves); got != tt.wantTotal {
				t.Errorf("wavesTime = %s, want %s", got, tt.wantTotal)
			}
		})
	}
}

// report wait that times out on a batch whose queued jobs sit in open
// provider batches says so, instead of asking whether workers run (a
// worker was driving them).
func TestReportWaitTimesOutOnWaves(t *testing.T) {
	t.Parallel()
	dsn := seedWaves(t)
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Jobs reach a wave through the queue: they were published.
	if err := st.MarkPublished(ctx, []string{"bw-1", "bw-2", "bw-3", "bw-4"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"wait", "bw", "--timeout", "1s", "--database-url", dsn}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "2 of 4 jobs still queued, 2 of them in open provider batches") {
		t.Errorf("wait: exit %d, stderr %q; want exit 1 naming the 2 jobs in open provider batches", code, errOut.String())
	}
}
