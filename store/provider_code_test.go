package store_test

import (
	"context"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
)

// TestProviderCodeGroups: the provider's own error code of a failed call
// is kept in attempts and interrupted_attempts (provider_code, beside
// provider_class), so SQL groups failures by it.
func TestProviderCodeGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t, "pc", 3)
	codes := []string{"context_length_exceeded", "not_found_error", "context_length_exceeded"}
	var results []store.Result
	for i, code := range codes {
		r := result(jobID("pc", i+1), "x", "provider")
		r.AttemptRows[0].ProviderClass, r.AttemptRows[0].ProviderCode = "bad_request", code
		results = append(results, r)
	}
	if _, err := s.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	in := store.Interruption{JobID: jobID("pc", 1), Delivery: 1, Reason: store.InterruptHandedBack,
		Attempts: result(jobID("pc", 1), "cut", "provider").AttemptRows}
	in.Attempts[0].ProviderClass, in.Attempts[0].ProviderCode = "model_not_found", "model_not_found"
	if err := s.SaveInterrupted(ctx, []store.Interruption{in}); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := s.QueryRowForTest(ctx, `
		SELECT string_agg(provider_code || '=' || n, ' ' ORDER BY provider_code) FROM (
			SELECT provider_code, count(*) AS n FROM (
				SELECT provider_code FROM attempts WHERE job_id LIKE 'pc-%'
				UNION ALL SELECT provider_code FROM interrupted_attempts WHERE job_id LIKE 'pc-%') u
			GROUP BY provider_code) g`, &got); err != nil {
		t.Fatal(err)
	}
	if want := "context_length_exceeded=2 model_not_found=1 not_found_error=1"; got != want {
		t.Errorf("failures by provider code: %q, want %q", got, want)
	}
	_, as, err := s.Job(ctx, jobID("pc", 2))
	if err != nil || len(as) != 1 || as[0].ProviderCode != "not_found_error" {
		t.Errorf("job 2's attempt reads back code %+v (%v), want not_found_error", as, err)
	}
}
