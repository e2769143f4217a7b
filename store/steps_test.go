package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

func intp(n int) *int { return &n }

// docAttempts are a parallel job's calls: two chunks, the merge (no call,
// with a conflict), one repair; then an agent turn with tool calls.
func docAttempts() []store.Attempt {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	return []store.Attempt{
		{No: 1, Step: "chunk", Chunk: &fixpoint.ChunkRef{N: 0, Start: 0, End: 4100}, Fields: intp(7), Valid: true,
			TokensIn: 1000, TokensOut: 100, CostUSD: 0.01, StartedAt: t0, Raw: "{}"},
		{No: 2, Step: "chunk", Chunk: &fixpoint.ChunkRef{N: 1, Start: 3900, End: 8000}, Fields: intp(0), Class: "semantic",
			Errors:   json.RawMessage(`[{"path":"/date","keyword":"format","class":"semantic","message":"m"}]`),
			TokensIn: 900, TokensOut: 90, CostUSD: 0.009, StartedAt: t0, Raw: "{}"},
		{No: 3, Step: "merge", Fields: intp(7), Class: "shape",
			Errors:    json.RawMessage(`[{"path":"/total","keyword":"required","class":"shape","message":"m"}]`),
			Conflicts: json.RawMessage(`[{"path":"/parties/1/name","values":["A","B"],"chunks":[[0],[1]],"chosen":"A"}]`)},
		{No: 4, Step: "agent", ToolCalls: json.RawMessage(`[{"id":"call_1","name":"search","arguments":"{\"text\":\"term\"}"}]`),
			TokensIn: 300, TokensOut: 30, CostUSD: 0.003, StartedAt: t0, Raw: ""},
	}
}

// A document job's attempts keep their step, chunk, fields, tool calls
// and conflicts through every write and read of the ledger: the results'
// COPY, the job page's read (Job), a driver's read (JobAttempts) and a
// call kept apart; an ordinary job's attempts keep NULL in every step
// column.
func TestStepsRoundTrip(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "st", 2)
	ctx := context.Background()
	doc := store.Result{JobID: jobID("st", 1), Status: fixpoint.StatusInvalid, Attempts: 4, Calls: 3, AttemptRows: docAttempts()}
	plain := result(jobID("st", 2), "x", "shape", "")
	if _, err := s.SaveResults(ctx, []store.Result{doc, plain}); err != nil {
		t.Fatal(err)
	}
	_, got, err := s.Job(ctx, doc.JobID)
	if err != nil {
		t.Fatal(err)
	}
	checkSteps(t, "Job", got, doc.AttemptRows)
	ledger, err := s.JobAttempts(ctx, doc.JobID, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkSteps(t, "JobAttempts", ledger, doc.AttemptRows)

	_, got, err = s.Job(ctx, plain.JobID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		if a.Step != "" || a.Chunk != nil || a.Fields != nil || a.ToolCalls != nil || a.Conflicts != nil {
			t.Errorf("ordinary attempt %d read back with step columns: %+v", a.No, a)
		}
	}
	var set int
	if err := s.QueryRowForTest(ctx, fmt.Sprintf(`SELECT count(*) FROM attempts WHERE job_id = '%s' AND (step IS NOT NULL OR chunk_n IS NOT NULL
		OR chunk_start IS NOT NULL OR chunk_end IS NOT NULL OR fields IS NOT NULL OR tool_calls IS NOT NULL OR conflicts IS NOT NULL)`,
		plain.JobID), &set); err != nil || set != 0 {
		t.Errorf("ordinary job: %d attempts with a step column set (%v), want 0: all NULL", set, err)
	}

	// A call kept apart says which step it was.
	in := store.Interruption{JobID: jobID("st", 1), Run: 1, Delivery: 2, Reason: store.InterruptShutdown,
		Attempts: []store.Attempt{{No: 5, Step: "chunk", Chunk: &fixpoint.ChunkRef{N: 2, Start: 7800, End: 9000}, Fields: intp(3),
			ToolCalls: json.RawMessage(`[]`)}}}
	if err := s.SaveInterrupted(ctx, []store.Interruption{in}); err != nil {
		t.Fatal(err)
	}
	var step string
	var n, start, end, fields int
	if err := s.QueryRowForTest(ctx, fmt.Sprintf(`SELECT step, chunk_n, chunk_start, chunk_end, fields FROM interrupted_attempts WHERE job_id = '%s'`,
		in.JobID), &step, &n, &start, &end, &fields); err != nil {
		t.Fatal(err)
	}
	if step != "chunk" || n != 2 || start != 7800 || end != 9000 || fields != 3 {
		t.Errorf("interrupted call: step %q chunk %d [%d, %d) fields %d, want chunk 2 [7800, 9000) fields 3", step, n, start, end, fields)
	}
}

func checkSteps(t *testing.T, read string, got, want []store.Attempt) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d attempts, want %d", read, len(got), len(want))
	}
	for i, a := range got {
		w := want[i]
		if a.Step != w.Step || fmt.Sprint(deref(a.Chunk)) != fmt.Sprint(deref(w.Chunk)) || fmt.Sprint(derefInt(a.Fields)) != fmt.Sprint(derefInt(w.Fields)) {
			t.Errorf("%s: attempt %d: step %q chunk %v fields %v, want %q %v %v", read, a.No, a.Step, deref(a.Chunk), derefInt(a.Fields),
				w.Step, deref(w.Chunk), derefInt(w.Fields))
		}
		if !sameJSON(a.ToolCalls, w.ToolCalls) || !sameJSON(a.Conflicts, w.Conflicts) {
			t.Errorf("%s: attempt %d: tool calls %s conflicts %s, want %s %s", read, a.No, a.ToolCalls, a.Conflicts, w.ToolCalls, w.Conflicts)
		}
	}
}

func deref(c *fixpoint.ChunkRef) any {
	if c == nil {
		return nil
	}
	return *c
}

func derefInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// sameJSON reports whether a and b are the same JSON value, or both none.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// A step the ledger does not know, or a chunk with offsets out of order,
// is refused before anything is written, naming the attempt.
func TestStepsRefused(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "sr", 1)
	ctx := context.Background()
	for _, a := range []store.Attempt{
		{No: 1, Step: "chunks"},
		{No: 1, Step: "chunk", Chunk: &fixpoint.ChunkRef{N: 0, Start: 10, End: 5}},
		{No: 1, Step: "agent", ToolCalls: json.RawMessage(`{"id":"x"}`)},
	} {
		r := store.Result{JobID: jobID("sr", 1), Status: fixpoint.StatusInvalid, AttemptRows: []store.Attempt{a}}
		if _, err := s.SaveResults(ctx, []store.Result{r}); err == nil {
			t.Errorf("attempt %+v saved, want an error", a)
		}
	}
}

// A chunk call carried by a wave (--delivery batch) keeps its step when
// its outcome is recorded, and a driver going on from the ledger reads it
// back (WaveAttempts).
func TestStepsThroughAWave(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "sw", 1)
	ctx := context.Background()
	w, taken, err := s.RecordWave(ctx, store.WaveParams{Batch: "sw", Run: 1, Provider: "openai", Model: "m", Requests: waveReqs("sw", 1, 1)})
	if err != nil || len(taken) != 1 {
		t.Fatalf("RecordWave: %v, %d requests", err, len(taken))
	}
	a := waveAttempt(1, "")
	a.Step, a.Chunk, a.Fields = "chunk", &fixpoint.ChunkRef{N: 3, Start: 12000, End: 16100}, intp(9)
	if _, err := s.RecordWaveOutcomes(ctx, []store.WaveOutcome{{WaveID: w.ID, CustomID: taken[0].CustomID, Attempt: a}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.WaveAttempts(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkSteps(t, "WaveAttempts", got[jobID("sw", 1)], []store.Attempt{a})
	r, err := s.Steps(ctx, "sw", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Chunks) != 1 || r.Chunks[0] != (store.ChunkFields{Chunk: 3, Attempts: 1, Valid: 1, WithValue: 1, Fields: 9}) {
		t.Errorf("chunk rollup after the wave: %+v", r.Chunks)
	}
}
