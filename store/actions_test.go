package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

func TestRequeue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "rq", 4)
	// 1 valid, 2 invalid (one syntax, one shape), 1 still queued.
	results := []store.Result{
		result(jobID("rq", 1), "a", ""),
		result(jobID("rq", 2), "b", "syntax", "syntax"),
		result(jobID("rq", 3), "c", "shape"),
	}
	if _, err := s.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	p := store.RequeueParams{Batch: "rq", Statuses: []fixpoint.Status{fixpoint.StatusInvalid}, Class: "syntax",
		Settings: json.RawMessage(`{"model":"other"}`), Model: "other"}
	dry := p
	dry.DryRun = true
	res, err := s.Requeue(ctx, dry)
	if err != nil || res.Total() != 1 || res.Run != 2 {
		t.Fatalf("dry run: %+v %v; want 1 job for run 2", res, err)
	}
	if j, _, _ := s.Job(ctx, jobID("rq", 2)); j.Status != fixpoint.StatusInvalid {
		t.Fatalf("dry run changed the job: %s", j.Status)
	}
	res, err = s.Requeue(ctx, p)
	if err != nil || res.Total() != 1 || res.Run != 2 {
		t.Fatalf("requeue: %+v %v", res, err)
	}
	j, as, err := s.Job(ctx, jobID("rq", 2))
	if err != nil || j.Status != fixpoint.StatusQueued || j.Run != 2 || j.Model != "other" || j.Published || len(as) != 0 || j.Attempts != 0 {
		t.Fatalf("requeued job: %+v, %d attempts (%v)", j, len(as), err)
	}
	// Repeating it finds nothing to do.
	if again, err := s.Requeue(ctx, p); err != nil || again.Total() != 0 {
		t.Fatalf("second requeue: %+v %v", again, err)
	}
	// The first run's outcome and attempts stay; the new run can win.
	var status fixpoint.Status
	var attempts int
	if err := s.QueryRowForTest(ctx, `SELECT status, (SELECT count(*) FROM attempts WHERE job_id = $$rq-2$$ AND run = 1)
		FROM job_runs WHERE job_id = 'rq-2' AND run = 1`, &status, &attempts); err != nil || status != fixpoint.StatusInvalid || attempts != 2 {
		t.Fatalf("run 1 of rq-2: %s with %d attempts (%v); want invalid with 2", status, attempts, err)
	}
	stale := result(jobID("rq", 2), "stale", "")
	if won, err := s.SaveResults(ctx, []store.Result{stale}); err != nil || won[0] {
		t.Fatalf("a run-1 result after the requeue: won %v, %v; want it to lose", won, err)
	}
	fresh := result(jobID("rq", 2), "fresh", "")
	fresh.Run = 2
	if won, err := s.SaveResults(ctx, []store.Result{fresh}); err != nil || !won[0] {
		t.Fatalf("the run-2 result: won %v, %v", won, err)
	}
	if j, as, _ := s.Job(ctx, jobID("rq", 2)); j.Status != fixpoint.StatusValid || j.Run != 2 || len(as) != 1 {
		t.Fatalf("after run 2: %s run %d with %d attempts", j.Status, j.Run, len(as))
	}
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "nope", Statuses: []fixpoint.Status{"invalid"}, Settings: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("requeue of no batch: %v", err)
	}
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "rq", Statuses: []fixpoint.Status{"queued"}, Settings: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("requeue of queued jobs: %v", err)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "cx", 3)
	if _, err := s.SaveResults(ctx, []store.Result{result(jobID("cx", 1), "a", "")}); err != nil {
		t.Fatal(err)
	}
	for want := range []int{2, 0} {
		n, err := s.Cancel(ctx, "cx")
		if err != nil || n != []int{2, 0}[want] {
			t.Fatalf("cancel %d: %d jobs, %v", want, n, err)
		}
	}
	p, _ := s.Progress(ctx, "cx")
	if p.Valid != 1 || p.Queued != 0 || !p.Done() {
		t.Errorf("after cancel: %+v", p)
	}
	if _, err := s.Cancel(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancel of no batch: %v", err)
	}
}

// A requeue of chosen jobs runs those alone (of any final status given),
// leaving the batch's other jobs of the same status, and the ones not
// final, as they are; a cancel of chosen jobs ends those not final yet,
// the batch going on.
func TestRequeueAndCancelChosenJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "cj", 5)
	// 1 valid, 2 and 3 invalid, 4 and 5 queued.
	if _, err := s.SaveResults(ctx, []store.Result{result(jobID("cj", 1), "a", ""), result(jobID("cj", 2), "b", "shape"),
		result(jobID("cj", 3), "c", "shape")}); err != nil {
		t.Fatal(err)
	}
	all := []fixpoint.Status{fixpoint.StatusValid, fixpoint.StatusInvalid}
	p := store.RequeueParams{Batch: "cj", Statuses: all, Settings: json.RawMessage(`{}`),
		Jobs: []string{jobID("cj", 1), jobID("cj", 3), jobID("cj", 4), "other-batch-job"}}
	res, err := s.Requeue(ctx, p)
	if err != nil || res.Run != 2 || res.Total() != 2 || res.Jobs["valid"] != 1 || res.Jobs["invalid"] != 1 {
		t.Fatalf("requeue of cj-1, cj-3, cj-4 (queued) and a job of no batch: %+v %v; want cj-1 (valid) and cj-3 (invalid) as run 2", res, err)
	}
	for i, want := range []fixpoint.Status{fixpoint.StatusQueued, fixpoint.StatusInvalid, fixpoint.StatusQueued, fixpoint.StatusQueued, fixpoint.StatusQueued} {
		j, _, err := s.Job(ctx, jobID("cj", i+1))
		if err != nil || j.Status != want {
			t.Errorf("cj-%d after the requeue: %v (%v), want %s", i+1, j.Status, err, want)
		}
		if wantRun := map[bool]int{true: 2, false: 1}[i == 0 || i == 2]; err == nil && j.Run != wantRun {
			t.Errorf("cj-%d is at run %d, want %d", i+1, j.Run, wantRun)
		}
	}
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "cj", Statuses: all, Settings: json.RawMessage(`{}`), Jobs: []string{""}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("requeue of an empty job id: %v, want ErrInvalid", err)
	}
	many := make([]string, store.RequeueJobsMax+1)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "cj", Statuses: all, Settings: json.RawMessage(`{}`), Jobs: many}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("requeue of %d jobs: %v, want ErrInvalid", len(many), err)
	}

	// Cancel cj-1 (queued again) and cj-2 (invalid, final): cj-1 alone.
	n, err := s.CancelJobs(ctx, "cj", []string{jobID("cj", 1), jobID("cj", 2)})
	if err != nil || n != 1 {
		t.Fatalf("cancel of cj-1 and cj-2: %d (%v), want 1", n, err)
	}
	j, _, _ := s.Job(ctx, jobID("cj", 1))
	if j.Status != fixpoint.StatusCancelled || j.Error != store.CancelledJobReason {
		t.Errorf("cj-1 %s (%q); want cancelled", j.Status, j.Error)
	}
	ov, _ := s.Overview(ctx, "cj")
	if ov.Queued != 3 || ov.Cancelled != 1 || ov.Invalid != 1 || !ov.Running() || !ov.CancelledAt.IsZero() {
		t.Errorf("after the cancel: %+v; want 3 queued (cj-3, 4, 5), 1 cancelled, 1 invalid, the batch running, not cancelled", ov)
	}
	if _, err := s.CancelJobs(ctx, "nope", []string{"x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancel of a job of no batch: %v", err)
	}
	if _, err := s.CancelJobs(ctx, "cj", nil); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("cancel of no job: %v", err)
	}
}

// A job cancelled while a wave held it, then requeued, is in no wave: it
// kept the wave's id, and every delivery of its new run was acked unrun as
// "in a wave" (a wave long done), for good; --resume skipped it too.
func TestCancelAndRequeueLeaveTheWave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "cw", 2)
	w, taken, err := s.RecordWave(ctx, store.WaveParams{Batch: "cw", Run: 1, Provider: "openai", Model: "m",
		Requests: waveReqs("cw", 1, 1, 2), Owner: "a", Lease: time.Minute})
	if err != nil || w == nil || len(taken) != 2 {
		t.Fatalf("record wave: %+v %v %v", w, taken, err)
	}
	if n, err := s.Cancel(ctx, "cw"); err != nil || n != 2 {
		t.Fatalf("cancel: %d %v", n, err)
	}
	placed := func() int {
		var n int
		if err := s.QueryRowForTest(ctx, `SELECT count(*) FROM jobs WHERE batch = 'cw' AND wave_id IS NOT NULL`, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := placed(); n != 0 {
		t.Errorf("%d cancelled jobs still placed in wave %d; a final job is in no wave", n, w.ID)
	}
	// A ledger that a cancel left so (before this fix) is mended by the requeue.
	var set int
	if err := s.QueryRowForTest(ctx, fmt.Sprintf(`WITH u AS (UPDATE jobs SET wave_id = %d WHERE batch = 'cw' RETURNING 1) SELECT count(*) FROM u`, w.ID), &set); err != nil || set != 2 {
		t.Fatal(set, err)
	}
	res, err := s.Requeue(ctx, store.RequeueParams{Batch: "cw", Statuses: []fixpoint.Status{fixpoint.StatusCancelled}, Settings: json.RawMessage(`{}`)})
	if err != nil || res.Total() != 2 {
		t.Fatalf("requeue: %+v %v", res, err)
	}
	if n := placed(); n != 0 {
		t.Errorf("%d requeued jobs still placed in wave %d", n, w.ID)
	}
}

// Many reservers at once never hold past the cap; a call's hold keeps
// its spend until the call's row is written, which charges the counter in
// the same transaction; a hold expires when its worker died, and is
// cleared.
func TestSpendCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "cap", 2)
	if h, err := s.Reserve(ctx, "cap", 1000, 1, time.Minute); err != nil || h.ID != 0 {
		t.Fatalf("uncapped reserve: %+v %v", h, err)
	}
	max := int64(1000)
	if err := s.SetCap(ctx, "cap", store.Cap{MaxTotalTokens: &max}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var holds []store.Hold
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := s.Reserve(ctx, "cap", 150, 0, time.Minute)
			if err != nil && !errors.Is(err, store.ErrBudgetHeld) {
				t.Error(err)
			}
			if err == nil {
				mu.Lock()
				holds = append(holds, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(holds) != 6 {
		t.Fatalf("%d holds of 150 granted under a cap of 1000, want 6", len(holds))
	}
	// Three calls end using 110 tokens each: settled, their spend is still
	// held, not yet charged.
	var ids []int64
	for _, h := range holds[:3] {
		if err := s.SettleHold(ctx, h, 110, 0); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.ID)
	}
	sp, err := s.BatchSpend(ctx, "cap")
	if err != nil || sp.Tokens != 0 || sp.HeldTokens != 3*110+3*150 || sp.Calls != 0 {
		t.Fatalf("spend %+v %v; want 0 charged, 780 held", sp, err)
	}
	// Their rows written (a job's result, one of them as the first job's
	// own attempts): charged with them, the holds gone in the same stroke.
	r := result(jobID("cap", 1), "a", "shape", "shape", "")
	r.Holds = ids
	if _, err := s.SaveResults(ctx, []store.Result{r}); err != nil {
		t.Fatal(err)
	}
	sp, err = s.BatchSpend(ctx, "cap")
	if err != nil || sp.Tokens != 330 || sp.HeldTokens != 450 || sp.Calls != 3 {
		t.Fatalf("spend %+v %v; want 330 charged, 450 held, 3 calls", sp, err)
	}
	// Interrupted calls charge it too, whatever their reason.
	in := store.Interruption{JobID: jobID("cap", 2), Delivery: 1, Reason: store.InterruptHandedBack, Holds: []int64{holds[3].ID},
		Attempts: []store.Attempt{{No: 1, Class: "provider", TokensIn: 90, TokensOut: 10}}}
	if err := s.SaveInterrupted(ctx, []store.Interruption{in}); err != nil {
		t.Fatal(err)
	}
	sp, err = s.BatchSpend(ctx, "cap")
	if err != nil || sp.Tokens != 430 || sp.HeldTokens != 300 || sp.Calls != 4 {
		t.Fatalf("spend %+v %v; want 430 charged, 300 held, 4 calls", sp, err)
	}
	// Past the cap with what is spent: over budget; only with what is
	// held: held.
	if _, err := s.Reserve(ctx, "cap", 571, 0, time.Minute); !errors.Is(err, store.ErrOverBudget) {
		t.Fatalf("reserve past the cap: %v", err)
	}
	if _, err := s.Reserve(ctx, "cap", 300, 0, time.Minute); !errors.Is(err, store.ErrBudgetHeld) {
		t.Fatalf("reserve past the cap with the holds: %v", err)
	}
	// A call that got no reply drops its hold.
	if err := s.SettleHold(ctx, holds[4], 0, 0); err != nil {
		t.Fatal(err)
	}
	// A renewed hold keeps its room; one whose worker stopped renewing it
	// expires, and the next reserve clears it.
	h := holds[5]
	if err := s.RenewHolds(ctx, []int64{h.ID}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, "cap", 500, 0, time.Minute); !errors.Is(err, store.ErrBudgetHeld) {
		t.Fatalf("reserve past a renewed hold: %v, want ErrBudgetHeld", err)
	}
	if err := s.RenewHolds(ctx, []int64{h.ID}, -time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, "cap", 500, 0, time.Minute); err != nil {
		t.Fatalf("the expired hold %d still counts: %v", h.ID, err)
	}
	var left int
	if err := s.QueryRowForTest(ctx, fmt.Sprintf(`SELECT count(*) FROM spend_holds WHERE id = %d`, h.ID), &left); err != nil || left != 0 {
		t.Errorf("the expired hold is still there (%d rows, %v); want it cleared", left, err)
	}
	if err := s.SetCap(ctx, "cap", store.Cap{}); err != nil {
		t.Fatal(err)
	}
	if h, err := s.Reserve(ctx, "cap", 1<<40, 0, time.Minute); err != nil || h.ID != 0 {
		t.Fatalf("reserve after the cap was removed: %+v %v", h, err)
	}
}

// batch_spend counts every run of a batch: a requeued job's earlier run,
// its latest, and, for a job cancelled while a provider batch ran, every
// reply recorded for its run (its totals stopped where the cancel found
// them), each once.
func TestBatchSpendCountsEveryRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "sp", 3)
	first := result(jobID("sp", 1), "a", "shape")
	first.CostUSD = 0.5
	if _, err := s.SaveResults(ctx, []store.Result{first}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Requeue(ctx, store.RequeueParams{Batch: "sp", Statuses: []fixpoint.Status{fixpoint.StatusInvalid}, Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	second := result(jobID("sp", 1), "b", "")
	second.CostUSD, second.Run = 0.25, 2
	if won, err := s.SaveResults(ctx, []store.Result{second}); err != nil || !won[0] {
		t.Fatalf("run 2: %v %v", won, err)
	}
	// Job 2 in a provider batch: its first reply recorded and counted in its
	// running totals, then the batch cancelled, then one more reply.
	var one int
	for _, q := range []string{
		`UPDATE jobs SET tokens_in = 100, cost_usd = 0.1 WHERE id = 'sp-2' RETURNING 1`,
		`INSERT INTO attempts (job_id, run, attempt_no, tokens_in, cost_usd) VALUES ('sp-2', 1, 1, 100, 0.1) RETURNING 1`,
	} {
		if err := s.QueryRowForTest(ctx, q, &one); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Cancel(ctx, "sp"); err != nil {
		t.Fatal(err)
	}
	if err := s.QueryRowForTest(ctx, `INSERT INTO attempts (job_id, run, attempt_no, tokens_in, cost_usd) VALUES ('sp-2', 1, 2, 200, 0.2) RETURNING 1`, &one); err != nil {
		t.Fatal(err)
	}
	var final, earlier, total float64
	var tokensIn int64
	if err := s.QueryRowForTest(ctx, `SELECT final_cost_usd, earlier_runs_cost_usd, cost_usd, final_tokens_in FROM batch_spend WHERE batch = 'sp'`,
		&final, &earlier, &total, &tokensIn); err != nil {
		t.Fatal(err)
	}
	// 0.5 (run 1 of job 1) + 0.25 (run 2) + 0.1 + 0.2 (job 2's replies).
	if !near(final, 1.05) || !near(earlier, 0.5) || !near(total, 1.05) || tokensIn != 100+100+300 {
		t.Errorf("batch_spend: final $%v, earlier runs $%v, total $%v, %d tokens in; want $1.05, $0.5, $1.05, 500", final, earlier, total, tokensIn)
	}
	costs, err := s.BatchCosts(ctx, "sp")
	if err != nil || len(costs) != 1 || !near(costs[0].TotalUSD, 1.05) || !near(costs[0].EarlierRunsUSD, 0.5) || costs[0].Batch != "sp" {
		t.Errorf("BatchCosts: %+v %v", costs, err)
	}
}

// batch_spend adds its costs exactly: $0.1 of results and $0.2 of
// interrupted calls is $0.3, not float8's 0.30000000000000004.
func TestBatchSpendAddsExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "exact", 1)
	in := store.Interruption{JobID: jobID("exact", 1), Delivery: 1, Reason: store.InterruptShutdown,
		Attempts: result(jobID("exact", 1), "cut", "syntax").AttemptRows}
	in.Attempts[0].CostUSD = 0.2
	if err := s.SaveInterrupted(ctx, []store.Interruption{in}); err != nil {
		t.Fatal(err)
	}
	r := result(jobID("exact", 1), "a", "")
	r.CostUSD = 0.1
	if _, err := s.SaveResults(ctx, []store.Result{r}); err != nil {
		t.Fatal(err)
	}
	var total float64
	if err := s.QueryRowForTest(ctx, `SELECT cost_usd FROM batch_spend WHERE batch = 'exact'`, &total); err != nil || total != 0.3 {
		t.Errorf("batch_spend cost_usd %v (%v), want exactly 0.3", total, err)
	}
	costs, err := s.BatchCosts(ctx, "exact")
	if err != nil || len(costs) != 1 || costs[0].TotalUSD != 0.3 {
		t.Errorf("BatchCosts: %+v %v, want a total of exactly 0.3", costs, err)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
