package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// callOutcome is one request's outcome, as a Machine is fed it.
type callOutcome struct {
	req     *fixpoint.Request
	resp    *fixpoint.Response
	err     error
	started time.Time
}

// driveMachine runs job under its document strategy to its end, or to a
// transient failure, sending the requests the repair.Machine asks for at
// once and feeding their outcomes one at a time. It is the smallest
// driver a Machine allows, without the worker's budget gates and journal:
// the bench times the strategies, not the worker's ledger.
func driveMachine(ctx context.Context, client pipeline.Completer, job *repair.Job, prev *fixpoint.Result) (*fixpoint.Result, error) {
	m, err := repair.StartDocument(job, prev, repair.Config{Record: repair.RecordHash})
	if err != nil {
		if m != nil {
			return m.Result(), err
		}
		return nil, err
	}
	// Calls still in flight when the job ends (a Stop, a transient
	// failure) are cancelled with it; their goroutines end with them.
	jobCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	outs := make(chan callOutcome)
	inFlight := 0
	send := func(reqs []*fixpoint.Request) {
		for _, req := range reqs {
			inFlight++
			wg.Go(func() {
				o := callOutcome{req: req, started: time.Now()}
				var sent time.Time
				// Started when it leaves the lane, as the Loop records it.
				callCtx := llm.WithSendHook(jobCtx, func(at time.Time) { sent = at })
				o.resp, o.err = client.Complete(callCtx, *req)
				if !sent.IsZero() {
					o.started = sent
				}
				select {
				case outs <- o:
				case <-jobCtx.Done():
				}
			})
		}
	}
	act := m.Next()
	for {
		if act.Err != nil {
			return m.Result(), act.Err
		}
		send(act.Requests)
		if act.Done() {
			return m.Result(), nil
		}
		if inFlight == 0 {
			if act = m.Next(); act.Waiting && len(act.Requests) == 0 {
				return m.Result(), fmt.Errorf("job %s: the %s machine waits with no request outstanding", job.ID, job.Limits.Strategy)
			}
			continue
		}
		var o callOutcome
		select {
		case o = <-outs:
		case <-ctx.Done():
			return m.Result(), fmt.Errorf("%w: %w", fixpoint.ErrTransient, ctx.Err())
		}
		inFlight--
		_, act = m.Feed(o.req, o.resp, o.err, o.started)
	}
}
