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
	"github.com/fixpoint-dev/fixpoint/internal/poll"
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

// Many reservers at once never hold past the cap; charges count; a hold
// expires when its worker died.
func TestSpendCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "cap", 1)
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
	for _, h := range holds[:3] {
		if err := s.Charge(ctx, h, 100, 0); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := s.BatchSpend(ctx, "cap")
	if err != nil || sp.Tokens != 300 || sp.HeldTokens != 450 || sp.Calls != 3 {
		t.Fatalf("spend %+v %v; want 300 charged, 450 held, 3 calls", sp, err)
	}
	// Past the cap with what is spent: over budget; only with what is
	// held: held. A hold that expires frees its room.
	if _, err := s.Reserve(ctx, "cap", 701, 0, time.Minute); !errors.Is(err, store.ErrOverBudget) {
		t.Fatalf("reserve past the cap: %v", err)
	}
	if _, err := s.Reserve(ctx, "cap", 300, 0, time.Minute); !errors.Is(err, store.ErrBudgetHeld) {
		t.Fatalf("reserve past the cap with the holds: %v", err)
	}
	// A renewed hold keeps its room past its first expiry: a hold of one
	// token made after it with the same expiry, not renewed, says by the
	// ledger's clock when that expiry passed.
	h, err := s.Reserve(ctx, "cap", 200, 0, 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, "cap", 1, 0, 30*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewHold(ctx, h, time.Minute); err != nil {
		t.Fatal(err)
	}
	held := func(tokens int64) func() bool {
		return func() bool { sp, err := s.BatchSpend(ctx, "cap"); return err == nil && sp.HeldTokens == tokens }
	}
	poll.Until(t, 10*time.Second, "the one-token hold to expire and the renewed one to stay (450 + 200 held)", held(650))
	if _, err := s.Reserve(ctx, "cap", 250, 0, time.Minute); !errors.Is(err, store.ErrBudgetHeld) {
		t.Fatalf("reserve past a renewed hold: %v, want ErrBudgetHeld", err)
	}
	if err := s.RenewHold(ctx, h, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the renewed hold to expire (450 held)", held(450))
	if _, err := s.Reserve(ctx, "cap", 250, 0, time.Minute); err != nil {
		t.Fatalf("the expired hold %d still counts: %v", h.ID, err)
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
