package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// DocCallsMax bounds the calls one document job has in flight at once.
// The parallel strategy asks for every chunk at once; a 300-page filing is
// a hundred chunks, and sending them all would take every slot of the
// provider's lane (and its rate limit) from the other jobs of the pool
// while holding the budget of a hundred calls. Eight keep a document's
// wall time near one call's for the usual few chunks.
const DocCallsMax = 8

// docOutcome is what became of one call of a document job.
type docOutcome struct {
	req     *fixpoint.Request
	resp    *fixpoint.Response
	err     error
	started time.Time
	release func(*fixpoint.Attempt)
	span    trace.Span
	// gateErr: the gate refused the call, which was never sent.
	gateErr error
	// notSent: the call was stopped while it waited for its lane; the
	// provider never saw it.
	notSent bool
}

// docRun is one run of a document job's Machine: the requests waiting to
// go out, the calls in flight, and why the run stops sending.
type docRun struct {
	l     *Loop
	hooks LoopHooks
	// mu makes the Machine's methods one at a time: the send hooks of the
	// calls in flight ask it for their Outstanding attempts while the run
	// feeds another's outcome.
	mu       sync.Mutex
	m        repair.Machine
	pending  []*fixpoint.Request
	inFlight int
	outcomes chan docOutcome
	// stop, once set, is how the Machine ends when the calls in flight
	// have been fed (a gate's refusal); handBack, the error that returns
	// the job to the queue instead.
	stop     func()
	handBack error
	// last is the Machine's latest DocAction.
	last repair.DocAction
}

// resumeDocument runs job under its document strategy from prev (see
// Resume): every request of a DocAction goes out at once, up to
// DocCallsMax in flight, and the outcomes are fed to the Machine one at a
// time. A gate's refusal, a transient failure or a call stopped before it
// was sent ends the sending; the calls already in flight are waited for
// and fed, so that every paid reply is in the result.
func (l *Loop) resumeDocument(ctx context.Context, job *repair.Job, prev *fixpoint.Result, hooks LoopHooks) (*fixpoint.Result, error) {
	start := l.startDocument
	if start == nil {
		start = repair.StartDocument
	}
	m, err := start(job, prev, l.step)
	if err != nil {
		if prev != nil {
			return prev, err
		}
		return &fixpoint.Result{JobID: job.ID, StartedAt: l.cfg.NowFunc()}, err
	}
	r := &docRun{l: l, hooks: hooks, m: m, outcomes: make(chan docOutcome)}
	r.take(m.Next())
	for {
		if r.sending() {
			r.launch(ctx)
		}
		if r.inFlight > 0 {
			r.feed(<-r.outcomes)
			continue
		}
		if !r.sending() || r.last.Done() {
			break
		}
		// Nothing in flight and the Machine not done: the last Feed said
		// to wait for calls that have since been fed, so ask again.
		r.take(m.Next())
		if len(r.pending) == 0 && r.sending() && !r.last.Done() {
			r.handBack = fmt.Errorf("%w: job %s: the %s strategy waits for a reply with no call outstanding", fixpoint.ErrTransient, job.ID, job.Limits.Strategy)
		}
	}
	if r.handBack != nil {
		return m.Result(), r.handBack
	}
	if r.stop != nil {
		r.stop()
	}
	return m.Result(), nil
}

// sending reports whether the run still sends new calls.
func (r *docRun) sending() bool { return r.stop == nil && r.handBack == nil }

// take queues the requests of act, or ends the sending on its error.
func (r *docRun) take(act repair.DocAction) {
	r.last = act
	if act.Err != nil && r.handBack == nil {
		r.handBack = act.Err
	}
	r.pending = append(r.pending, act.Requests...)
}

// launch starts the pending calls, up to DocCallsMax in flight.
func (r *docRun) launch(ctx context.Context) {
	for r.inFlight < DocCallsMax && len(r.pending) > 0 {
		req := r.pending[0]
		r.pending = r.pending[1:]
		r.inFlight++
		go func() { r.outcomes <- r.call(ctx, req) }()
	}
}

// call is one call of the run, on its own goroutine: the gate, the send
// hook and the call's span are its own.
func (r *docRun) call(ctx context.Context, req *fixpoint.Request) docOutcome {
	o := docOutcome{req: req}
	if r.hooks.GateFunc != nil {
		o.release, o.gateErr = r.hooks.GateFunc(ctx, req)
		if o.gateErr != nil {
			return o
		}
	}
	o.started = r.l.cfg.NowFunc()
	var sent time.Time
	callCtx := llm.WithSendHook(ctx, func(at time.Time) {
		sent = at
		if r.hooks.SentFunc != nil {
			r.mu.Lock()
			a := r.m.Outstanding(req, at)
			r.mu.Unlock()
			if a != nil {
				r.hooks.SentFunc(a)
			}
		}
	})
	callCtx, o.span = r.l.startCall(callCtx, req)
	o.resp, o.err = r.l.client.Complete(callCtx, *req)
	if !sent.IsZero() {
		o.started = sent
	}
	le := (*fixpoint.ProviderError)(nil)
	o.notSent = o.err != nil && ctx.Err() != nil && errors.As(o.err, &le) && le.NotSent
	return o
}

// feed hands one outcome to the Machine, on the run's goroutine.
func (r *docRun) feed(o docOutcome) {
	r.inFlight--
	switch {
	case o.gateErr != nil:
		r.refused(o.gateErr)
		return
	case o.notSent:
		// Stopped while it waited for its lane: no call of the job (see
		// Resume). The job runs again.
		if o.release != nil {
			o.release(nil)
		}
		endCall(o.span, o.resp, o.err, nil)
		if r.handBack == nil {
			r.handBack = fmt.Errorf("%w: %w", fixpoint.ErrTransient, o.err)
		}
		return
	}
	r.mu.Lock()
	var a *fixpoint.Attempt
	var act repair.DocAction
	// A Machine that ended the job (its own error) may drop the requests
	// it had out; an outcome it no longer waits for is not fed.
	if r.m.Outstanding(o.req, o.started) != nil {
		a, act = r.m.Feed(o.req, o.resp, o.err, o.started)
	}
	r.mu.Unlock()
	endCall(o.span, o.resp, o.err, a)
	if o.release != nil {
		o.release(a)
	}
	if r.hooks.AttemptFunc != nil && a != nil {
		r.hooks.AttemptFunc(a)
	}
	if a == nil {
		return
	}
	if r.sending() {
		r.take(act)
	} else if act.Err != nil && r.handBack == nil && r.stop == nil {
		r.handBack = act.Err
	}
}

// refused ends the sending on a gate's refusal, as Resume does for one
// call: over budget or cancelled stops the Machine once the calls in
// flight are fed; another error hands the job back.
func (r *docRun) refused(err error) {
	if !r.sending() {
		return
	}
	r.pending = nil
	stop := func(status fixpoint.Status, class string) {
		r.stop = func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.m.Stop(status, class, err.Error())
		}
	}
	switch {
	case errors.Is(err, fixpoint.ErrOverBudget):
		stop(fixpoint.StatusOverBudget, fixpoint.OutcomeBudget)
	case errors.Is(err, fixpoint.ErrCancelled):
		stop(fixpoint.StatusCancelled, "")
	default:
		r.handBack = err
	}
}
