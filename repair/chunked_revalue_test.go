package repair_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// TestResumeFromLedgerRows: a parallel job continued from its attempts as
// the ledger keeps them, with no values (a wave's next wave, or realtime
// after its waves), asks for the same repair as the machine that fed the
// chunks: the merged value and the lost chunk only, not an empty value
// and the whole document.
func TestResumeFromLedgerRows(t *testing.T) {
	t.Parallel()
	first := map[int]string{0: `{"party": "Acme GmbH"}`, 1: `{"amount": "twelve hundred"}`, 2: `{"items": [{"name": "Acme Ltd"}]}`}
	for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyParallel, fixpoint.StrategySequential} {
		job := agreementJob(t, strategy, func(j *repair.Job) { j.Limits.MaxAttempts = 1 })
		m := startDoc(t, job, nil)
		reply := byChunk(first, nil, `{}`)
		var repairReq *fixpoint.Request
		act := m.Next()
		for queue := act.Requests; len(queue) > 0; {
			req := queue[0]
			queue = queue[1:]
			if partOf(req) < 0 {
				repairReq = req
				break
			}
			resp, err := reply(req)
			_, act = m.Feed(req, resp, err, time.Now())
			queue = append(queue, act.Requests...)
		}
		if repairReq == nil {
			t.Fatalf("%s: no repair request", strategy)
		}
		rows := slices.Clone(m.Result().Attempts)
		if n := len(rows); n != 4 || rows[3].Step != fixpoint.StepMerge {
			t.Fatalf("%s: %d attempts before the repair, want 3 chunks and the merge", strategy, n)
		}
		for i := range rows {
			rows[i].Value = nil // the ledger keeps none
		}
		again := startDoc(t, job, &fixpoint.Result{JobID: job.ID, Attempts: rows})
		next := again.Next()
		if len(next.Requests) != 1 {
			t.Fatalf("%s: resumed machine asks for %d requests, want the repair", strategy, len(next.Requests))
		}
		got, _ := json.Marshal(next.Requests[0])
		want, _ := json.Marshal(repairReq)
		if string(got) != string(want) {
			t.Errorf("%s: resumed repair request\n%s\nwant\n%s", strategy, got, want)
		}
	}
}
