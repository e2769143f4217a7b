package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// webLedger is a batch "wb" of 7 jobs: 1-3 valid at attempt 1, 4 valid at
// attempt 2 (shape first), 5 valid at 3, 6 invalid after 3 shape errors
// (one at an array index), 7 still queued.
func webLedger(t *testing.T) *store.Store {
	t.Helper()
	s, _ := setup(t, "wb", 7)
	ctx := context.Background()
	rs := []store.Result{
		result(jobID("wb", 1), "a", ""), result(jobID("wb", 2), "b", ""), result(jobID("wb", 3), "c", ""),
		result(jobID("wb", 4), "d", "shape", ""), result(jobID("wb", 5), "e", "shape", "syntax", ""),
		result(jobID("wb", 6), "f", "shape", "shape", "shape"),
	}
	rs[4].AttemptRows[1].Errors = json.RawMessage(`[{"path":"","keyword":"syntax","class":"syntax","message":"unexpected end"}]`)
	rs[5].AttemptRows[2].Errors = json.RawMessage(`[{"path":"/items/3/sku","keyword":"pattern","class":"semantic","message":"bad sku"}]`)
	rs[0].RepairedLocally = true
	for i := range rs {
		for k := range rs[i].AttemptRows {
			rs[i].AttemptRows[k].CostUSD = 0.001
			rs[i].CostUSD += 0.001
		}
	}
	if _, err := s.SaveResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOverviews(t *testing.T) {
	t.Parallel()
	s := webLedger(t)
	ctx := context.Background()
	b, err := s.Overview(ctx, "wb")
	if err != nil {
		t.Fatal(err)
	}
	if b.Jobs != 7 || b.Queued != 1 || b.Valid != 5 || b.Invalid != 1 || b.FirstAttemptValid != 3 || b.Model != "sim-typical" {
		t.Errorf("overview %+v: want 7 jobs, 1 queued, 5 valid, 1 invalid, 3 first-attempt valid, model sim-typical", b)
	}
	if !b.Running() || b.ValidRate() != 5.0/6 || b.FirstAttemptValidRate() != 3.0/6 {
		t.Errorf("running %v, valid rate %v, first-attempt rate %v", b.Running(), b.ValidRate(), b.FirstAttemptValidRate())
	}
	// 11 attempts at $0.001 and 110 tokens each.
	if b.CostUSD < 0.01099 || b.CostUSD > 0.01101 || b.Tokens != 11*110 {
		t.Errorf("cost %v tokens %d, want 0.011 and 1210", b.CostUSD, b.Tokens)
	}
	if b.StartedAt.IsZero() == b.FinishedAt.IsZero() && b.FinishedAt.IsZero() {
		t.Errorf("finished at %v", b.FinishedAt)
	}
	if _, err := s.Overview(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown batch: %v, want ErrNotFound", err)
	}
	// A cap makes the spend counter the figure.
	max := 5.0
	if err := s.SetCap(ctx, "wb", store.Cap{MaxCostUSD: &max}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBatch(ctx, store.BatchParams{Name: "wb2", Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Overviews(ctx, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Name != "wb2" || all[0].Jobs != 0 || all[1].MaxCostUSD == nil || *all[1].MaxCostUSD != 5 {
		t.Errorf("overviews %+v: want wb2 (newest, empty) then wb capped at 5", all)
	}
	if one, err := s.Overviews(ctx, nil, 1); err != nil || len(one) != 1 {
		t.Errorf("limit 1: %d rows, %v", len(one), err)
	}
	if all[1].BadRows != 0 {
		t.Errorf("wb has %d bad rows, want none", all[1].BadRows)
	}
	// Enqueue left 3 bad rows out, one of them with the job id a later
	// dataset recorded (the row fixed): 2 are missing.
	if _, err := s.FinishRecording(ctx, "wb", "tok", "d1", 10, []string{"", "wb-99", jobID("wb", 1)}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Overview(ctx, "wb"); err != nil || b.BadRows != 2 {
		t.Errorf("after 3 bad rows, 1 recorded later: %d bad rows (%v), want 2", b.BadRows, err)
	}
	if n, err := s.BadRows(ctx, "wb"); err != nil || n != 2 {
		t.Errorf("BadRows: %d (%v), want 2 as the overview says", n, err)
	}
}

func TestBatchFunnelClustersCosts(t *testing.T) {
	t.Parallel()
	s := webLedger(t)
	ctx := context.Background()
	f, err := s.BatchFunnel(ctx, "wb")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(f.ValidAt) != "[3 1 1]" || fmt.Sprint(f.LocalAt) != "[1 0 0]" || f.Never != 1 {
		t.Errorf("funnel %+v: want valid at 1,2,3 = 3,1,1 (1 local at 1), never 1", f)
	}
	cs, err := s.FailureClusters(ctx, "wb", 10)
	if err != nil {
		t.Fatal(err)
	}
	// /name required: jobs 4, 5 and 6 twice = 4 errors in 3 jobs.
	if len(cs) != 3 || cs[0].Path != "/name" || cs[0].Keyword != "required" || cs[0].Errors != 4 || cs[0].Jobs != 3 ||
		cs[0].ExampleJob != "wb-4" || cs[0].ExampleMessage != "/name: missing" {
		t.Fatalf("clusters %+v", cs)
	}
	var folded bool
	for _, c := range cs {
		folded = folded || (c.Path == "/items/*/sku" && c.Keyword == "pattern" && c.ExampleJob == "wb-6")
	}
	if !folded {
		t.Errorf("no cluster /items/*/sku pattern in %+v", cs)
	}
	steps, err := s.RepairSteps(ctx, "wb")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range steps {
		got = append(got, fmt.Sprintf("%d %s %d/%d/%d", p.AttemptNo, p.Class, p.Failed, p.Retried, p.ValidNext))
	}
	// Jobs 4, 5, 6 fail attempt 1 (shape); 4 is valid at 2, 5 fails it
	// (syntax) and is valid at 3, 6 fails 2 and 3 (shape).
	if want := "1 shape 3/3/1,2 shape 1/1/0,2 syntax 1/1/1,3 shape 1/0/0"; strings.Join(got, ",") != want {
		t.Errorf("repair steps %s, want %s", strings.Join(got, ","), want)
	}
	if steps[0].Rate == nil || *steps[0].Rate != 1.0/3 || steps[3].Rate != nil {
		t.Errorf("rates %v %v: want 1/3 and none (never retried)", steps[0].Rate, steps[3].Rate)
	}
	mc, err := s.ModelCosts(ctx, "wb")
	if err != nil {
		t.Fatal(err)
	}
	if len(mc) != 1 || mc[0].Model != "sim-typical" || mc[0].Basis != "realtime" || mc[0].Calls != 11 || mc[0].ValidJobs != 5 ||
		mc[0].TokensCached != 11*5 || mc[0].CostPerValid() < 0.00219 || mc[0].CostPerValid() > 0.00221 {
		t.Errorf("model costs %+v: want 11 calls, 55 cached tokens, 5 valid jobs, $0.0022 a valid job", mc)
	}
}

func TestJobPage(t *testing.T) {
	t.Parallel()
	s := webLedger(t)
	ctx := context.Background()
	ids := func(rows []store.JobRow) string {
		var out []string
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		f    store.JobFilter
		want string
	}{
		{store.JobFilter{}, "wb-1,wb-2,wb-3,wb-4,wb-5,wb-6,wb-7"},
		{store.JobFilter{Status: "valid", Attempts: 1}, "wb-1,wb-2,wb-3"},
		{store.JobFilter{Class: "shape", Status: "invalid"}, "wb-6"},
		{store.JobFilter{ErrorPath: "/items/*/sku"}, "wb-6"},
		{store.JobFilter{ErrorPath: "/name", Status: "valid"}, "wb-4,wb-5"},
		{store.JobFilter{Status: "queued"}, "wb-7"},
	}
	for _, c := range cases {
		rows, next, err := s.JobPage(ctx, "wb", c.f)
		if err != nil || ids(rows) != c.want || next != "" {
			t.Errorf("%+v: %s next %q (%v), want %s", c.f, ids(rows), next, err, c.want)
		}
	}
	// Keyset paging: pages of 3 cover the batch once, in order.
	var all []string
	f := store.JobFilter{Limit: 3}
	for range 5 {
		rows, next, err := s.JobPage(ctx, "wb", f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ids(rows))
		if next == "" {
			break
		}
		f.After = next
	}
	if got := strings.Join(all, "|"); got != "wb-1,wb-2,wb-3|wb-4,wb-5,wb-6|wb-7" {
		t.Errorf("pages %s", got)
	}
	for _, bad := range []store.JobFilter{{Status: "done"}, {Class: "x"}, {Attempts: -1}} {
		if _, _, err := s.JobPage(ctx, "wb", bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	var listed []store.JobRow
	if err := s.JobList(ctx, "wb", store.JobFilter{Status: "valid"}, func(r store.JobRow) error {
		listed = append(listed, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ids(listed) != "wb-1,wb-2,wb-3,wb-4,wb-5" || string(listed[3].Value) != `{"tag": "d"}` || string(listed[3].Metadata) != `{"row": 4}` {
		t.Errorf("list %s, job 4 value %s metadata %s", ids(listed), listed[3].Value, listed[3].Metadata)
	}
	d, err := s.JobDetail(ctx, "wb-5")
	if err != nil || len(d.Attempts) != 3 || d.Job.Status != "valid" {
		t.Errorf("job detail: %+v, %v", d, err)
	}
	if _, err := s.JobDetail(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
}

// A requeued job's detail has its earlier runs, the latest first, each
// with its outcome and its own attempts.
func TestJobDetailRuns(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "jr", 1)
	ctx := context.Background()
	id := jobID("jr", 1)
	if _, err := s.SaveResults(ctx, []store.Result{result(id, "first", "shape", "syntax")}); err != nil {
		t.Fatal(err)
	}
	d, err := s.JobDetail(ctx, id)
	if err != nil || len(d.Runs) != 0 || len(d.Attempts) != 2 {
		t.Fatalf("before a requeue: %d runs, %d attempts (%v); want no earlier run, 2 attempts", len(d.Runs), len(d.Attempts), err)
	}
	for i, model := range []string{"second", "third"} {
		run := i + 2
		if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "jr", Statuses: []fixpoint.Status{fixpoint.StatusInvalid, fixpoint.StatusValid},
			Settings: json.RawMessage(`{}`), Model: model}); err != nil {
			t.Fatal(err)
		}
		res := result(id, model, map[int]string{2: "shape", 3: ""}[run])
		res.Run = run
		if _, err := s.SaveResults(ctx, []store.Result{res}); err != nil {
			t.Fatal(err)
		}
	}
	d, err = s.JobDetail(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Job.Run != 3 || d.Job.Status != fixpoint.StatusValid || len(d.Attempts) != 1 || d.Attempts[0].Raw != "third" {
		t.Errorf("the current run: %d, %s, %d attempts; want run 3 valid with its 1 attempt", d.Job.Run, d.Job.Status, len(d.Attempts))
	}
	if len(d.Runs) != 2 {
		t.Fatalf("%d earlier runs, want 2", len(d.Runs))
	}
	r2, r1 := d.Runs[0], d.Runs[1]
	if r2.Run != 2 || r2.Status != fixpoint.StatusInvalid || r2.Model != "second" || len(r2.AttemptRows) != 1 || r2.AttemptRows[0].Raw != "second" || r2.FinalClass != "shape" {
		t.Errorf("run 2: %+v; want invalid on model second, its 1 attempt", r2)
	}
	if r1.Run != 1 || r1.Status != fixpoint.StatusInvalid || r1.Model != "sim-typical" || r1.Attempts != 2 || len(r1.AttemptRows) != 2 ||
		r1.AttemptRows[1].No != 2 || r1.AttemptRows[1].Class != "syntax" || r1.TokensIn != 200 {
		t.Errorf("run 1: %+v; want invalid on sim-typical, its 2 attempts (the second syntax), 200 tokens in", r1)
	}
}

// A search finds text in a job's id, input, prompt, value or error, case
// aside, a window of jobs at a time, and goes on from where it stopped.
func TestSearchJobs(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, "sj", 60)
	ctx := context.Background()
	bad := result(jobID("sj", 2), "b", "shape")
	bad.Error = "/name: missing Needle"
	if _, err := s.SaveResults(ctx, []store.Result{bad, result(jobID("sj", 4), "needle-4", "")}); err != nil {
		t.Fatal(err)
	}
	ids := func(r store.JobSearch) string {
		var out []string
		for _, j := range r.Jobs {
			out = append(out, j.ID+"="+strings.Join(j.Matched, "+"))
		}
		return strings.Join(out, " ")
	}
	for text, want := range map[string]string{
		"NEEDLE":      "sj-2=error sj-4=value",
		" ROW 7 ":     "sj-7=prompt",
		`"row": 5}`:   "sj-5=input",
		"sj-59":       "sj-59=id",
		"no such bit": "",
	} {
		r, err := s.SearchJobs(ctx, "sj", text, "")
		if err != nil || ids(r) != want || r.FromRow != 1 || r.ToRow != 60 || r.Next != "" {
			t.Errorf("search %q: %q, rows %d-%d, next %q (%v); want %q in rows 1-60, to the end", text, ids(r), r.FromRow, r.ToRow, r.Next, err, want)
		}
	}
	// More matches than a step returns: the first 50, then the rest.
	r, err := s.SearchJobs(ctx, "sj", "extract", "")
	if err != nil || len(r.Jobs) != store.SearchMatchesMax || r.Jobs[49].ID != "sj-50" || r.ToRow != 50 || r.Next != "50:sj-50" {
		t.Fatalf("search of every job: %d matches, to row %d, next %q (%v); want 50, to row 50, next after sj-50", len(r.Jobs), r.ToRow, r.Next, err)
	}
	if r, err = s.SearchJobs(ctx, "sj", "extract", r.Next); err != nil || len(r.Jobs) != 10 || r.FromRow != 51 || r.Next != "" {
		t.Errorf("its next step: %d matches from row %d, next %q (%v); want the 10 left, from row 51, to the end", len(r.Jobs), r.FromRow, r.Next, err)
	}
	// A window smaller than the batch: a step reads that many jobs.
	s.SetSearchWindow(25)
	var steps []string
	for next, n := "", 0; n == 0 || next != ""; n++ {
		r, err := s.SearchJobs(ctx, "sj", "row 4", next)
		if err != nil || n > 3 {
			t.Fatalf("step %d: %v", n+1, err)
		}
		steps = append(steps, fmt.Sprintf("%d-%d:%s", r.FromRow, r.ToRow, ids(r)))
		next = r.Next
	}
	if got := strings.Join(steps, " "); got != "1-25:sj-4=prompt 26-50:sj-40=prompt sj-41=prompt sj-42=prompt sj-43=prompt sj-44=prompt sj-45=prompt sj-46=prompt sj-47=prompt sj-48=prompt sj-49=prompt 51-60:" {
		t.Errorf("steps of 25 jobs: %s", got)
	}
	s.SetSearchWindow(0)
	for _, text := range []string{" ", strings.Repeat("x", store.SearchTextMax+1)} {
		if _, err := s.SearchJobs(ctx, "sj", text, ""); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("search %.20q: %v, want ErrInvalid", text, err)
		}
	}
	if _, err := s.SearchJobs(ctx, "sj", "x", "nocursor"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a bad cursor: %v, want ErrInvalid", err)
	}
	if b, err := s.JobBatch(ctx, "sj-7"); err != nil || b != "sj" {
		t.Errorf("JobBatch(sj-7) = %q, %v", b, err)
	}
	if _, err := s.JobBatch(ctx, "sj-0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("JobBatch of no job: %v, want ErrNotFound", err)
	}
}
