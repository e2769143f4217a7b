package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// BenchmarkSaveResults saves 200-job slices with 3 attempts each (two failed
// with errors, one valid), with a realistic request and reply size, and
// reports jobs/s and the CPU time of the database's Postgres backends a
// job (pg-µs/job: Postgres's work, which other load on a shared machine
// slows less than it does the wall clock). Job rows are inserted outside
// the timer and the backends' CPU count.
func BenchmarkSaveResults(b *testing.B) {
	s, hash := setup(b, "bench", 0)
	benchSaveResults(b, s, hash, 200)
}

// BenchmarkSaveResultsSmall saves 16-job slices: about what the worker's
// writer commits at a time under a few thousand jobs a second (it flushes
// 5 ms after a batch's first result), where each statement's fixed cost
// weighs most.
func BenchmarkSaveResultsSmall(b *testing.B) {
	s, hash := setup(b, "bench", 0)
	benchSaveResults(b, s, hash, 16)
}

// BenchmarkSaveResultsTypical saves 16-job slices shaped like the
// simulator's typical preset as the end-to-end bench writes them: one
// valid attempt for four jobs in five, a failed attempt and a valid one for
// the fifth, and every attempt graded for evidence (two leaves), so that
// nearly every job has a final check with grades.
func BenchmarkSaveResultsTypical(b *testing.B) {
	s, hash := setup(b, "bench", 0)
	benchSaveResultsShaped(b, s, hash, 16, func(k int, j store.NewJob, raw string) store.Result {
		classes := []string{""}
		if k%5 == 4 {
			classes = []string{"shape", ""}
		}
		r := result(j.ID, raw, classes...)
		for a := range r.AttemptRows {
			r.AttemptRows[a].Evidence = json.RawMessage(`[{"end": 144, "path": "/customer", "grade": "exact", "start": 134},
				{"end": 154, "path": "/order_id", "grade": "exact", "start": 145}]`)
		}
		return r
	})
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
	benchSaveResults(b, s, hash, 200)
}

// benchSlices numbers the benchmarks' slices of jobs, so that every run of
// a benchmark function (testing runs it with growing b.N) saves new jobs.
var benchSlices atomic.Int64

func benchSaveResults(b *testing.B, s *store.Store, hash string, perBatch int) {
	benchSaveResultsShaped(b, s, hash, perBatch, func(_ int, j store.NewJob, raw string) store.Result {
		return result(j.ID, raw, "shape", "semantic", "")
	})
}

// benchSaveResultsShaped saves slices of perBatch new jobs, the k-th job's
// result made by shape from the job and a reply text.
func benchSaveResultsShaped(b *testing.B, s *store.Store, hash string, perBatch int, shape func(k int, j store.NewJob, raw string) store.Result) {
	ctx := context.Background()
	req := json.RawMessage(fmt.Sprintf(`[{"role":"system","content":%q},{"role":"user","content":%q}]`,
		strings.Repeat("Return JSON matching the schema. ", 20), strings.Repeat("Extract the fields. ", 25)))
	raw := strings.Repeat(`{"name":"Ada","age":36} `, 20)
	var pg time.Duration // the backends' CPU time in SaveResults
	pgKnown := true
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		jobs := newJobs(fmt.Sprintf("bench-%d", benchSlices.Add(1)), hash, perBatch)
		for k := range jobs {
			jobs[k].Batch = "bench"
		}
		if _, err := s.InsertJobs(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		results := make([]store.Result, perBatch)
		for k, j := range jobs {
			r := shape(k, j, raw)
			for a := range r.AttemptRows {
				r.AttemptRows[a].Request = req
			}
			results[k] = r
		}
		cpu0, ok := backendCPU(b, s)
		pgKnown = pgKnown && ok
		b.StartTimer()
		won, err := s.SaveResults(ctx, results)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if !won[0] || !won[perBatch-1] {
			b.Fatal("fresh jobs not won")
		}
		cpu1, ok := backendCPU(b, s)
		pgKnown = pgKnown && ok
		pg += cpu1 - cpu0
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "jobs/s")
	if pgKnown {
		b.ReportMetric(float64(pg.Microseconds())/float64(b.N*perBatch), "pg-µs/job")
	}
}

// backendCPU is the CPU time (user and system) of the Postgres backends
// connected to s's database, read from /proc; not ok when Postgres runs
// elsewhere.
func backendCPU(b *testing.B, s *store.Store) (time.Duration, bool) {
	pids, err := s.BackendPIDs(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, false
		}
		// utime and stime are the 12th and 13th fields after the command,
		// which is in parentheses; USER_HZ is 100 on Linux.
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) < 13 {
			return 0, false
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		sum += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return sum, len(pids) > 0
}
