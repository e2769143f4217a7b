package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A batch enqueued --delivery flex runs through the worker on the
// simulator's flex tier: every call asks for the tier; a call served on
// it is recorded and priced flex (batch rates); a call refused for want
// of capacity falls back to the default tier (FlexFallbackAfter is short
// here) and is recorded and priced realtime, its capacity retry kept. A
// spend cap charges what the attempts cost on their bases.
func TestFlexDeliveryEndToEnd(t *testing.T) {
	t.Parallel()
	simCfg := typical(t, 11)
	simCfg.FlexBusy = 0.3
	h := newHarness(t, harnessConfig{Sim: simCfg})
	const jobs = 60
	ecfg := h.enqueueConfig("flex")
	ecfg.Delivery = queue.DeliveryFlex
	capUSD := 100.0
	ecfg.Cap = store.Cap{MaxCostUSD: &capUSD}
	prog, err := enqueue.Run(h.ctx, h.js, h.st, ecfg, strings.NewReader(dataset(jobs)))
	if err != nil || prog.Published != jobs {
		t.Fatalf("enqueue: %+v, %v", prog, err)
	}
	cfg := h.workerConfig(h.client(func(c *llm.Config) { c.FlexFallbackAfter = time.Millisecond }))
	prices := repair.Prices{"sim-model": {InputPerMTok: 2, OutputPerMTok: 8, CachedInputPerMTok: 0.5}}
	cfg.Loop.Prices = prices
	rw := h.startWorker(cfg, nil, nil)
	h.waitDone("flex", jobs, 60*time.Second)
	if err := rw.stop(t, 30*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var flex, fellBack, capacityRetries int
	var spent float64
	for i := 1; i <= jobs; i++ {
		_, attempts, err := h.st.Job(context.Background(), jobID("flex", i))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range attempts {
			spent += a.CostUSD
			capacityRetries += strings.Count(string(a.RetryClasses), `"`+string(fixpoint.ClassCapacity)+`"`)
			if a.ProviderStatus != 200 {
				continue
			}
			want := prices.CostOn("sim-model", fixpoint.PriceBasis(a.PriceBasis), int(a.TokensIn), int(a.TokensOut), int(a.TokensCached), int(a.TokensCacheWrite))
			switch {
			case a.PriceBasis == "flex" && a.ServiceTier == "flex":
				flex++
			case a.PriceBasis == "realtime" && a.ServiceTier == "default":
				fellBack++
				if !strings.Contains(string(a.RetryClasses), string(fixpoint.ClassCapacity)) {
					t.Errorf("job %d attempt %d fell back with retries %s, want a capacity retry", i, a.No, a.RetryClasses)
				}
			default:
				t.Errorf("job %d attempt %d: basis %q, tier %q; want flex/flex or realtime/default", i, a.No, a.PriceBasis, a.ServiceTier)
			}
			if d := a.CostUSD - repair.LedgerCost(want); d > 1e-8 || d < -1e-8 || want == 0 {
				t.Errorf("job %d attempt %d: cost %v, want %v on basis %s", i, a.No, a.CostUSD, want, a.PriceBasis)
			}
		}
	}
	if flex == 0 || fellBack == 0 {
		t.Errorf("%d calls served flex, %d fell back; want some of each (FlexBusy 0.3)", flex, fellBack)
	}
	sp, err := h.st.BatchSpend(context.Background(), "flex")
	if err != nil {
		t.Fatal(err)
	}
	if d := sp.CostUSD - spent; d > 1e-6 || d < -1e-6 || sp.HeldCostUSD != 0 {
		t.Errorf("cap charged $%v (held $%v), the attempts cost $%v", sp.CostUSD, sp.HeldCostUSD, spent)
	}
	// Every refusal was retried inside its call, and recorded so.
	if got := h.sim.srv.Stats().Transport[sim.EventCapacity]; int(got) != capacityRetries {
		t.Errorf("simulator refused %d flex calls, the attempts record %d capacity retries", got, capacityRetries)
	}
}
