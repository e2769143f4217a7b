package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A delivery that ended without a result keeps its calls; a result that
// lost to another delivery's keeps its calls as superseded; a save retried
// after its commit went through records nothing twice.
func TestInterruptedAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "intr", 3)

	first := result(jobID("intr", 1), "a", "shape", "")
	first.StartedAt, first.Deliveries = time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC), 2
	in := store.Interruption{JobID: jobID("intr", 1), Delivery: 1, Reason: store.InterruptShutdown,
		Attempts: result(jobID("intr", 1), "cut", "syntax").AttemptRows}
	in.Attempts[0].CostUSD = 0.25
	for range 2 { // idempotent
		if err := s.SaveInterrupted(ctx, []store.Interruption{in}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SaveResults(ctx, []store.Result{first}); err != nil {
		t.Fatal(err)
	}
	// The same save again (a retry after a lost COMMIT reply): nothing new.
	if won, err := s.SaveResults(ctx, []store.Result{first}); err != nil || won[0] {
		t.Fatalf("second save: %v %v", won, err)
	}
	// Another delivery's result for the same job loses; its calls stay.
	dup := result(jobID("intr", 1), "b", "")
	dup.StartedAt, dup.Deliveries = time.Date(2026, 1, 1, 1, 0, 5, 0, time.UTC), 3
	if won, err := s.SaveResults(ctx, []store.Result{dup}); err != nil || won[0] {
		t.Fatalf("duplicate delivery's save: %v %v", won, err)
	}
	c, err := s.Counts(ctx, "intr")
	if err != nil {
		t.Fatal(err)
	}
	if c.InterruptedRows != 2 || c.AttemptRows != 2 {
		t.Errorf("interrupted rows %d, attempt rows %d; want 1 cut off at shutdown + 1 superseded, and the first result's 2",
			c.InterruptedRows, c.AttemptRows)
	}
	var spend float64
	if err := s.QueryRowForTest(ctx, `SELECT interrupted_cost_usd FROM batch_spend WHERE batch = 'intr'`, &spend); err != nil || spend != 0.25 {
		t.Errorf("batch_spend interrupted cost %v (%v), want 0.25", spend, err)
	}
	if err := s.SaveInterrupted(ctx, []store.Interruption{{JobID: "x", Reason: "lost", Attempts: in.Attempts}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("unknown reason: %v, want ErrInvalid", err)
	}
}

// An outage's failed calls are kept per wait: a resumed job numbers its
// next call as the one that failed, and the wait keeps the rows apart. A
// result that loses to enqueue cancel keeps its calls as cancelled.
func TestInterruptedOutagesAndCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "hold", 2)
	id := jobID("hold", 1)
	failed := result(id, "x", "").AttemptRows[:1]
	failed[0].ProviderError, failed[0].Class, failed[0].Valid, failed[0].Raw = "503 overloaded", "provider", false, ""
	failed[0].TokensIn, failed[0].TokensOut, failed[0].TokensCached = 0, 0, 0
	at := func(call int) []store.Attempt { // the failed call, made at second call of the delivery
		a := failed[0]
		a.StartedAt = time.Date(2026, 1, 1, 0, 0, call, 0, time.UTC)
		return []store.Attempt{a}
	}
	for hold := 1; hold <= 2; hold++ {
		in := store.Interruption{JobID: id, Delivery: 1, Hold: hold, Reason: store.InterruptOutage, Attempts: at(hold)}
		if err := s.SaveInterrupted(ctx, []store.Interruption{in}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveInterrupted(ctx, []store.Interruption{{JobID: id, Delivery: 1, Reason: store.InterruptHandedBack, Attempts: at(3)}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.JobInterrupted(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.InterruptedCalls{
		{Run: 1, Delivery: 1, Hold: 1, Reason: store.InterruptOutage, Calls: 1, LastError: "503 overloaded"},
		{Run: 1, Delivery: 1, Hold: 2, Reason: store.InterruptOutage, Calls: 1, LastError: "503 overloaded"},
		{Run: 1, Delivery: 1, Reason: store.InterruptHandedBack, Calls: 1, LastError: "503 overloaded"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("interrupted calls:\n got %+v\nwant %+v", got, want)
	}
	for _, bad := range []store.Interruption{
		{JobID: id, Delivery: 1, Reason: store.InterruptOutage, Attempts: failed},            // an outage names its wait
		{JobID: id, Delivery: 1, Hold: 1, Reason: store.InterruptShutdown, Attempts: failed}, // only an outage or a probe has one
		{JobID: id, Delivery: 1, Hold: -1, Reason: store.InterruptOutage, Attempts: failed},
	} {
		if err := s.SaveInterrupted(ctx, []store.Interruption{bad}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s with hold %d: %v, want ErrInvalid", bad.Reason, bad.Hold, err)
		}
	}

	// A cancel while job 2 ran: its result loses, and its calls say why.
	if _, err := s.Cancel(ctx, "hold"); err != nil {
		t.Fatal(err)
	}
	late := result(jobID("hold", 2), "a", "shape", "")
	late.Deliveries = 1
	if won, err := s.SaveResults(ctx, []store.Result{late}); err != nil || won[0] {
		t.Fatalf("result after the cancel: won %v, %v; want it to lose", won, err)
	}
	got, err = s.JobInterrupted(ctx, jobID("hold", 2))
	if err != nil || len(got) != 1 || got[0].Reason != store.InterruptCancelled || got[0].Calls != 2 || got[0].Paid != 2 {
		t.Errorf("calls of the cancelled job: %+v %v; want its 2 paid calls as cancelled", got, err)
	}
	job, _, err := s.Job(ctx, jobID("hold", 2))
	if err != nil || job.Status != fixpoint.StatusCancelled || job.Error != store.CancelledReason {
		t.Errorf("cancelled job: %+v %v", job, err)
	}
}

// SaveCrashed records the calls a dead worker's journal kept that the
// ledger does not have: not those its result committed, not those already
// kept apart, and nothing the second time.
func TestSaveCrashed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "crash", 2)
	at := func(sec int) time.Time { return time.Date(2026, 1, 1, 1, 0, sec, 123456000, time.UTC) }
	// Job 1 committed its result (attempts 1 and 2) before the worker died.
	done := result(jobID("crash", 1), "a", "shape", "")
	done.AttemptRows[0].StartedAt, done.AttemptRows[1].StartedAt = at(1), at(2)
	if _, err := s.SaveResults(ctx, []store.Result{done}); err != nil {
		t.Fatal(err)
	}
	// The journal: job 1's two committed calls, and job 2's two calls of a
	// delivery that never finished.
	open := result(jobID("crash", 2), "b", "shape", "shape").AttemptRows
	open[0].StartedAt, open[1].StartedAt = at(3), at(4)
	open[0].CostUSD, open[1].CostUSD = 0.25, 0.5
	journal := []store.Interruption{
		{JobID: jobID("crash", 1), Delivery: 1, Attempts: done.AttemptRows},
		{JobID: jobID("crash", 2), Delivery: 1, Attempts: open},
	}
	for i, want := range []int{2, 0} {
		n, err := s.SaveCrashed(ctx, journal)
		if err != nil || n != want {
			t.Fatalf("save %d: %d recorded (%v), want %d", i+1, n, err, want)
		}
	}
	var rows int
	var cost float64
	if err := s.QueryRowForTest(ctx, `SELECT count(*), sum(cost_usd)::float8 FROM interrupted_attempts WHERE reason = 'crashed'`, &rows, &cost); err != nil || rows != 2 || cost != 0.75 {
		t.Errorf("crashed rows %d costing $%v (%v); want job 2's 2 calls, $0.75", rows, cost, err)
	}
	if err := s.QueryRowForTest(ctx, `SELECT interrupted_cost_usd FROM batch_spend WHERE batch = 'crash'`, &cost); err != nil || cost != 0.75 {
		t.Errorf("batch_spend interrupted cost $%v (%v); want $0.75", cost, err)
	}
}
