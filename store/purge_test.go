package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// rollupTables are every table a rollup trigger keeps: a purge must leave
// each as it was.
var rollupTables = append(store.RollupRelationsForTest(), "spend_counters")

// ledgerFigures is every figure report summary, report failures and the
// dashboard's batch page give of batch, and every rollup row, as text.
func ledgerFigures(t *testing.T, s *store.Store, batch string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	put := func(name string, v any, err error) {
		if err != nil {
			t.Fatalf("%s of %s: %v", name, batch, err)
		}
		b, err := json.Marshal(v) // pointers compared by what they point to
		if err != nil {
			t.Fatalf("%s of %s: %v", name, batch, err)
		}
		out[name] = string(b)
	}
	v1, err := s.Summary(ctx, batch)
	put("Summary", v1, err)
	v2, err := s.UnpricedAttempts(ctx, batch)
	put("UnpricedAttempts", v2, err)
	v3, err := s.BatchCosts(ctx, batch)
	put("BatchCosts", v3, err)
	v4, err := s.BatchSpend(ctx, batch)
	put("BatchSpend", v4, err)
	v5, err := s.InterruptedAnswered(ctx, batch)
	put("InterruptedAnswered", v5, err)
	v6, err := s.CacheDelivery(ctx, batch)
	put("CacheDelivery", v6, err)
	v7, err := s.Repairs(ctx, batch)
	put("Repairs", v7, err)
	v8, err := s.FailureClasses(ctx, batch)
	put("FailureClasses", v8, err)
	v9, err := s.RepairEffectiveness(ctx, batch)
	put("RepairEffectiveness", v9, err)
	v10, err := s.TopErrorPaths(ctx, batch, 0)
	put("TopErrorPaths", v10, err)
	v11, err := s.EndReasons(ctx, batch, 100)
	put("EndReasons", v11, err)
	v12, err := s.RuleFailures(ctx, batch, 0)
	put("RuleFailures", v12, err)
	v13, err := s.Grounding(ctx, batch, 0)
	put("Grounding", v13, err)
	v14, err := s.Overview(ctx, batch)
	put("Overview", v14, err)
	v15, err := s.BatchFunnel(ctx, batch)
	put("BatchFunnel", v15, err)
	v16, err := s.ModelCosts(ctx, batch)
	put("ModelCosts", v16, err)
	v17, err := s.RepairSteps(ctx, batch)
	put("RepairSteps", v17, err)
	v18, err := s.FailureClusters(ctx, batch, 0)
	put("FailureClusters", v18, err)
	v19, err := s.BatchTimeline(ctx, batch)
	put("BatchTimeline", v19, err)
	for _, f := range []store.JobFilter{{Coerced: true}, {Patched: true}, {ErrorPath: "/name"}, {Status: "invalid"}} {
		page, next, err := s.JobPage(ctx, batch, f)
		put(fmt.Sprintf("JobPage %+v", f), fmt.Sprint(page, next), err)
	}
	for _, tbl := range rollupTables {
		var rows string
		err := s.QueryRowForTest(ctx, `SELECT coalesce(string_agg(t::text, E'\n' ORDER BY t::text), '') FROM `+tbl+` t`, &rows)
		put(tbl, rows, err)
	}
	return out
}

// A purge deletes the attempts of the jobs finished before its cutoff and
// keeps every figure of their batches: report summary, report failures,
// the dashboard's batch page and every rollup are the same after it, and a
// purged job says its attempts were purged.
func TestPurgeKeepsFigures(t *testing.T) {
	t.Parallel()
	s := truthDataset(t) // batches t and u: rules, grades, a requeue
	ctx := context.Background()
	dsn := s.URLForTest()
	if _, err := storetest.Generate(ctx, dsn, storetest.GenSpec{Batch: "gen", Jobs: 3000, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string]string{}
	for _, b := range []string{"t", "u", "gen"} {
		before[b] = ledgerFigures(t, s, b)
	}
	var attempts, kept int64
	if err := s.QueryRowForTest(ctx, `SELECT (SELECT count(*) FROM attempts), (SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id
		WHERE j.status = 'cancelled' AND (j.attempts > 0 OR j.tokens_in > 0 OR j.tokens_out > 0 OR j.cost_usd > 0))`, &attempts, &kept); err != nil {
		t.Fatal(err)
	}

	cutoff := time.Now().Add(time.Hour) // every finished job
	dry, err := s.Purge(ctx, store.PurgeParams{Before: cutoff, DryRun: true, Chunk: 700})
	if err != nil {
		t.Fatal(err)
	}
	var still int64
	if err := s.QueryRowForTest(ctx, `SELECT count(*) FROM attempts`, &still); err != nil || still != attempts {
		t.Fatalf("a dry run left %d attempts of %d (%v)", still, attempts, err)
	}
	var calls int
	var last store.PurgeResult
	res, err := s.Purge(ctx, store.PurgeParams{Before: cutoff, Chunk: 700, Progress: func(_ string, r store.PurgeResult) {
		calls++
		last = r
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res != dry || res.Attempts != attempts-kept || res.Jobs == 0 {
		t.Errorf("purged %+v, dry run said %+v; %d attempts, %d of cancelled jobs with totals", res, dry, attempts, kept)
	}
	if calls < 5 || last != res {
		t.Errorf("progress called %d times, last %+v; want once a chunk of 700 jobs, the last with the totals %+v", calls, last, res)
	}
	if err := s.QueryRowForTest(ctx, `SELECT count(*) FROM attempts`, &still); err != nil || still != kept {
		t.Errorf("%d attempts left after the purge (%v), want the %d of cancelled jobs with totals", still, err, kept)
	}
	for _, b := range []string{"t", "u", "gen"} {
		after := ledgerFigures(t, s, b)
		for k, v := range before[b] {
			if after[k] != v {
				t.Errorf("batch %s: %s changed with the purge:\n%s\nafter:\n%s", b, k, v, after[k])
			}
		}
	}

	job, atts, err := s.Job(ctx, jobID("t", 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 0 || job.Purged == nil || job.Purged.Attempts != 2 || job.Attempts != 2 || job.Value == nil {
		t.Errorf("purged job t-1: %d attempts shown, purge %+v, totals %d attempts, value %s; want none shown, 2 purged, totals and value kept",
			len(atts), job.Purged, job.Attempts, job.Value)
	}
	if d, err := s.JobDetail(ctx, jobID("t", 3)); err != nil || d.Job.Purged == nil || d.Job.Purged.Attempts != 2 || len(d.Runs) != 1 || len(d.Runs[0].AttemptRows) != 0 {
		t.Errorf("purged job t-3 (two runs): %+v, %v; want its attempts of both runs purged, its earlier run kept", d, err)
	}
	if job, _, err := s.Job(ctx, jobID("t", 5)); err != nil || job.Purged != nil {
		t.Errorf("queued job t-5: purge %+v, %v; want none", job.Purged, err)
	}
	// Nothing is left to purge: a second purge finds no job.
	if again, err := s.Purge(ctx, store.PurgeParams{Before: cutoff}); err != nil || again != (store.PurgeResult{}) {
		t.Errorf("a second purge: %+v, %v; want nothing", again, err)
	}

	// What the purged jobs' final checks added is kept: a new final check
	// takes exactly that away, though the attempts it was read from are
	// gone. t-1's was its valid second attempt (a rule warning on /lines,
	// four graded leaves); a third, valid and with neither, replaces it.
	finals := func() (finalJobs, leaves int64) {
		t.Helper()
		if err := s.QueryRowForTest(ctx, `SELECT (SELECT coalesce(sum(final_jobs), 0) FROM batch_rollup_rules WHERE batch = 't'),
			(SELECT coalesce(sum(leaves), 0) FROM batch_rollup_grades WHERE batch = 't')`, &finalJobs, &leaves); err != nil {
			t.Fatal(err)
		}
		return finalJobs, leaves
	}
	finalJobs, leaves := finals()
	if err := s.ExecForTest(ctx, `INSERT INTO attempts (job_id, attempt_no, valid, class, errors) VALUES ('t-1', 3, true, '', '[]')`); err != nil {
		t.Fatal(err)
	}
	if f, l := finals(); f != finalJobs-1 || l != leaves-4 {
		t.Errorf("t-1's final check replaced after its purge: final_jobs %d -> %d, leaves %d -> %d; want one job and 4 leaves less",
			finalJobs, f, leaves, l)
	}
	// A requeue leaves no final check in the batch: each purged job's is
	// taken away.
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "t", Statuses: []fixpoint.Status{fixpoint.StatusValid, fixpoint.StatusInvalid},
		Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if f, l := finals(); f != 0 || l != 0 {
		t.Errorf("batch t requeued after its purge: final_jobs %d, leaves %d; want 0, 0", f, l)
	}
	var rows int
	if err := s.QueryRowForTest(ctx, `SELECT count(*) FROM job_final_checks f JOIN jobs j ON j.id = f.job_id WHERE j.batch = 't'`, &rows); err != nil || rows != 0 {
		t.Errorf("%d final checks still kept for batch t (%v), want none once replaced", rows, err)
	}
}

// A purge deletes only the jobs finished before its cutoff, of its batch.
func TestPurgeCutoffAndBatch(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "p1", 4)
	ctx := context.Background()
	if _, err := s.SaveResults(ctx, []store.Result{result(jobID("p1", 1), "a", ""), result(jobID("p1", 2), "b", "shape", "")}); err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.Generate(ctx, s.URLForTest(), storetest.GenSpec{Batch: "p2", Jobs: 50, Seed: 4}); err != nil {
		t.Fatal(err)
	}
	// p1's jobs finished now: a cutoff a day ago keeps them.
	if r, err := s.Purge(ctx, store.PurgeParams{Before: time.Now().Add(-24 * time.Hour), Batch: "p1"}); err != nil || r != (store.PurgeResult{}) {
		t.Errorf("purge of p1 a day back: %+v, %v; want nothing", r, err)
	}
	r, err := s.Purge(ctx, store.PurgeParams{Before: time.Now().Add(time.Minute), Batch: "p1"})
	if err != nil || r.Jobs != 2 || r.Attempts != 3 {
		t.Errorf("purge of p1: %+v, %v; want 2 jobs, 3 attempts", r, err)
	}
	var p2 int64
	if err := s.QueryRowForTest(ctx, `SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch = 'p2'`, &p2); err != nil || p2 == 0 {
		t.Errorf("p2 kept %d attempts (%v): a purge of p1 touched p2", p2, err)
	}
	if _, err := s.Purge(ctx, store.PurgeParams{Before: time.Now(), Batch: "nope"}); err == nil {
		t.Error("purge of a batch not in the ledger: no error")
	}
	if _, err := s.Purge(ctx, store.PurgeParams{}); err == nil {
		t.Error("purge with no cutoff: no error")
	}
}

// GenerateInServer's rollups are exact (its rows go through the triggers
// like any writer's), and its mix is Generate's.
func TestGenerateInServer(t *testing.T) {
	t.Parallel()
	s := storetest.NewStore(t)
	ctx := context.Background()
	st, err := storetest.GenerateInServer(ctx, s.URLForTest(), storetest.GenSpec{Batch: "srv", Jobs: 5000, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	noDrift(t, s, "a batch generated in the server")
	if st.Jobs != 5000 || st.ByStatus["valid"] < 3800 || st.ByStatus["valid"] > 4200 || st.ByStatus["invalid"] < 400 ||
		st.Attempts < 6500 || st.Attempts > 8000 {
		t.Errorf("generated %+v: want 5,000 jobs, about 80%% valid and 10%% invalid, about 1.4 attempts a job", st)
	}
	paths, err := s.TopErrorPaths(ctx, "srv", 0)
	if err != nil || len(paths) < 8 {
		t.Errorf("error paths %+v, %v: want most of GenPaths", paths, err)
	}
	size, err := s.LedgerSize(ctx)
	if err != nil || size.Jobs != 5000 || size.BytesPerJob() <= 0 {
		t.Errorf("ledger size %+v, %v", size, err)
	}
}
