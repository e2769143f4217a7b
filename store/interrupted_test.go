package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
