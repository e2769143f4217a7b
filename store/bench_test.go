package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
)

// BenchmarkSaveResults saves 200-job slices with 3 attempts each (two failed
// with errors, one valid), with a realistic request and reply size, and
// reports jobs/s. Job rows are inserted outside the timer.
func BenchmarkSaveResults(b *testing.B) {
	s, hash := setup(b, "bench", 0)
	benchSaveResults(b, s, hash)
}

// BenchmarkSaveResultsNoRollups is BenchmarkSaveResults with every
// user trigger on jobs, attempts, job_runs and interrupted_attempts
// disabled: the writer's own cost, so that the difference is what keeping
// the rollups costs.
func BenchmarkSaveResultsNoRollups(b *testing.B) {
	s, hash := setup(b, "bench", 0)
	for _, t := range []string{"jobs", "attempts", "job_runs", "interrupted_attempts"} {
		if err := s.ExecForTest(context.Background(), "ALTER TABLE "+t+" DISABLE TRIGGER USER"); err != nil {
			b.Fatal(err)
		}
	}
	benchSaveResults(b, s, hash)
}

func benchSaveResults(b *testing.B, s *store.Store, hash string) {
	const perBatch = 200
	ctx := context.Background()
	req := json.RawMessage(fmt.Sprintf(`[{"role":"system","content":%q},{"role":"user","content":%q}]`,
		strings.Repeat("Return JSON matching the schema. ", 20), strings.Repeat("Extract the fields. ", 25)))
	raw := strings.Repeat(`{"name":"Ada","age":36} `, 20)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		jobs := newJobs(fmt.Sprintf("bench-%d", i), hash, perBatch)
		for k := range jobs {
			jobs[k].Batch = "bench"
		}
		if _, err := s.InsertJobs(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		results := make([]store.Result, perBatch)
		for k, j := range jobs {
			r := result(j.ID, raw, "shape", "semantic", "")
			for a := range r.AttemptRows {
				r.AttemptRows[a].Request = req
			}
			results[k] = r
		}
		b.StartTimer()
		won, err := s.SaveResults(ctx, results)
		if err != nil {
			b.Fatal(err)
		}
		if !won[0] || !won[perBatch-1] {
			b.Fatal("fresh jobs not won")
		}
	}
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "jobs/s")
}
