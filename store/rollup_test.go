package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// noDrift fails the test when the rollups differ from a recount.
func noDrift(t *testing.T, s *store.Store, after string) {
	t.Helper()
	drift, err := s.RollupDrift(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(drift) > 0 {
		t.Fatalf("after %s, the rollups differ from a recount:\n%s", after, strings.Join(drift, "\n"))
	}
}

// The rollups stay equal to a recount through every writer of jobs and
// attempts: a generated batch (COPY), enqueue's insert, the writer's
// results, rejections, a wave's outcomes, a requeue and the new run's
// results, and a cancel.
func TestRollupsExactAcrossWriters(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.NewDB(t)
	s, err := store.Open(ctx, dsn, &store.Config{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := storetest.Generate(ctx, dsn, storetest.GenSpec{Batch: "gen", Jobs: 2000, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	noDrift(t, s, "a generated batch")

	if err := s.PutBatch(ctx, store.BatchParams{Name: "ru", Settings: json.RawMessage(`{"model":"sim-typical"}`), TotalJobs: 20}); err != nil {
		t.Fatal(err)
	}
	hash, err := s.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("ru", hash, 20)); err != nil {
		t.Fatal(err)
	}
	noDrift(t, s, "enqueue's insert")

	valid, invalid, coerced := result(jobID("ru", 1), "a", "shape", ""), result(jobID("ru", 2), "b", "syntax", "semantic"), result(jobID("ru", 3), "c", "")
	coerced.AttemptRows[0].Coerced, coerced.RepairedLocally = 2, true
	valid.AttemptRows[1].PatchOutcome = "applied"
	if _, err := s.SaveResults(ctx, []store.Result{valid, invalid, coerced, result(jobID("ru", 1), "again", "")}); err != nil {
		t.Fatal(err)
	}
	noDrift(t, s, "the writer's results")

	for _, r := range []store.Rejection{{JobID: jobID("ru", 4), Batch: "ru", Reason: "bad"},
		{JobID: jobID("ru", 5), Batch: "ru", Reason: "again and again", Status: fixpoint.StatusDead},
		{JobID: "nobatch-1", Reason: "unreadable"}, {JobID: "ru-new", Batch: "ru", Reason: "bad"}} {
		if _, err := s.Reject(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	noDrift(t, s, "rejections")

	w, taken, err := s.RecordWave(ctx, store.WaveParams{Batch: "ru", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("ru", 1, 6, 7, 8), Owner: "a", Lease: time.Minute})
	if err != nil || len(taken) != 3 {
		t.Fatalf("wave: %d taken, %v", len(taken), err)
	}
	final := result(jobID("ru", 6), "ok", "")
	if _, err := s.RecordWaveOutcomes(ctx, []store.WaveOutcome{
		{WaveID: w.ID, CustomID: taken[0].CustomID, Attempt: waveAttempt(1, ""), Result: &final},
		{WaveID: w.ID, CustomID: taken[1].CustomID, Attempt: waveAttempt(1, "shape"),
			Totals: &store.Result{Attempts: 1, Calls: 1, TokensIn: 100, TokensOut: 10, CostUSD: 0.001}},
	}); err != nil {
		t.Fatal(err)
	}
	noDrift(t, s, "a wave's outcomes")

	res, err := s.Requeue(ctx, store.RequeueParams{Batch: "gen", Statuses: []fixpoint.Status{fixpoint.StatusInvalid, fixpoint.StatusFailed},
		Settings: json.RawMessage(`{"model":"sim-typical"}`)})
	if err != nil || res.Total() == 0 {
		t.Fatalf("requeue: %+v %v", res, err)
	}
	noDrift(t, s, "a requeue")
	requeued, _, err := s.JobPage(ctx, "gen", store.JobFilter{Status: "queued", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var again []store.Result
	for i, j := range requeued[:40] {
		r := result(j.ID, "run 2", []string{"", "truncated"}[i%2])
		r.Run = res.Run
		again = append(again, r)
	}
	if won, err := s.SaveResults(ctx, again); err != nil || !won[0] {
		t.Fatalf("results of run 2: %v %v", won, err)
	}
	noDrift(t, s, "the results of a requeued run")

	if _, err := s.Cancel(ctx, "ru"); err != nil {
		t.Fatal(err)
	}
	noDrift(t, s, "a cancel")

	checkDashboardQueries(t, s, "gen")
	checkDashboardQueries(t, s, "ru")
}

// checkDashboardQueries compares the overview, the funnel and every job
// list filter of batch (paged in small pages) with a recount from the rows.
func checkDashboardQueries(t *testing.T, s *store.Store, batch string) {
	t.Helper()
	ctx := context.Background()
	ov, err := s.Overview(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	var want store.BatchOverview
	var started, finished *time.Time
	if err := s.QueryArgsForTest(ctx, `
		SELECT count(*), count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'valid'),
		       count(*) FILTER (WHERE status = 'invalid'), count(*) FILTER (WHERE status = 'failed'),
		       count(*) FILTER (WHERE status = 'rejected'), count(*) FILTER (WHERE status = 'dead'),
		       count(*) FILTER (WHERE status = 'cancelled'), count(*) FILTER (WHERE status = 'over_budget'),
		       count(*) FILTER (WHERE status = 'valid' AND first_attempt_valid),
		       sum(tokens_in + tokens_out), min(started_at), max(finished_at) FILTER (WHERE status <> 'queued')
		FROM jobs WHERE batch = $1`, []any{batch}, &want.Jobs, &want.Queued, &want.Valid, &want.Invalid, &want.Failed,
		&want.Rejected, &want.Dead, &want.Cancelled, &want.OverBudget, &want.FirstAttemptValid, &want.Tokens,
		&started, &finished); err != nil {
		t.Fatal(err)
	}
	got := []int64{ov.Jobs, ov.Queued, ov.Valid, ov.Invalid, ov.Failed, ov.Rejected, ov.Dead, ov.Cancelled, ov.OverBudget, ov.FirstAttemptValid, ov.Tokens}
	exp := []int64{want.Jobs, want.Queued, want.Valid, want.Invalid, want.Failed, want.Rejected, want.Dead, want.Cancelled, want.OverBudget, want.FirstAttemptValid, want.Tokens}
	if !slices.Equal(got, exp) {
		t.Errorf("%s: overview counts %v, recount %v", batch, got, exp)
	}
	if started != nil && !ov.StartedAt.Equal(*started) || finished != nil && !ov.FinishedAt.Equal(*finished) {
		t.Errorf("%s: overview started %s finished %s, recount %v %v", batch, ov.StartedAt, ov.FinishedAt, started, finished)
	}

	fn, err := s.BatchFunnel(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	var wantFn store.Funnel
	for n := 1; n <= 4; n++ {
		var v, l int64
		if err := s.QueryArgsForTest(ctx, `SELECT count(*), count(*) FILTER (WHERE repaired_locally) FROM jobs
			WHERE batch = $1 AND status = 'valid' AND greatest(attempts, 1) = $2`, []any{batch, n}, &v, &l); err != nil {
			t.Fatal(err)
		}
		wantFn.ValidAt, wantFn.LocalAt = append(wantFn.ValidAt, v), append(wantFn.LocalAt, l)
	}
	for len(wantFn.ValidAt) > 0 && wantFn.ValidAt[len(wantFn.ValidAt)-1] == 0 {
		wantFn.ValidAt, wantFn.LocalAt = wantFn.ValidAt[:len(wantFn.ValidAt)-1], wantFn.LocalAt[:len(wantFn.LocalAt)-1]
	}
	if err := s.QueryArgsForTest(ctx, `SELECT count(*) FROM jobs WHERE batch = $1 AND status NOT IN ('queued', 'valid')`, []any{batch}, &wantFn.Never); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fn.ValidAt, wantFn.ValidAt) || !slices.Equal(fn.LocalAt, wantFn.LocalAt) || fn.Never != wantFn.Never {
		t.Errorf("%s: funnel %+v, recount %+v", batch, fn, wantFn)
	}

	// The parts: clusters, costs and repair steps as the queries over the
	// attempts gave them.
	for _, q := range []struct {
		what, sql string
		got       func() ([]string, error)
	}{
		{"clusters", `
			SELECT coalesce(array_agg(format('%s %s %s %s %s %s', path, keyword, class, errors, jobs, example) ORDER BY errors DESC, path, keyword), '{}')
			FROM (SELECT regexp_replace(coalesce(e->>'path', e->>'pointer', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
			             coalesce(e->>'keyword', '') AS keyword, min(coalesce(e->>'class', '')) AS class, count(*) AS errors,
			             count(DISTINCT a.job_id) AS jobs, min(a.job_id) AS example
			      FROM jobs j JOIN attempts a ON a.job_id = j.id CROSS JOIN LATERAL jsonb_array_elements(a.errors) e
			      WHERE j.batch = $1 GROUP BY 1, 2) g`,
			func() ([]string, error) {
				cs, err := s.FailureClusters(ctx, batch, 1000)
				var out []string
				for _, c := range cs {
					out = append(out, fmt.Sprintf("%s %s %s %d %d %s", c.Path, c.Keyword, c.Class, c.Errors, c.Jobs, c.ExampleJob))
				}
				return out, err
			}},
		{"costs", `
			SELECT coalesce(array_agg(format('%s %s %s %s %s %s %s', m, b, n, ti, tout, c::float8, v) ORDER BY c DESC, m, b), '{}')
			FROM (SELECT coalesce(nullif(a.model, ''), j.model) AS m, a.price_basis AS b, count(*) AS n,
			             sum(a.tokens_in) AS ti, sum(a.tokens_out) AS tout, coalesce(sum(a.cost_usd), 0) AS c,
			             count(*) FILTER (WHERE a.valid AND a.run = j.run AND j.status = 'valid') AS v
			      FROM jobs j JOIN attempts a ON a.job_id = j.id WHERE j.batch = $1 GROUP BY 1, 2) g`,
			func() ([]string, error) {
				cs, err := s.ModelCosts(ctx, batch)
				var out []string
				for _, c := range cs {
					out = append(out, fmt.Sprintf("%s %s %d %d %d %s %d", c.Model, c.Basis, c.Calls, c.TokensIn, c.TokensOut, strconv.FormatFloat(c.CostUSD, 'g', -1, 64), c.ValidJobs))
				}
				return out, err
			}},
		{"repairs", `
			SELECT coalesce(array_agg(format('%s %s %s %s %s', n, c, f, r, v) ORDER BY n, c), '{}')
			FROM (SELECT a.attempt_no AS n, a.class AS c, count(*) AS f, count(x.job_id) AS r, count(*) FILTER (WHERE x.valid) AS v
			      FROM jobs j JOIN attempts a ON a.job_id = j.id
			      LEFT JOIN attempts x ON x.job_id = a.job_id AND x.run = a.run AND x.attempt_no = a.attempt_no + 1
			      WHERE j.batch = $1 AND NOT a.valid GROUP BY 1, 2) g`,
			func() ([]string, error) {
				ps, err := s.RepairSteps(ctx, batch)
				var out []string
				for _, p := range ps {
					out = append(out, fmt.Sprintf("%d %s %d %d %d", p.AttemptNo, p.Class, p.Failed, p.Retried, p.ValidNext))
				}
				return out, err
			}},
	} {
		var want []string
		if err := s.QueryArgsForTest(ctx, q.sql, []any{batch}, &want); err != nil {
			t.Fatalf("%s: %v", q.what, err)
		}
		got, err := q.got()
		if err != nil {
			t.Fatalf("%s: %v", q.what, err)
		}
		if len(want) == 0 {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %s\n%q\nrecount\n%q", batch, q.what, got, want)
		}
	}

	// Every filter, and a few combinations, against the filter written
	// out over the attempts, in row order.
	filters := []store.JobFilter{{}, {Coerced: true}, {Patched: true}, {Status: "invalid", Class: "shape"},
		{Status: "valid", Attempts: 2}, {ErrorPath: "/items/*/price", Status: "invalid"}, {ErrorPath: "/name", Coerced: true},
		{ErrorPath: "/nowhere"}, {Attempts: 3, Patched: true}}
	for _, st := range []string{"queued", "valid", "invalid", "failed", "rejected", "dead", "cancelled", "over_budget"} {
		filters = append(filters, store.JobFilter{Status: st})
	}
	for _, c := range []string{"syntax", "shape", "semantic", "truncated", "refusal", "provider"} {
		filters = append(filters, store.JobFilter{Class: c})
	}
	fold := regexp.MustCompile(`/[0-9]+(/|$)`)
	for _, p := range storetest.GenPaths {
		filters = append(filters, store.JobFilter{ErrorPath: fold.ReplaceAllString(fold.ReplaceAllString(p, "/*$1"), "/*$1")})
	}
	for n := 0; n <= 3; n++ {
		filters = append(filters, store.JobFilter{Attempts: n})
	}
	for _, f := range filters {
		var ids []string
		if err := s.QueryArgsForTest(ctx, `
			SELECT coalesce(array_agg(id ORDER BY row_no, id), '{}') FROM jobs j
			WHERE batch = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR final_class = $3) AND ($4 = 0 OR attempts = $4)
			  AND ($5 = '' OR EXISTS (SELECT 1 FROM attempts a CROSS JOIN LATERAL jsonb_array_elements(a.errors) e
			      WHERE a.job_id = j.id AND a.run = j.run
			        AND regexp_replace(coalesce(e->>'path', e->>'pointer', ''), '/[0-9]+(?=/|$)', '/*', 'g') = $5))
			  AND (NOT $6 OR EXISTS (SELECT 1 FROM attempts a WHERE a.job_id = j.id AND a.run = j.run AND a.coerced > 0))
			  AND (NOT $7 OR EXISTS (SELECT 1 FROM attempts a WHERE a.job_id = j.id AND a.run = j.run AND a.patch_outcome = 'applied'))`,
			[]any{batch, f.Status, f.Class, f.Attempts, f.ErrorPath, f.Coerced, f.Patched}, &ids); err != nil {
			t.Fatal(err)
		}
		var got []string
		f.Limit = 97
		for pages := 0; ; pages++ {
			rows, next, err := s.JobPage(ctx, batch, f)
			if err != nil {
				t.Fatalf("%+v: %v", f, err)
			}
			for _, r := range rows {
				got = append(got, r.ID)
			}
			if next == "" || pages > 100 {
				break
			}
			f.After = next
		}
		if !slices.Equal(got, ids) {
			t.Errorf("%s, filter %+v: %d jobs listed, %d match (first listed %q, matching %q)", batch, f, len(got), len(ids), got[:min(3, len(got))], ids[:min(3, len(ids))])
		}
		f.After = ""
		var listed int
		if err := s.JobList(ctx, batch, f, func(store.JobRow) error { listed++; return nil }); err != nil || listed != len(ids) {
			t.Errorf("%s, filter %+v: JobList gave %d jobs (%v), want %d", batch, f, listed, err, len(ids))
		}
	}
	if _, _, err := s.JobPage(ctx, batch, store.JobFilter{After: "x"}); err == nil {
		t.Error("a cursor that is no row number and id: no error")
	}
}

// Rollup rows are never negative, and a statement that changes nothing
// counted (publishing) writes none.
func TestRollupsIgnoreUncountedUpdates(t *testing.T) {
	s, _ := setup(t, "pub", 30)
	ctx := context.Background()
	var before, after string
	q := `SELECT xmin::text FROM batch_rollups WHERE batch = 'pub'`
	if err := s.QueryRowForTest(ctx, q, &before); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 1; i <= 30; i++ {
		ids = append(ids, jobID("pub", i))
	}
	if err := s.MarkPublished(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if err := s.QueryRowForTest(ctx, q, &after); err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Errorf("publishing jobs rewrote their batch's rollup row (xmin %s -> %s)", before, after)
	}
	noDrift(t, s, fmt.Sprint("publishing ", len(ids), " jobs"))
}

// A job's attempts written by more than one statement (a wave's, then the
// realtime rest; a spill replayed) count each failed attempt and the one
// after it once, whichever came first.
func TestRollupsExactWithAttemptsSplitAcrossStatements(t *testing.T) {
	s, _ := setup(t, "split", 3)
	ctx := context.Background()
	insert := func(job string, no int, valid bool) {
		t.Helper()
		class, errs := "", "[]"
		if !valid {
			class, errs = "shape", `[{"path":"/name","keyword":"required","class":"shape","message":"missing"}]`
		}
		q := fmt.Sprintf(`INSERT INTO attempts (job_id, attempt_no, valid, class, errors) VALUES (%s, %d, %t, '%s', '%s')`,
			pgQuote(job), no, valid, class, errs)
		if err := s.ExecForTest(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// split-1: the failed attempt first, the valid one after it later.
	insert(jobID("split", 1), 1, false)
	noDrift(t, s, "a failed attempt alone")
	insert(jobID("split", 1), 2, true)
	noDrift(t, s, "the attempt after a failed one recorded before")
	// split-2: the later attempt first, then the failed one before it.
	insert(jobID("split", 2), 2, false)
	insert(jobID("split", 2), 1, false)
	noDrift(t, s, "a failed attempt whose next one was recorded before")
	// split-3: a failed attempt between two recorded before it.
	insert(jobID("split", 3), 1, false)
	insert(jobID("split", 3), 3, true)
	insert(jobID("split", 3), 2, false)
	noDrift(t, s, "a failed attempt between two recorded before")
	var failed, retried, validNext int
	if err := s.QueryRowForTest(ctx, `SELECT sum(failed), sum(retried), sum(valid_next) FROM batch_rollup_repairs WHERE batch = 'split'`,
		&failed, &retried, &validNext); err != nil {
		t.Fatal(err)
	}
	if failed != 5 || retried != 4 || validNext != 2 {
		t.Errorf("repairs failed/retried/valid_next = %d/%d/%d, want 5/4/2", failed, retried, validNext)
	}
}

// A job whose final check counted a rule failure and grades loses them
// when a later attempt of the same run, with neither, becomes its final
// check (its statement carries no rule, warning or evidence of its own).
func TestRollupsFinalCheckReplacedByPlainAttempt(t *testing.T) {
	s, _ := setup(t, "finals", 1)
	ctx := context.Background()
	job := pgQuote(jobID("finals", 1))
	if err := s.ExecForTest(ctx, `INSERT INTO attempts (job_id, attempt_no, valid, class, errors, warnings, evidence)
		VALUES (`+job+`, 1, false, 'shape', '[]',
		        '[{"keyword":"x-fixpoint-rules","rule":"total","path":"/total","message":"sum differs"}]',
		        '[{"path":"/name","grade":"exact"}]')`); err != nil {
		t.Fatal(err)
	}
	noDrift(t, s, "a final check with a rule warning and a grade")
	var finalJobs, leaves int
	read := func() {
		t.Helper()
		if err := s.QueryRowForTest(ctx, `SELECT (SELECT coalesce(sum(final_jobs), 0) FROM batch_rollup_rules WHERE batch = 'finals'),
			(SELECT coalesce(sum(leaves), 0) FROM batch_rollup_grades WHERE batch = 'finals')`, &finalJobs, &leaves); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if finalJobs != 1 || leaves != 1 {
		t.Fatalf("before: final_jobs %d, leaves %d; want 1, 1", finalJobs, leaves)
	}
	if err := s.ExecForTest(ctx, `INSERT INTO attempts (job_id, attempt_no, valid, class, errors) VALUES (`+job+`, 2, true, '', '[]')`); err != nil {
		t.Fatal(err)
	}
	noDrift(t, s, "the final check replaced by a valid attempt with no checks")
	read()
	if finalJobs != 0 || leaves != 0 {
		t.Errorf("after: final_jobs %d, leaves %d; want 0, 0", finalJobs, leaves)
	}
}

// An attempt recorded after a better one of the same run (valid, or
// failed with a later number) leaves the job's final check as it was;
// one better than the final check replaces it.
func TestRollupsFinalCheckKeptAgainstWorseAttempt(t *testing.T) {
	s, _ := setup(t, "worse", 1)
	ctx := context.Background()
	job := pgQuote(jobID("worse", 1))
	insert := func(no int, valid bool, grade string) {
		t.Helper()
		if err := s.ExecForTest(ctx, fmt.Sprintf(`INSERT INTO attempts (job_id, attempt_no, valid, class, errors, warnings, evidence)
			VALUES (%s, %d, %t, '', '[]', '[{"keyword":"x-fixpoint-rules","rule":"r%d","path":"/a","message":"m"}]',
			        '[{"path":"/a","grade":%q}]')`, job, no, valid, no, grade)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (exact, none int, rules string) {
		t.Helper()
		if err := s.QueryRowForTest(ctx, `SELECT (SELECT coalesce(sum(exact), 0) FROM batch_rollup_grades WHERE batch = 'worse'),
			(SELECT coalesce(sum(none), 0) FROM batch_rollup_grades WHERE batch = 'worse'),
			(SELECT coalesce(string_agg(rule, ',' ORDER BY rule), '') FROM batch_rollup_rules WHERE batch = 'worse' AND final_jobs > 0)`,
			&exact, &none, &rules); err != nil {
			t.Fatal(err)
		}
		return exact, none, rules
	}
	insert(2, false, "exact")
	insert(1, false, "none") // failed, earlier: the final check stays attempt 2
	noDrift(t, s, "a worse attempt after the final one")
	if exact, none, rules := read(); exact != 1 || none != 0 || rules != "r2" {
		t.Errorf("after attempts 2 then 1 (both failed): exact %d, none %d, final rules %q; want 1, 0, r2", exact, none, rules)
	}
	insert(3, true, "none") // valid: the final check now
	insert(4, false, "exact")
	noDrift(t, s, "a valid attempt, then a failed one")
	if exact, none, rules := read(); exact != 0 || none != 1 || rules != "r3" {
		t.Errorf("after a valid attempt 3 and a failed 4: exact %d, none %d, final rules %q; want 0, 1, r3", exact, none, rules)
	}
}

func pgQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Writers finishing jobs of the same batches at once (each transaction
// touching both batches) leave the rollups exact: every statement's change
// is added under the batch row's lock, and a deadlock between two writers
// is retried by SaveResults.
func TestRollupsExactUnderConcurrentWriters(t *testing.T) {
	s, hash := setup(t, "cw1", 0)
	ctx := context.Background()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "cw2", Settings: json.RawMessage(`{"model":"sim-typical"}`)}); err != nil {
		t.Fatal(err)
	}
	const writers, per = 4, 60
	for _, b := range []string{"cw1", "cw2"} {
		if _, err := s.InsertJobs(ctx, newJobs(b, hash, writers*per)); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			var err error
			for i := 0; i < per && err == nil; i += 10 {
				var rs []store.Result
				for k := i; k < i+10; k++ {
					n := w*per + k + 1
					rs = append(rs, result(jobID("cw1", n), "a", "shape", ""), result(jobID("cw2", n), "b", []string{"", "syntax"}[n%2]))
				}
				_, err = s.SaveResults(ctx, rs)
			}
			errs <- err
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	noDrift(t, s, "concurrent writers")
	ov, err := s.Overview(ctx, "cw1")
	if err != nil || ov.Valid != writers*per {
		t.Errorf("cw1: %+v %v, want %d valid", ov, err, writers*per)
	}
}
