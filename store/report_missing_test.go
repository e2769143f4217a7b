package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// A lane whose provider answered "no such model" is reported by batch,
// provider and model, with the calls answered so and the lane's jobs
// still queued; a batch without such calls has no line.
func TestMissingModels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "lost", 3)
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i := 1; i <= 2; i++ {
		a := store.Attempt{No: 1, Class: "provider", ProviderStatus: 404, ProviderClass: "model_not_found", ProviderCode: "model_not_found",
			ProviderError: "model not found", Model: "sim-typical", StartedAt: at.Add(time.Duration(i) * time.Minute)}
		if err := s.SaveInterrupted(ctx, []store.Interruption{{JobID: jobID("lost", i), Delivery: 1, Reason: store.InterruptHandedBack, Attempts: []store.Attempt{a}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Another class of failure is not a missing model.
	other := result(jobID("lost", 3), "x", "provider")
	other.AttemptRows[0].ProviderClass = "bad_request"
	if _, err := s.SaveResults(ctx, []store.Result{other}); err != nil {
		t.Fatal(err)
	}
	got, err := s.MissingModels(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := store.MissingModel{Batch: "lost", Provider: "sim", Model: "sim-typical", Calls: 2, Queued: 2, LastCall: at.Add(2 * time.Minute)}
	if len(got) != 1 || got[0].Batch != want.Batch || got[0].Provider != want.Provider || got[0].Model != want.Model ||
		got[0].Calls != want.Calls || got[0].Queued != want.Queued || !got[0].LastCall.Equal(want.LastCall) {
		t.Fatalf("MissingModels = %+v, want [%+v]", got, want)
	}
	if got, err := s.MissingModels(ctx, "other"); err != nil || len(got) != 0 {
		t.Errorf("MissingModels of another batch = %+v, %v; want none", got, err)
	}
}
