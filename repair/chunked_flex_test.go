package repair_test

import (
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// Every call of a document job under flex asks for the flex tier: the
// chunks', the list passes', the merge model's and the repair's, which
// the chunked machine builds from copies of the job.
func TestDocumentCallsCarryTheTier(t *testing.T) {
	t.Parallel()
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: `{"amount": 1200}`, 2: `{"items": [{"name": "Acme Ltd"}]}`}
	for _, tc := range []struct {
		name string
		edit func(*repair.Job)
	}{
		{"parallel, merge model", func(j *repair.Job) {
			j.Limits.Strategy, j.Limits.MergeModel = fixpoint.StrategyParallel, "gpt-4o"
		}},
		{"sequential, list passes", func(j *repair.Job) {
			j.Limits.Strategy, j.Limits.ListPasses = fixpoint.StrategySequential, 2
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			job := agreementJob(t, fixpoint.StrategyParallel, func(j *repair.Job) {
				j.ServiceTier = fixpoint.ServiceTierFlex
				tc.edit(j)
			})
			// The merge call and the repair are answered with a value that
			// lacks "amount": the repair is asked too.
			sent := drive(t, startDoc(t, job, nil), byChunk(first, nil, `{"party": "Acme GmbH", "items": []}`))
			if len(sent) < 4 {
				t.Fatalf("%d requests, want the chunks' and more", len(sent))
			}
			merges := 0
			for i, req := range sent {
				if req.Model == "gpt-4o" {
					merges++
				}
				if req.ServiceTier != fixpoint.ServiceTierFlex {
					t.Errorf("request %d (model %s): tier %q, want flex", i, req.Model, req.ServiceTier)
				}
			}
			if want := tc.name == "parallel, merge model"; want != (merges == 1) {
				t.Errorf("%d calls to the merge model", merges)
			}
		})
	}
}
