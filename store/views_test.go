package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// viewDataset stores a hand-built batch "v" (plus a one-job batch "w" that
// must not leak into v's figures). Every attempt uses 100/10/5 tokens and
// costs $0.01. Jobs (attempt classes, "" = valid):
//
//	v-1 valid   [""]                          wall 100
//	v-2 valid   [shape, ""]                   wall 200
//	v-3 valid   [syntax, semantic, ""]        wall 300
//	v-4 invalid [shape, shape, semantic]      wall 400
//	v-5 failed  [provider] (model gpt-4o-mini) wall 500
//	v-6 valid   [""] repaired locally         wall 600
//	v-7 rejected
//	v-8 queued
func viewDataset(t *testing.T) *store.Store {
	t.Helper()
	s, hash := setup(t, "v", 8)
	ctx := context.Background()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("w", hash, 1)); err != nil {
		t.Fatal(err)
	}
	errs := map[string]string{
		"shape":    `[{"path":"/items/0/name","keyword":"required","class":"shape","message":"m"},{"path":"/items/12/name","keyword":"required","class":"shape","message":"m"}]`,
		"semantic": `[{"path":"/age","keyword":"minimum","class":"semantic","message":"m"}]`,
	}
	classes := [][]string{{""}, {"shape", ""}, {"syntax", "semantic", ""}, {"shape", "shape", "semantic"}, {"provider"}, {""}}
	var results []store.Result
	for i, cs := range classes {
		r := result(jobID("v", i+1), "x", cs...)
		r.WallMS = int64(100 * (i + 1))
		r.CostUSD = 0.01 * float64(len(cs))
		for k := range r.AttemptRows {
			r.AttemptRows[k].Errors = json.RawMessage(errs[r.AttemptRows[k].Class])
		}
		results = append(results, r)
	}
	results[4].Status = fixpoint.StatusFailed
	results[4].AttemptRows[0].Model = "gpt-4o-mini"
	results[5].RepairedLocally = true
	w := result(jobID("w", 1), "x", "shape", "")
	w.WallMS = 5000
	results = append(results, w)
	if _, err := s.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reject(ctx, store.Rejection{JobID: jobID("v", 7), Batch: "v", Reason: "bad row"}); err != nil {
		t.Fatal(err)
	}
	return s
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestViews(t *testing.T) {
	t.Parallel()
	s := viewDataset(t)
	ctx := context.Background()

	t.Run("batch_summary", func(t *testing.T) {
		got, err := s.Summary(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("Summary(v) = %d rows, want 1", len(got))
		}
		want := store.BatchSummary{
			Batch: "v", Jobs: 8, Queued: 1, Valid: 4, Invalid: 1, Failed: 1, Rejected: 1, Dead: 0, Finished: 7,
			FirstAttemptValid: 2, Repaired: 3, Runs: 1,
			ValidRate: 4.0 / 7, FirstAttemptValidRate: 2.0 / 7, RepairRate: 3.0 / 4,
			MeanAttempts: 11.0 / 6,
			TokensIn:     1100, TokensOut: 110, TokensCached: 55, CostUSD: 0.11,
			TokensPerValidJob: 1210.0 / 4, CostPerValidJob: 0.11 / 4,
			P50WallMS: 350, P95WallMS: 575, HasWall: true, // percentile_cont over 100..600
		}
		g := got[0]
		floats := [][2]float64{
			{g.ValidRate, want.ValidRate}, {g.FirstAttemptValidRate, want.FirstAttemptValidRate},
			{g.RepairRate, want.RepairRate}, {g.MeanAttempts, want.MeanAttempts}, {g.CostUSD, want.CostUSD},
			{g.TokensPerValidJob, want.TokensPerValidJob}, {g.CostPerValidJob, want.CostPerValidJob},
			{g.P50WallMS, want.P50WallMS}, {g.P95WallMS, want.P95WallMS},
		}
		for _, f := range floats {
			if !approx(f[0], f[1]) {
				t.Fatalf("summary =\n%+v\nwant\n%+v", g, want)
			}
		}
		g.ValidRate, g.FirstAttemptValidRate, g.RepairRate, g.MeanAttempts, g.CostUSD = 0, 0, 0, 0, 0
		g.TokensPerValidJob, g.CostPerValidJob, g.P50WallMS, g.P95WallMS = 0, 0, 0, 0
		want.ValidRate, want.FirstAttemptValidRate, want.RepairRate, want.MeanAttempts, want.CostUSD = 0, 0, 0, 0, 0
		want.TokensPerValidJob, want.CostPerValidJob, want.P50WallMS, want.P95WallMS = 0, 0, 0, 0
		if g != want {
			t.Fatalf("summary counts =\n%+v\nwant\n%+v", g, want)
		}
		all, err := s.Summary(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 || all[0].Batch != "v" || all[1].Batch != "w" || all[1].Jobs != 1 || all[1].P50WallMS != 5000 {
			t.Fatalf("Summary(all) = %+v, want v then w (1 job, p50 5000)", all)
		}
	})

	t.Run("failure_classes", func(t *testing.T) {
		got, err := s.FailureClasses(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		want := []store.ClassCount{
			{"v", "gpt-4o-mini", 1, "provider", 1, 1},
			{"v", "sim-typical", 1, "shape", 2, 2.0 / 5},
			{"v", "sim-typical", 1, "syntax", 1, 1.0 / 5},
			{"v", "sim-typical", 2, "semantic", 1, 1.0 / 3},
			{"v", "sim-typical", 2, "shape", 1, 1.0 / 3},
			{"v", "sim-typical", 3, "semantic", 1, 1.0 / 2},
		}
		if len(got) != len(want) {
			t.Fatalf("FailureClasses = %+v, want %+v", got, want)
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Batch != w.Batch || g.Model != w.Model || g.AttemptNo != w.AttemptNo || g.Class != w.Class ||
				g.Attempts != w.Attempts || !approx(g.Share, w.Share) {
				t.Fatalf("FailureClasses[%d] = %+v, want %+v", i, g, w)
			}
		}
	})

	t.Run("repair_effectiveness", func(t *testing.T) {
		got, err := s.RepairEffectiveness(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		// The rate is over the jobs asked again: none for the provider
		// failure no attempt followed, nor for the last attempt.
		rate := func(r float64) *float64 { return &r }
		want := []store.RepairStep{
			{"v", 1, "provider", 1, 0, 0, nil},
			{"v", 1, "shape", 2, 2, 1, rate(0.5)},
			{"v", 1, "syntax", 1, 1, 0, rate(0)},
			{"v", 2, "semantic", 1, 1, 1, rate(1)},
			{"v", 2, "shape", 1, 1, 0, rate(0)},
			{"v", 3, "semantic", 1, 0, 0, nil},
		}
		show := func(steps []store.RepairStep) string {
			var b strings.Builder
			for _, s := range steps {
				fmt.Fprintf(&b, "%s %d %s %d %d %d ", s.Batch, s.AttemptNo, s.Class, s.Failed, s.Retried, s.ValidNext)
				if s.Rate == nil {
					b.WriteString("-\n")
				} else {
					fmt.Fprintf(&b, "%.3f\n", *s.Rate)
				}
			}
			return b.String()
		}
		if show(got) != show(want) {
			t.Fatalf("RepairEffectiveness =\n%s\nwant\n%s", show(got), show(want))
		}
	})

	t.Run("error_paths", func(t *testing.T) {
		got, err := s.TopErrorPaths(ctx, "v", 10)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.PathCount{
			{"v", "/items/*/name", "required", "shape", 6, 2},
			{"v", "/age", "minimum", "semantic", 2, 2},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("TopErrorPaths =\n%+v\nwant\n%+v", got, want)
		}
		top, err := s.TopErrorPaths(ctx, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		// w adds one shape attempt: 2 more /items/*/name errors in its own batch row.
		if len(top) != 1 || top[0] != want[0] {
			t.Fatalf("TopErrorPaths(all, 1) = %+v, want [%+v]", top, want[0])
		}
	})

	t.Run("progress and counts", func(t *testing.T) {
		p, err := s.Progress(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		if p != (store.Progress{Total: 8, Queued: 1, Valid: 4, Invalid: 1, Failed: 1, Rejected: 1, Unpublished: 1}) || p.Done() {
			t.Fatalf("Progress = %+v", p)
		}
		c, err := s.Counts(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		if c.AttemptRows != 11 || c.JobTokensIn != c.AttemptTokensIn || c.AttemptTokensIn != 1100 || c.AttemptsMismatch != 0 {
			t.Fatalf("Counts = %+v, want 11 attempts, 1100 tokens in on both sides, no mismatch", c)
		}
	})
}

// A job valid on its first answered attempt after a batch request that
// never ran (first_attempt_valid, two attempts) is first-try, not
// repaired: the summary counted every job of more than one attempt as
// repaired.
func TestSummaryFirstAnsweredAttempt(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "fa", 2)
	ctx := context.Background()
	never := result(jobID("fa", 1), "a", "provider", "")
	never.AttemptRows[0].Raw = ""
	never.FirstAttemptValid = true
	wrong := result(jobID("fa", 2), "b", "shape", "")
	if _, err := s.SaveResults(ctx, []store.Result{never, wrong}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Summary(ctx, "fa")
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if got[0].Valid != 2 || got[0].FirstAttemptValid != 1 || got[0].Repaired != 1 {
		t.Errorf("summary %+v; want 2 valid, 1 first-try (after a request that never ran), 1 repaired", got[0])
	}
}

// A requeued job's first try was in its first run: valid on run 2's first
// attempt after run 1 failed three is repaired, not first-try, and its
// attempts are both runs'. A requeue raised 1ST-TRY% and lowered ATTEMPTS
// (51.7% to 54.7%, 1.65 to 1.57 on 20,000 jobs) though no first try had
// changed. A job whose earlier run made no call (cancelled unrun) is still
// first-try on its later run.
func TestSummaryAcrossRuns(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "ar", 3)
	ctx := context.Background()
	unrun := store.Result{JobID: jobID("ar", 3), Status: fixpoint.StatusCancelled}
	if _, err := s.SaveResults(ctx, []store.Result{result(jobID("ar", 1), "a", ""), result(jobID("ar", 2), "b", "shape", "shape", "shape"), unrun}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Summary(ctx, "ar")
	if err != nil || len(before) != 1 || before[0].FirstAttemptValid != 1 || before[0].MeanAttempts != 2 {
		t.Fatalf("before the requeue: %+v %v; want 1 first-try, 2 attempts a job", before, err)
	}
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "ar", Statuses: []fixpoint.Status{fixpoint.StatusInvalid, fixpoint.StatusCancelled}, Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	second := result(jobID("ar", 2), "b2", "")
	second.Run = 2
	third := result(jobID("ar", 3), "c", "")
	third.Run = 2
	if _, err := s.SaveResults(ctx, []store.Result{second, third}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Summary(ctx, "ar")
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if g := got[0]; g.Valid != 3 || g.FirstAttemptValid != 2 || g.Repaired != 1 || g.MeanAttempts != 2 {
		t.Errorf("after the requeue: %+v; want 3 valid, 2 first-try (ar-1, and ar-3 whose run 1 made no call), 1 repaired, (1+4+1)/3 = 2 attempts a job", g)
	}
	// A valid job requeued (another model) keeps its first try, whatever
	// its later run did: 1ST-TRY% fell to 0 when every job was requeued.
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "ar", Statuses: []fixpoint.Status{fixpoint.StatusValid}, Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var rerun []store.Result
	for i, classes := range [][]string{{"shape", ""}, {""}, {""}} {
		r := result(jobID("ar", i+1), "again", classes...)
		j, _, err := s.Job(ctx, r.JobID)
		if err != nil {
			t.Fatal(err)
		}
		r.Run = j.Run
		rerun = append(rerun, r)
	}
	if _, err := s.SaveResults(ctx, rerun); err != nil {
		t.Fatal(err)
	}
	got, err = s.Summary(ctx, "ar")
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if g := got[0]; g.Valid != 3 || g.FirstAttemptValid != 2 || g.Repaired != 1 {
		t.Errorf("after requeuing the valid jobs: %+v; want the same 2 first-try (ar-1 and ar-3 were valid on their first tries), 1 repaired", g)
	}
}
