package wave

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/ledgerrow"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A document job (fixpoint.Strategy.Document: parallel, sequential,
// agent) runs in waves through its repair.Machine instead of a Step: every
// request the Machine has outstanding goes into the same wave, each its own
// attempt and custom id (a parallel job's chunk calls at once; a
// sequential or agent job's one at a time). The Machine keeps nothing
// between waves: it is started again from the ledger's attempts of the job
// (repair.StartDocument continues from them) whenever a wave's results
// are fed or its next requests planned. Feeding a wave's replies in the
// order of their attempt numbers, all of a job's at once and recorded in
// one transaction, makes the rebuilt Machine ask for exactly the requests
// the wave holds, numbered as the wave numbered them, whatever order the
// provider answered in.

// ask is one request a job's next attempts make, with its attempt number.
type ask struct {
	req *fixpoint.Request
	no  int
}

// firstAsks starts the job's repair step or document Machine and returns
// its first requests; final, when not nil, is the job's result made
// before any call.
func firstAsks(job *repair.Job, cfg repair.Config, now time.Time) (asks []ask, final *fixpoint.Result, err error) {
	if !job.Limits.Strategy.Document() {
		step, err := repair.Start(job, nil, cfg)
		if err != nil {
			return nil, nil, err
		}
		act := step.Next()
		if act.Request == nil {
			return nil, step.Result(), nil
		}
		return []ask{{req: act.Request, no: 1}}, nil, nil
	}
	m, err := repair.StartDocument(job, nil, cfg)
	if err != nil {
		return nil, nil, err
	}
	return machineAsks(m, job.ID, now)
}

// machineAsks are the requests a Machine asks for now, each numbered as
// the Machine will number its attempt; final when it is done without
// one.
func machineAsks(m repair.Machine, jobID string, now time.Time) ([]ask, *fixpoint.Result, error) {
	act := m.Next()
	switch {
	case act.Err != nil:
		return nil, nil, act.Err
	case act.Done():
		return nil, m.Result(), nil
	case len(act.Requests) == 0:
		return nil, nil, fmt.Errorf("%w: job %s: its machine waits for a reply with no request outstanding", fixpoint.ErrTransient, jobID)
	}
	asks := make([]ask, 0, len(act.Requests))
	for _, req := range act.Requests {
		a := m.Outstanding(req, now)
		if a == nil {
			return nil, nil, fmt.Errorf("%w: job %s: a request its machine gave is not outstanding", fixpoint.ErrTransient, jobID)
		}
		asks = append(asks, ask{req: req, no: a.No})
	}
	return asks, nil, nil
}

// waveRequest is the wave request of a, one of env's next attempts, and
// the size of its line in the provider batch.
func waveRequest(client BatchClient, env *queue.Envelope, a ask, envJSON json.RawMessage) (store.WaveRequest, int64, error) {
	reqJSON, err := json.Marshal(a.req)
	if err != nil {
		return store.WaveRequest{}, 0, fmt.Errorf("%w: encode request: %v", fixpoint.ErrBadJob, err)
	}
	item, err := client.EncodeBatchItem(llm.BatchItem{CustomID: "w0-0", Request: *a.req})
	if err != nil {
		return store.WaveRequest{}, 0, fmt.Errorf("%w: %v", fixpoint.ErrBadJob, err)
	}
	r := store.WaveRequest{JobID: env.JobID, Run: env.RunOrFirst(), AttemptNo: a.no, Request: reqJSON, Envelope: envJSON}
	return r, int64(len(item)) + 16, nil // the custom id is longer than the placeholder
}

// heldOutcome is the reply (or failure) to one request of a wave, held
// until the outcomes of all its job's requests in the wave are in.
type heldOutcome struct {
	req  store.WaveRequest
	resp *fixpoint.Response
	err  error
}

// docMachine is a document job's Machine rebuilt from the ledger up to
// the attempts of a wave, and the requests it has outstanding by attempt
// number.
type docMachine struct {
	m    repair.Machine
	env  *queue.Envelope
	byNo map[int]*fixpoint.Request
}

// rebuildDocument starts job's Machine from the attempts the ledger has
// before attempt first (rows: the run's). nil, nil: attempt first is
// recorded already.
func (v *Driver) rebuildDocument(env *queue.Envelope, job *repair.Job, first int, rows []store.Attempt) (*docMachine, error) {
	var before []store.Attempt
	for _, a := range rows {
		if a.No >= first {
			return nil, nil
		}
		before = append(before, a)
	}
	m, err := repair.StartDocument(job, ledgerrow.ResultFrom(env.JobID, before), v.w.StepConfig(env.Provider, fixpoint.PriceBasisBatch))
	if err != nil {
		return nil, err
	}
	asks, _, err := machineAsks(m, env.JobID, v.clock.Now())
	if err != nil {
		return nil, err
	}
	d := &docMachine{m: m, env: env, byNo: map[int]*fixpoint.Request{}}
	for _, a := range asks {
		d.byNo[a.no] = a.req
	}
	return d, nil
}

// feedDocument feeds the outcomes of a document job's requests in the
// wave to its Machine rebuilt from the ledger, in the order of their
// attempt numbers, and queues their attempts (and the merge a last chunk
// brings, as Also), each with the job's totals, and the job's result when
// the Machine is done, all in one ledger transaction.
func (rs *waveResults) feedDocument(ctx context.Context, env *queue.Envelope, job *repair.Job, held []heldOutcome) error {
	slices.SortFunc(held, func(a, b heldOutcome) int { return cmp.Compare(a.req.AttemptNo, b.req.AttemptNo) })
	d, err := rs.v.rebuildDocument(env, job, held[0].req.AttemptNo, rs.prev[env.JobID])
	if err != nil {
		rs.log.ErrorContext(ctx, "worker: wave results of a document job that cannot be rebuilt", slog.String("job_id", env.JobID), slog.String("error", err.Error()))
		return nil // it stays placed; the next pass hands it to the queue
	}
	if d == nil {
		return nil // its attempts are recorded already
	}
	var outs []store.WaveOutcome
	var act repair.DocAction
	for _, h := range held {
		req := d.byNo[h.req.AttemptNo]
		if req == nil || d.m.Outstanding(req, rs.started) == nil {
			// The Machine rebuilt does not ask for it: the wave was
			// planned from other attempts. Its reply is not fed; the job
			// stays placed and goes on realtime from the ledger.
			rs.log.ErrorContext(ctx, "worker: a document job's wave request its machine does not ask for", slog.String("job_id", env.JobID),
				slog.Int("attempt", h.req.AttemptNo))
			return nil
		}
		before := len(d.m.Result().Attempts)
		var a *fixpoint.Attempt
		a, act = d.m.Feed(req, h.resp, h.err, rs.started)
		rs.traced.add(a, h.err)
		o := store.WaveOutcome{WaveID: rs.wave.ID, CustomID: h.req.CustomID, Attempt: ledgerrow.Attempt(a)}
		for _, also := range d.m.Result().Attempts[before:] {
			if also.No != a.No {
				o.Also = append(o.Also, ledgerrow.Attempt(&also))
			}
		}
		tot := ledgerrow.Result(d.m.Result(), env, 0)
		o.Totals = &tot
		outs = append(outs, o)
	}
	if act.Done() {
		// Final only now: its Machine has every outcome of the wave.
		last := &outs[len(outs)-1]
		last.Result, last.Totals = last.Totals, nil
	}
	rs.outs = append(rs.outs, outs...)
	return nil
}

// nextDocument is the requests of a placed document job's next attempts,
// from the attempts the ledger has of its run (rows); false when the job
// goes on realtime: it cannot be rebuilt, or its Machine asks for none.
func (v *Driver) nextDocument(p store.WaveRequest, env *queue.Envelope, job *repair.Job, rows []store.Attempt) ([]store.WaveRequest, bool) {
	d, err := v.rebuildDocument(env, job, len(rows)+1, rows)
	if err != nil || d == nil || len(d.byNo) == 0 {
		return nil, false
	}
	nos := make([]int, 0, len(d.byNo))
	for no := range d.byNo {
		nos = append(nos, no)
	}
	slices.Sort(nos)
	out := make([]store.WaveRequest, 0, len(nos))
	for _, no := range nos {
		b, err := json.Marshal(d.byNo[no])
		if err != nil {
			return nil, false
		}
		r := p
		r.CustomID, r.Recorded, r.AttemptNo, r.Request = "", false, no, b
		out = append(out, r)
	}
	return out, true
}
