package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// The rules and grades of truthDataset's attempts.
const (
	ruleOrder = "self.end >= self.start"
	ruleLines = "self.lines.size() <= 3"
	ruleTotal = "self.total == self.qty * self.price"
)

// ruleErr is a failure of rule at path, as the rules package writes it
// into attempts.errors or attempts.warnings.
func ruleErr(path, rule string) string {
	return fmt.Sprintf(`{"path":%q,"keyword":"x-fixpoint-rules","class":"semantic","message":"%s: fails the rule %s","rule":%q}`, path, path, rule, rule)
}

// grades is an attempts.evidence array of path=grade pairs.
func grades(pairs ...string) json.RawMessage {
	out := "["
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf(`{"path":%q,"grade":%q,"start":0,"end":0}`, pairs[i], pairs[i+1])
	}
	return json.RawMessage(out + "]")
}

// truthDataset stores batch "t" (and batch "u", which must not leak into
// t's figures), each attempt's rule failures and grades as the worker
// records them:
//
//	t-1 valid   #1 error ruleOrder /end, warn ruleLines
//	            #2 valid, warn ruleLines; /vendor exact, /lines/0/sku normalized,
//	               /lines/1/sku none, /total fuzzy
//	t-2 invalid #1 error ruleTotal /lines/0/total and /lines/1/total
//	            #2 error ruleTotal /lines/1/total
//	t-3 valid   run 1 #1 valid, warn ruleLines; /vendor none
//	            run 2 #1 valid, warn ruleLines; /vendor exact
//	t-4 invalid (evidence require) #1 /vendor none, /total none
//	            #2 /vendor none, /total exact
//	t-5 queued
func truthDataset(t *testing.T) *store.Store {
	t.Helper()
	s, hash := setup(t, "t", 5)
	ctx := context.Background()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "u"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("u", hash, 1)); err != nil {
		t.Fatal(err)
	}
	r1 := result(jobID("t", 1), "a", "semantic", "")
	r1.AttemptRows[0].Errors = json.RawMessage("[" + ruleErr("/end", ruleOrder) + "]")
	r1.AttemptRows[0].Warnings = json.RawMessage("[" + ruleErr("/lines", ruleLines) + "]")
	r1.AttemptRows[1].Warnings = json.RawMessage("[" + ruleErr("/lines", ruleLines) + "]")
	r1.AttemptRows[1].Evidence = grades("/vendor", "exact", "/lines/0/sku", "normalized", "/lines/1/sku", "none", "/total", "fuzzy")
	r2 := result(jobID("t", 2), "b", "semantic", "semantic")
	r2.AttemptRows[0].Errors = json.RawMessage("[" + ruleErr("/lines/0/total", ruleTotal) + "," + ruleErr("/lines/1/total", ruleTotal) + "]")
	r2.AttemptRows[1].Errors = json.RawMessage("[" + ruleErr("/lines/1/total", ruleTotal) + "]")
	r3 := result(jobID("t", 3), "c", "")
	r3.AttemptRows[0].Warnings = json.RawMessage("[" + ruleErr("/lines", ruleLines) + "]")
	r3.AttemptRows[0].Evidence = grades("/vendor", "none")
	r4 := result(jobID("t", 4), "d", "evidence", "evidence")
	r4.AttemptRows[0].Evidence = grades("/vendor", "none", "/total", "none")
	r4.AttemptRows[1].Evidence = grades("/vendor", "none", "/total", "exact")
	u := result(jobID("u", 1), "e", "semantic", "")
	u.AttemptRows[0].Errors = json.RawMessage("[" + ruleErr("/end", ruleOrder) + "]")
	u.AttemptRows[1].Evidence = grades("/vendor", "none")
	if _, err := s.SaveResults(ctx, []store.Result{r1, r2, r3, r4, u}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "t", Jobs: []string{jobID("t", 3)}, Statuses: []fixpoint.Status{fixpoint.StatusValid},
		Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	r3 = result(jobID("t", 3), "c2", "")
	r3.Run = 2
	r3.AttemptRows[0].Warnings = json.RawMessage("[" + ruleErr("/lines", ruleLines) + "]")
	r3.AttemptRows[0].Evidence = grades("/vendor", "exact")
	if _, err := s.SaveResults(ctx, []store.Result{r3}); err != nil {
		t.Fatal(err)
	}
	return s
}

// rule_failures counts every attempt's failures by rule, folded path and
// severity, and final_jobs only the jobs' final attempts; evidence_grades
// grades the final attempts alone (the latest run's valid attempt, else
// its last), by folded path.
func TestRuleFailuresAndGrounding(t *testing.T) {
	t.Parallel()
	s := truthDataset(t)
	ctx := context.Background()
	rf, err := s.RuleFailures(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantRF := []store.RuleFailure{
		{Rule: ruleLines, Path: "/lines", Severity: "warn", Failures: 4, Jobs: 2, FinalJobs: 2},
		{Rule: ruleTotal, Path: "/lines/*/total", Severity: "error", Failures: 3, Jobs: 1, FinalJobs: 1},
		{Rule: ruleOrder, Path: "/end", Severity: "error", Failures: 1, Jobs: 1, FinalJobs: 0},
	}
	if !reflect.DeepEqual(rf, wantRF) {
		t.Errorf("RuleFailures(t) =\n%+v\nwant\n%+v", rf, wantRF)
	}
	if top, err := s.RuleFailures(ctx, "t", 1); err != nil || len(top) != 1 || top[0] != wantRF[0] {
		t.Errorf("RuleFailures(t, 1) = %+v, %v; want the most frequent", top, err)
	}
	g, err := s.Grounding(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantG := []store.FieldGrounding{
		{Path: "/lines/*/sku", Leaves: 2, Normalized: 1, None: 1},
		{Path: "/vendor", Leaves: 3, Exact: 2, None: 1},
		{Path: "/total", Leaves: 2, Exact: 1, Fuzzy: 1},
	}
	if !reflect.DeepEqual(g, wantG) {
		t.Errorf("Grounding(t) =\n%+v\nwant\n%+v", g, wantG)
	}
	if sh := g[1].Share(g[1].None); !approx(sh, 1.0/3) {
		t.Errorf("/vendor none share %v, want 1/3", sh)
	}
	if rf, err := s.RuleFailures(ctx, "none-such", 0); err != nil || len(rf) != 0 {
		t.Errorf("RuleFailures of no batch = %+v, %v", rf, err)
	}
	noDrift(t, s, "the truth dataset's attempts and requeue")
}

// ExportWith Evidence gives each job its final attempt's grades, as
// evidence_grades counts them; Export gives none.
func TestExportEvidence(t *testing.T) {
	t.Parallel()
	s := truthDataset(t)
	ctx := context.Background()
	got := map[string]string{}
	err := s.ExportWith(ctx, "t", store.ExportOptions{Evidence: true}, func(r store.ExportRow) error {
		var paths []string
		var gs []fixpoint.Grounding
		if r.Evidence != nil {
			if err := json.Unmarshal(r.Evidence, &gs); err != nil {
				return err
			}
			for _, g := range gs {
				paths = append(paths, g.Path+"="+string(g.Grade))
			}
		}
		got[r.ID] = fmt.Sprint(r.Evidence != nil, paths)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		jobID("t", 1): "true [/vendor=exact /lines/0/sku=normalized /lines/1/sku=none /total=fuzzy]",
		jobID("t", 2): "false []",
		jobID("t", 3): "true [/vendor=exact]",
		jobID("t", 4): "true [/vendor=none /total=exact]",
		jobID("t", 5): "false []",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ExportWith evidence:\n%v\nwant\n%v", got, want)
	}
	err = s.Export(ctx, "t", func(r store.ExportRow) error {
		if r.Evidence != nil {
			return fmt.Errorf("job %s: evidence %s without asking", r.ID, r.Evidence)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// JobDetail says the evidence settings of the job's latest run: the
// batch's for run 1, the requeue's after it.
func TestJobDetailEvidenceSettings(t *testing.T) {
	t.Parallel()
	s := storetest.NewStore(t)
	ctx := context.Background()
	if err := s.PutBatch(ctx, store.BatchParams{Name: "s", Settings: json.RawMessage(`{"evidence":"require","evidence_source":"field:text"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertJobs(ctx, newJobs("s", "", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveResults(ctx, []store.Result{result(jobID("s", 1), "a", "")}); err != nil {
		t.Fatal(err)
	}
	d, err := s.JobDetail(ctx, jobID("s", 1))
	if err != nil || d.Evidence != "require" || d.EvidenceSource != "field:text" {
		t.Fatalf("run 1: evidence %q, source %q (%v); want the batch's require, field:text", d.Evidence, d.EvidenceSource, err)
	}
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "s", Statuses: []fixpoint.Status{fixpoint.StatusValid},
		Settings: json.RawMessage(`{"evidence":"check","evidence_source":"prompt"}`)}); err != nil {
		t.Fatal(err)
	}
	d, err = s.JobDetail(ctx, jobID("s", 1))
	if err != nil || d.Job.Run != 2 || d.Evidence != "check" || d.EvidenceSource != "prompt" {
		t.Fatalf("run %d: evidence %q, source %q (%v); want run 2's check, prompt", d.Job.Run, d.Evidence, d.EvidenceSource, err)
	}
}

// A revalidated job's final check is its revalidation: the views and the
// export read its grades and rule failures, not those of the attempts of
// the run it checked (whose failures still count in failures).
func TestRuleFailuresAndGroundingAfterRevalidation(t *testing.T) {
	t.Parallel()
	s, hash := setup(t, "rv", 2)
	ctx := context.Background()
	r1 := result(jobID("rv", 1), "a", "")
	r1.AttemptRows[0].Warnings = json.RawMessage("[" + ruleErr("/lines", ruleLines) + "]")
	r1.AttemptRows[0].Evidence = grades("/vendor", "exact")
	r2 := result(jobID("rv", 2), "b", "")
	r2.AttemptRows[0].Evidence = grades("/vendor", "exact")
	if _, err := s.SaveResults(ctx, []store.Result{r1, r2}); err != nil {
		t.Fatal(err)
	}
	outcomes := []store.RevalidationOutcome{
		{JobID: jobID("rv", 1), PriorRun: 1, Valid: true, Value: json.RawMessage(`{"tag":"a"}`),
			Warnings: json.RawMessage("[" + ruleErr("/lines", ruleLines) + "]"), Evidence: grades("/vendor", "none")},
		{JobID: jobID("rv", 2), PriorRun: 1, Value: json.RawMessage(`{"tag":"b"}`), Error: "/end: fails", Class: "semantic",
			Errors: json.RawMessage("[" + ruleErr("/end", ruleOrder) + "]")},
	}
	if _, _, err := s.SaveRevalidation(ctx, store.RevalidationParams{Batch: "rv", SchemaHash: hash, Settings: json.RawMessage(`{}`)},
		func() (*store.RevalidationOutcome, error) {
			if len(outcomes) == 0 {
				return nil, nil
			}
			o := outcomes[0]
			outcomes = outcomes[1:]
			return &o, nil
		}); err != nil {
		t.Fatal(err)
	}
	rf, err := s.RuleFailures(ctx, "rv", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantRF := []store.RuleFailure{
		{Rule: ruleLines, Path: "/lines", Severity: "warn", Failures: 2, Jobs: 1, FinalJobs: 1},
		{Rule: ruleOrder, Path: "/end", Severity: "error", Failures: 1, Jobs: 1, FinalJobs: 1},
	}
	if !reflect.DeepEqual(rf, wantRF) {
		t.Errorf("RuleFailures(rv) =\n%+v\nwant\n%+v", rf, wantRF)
	}
	g, err := s.Grounding(ctx, "rv", 0)
	if want := []store.FieldGrounding{{Path: "/vendor", Leaves: 1, None: 1}}; err != nil || !reflect.DeepEqual(g, want) {
		t.Errorf("Grounding(rv) = %+v, %v; want the revalidation's grades alone: %+v", g, err, want)
	}
	got, errs := map[string]string{}, map[string]string{}
	if err := s.ExportWith(ctx, "rv", store.ExportOptions{Evidence: true}, func(r store.ExportRow) error {
		var gs []fixpoint.Grounding
		err := json.Unmarshal(r.Evidence, &gs)
		got[r.ID] = fmt.Sprint(gs, err == nil)
		errs[r.ID] = string(r.Errors)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The errors exported with an invalid job are its revalidation's: its
	// run has no attempt.
	if e := errs[jobID("rv", 2)]; !strings.Contains(e, ruleOrder) || errs[jobID("rv", 1)] != "" {
		t.Errorf("export errors after the revalidation %q; want the failing job's revalidation errors, none for the valid one", errs)
	}
	vendorNone := fmt.Sprint([]fixpoint.Grounding{{Path: "/vendor", Grade: fixpoint.GradeNone}}, true)
	if want := map[string]string{jobID("rv", 1): vendorNone, jobID("rv", 2): "[] false"}; !reflect.DeepEqual(got, want) {
		t.Errorf("export evidence after the revalidation %q, want %q", got, want)
	}
	noDrift(t, s, "a revalidation")
	// A requeue leaves the revalidated jobs no final check until their
	// next run checks them.
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "rv", Statuses: []fixpoint.Status{fixpoint.StatusValid, fixpoint.StatusInvalid},
		Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	noDrift(t, s, "a requeue of revalidated jobs")
	if g, err := s.Grounding(ctx, "rv", 0); err != nil || len(g) != 0 {
		t.Errorf("Grounding(rv) after a requeue = %+v, %v; want none: no run has a final check", g, err)
	}
}

// JobDetail gives a revalidated job the revalidation that made its run,
// and a job whose run is no revalidation none.
func TestJobDetailRevalidation(t *testing.T) {
	t.Parallel()
	s, hash := setup(t, "jr", 2)
	ctx := context.Background()
	if _, err := s.SaveResults(ctx, []store.Result{result(jobID("jr", 1), "a", ""), result(jobID("jr", 2), "b", "shape")}); err != nil {
		t.Fatal(err)
	}
	done := false
	if _, _, err := s.SaveRevalidation(ctx, store.RevalidationParams{Batch: "jr", SchemaHash: hash, Settings: json.RawMessage(`{}`)},
		func() (*store.RevalidationOutcome, error) {
			if done {
				return nil, nil
			}
			done = true
			return &store.RevalidationOutcome{JobID: jobID("jr", 1), PriorRun: 1, AttemptNo: 1, Value: json.RawMessage(`{"tag":"a"}`),
				Error: "/end: fails", Class: "semantic", Errors: json.RawMessage("[" + ruleErr("/end", ruleOrder) + "]"),
				Warnings: json.RawMessage("[" + ruleErr("/lines", ruleLines) + "]"), Evidence: grades("/tag", "none")}, nil
		}); err != nil {
		t.Fatal(err)
	}
	d, err := s.JobDetail(ctx, jobID("jr", 1))
	if err != nil {
		t.Fatal(err)
	}
	rv := d.Revalidation
	if rv == nil || rv.Run != 2 || d.Job.Run != 2 || rv.PriorRun != 1 || rv.AttemptNo != 1 || rv.SchemaHash != hash || rv.Valid ||
		rv.Class != "semantic" || rv.Warnings == nil || rv.CheckedAt.IsZero() || len(d.Attempts) != 0 {
		t.Fatalf("revalidated job: run %d, %d attempts, revalidation %+v", d.Job.Run, len(d.Attempts), rv)
	}
	var gs []fixpoint.Grounding
	var errs []fixpoint.ValidationError
	if json.Unmarshal(rv.Evidence, &gs) != nil || len(gs) != 1 || gs[0].Path != "/tag" || json.Unmarshal(rv.Errors, &errs) != nil ||
		len(errs) != 1 || errs[0].Rule != ruleOrder {
		t.Errorf("revalidation grades %s, errors %s", rv.Evidence, rv.Errors)
	}
	if d, err := s.JobDetail(ctx, jobID("jr", 2)); err != nil || d.Revalidation != nil {
		t.Errorf("a job left out of the revalidation: %+v (%v), want none", d.Revalidation, err)
	}
}
