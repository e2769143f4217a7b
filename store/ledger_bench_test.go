package store_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// BenchmarkLedger times each question a report subcommand, a view the docs
// point users to, and the dashboard ask of one batch, for a batch of
// 10,000 jobs and a large one, in a ledger of FIXPOINT_LEDGER_JOBS jobs
// (default 100,000): the large batch holds the rest. The ledger is
// generated (storetest.Generate) into a fresh database dropped at the end,
// or, with FIXPOINT_LEDGER_DSN, read as it is (batches ledger-small and
// ledger-big, or FIXPOINT_LEDGER_BATCHES, comma-separated; see BENCHMARKS.md, "The ledger at ten million jobs", for
// making one). Each question is reported as p50-ms and p95-ms of b.N runs,
// and the ledger's bytes a job are logged (-v):
//
//	FIXPOINT_LEDGER_JOBS=1000000 go test ./store/ -run '^$' -bench Ledger -benchtime 20x -timeout 60m -v
//	FIXPOINT_LEDGER_JOBS=10000000 FIXPOINT_LEDGER_GEN=server go test ./store/ -run '^$' -bench Ledger -benchtime 10x -timeout 180m -v
func BenchmarkLedger(b *testing.B) {
	st := ledgerBench(b)
	ctx := context.Background()
	batches := []string{"ledger-small", "ledger-big"}
	if v := os.Getenv("FIXPOINT_LEDGER_BATCHES"); v != "" {
		batches = strings.Split(v, ",")
	}
	for _, batch := range batches {
		for _, q := range ledgerQuestions {
			b.Run(batch+"/"+q.name, func(b *testing.B) {
				ds := make([]time.Duration, 0, b.N)
				for range b.N {
					t0 := time.Now()
					if err := q.ask(ctx, st, batch); err != nil {
						b.Fatalf("%s of %s: %v", q.name, batch, err)
					}
					ds = append(ds, time.Since(t0))
				}
				reportMillis(b, ds)
			})
		}
	}
}

// ledgerQuestions are the questions BenchmarkLedger asks, by what asks
// them: report summary, report failures, report wait and export, the
// views of docs/ledger.md, and the dashboard's batch page.
var ledgerQuestions = []struct {
	name string
	ask  func(context.Context, *store.Store, string) error
}{
	{"summary/Summary", func(ctx context.Context, s *store.Store, b string) error { _, err := s.Summary(ctx, b); return err }},
	{"summary/UnpricedAttempts", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.UnpricedAttempts(ctx, b)
		return err
	}},
	{"summary/MissingModels", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.MissingModels(ctx, b)
		return err
	}},
	{"summary/BatchCosts", func(ctx context.Context, s *store.Store, b string) error { _, err := s.BatchCosts(ctx, b); return err }},
	{"summary/BatchSpend", func(ctx context.Context, s *store.Store, b string) error { _, err := s.BatchSpend(ctx, b); return err }},
	{"summary/InterruptedAnswered", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.InterruptedAnswered(ctx, b)
		return err
	}},
	{"summary/BadRows", func(ctx context.Context, s *store.Store, b string) error { _, err := s.BadRows(ctx, b); return err }},
	{"summary/Waves", func(ctx context.Context, s *store.Store, b string) error { _, err := s.Waves(ctx, b); return err }},
	{"summary/CacheDelivery", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.CacheDelivery(ctx, b)
		return err
	}},
	{"summary/Repairs", func(ctx context.Context, s *store.Store, b string) error { _, err := s.Repairs(ctx, b); return err }},
	{"failures/FailureClasses", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.FailureClasses(ctx, b)
		return err
	}},
	{"failures/RepairEffectiveness", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.RepairEffectiveness(ctx, b)
		return err
	}},
	{"failures/TopErrorPaths", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.TopErrorPaths(ctx, b, 15)
		return err
	}},
	{"failures/EndReasons", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.EndReasons(ctx, b, 15)
		return err
	}},
	{"failures/RuleFailures", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.RuleFailures(ctx, b, 15)
		return err
	}},
	{"failures/Grounding", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.Grounding(ctx, b, 15)
		return err
	}},
	{"wait/Progress", func(ctx context.Context, s *store.Store, b string) error { _, err := s.Progress(ctx, b); return err }},
	{"wait/OwedByQueue", func(ctx context.Context, s *store.Store, b string) error { _, err := s.OwedByQueue(ctx, b); return err }},
	{"dashboard/Overview", func(ctx context.Context, s *store.Store, b string) error { _, err := s.Overview(ctx, b); return err }},
	{"dashboard/BatchFunnel", func(ctx context.Context, s *store.Store, b string) error { _, err := s.BatchFunnel(ctx, b); return err }},
	{"dashboard/ModelCosts", func(ctx context.Context, s *store.Store, b string) error { _, err := s.ModelCosts(ctx, b); return err }},
	{"dashboard/RepairSteps", func(ctx context.Context, s *store.Store, b string) error { _, err := s.RepairSteps(ctx, b); return err }},
	{"dashboard/FailureClusters", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.FailureClusters(ctx, b, 20)
		return err
	}},
	{"dashboard/BatchTimeline", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.BatchTimeline(ctx, b)
		return err
	}},
	{"dashboard/JobPage", func(ctx context.Context, s *store.Store, b string) error {
		_, _, err := s.JobPage(ctx, b, store.JobFilter{Status: "invalid"})
		return err
	}},
	{"dashboard/JobPageClass", func(ctx context.Context, s *store.Store, b string) error {
		_, _, err := s.JobPage(ctx, b, store.JobFilter{Class: "semantic"})
		return err
	}},
	{"dashboard/JobPageAttempts", func(ctx context.Context, s *store.Store, b string) error {
		_, _, err := s.JobPage(ctx, b, store.JobFilter{Attempts: 3})
		return err
	}},
	{"dashboard/JobPageAttemptsRare", func(ctx context.Context, s *store.Store, b string) error {
		_, _, err := s.JobPage(ctx, b, store.JobFilter{Attempts: 7})
		return err
	}},
	{"dashboard/JobPageNoMatch", func(ctx context.Context, s *store.Store, b string) error {
		// A filter no job of the batch matches: the page must not read
		// the whole batch to say so.
		_, _, err := s.JobPage(ctx, b, store.JobFilter{Status: "dead", Attempts: 7})
		return err
	}},
	{"dashboard/JobPageErrorPath", func(ctx context.Context, s *store.Store, b string) error {
		_, _, err := s.JobPage(ctx, b, store.JobFilter{ErrorPath: "/rare/path"})
		return err
	}},
	{"dashboard/JobPageCoerced", func(ctx context.Context, s *store.Store, b string) error {
		_, _, err := s.JobPage(ctx, b, store.JobFilter{Coerced: true, Patched: true})
		return err
	}},
	{"dashboard/SearchJobs", func(ctx context.Context, s *store.Store, b string) error {
		_, err := s.SearchJobs(ctx, b, "no such text", "")
		return err
	}},
	{"dashboard/JobDetail", func(ctx context.Context, s *store.Store, b string) error {
		// The page of one job: its row found by the batch's first page.
		page, _, err := s.JobPage(ctx, b, store.JobFilter{Status: "invalid", Limit: 1})
		if err != nil || len(page) == 0 {
			return err
		}
		_, err = s.JobDetail(ctx, page[0].ID)
		return err
	}},
	{"dashboard/Overviews", func(ctx context.Context, s *store.Store, _ string) error {
		_, err := s.Overviews(ctx, nil, 50)
		return err
	}},
	{"dashboard/CostsOverTime", func(ctx context.Context, s *store.Store, _ string) error {
		t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		_, err := s.CostsOverTime(ctx, t0, t0.Add(48*time.Hour), "hour")
		return err
	}},
}

// ledgerBench opens the ledger BenchmarkLedger reads: FIXPOINT_LEDGER_DSN's,
// or one generated now.
func ledgerBench(b *testing.B) *store.Store {
	b.Helper()
	ctx := context.Background()
	dsn := os.Getenv("FIXPOINT_LEDGER_DSN")
	if dsn == "" {
		n := 100_000
		if v := os.Getenv("FIXPOINT_LEDGER_JOBS"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n <= 10_000 {
				b.Fatalf("FIXPOINT_LEDGER_JOBS=%q: want a number of jobs over 10,000", v)
			}
		}
		dsn = storetest.NewDB(b)
		t0 := time.Now()
		// FIXPOINT_LEDGER_GEN=server draws the large batch in Postgres
		// (storetest.GenerateInServer): ten million jobs in minutes.
		gen := storetest.Generate
		if os.Getenv("FIXPOINT_LEDGER_GEN") == "server" {
			gen = storetest.GenerateInServer
		}
		if _, err := storetest.Generate(ctx, dsn, storetest.GenSpec{Batch: "ledger-small", Jobs: 10_000, Seed: 2}); err != nil {
			b.Fatal(err)
		}
		if _, err := gen(ctx, dsn, storetest.GenSpec{Batch: "ledger-big", Jobs: n - 10_000, Seed: 1}); err != nil {
			b.Fatal(err)
		}
		b.Logf("generated a ledger of %d jobs in %s", n, time.Since(t0).Round(time.Second))
	}
	st, err := store.Open(ctx, dsn, &store.Config{MaxConns: 4})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	size, err := st.LedgerSize(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("ledger: %d jobs, %d attempts; jobs %d MB, attempts %d MB, rollups and facets %d MB: %d bytes a job",
		size.Jobs, size.Attempts, size.JobsBytes>>20, size.AttemptsBytes>>20, size.RollupBytes>>20, size.BytesPerJob())
	return st
}

// reportMillis reports the p50 and p95 of ds in milliseconds.
func reportMillis(b *testing.B, ds []time.Duration) {
	b.Helper()
	slices.Sort(ds)
	at := func(p float64) float64 {
		i := min(int(p*float64(len(ds))+0.5), len(ds)) - 1
		return float64(ds[max(i, 0)].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
	b.ReportMetric(0, "ns/op")
}
