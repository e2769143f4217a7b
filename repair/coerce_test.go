package repair_test

import (
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// A reply whose only faults are lossless shape faults is valid without
// another call under the default safe coercion, with each fix recorded; with
// coercion off the same reply costs a re-ask.
func TestStepCoercesBeforeACall(t *testing.T) {
	t.Parallel()
	schema, err := validate.Compile([]byte(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	reply := `{"customer":{"name":"Ada Lovelace","tier":"Pro"},"lines":[{"sku":"ABC-1000","qty":"3"}],"rush":"false"}`
	for _, tc := range []struct {
		mode     fixpoint.CoerceMode
		valid    bool
		coerced  int
		nextCall bool
	}{
		{mode: "", valid: true, coerced: 3},
		{mode: fixpoint.CoerceSafe, valid: true, coerced: 3},
		{mode: fixpoint.CoerceNone, valid: false, nextCall: true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			job := &repair.Job{ID: "j", Schema: schema, SchemaRaw: []byte(orderSchema), Model: "m", Prompt: "extract",
				Limits: fixpoint.Limits{MaxAttempts: 3, Coerce: tc.mode}}
			step, err := repair.Start(job, nil, repair.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if act := step.Next(); act.Request == nil {
				t.Fatal("no first request")
			}
			a, act := step.Feed(&fixpoint.Response{Text: reply, FinishReason: fixpoint.FinishStop}, nil, time.Now())
			if a.Valid != tc.valid || a.Coerced != tc.coerced || (act.Request != nil) != tc.nextCall {
				t.Fatalf("attempt valid=%v coerced=%d next call=%v, want %v %d %v (errors %v)", a.Valid, a.Coerced, act.Request != nil,
					tc.valid, tc.coerced, tc.nextCall, a.Errors)
			}
			if !tc.valid {
				return
			}
			if !a.RepairedLocally || string(step.Result().Value) != `{"customer":{"name":"Ada Lovelace","tier":"pro"},"lines":[{"qty":3,"sku":"ABC-1000"}],"rush":false}` {
				t.Errorf("value %s repaired locally %v", step.Result().Value, a.RepairedLocally)
			}
			kinds := map[string]bool{}
			for _, r := range a.Repairs[len(a.Repairs)-a.Coerced:] {
				if r.Pointer == "" || len(r.Before) == 0 {
					t.Errorf("fix %+v lacks its pointer or value before", r)
				}
				kinds[r.Kind] = true
			}
			if len(kinds) < 2 {
				t.Errorf("fix kinds %v, want an enum case fix and scalar fixes", kinds)
			}
		})
	}
}

// A coercion mode that is not none, safe or all is a bad job.
func TestCoerceModeValidated(t *testing.T) {
	t.Parallel()
	if err := (fixpoint.Limits{MaxAttempts: 1, Strategy: fixpoint.StrategyRepair, Feedback: fixpoint.FeedbackText, Coerce: "some"}).Validate(); err == nil {
		t.Fatal("coerce mode \"some\" accepted")
	}
}
