package repair

import (
	"fmt"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// Machine is the repair of a job under a document strategy (parallel,
// sequential, agent; fixpoint.Strategy.Document) as a state machine with
// no I/O of its own, like Step, but with more than one request
// outstanding at a time: the parallel strategy's chunk calls go out at
// once. Given a job and its attempts so far it says which requests to
// send; given each request's outcome it records the attempt and says what
// comes next. Drivers send the requests Next returns, feed each outcome
// with the request it answers, and call Next again when a Feed returns no
// new request while others are still outstanding.
//
// A Machine is not safe for concurrent use: a driver that sends its
// requests at once feeds their outcomes one at a time.
type Machine interface {
	// Next returns the requests to send now: the new ones, each once
	// (none while the machine waits for requests already outstanding), a
	// transient failure to wait out, or done (see DocAction).
	Next() DocAction
	// Feed records the outcome of req, one of the requests Next returned:
	// the reply, or the provider's error after its transport retries.
	// started is when the request was sent. It returns the attempt
	// recorded and what comes next, as Next would. Feeding a request that
	// is not outstanding is a driver bug and panics.
	Feed(req *fixpoint.Request, resp *fixpoint.Response, err error, started time.Time) (*fixpoint.Attempt, DocAction)
	// Outstanding is the attempt req records if the worker stops before
	// its reply is fed: the request, sent at at, with no reply (see
	// Step.Outstanding). nil when req is not outstanding.
	Outstanding(req *fixpoint.Request, at time.Time) *fixpoint.Attempt
	// Stop ends the job without another call (see Step.Stop); requests
	// still outstanding are dropped, their replies never fed.
	Stop(status fixpoint.Status, class, msg string)
	// Result is the job's result so far: every attempt recorded, the
	// totals over them all; final once Next says done.
	Result() *fixpoint.Result
}

// DocAction is what a Machine asks of its driver next.
type DocAction struct {
	// Requests, when not empty, are the calls to make now, in any order
	// and at once; feed each outcome with its request.
	Requests []*fixpoint.Request
	// Err, when not nil, says the job must be run again later (it matches
	// ErrTransient), as Action.Err does.
	Err error
	// Waiting says no new request goes out until an outstanding one is
	// fed.
	Waiting bool
}

// Done reports whether the job is final.
func (a DocAction) Done() bool { return len(a.Requests) == 0 && a.Err == nil && !a.Waiting }

// StartDocument begins the repair of job under its document strategy, or
// continues it from prev, the result of an earlier run of the same job
// (its attempts say which chunks are done and where the conversation
// was). An error matches ErrBadJob: the job can never run as it is (no
// document, a strategy that is no document strategy, a mode other than
// prompt, chunk sizes out of range).
func StartDocument(job *Job, prev *fixpoint.Result, cfg Config) (Machine, error) {
	switch job.Limits.Strategy {
	case fixpoint.StrategyParallel, fixpoint.StrategySequential:
		return startChunked(job, prev, cfg)
	case fixpoint.StrategyAgent:
		return startAgent(job, prev, cfg)
	}
	return nil, fmt.Errorf("%w: strategy %q is not a document strategy", fixpoint.ErrBadJob, job.Limits.Strategy)
}
