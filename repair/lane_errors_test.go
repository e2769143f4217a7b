package repair_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// TestStepModelNotFoundWaitsForTheModel: a model the provider does not
// have is wrong for every job of it, not for this one: the step asks the
// driver to keep the job (ErrTransient with ErrModelNotFound) instead of
// ending it failed, as it does for a refused key.
func TestStepModelNotFoundWaitsForTheModel(t *testing.T) {
	t.Parallel()
	for _, perr := range []*fixpoint.ProviderError{
		{Class: fixpoint.ClassModelNotFound, Status: 404, Code: "model_not_found", Message: "The model `m-test` does not exist"},
		{Class: fixpoint.ClassModelNotFound, Status: 404, Message: "model 'm-test' not found"},
	} {
		step, err := repair.Start(costJob(t), nil, repair.Config{Prices: costPrices})
		if err != nil {
			t.Fatal(err)
		}
		step.Next()
		a, act := step.Feed(nil, perr, time.Now())
		if act.Done() || !errors.Is(act.Err, fixpoint.ErrTransient) || !errors.Is(act.Err, fixpoint.ErrModelNotFound) {
			t.Fatalf("%v: next %+v; want the job kept (ErrTransient, ErrModelNotFound)", perr, act)
		}
		if a.ProviderClass != fixpoint.ClassModelNotFound || a.Class != fixpoint.OutcomeProvider || a.ProviderCode != perr.Code {
			t.Errorf("attempt class %q, provider class %q, code %q; want provider, model_not_found, the provider's code %q", a.Class, a.ProviderClass, a.ProviderCode, perr.Code)
		}
		// The driver kept the job: it goes on with the next call.
		if next := step.Next(); next.Request == nil {
			t.Errorf("after the wait: %+v, want the call again", next)
		}
	}
}
