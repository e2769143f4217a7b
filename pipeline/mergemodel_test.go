package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
)

// A parallel batch with a merge model end to end on the simulator,
// against the real queue and ledger: each job's merge is a call, its row
// of step merge with the merge model's name, tokens and cost at the merge
// model's price, counted in the job's calls; no merge by rule follows a
// merge reply with a value.
func TestMergeModelEndToEnd(t *testing.T) {
	t.Parallel()
	const n = 2
	h := newHarness(t, harnessConfig{})
	enqueueDocuments(h, "mm", n, fixpoint.StrategyParallel, func(l *fixpoint.Limits) {
		// The merged value of 500 subsidiaries is more than the 8,000
		// tokens a chunk's reply may take.
		l.MergeModel, l.TruncationMaxTokens = "gpt-4o", 32_000
	})
	rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
	h.waitDone("mm", n, 60*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	prices := repair.DefaultPrices()
	for i := range n {
		id := "mm:a" + string(rune('0'+i))
		j, as := h.job(id)
		calls, mergeCalls := 0, 0
		for _, a := range as {
			isCall := a.RequestHash != "" || a.Raw != "" || a.TokensIn+a.TokensOut > 0
			if isCall {
				calls++
			}
			if a.Step != string(fixpoint.StepMerge) {
				continue
			}
			if !isCall {
				t.Errorf("job %s: a merge by rule after the merge call, whose reply had a value (class %q)", id, a.Class)
				continue
			}
			mergeCalls++
			want := repair.LedgerCost(prices.Cost("gpt-4o", int(a.TokensIn), int(a.TokensOut), int(a.TokensCached)))
			if !strings.HasPrefix(a.Model, "gpt-4o") || strings.HasPrefix(a.Model, "gpt-4o-mini") || a.TokensOut == 0 || a.CostUSD != want {
				t.Errorf("job %s: merge row model %q, %d tokens out, $%v; want gpt-4o's reply at its price ($%v)", id, a.Model, a.TokensOut, a.CostUSD, want)
			}
		}
		if mergeCalls != 1 || int(j.Calls) != calls {
			t.Errorf("job %s: %d merge calls, %d calls in rows and %d on the job; want one merge call, every call counted", id, mergeCalls, calls, j.Calls)
		}
	}
	h.checkInvariants("mm", invariants{Jobs: n, Schema: sim.DocumentSchema})

	// A requeue to another strategy drops the merge model, saying so.
	rep, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "mm", Statuses: []fixpoint.Status{fixpoint.StatusValid},
		Strategy: fixpoint.StrategySequential, Queue: h.q, DryRun: true})
	if err != nil || rep.Settings.Limits.MergeModel != "" || len(rep.Warnings) == 0 || !strings.Contains(rep.Warnings[0], "merge model gpt-4o") {
		t.Errorf("requeue --strategy sequential: %v, merge model %q, warnings %v; want it dropped, saying so", err, rep.Settings.Limits.MergeModel, rep.Warnings)
	}
}
