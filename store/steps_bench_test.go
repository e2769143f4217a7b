package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// BenchmarkSaveResultsSmallNoStepRollup is BenchmarkSaveResultsSmall with
// only migration 015's trigger (attempts_rollup_steps) disabled: the
// difference is what the step rollups cost a batch of ordinary jobs, whose
// statements the trigger leaves at its first test.
func BenchmarkSaveResultsSmallNoStepRollup(b *testing.B) {
	s, hash := setup(b, "bench", 0)
	if err := s.ExecForTest(context.Background(), "ALTER TABLE attempts DISABLE TRIGGER attempts_rollup_steps"); err != nil {
		b.Fatal(err)
	}
	benchSaveResults(b, s, hash, 16)
}

// BenchmarkSaveResultsDocument saves 16-job slices of parallel jobs: eight
// chunk calls (every value graded for evidence), a merge with two
// conflicts and a repair, so that the step rollups count every row.
func BenchmarkSaveResultsDocument(b *testing.B) {
	s, hash := setup(b, "bench", 0)
	ev := json.RawMessage(`[{"end": 144, "path": "/customer", "grade": "exact", "start": 134}]`)
	conflicts := json.RawMessage(`[{"path":"/parties/0/name","values":["A","B"],"chunks":[[0],[1]],"chosen":"A"},
		{"path":"/total","values":[1,2],"chunks":[[2],[3]],"chosen":1}]`)
	benchSaveResultsShaped(b, s, hash, 16, func(_ int, j store.NewJob, raw string) store.Result {
		r := store.Result{JobID: j.ID, Status: fixpoint.StatusValid, Value: json.RawMessage(`{}`)}
		for c := range 8 {
			r.AttemptRows = append(r.AttemptRows, store.Attempt{No: c + 1, Step: "chunk", Raw: raw, Valid: true,
				Chunk: &fixpoint.ChunkRef{N: c, Start: c * 16000, End: c*16000 + 16800}, Fields: intp(c % 4), Evidence: ev,
				TokensIn: 4000, TokensOut: 200, CostUSD: 0.001})
		}
		r.AttemptRows = append(r.AttemptRows,
			store.Attempt{No: 9, Step: "merge", Fields: intp(12), Class: "shape", Conflicts: conflicts,
				Errors: json.RawMessage(fmt.Sprintf(`[{"path":"/total","keyword":"required","class":"shape","message":%q}]`, "m"))},
			store.Attempt{No: 10, Step: "repair", Raw: raw, Valid: true, Fields: intp(13), TokensIn: 2000, TokensOut: 300, CostUSD: 0.001})
		return r
	})
}
