package repair_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// claimSchema is a delivery claim whose dates a rule orders.
const claimSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["customer", "order_id", "ordered", "delivered", "category"],
  "properties": {
    "customer": {"type": "string", "minLength": 2},
    "order_id": {"type": "string", "pattern": "^ORD-[0-9]{5}$"},
    "ordered": {"type": "string", "format": "date"},
    "delivered": {"type": "string", "format": "date"},
    "category": {"enum": ["refund", "damage", "late"]}
  },
  "x-fixpoint-rules": [
    {"rule": "self.delivered >= self.ordered", "message": "the delivery cannot come before the order", "path": "/delivered"}
  ]
}`

// claimJobs are n claims, each stating its customer, order and two dates.
func claimJobs(t *testing.T, n int, feedback fixpoint.FeedbackFormat) []*repair.Job {
	t.Helper()
	schema, err := validate.Compile([]byte(claimSchema))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.Compile([]byte(claimSchema))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"Hana Sato", "Bruno Silva", "Farah Khan", "Goran Ilic", "Jade Moreau"}
	jobs := make([]*repair.Job, n)
	for i := range jobs {
		ordered := time.Date(2026, time.Month(1+i%9), 1+i%28, 0, 0, 0, 0, time.UTC)
		jobs[i] = &repair.Job{ID: fmt.Sprintf("claim-%03d", i), Schema: schema, SchemaRaw: []byte(claimSchema), Model: "sim-messy", Rules: set,
			Prompt: fmt.Sprintf("Claim from %s about order ORD-%05d. Ordered on %s, delivered on %s.", names[i%len(names)], 20000+i,
				ordered.Format(time.DateOnly), ordered.AddDate(0, 0, 2+i%17).Format("2 January 2006")),
			Limits: fixpoint.Limits{MaxAttempts: 4, Feedback: feedback}}
	}
	return jobs
}

// convergence is what a batch of claims did on the messy simulator.
type convergence struct {
	jobs int
	// validBy counts the jobs valid after k attempts (index k, 1 to 4).
	validBy [5]int
	// broke counts the jobs with an attempt that broke the rule; fixed
	// those of them that ended valid.
	broke, fixed int
}

// runClaims drives the claims to their end on the messy preset and checks
// that every valid value keeps the rule.
func runClaims(t *testing.T, n int, feedback fixpoint.FeedbackFormat) convergence {
	t.Helper()
	set, err := rules.Compile([]byte(claimSchema))
	if err != nil {
		t.Fatal(err)
	}
	res := syncDrive(t, simCompleter(t, "messy"), claimJobs(t, n, feedback))
	c := convergence{jobs: n}
	for _, r := range res {
		broke := false
		for k, a := range r.Attempts {
			for _, e := range a.Errors {
				broke = broke || e.Keyword == rules.Keyword && e.Class == fixpoint.ClassSemantic
			}
			if a.Valid {
				for j := k + 1; j < len(c.validBy); j++ {
					c.validBy[j]++
				}
			}
		}
		if broke {
			c.broke++
		}
		if r.Status != fixpoint.StatusValid {
			continue
		}
		if broke {
			c.fixed++
		}
		dec := json.NewDecoder(strings.NewReader(string(r.Value)))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if fs, _ := set.Check(context.Background(), v); len(rules.Errors(fs)) > 0 {
			t.Errorf("%s is valid with %s, which breaks the rule: %v", r.JobID, r.Value, rules.Errors(fs))
		}
	}
	return c
}

// Rule errors fed back converge on the simulator: on the messy preset
// (8% of first replies break a rule), the claims that broke the rule are
// repaired when the feedback names the rule's error, and not when it is
// vague; the share of valid jobs rises with each attempt; and no valid
// value breaks the rule.
func TestRuleErrorsConvergeOnTheSimulator(t *testing.T) {
	t.Parallel()
	const n = 600
	exact := runClaims(t, n, fixpoint.FeedbackText)
	vague := runClaims(t, n, fixpoint.FeedbackVague)
	t.Logf("exact feedback: valid by attempt %v of %d, %d of %d rule-broken jobs repaired; vague: valid by attempt %v, %d of %d repaired",
		exact.validBy[1:], n, exact.fixed, exact.broke, vague.validBy[1:], vague.fixed, vague.broke)
	if exact.broke < 15 {
		t.Fatalf("%d of %d jobs broke the rule: too few to measure (the preset's rule_break rate is 8%%)", exact.broke, n)
	}
	for k := 2; k < len(exact.validBy); k++ {
		if exact.validBy[k] <= exact.validBy[k-1] {
			t.Errorf("valid after %d attempts: %d, after %d: %d; want it to rise with each attempt", k, exact.validBy[k], k-1, exact.validBy[k-1])
		}
	}
	if share := float64(exact.fixed) / float64(exact.broke); share < 0.8 {
		t.Errorf("exact feedback repaired %d of %d jobs that broke the rule (%.0f%%); want at least 80%%", exact.fixed, exact.broke, 100*share)
	}
	if vague.broke < 15 || float64(vague.fixed)/float64(vague.broke) > 0.2 {
		t.Errorf("vague feedback repaired %d of %d jobs that broke the rule; want at most 20%%: the rule's message is what repairs it", vague.fixed, vague.broke)
	}
}
