package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// stepsDataset stores batch "ds" (strategy parallel) with two document
// jobs, and batch "pl" (conversation) with one ordinary job:
//
//	ds-1  docAttempts: chunk 0 valid (7 fields), chunk 1 semantic (0
//	      fields), merge shape (1 conflict at /parties/1/name), agent turn
//	      with 1 tool call
//	ds-2  chunk 0 valid (3 fields, graded exact and none), chunk 1 valid
//	      (5 fields), merge valid (conflicts at /parties/0/name and
//	      /total), repair valid (graded exact, normalized, fuzzy)
func stepsDataset(t *testing.T) *store.Store {
	t.Helper()
	s, hash := setup(t, "ds", 2)
	ctx := context.Background()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "ds", Settings: json.RawMessage(`{"limits":{"strategy":"parallel"}}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBatch(ctx, store.BatchParams{Name: "pl", Settings: json.RawMessage(`{"limits":{"max_attempts":3}}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("pl", hash, 1)); err != nil {
		t.Fatal(err)
	}
	grades := func(gs ...string) json.RawMessage {
		var out []map[string]any
		for i, g := range gs {
			out = append(out, map[string]any{"path": fmt.Sprintf("/f%d", i), "grade": g, "start": 0, "end": 1})
		}
		b, _ := json.Marshal(out)
		return b
	}
	ds2 := []store.Attempt{
		{No: 1, Step: "chunk", Chunk: &fixpoint.ChunkRef{N: 0, Start: 0, End: 4000}, Fields: intp(3), Valid: true,
			TokensIn: 800, TokensOut: 80, CostUSD: 0.008, Evidence: grades("exact", "none")},
		{No: 2, Step: "chunk", Chunk: &fixpoint.ChunkRef{N: 1, Start: 3800, End: 7000}, Fields: intp(5), Valid: true,
			TokensIn: 700, TokensOut: 70, CostUSD: 0.007},
		{No: 3, Step: "merge", Fields: intp(8), Valid: true, Conflicts: json.RawMessage(`[
			{"path":"/parties/0/name","values":["A","B"],"chunks":[[0],[1]],"chosen":"A"},
			{"path":"/total","values":[1,2],"chunks":[[0],[1]],"chosen":1}]`)},
		{No: 4, Step: "repair", Fields: intp(8), Valid: true, TokensIn: 500, TokensOut: 50, CostUSD: 0.005, Unpriced: true,
			Evidence: grades("exact", "normalized", "fuzzy")},
	}
	results := []store.Result{
		{JobID: jobID("ds", 1), Status: fixpoint.StatusInvalid, AttemptRows: docAttempts()},
		{JobID: jobID("ds", 2), Status: fixpoint.StatusValid, Value: json.RawMessage(`{}`), AttemptRows: ds2},
		result(jobID("pl", 1), "x", "shape", ""),
	}
	if _, err := s.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	return s
}

// The step report's figures on a hand-made ledger, and a batch with no
// document job, whose report is empty and says its strategy.
func TestStepsReport(t *testing.T) {
	t.Parallel()
	s := stepsDataset(t)
	ctx := context.Background()
	r, err := s.Steps(ctx, "ds", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Strategies, []string{"parallel"}) {
		t.Errorf("strategies %q, want [parallel]", r.Strategies)
	}
	want := []store.StepCalls{
		{Step: "chunk", Class: "", Attempts: 3, Valid: 3, TokensIn: 2500, TokensOut: 250, CostUSD: 0.025, Graded: 1, Leaves: 2, Exact: 1, None: 1},
		{Step: "chunk", Class: "semantic", Attempts: 1, TokensIn: 900, TokensOut: 90, CostUSD: 0.009},
		{Step: "merge", Class: "", Attempts: 1, Valid: 1, Conflicts: 2, Conflicted: 1},
		{Step: "merge", Class: "shape", Attempts: 1, Conflicts: 1, Conflicted: 1},
		{Step: "repair", Class: "", Attempts: 1, Valid: 1, TokensIn: 500, TokensOut: 50, CostUSD: 0.005, Unpriced: 1,
			Graded: 1, Leaves: 3, Exact: 1, Normalized: 1, Fuzzy: 1},
		{Step: "agent", Class: "", Attempts: 1, TokensIn: 300, TokensOut: 30, CostUSD: 0.003, ToolCalls: 1},
	}
	if len(r.Steps) != len(want) {
		t.Fatalf("steps:\n%+v\nwant\n%+v", r.Steps, want)
	}
	for i, got := range r.Steps {
		w := want[i]
		if math.Abs(got.CostUSD-w.CostUSD) > 1e-9 {
			t.Errorf("%s/%s: cost %v, want %v", got.Step, got.Class, got.CostUSD, w.CostUSD)
		}
		got.CostUSD = w.CostUSD
		if got != w {
			t.Errorf("step row %d:\n%+v\nwant\n%+v", i, got, w)
		}
	}
	wantChunks := []store.ChunkFields{
		{Chunk: 0, Attempts: 2, Valid: 2, WithValue: 2, Fields: 10},
		{Chunk: 1, Attempts: 2, Valid: 1, WithValue: 2, Fields: 5, Empty: 1},
	}
	if !slices.Equal(r.Chunks, wantChunks) {
		t.Errorf("chunks %+v, want %+v", r.Chunks, wantChunks)
	}
	if m := r.Chunks[0].MeanFields(); m != 5 {
		t.Errorf("chunk 0 mean fields %v, want 5", m)
	}
	wantConflicts := []store.ConflictPath{{Path: "/parties/*/name", Conflicts: 2, Merges: 2}, {Path: "/total", Conflicts: 1, Merges: 1}}
	if !slices.Equal(r.Conflicts, wantConflicts) {
		t.Errorf("conflicts %+v, want %+v", r.Conflicts, wantConflicts)
	}
	if top, err := s.Steps(ctx, "ds", 1); err != nil || len(top.Conflicts) != 1 || top.Conflicts[0].Path != "/parties/*/name" {
		t.Errorf("Steps with limit 1: %+v, %v; want the one most frequent path", top.Conflicts, err)
	}

	plain, err := s.Steps(ctx, "pl", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plain.Strategies, []string{"conversation"}) || len(plain.Steps)+len(plain.Chunks)+len(plain.Conflicts) > 0 {
		t.Errorf("ordinary batch: %+v, want strategy conversation and no rows", plain)
	}
	if _, err := s.Steps(ctx, "nope", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Steps(nope): %v, want ErrNotFound", err)
	}
}

// The step rollups are exact: a recount from the attempts finds no
// drift.
func TestStepsRollupsExact(t *testing.T) {
	t.Parallel()
	s := stepsDataset(t)
	drift, err := s.RollupDrift(context.Background())
	if err != nil || len(drift) > 0 {
		t.Fatalf("RollupDrift: %v\n%s", err, drift)
	}
}
