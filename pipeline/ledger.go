package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/fixpoint-dev/fixpoint/store"
)

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// permanent marks an error retryLedger must not retry.
func permanent(err error) error { return permanentError{err} }

// retryLedger runs op until it succeeds, returns a permanent error or one
// the ledger refuses (store.IsRefused: the same data cannot succeed), or
// the worker stops, waiting out the rest with a ledgerWait. A ledger that
// is down is not the job's fault: the message is kept (its progress
// reported) and pulling pauses, instead of a nak that would count a
// delivery and let an outage burn jobs to dead.
func (w *Worker) retryLedger(ctx context.Context, log *slog.Logger, op func() error) error {
	wait := newLedgerWait(ctx, w, log, "worker: ledger unavailable, retrying (said once a second)", &w.ledgerReadWarned)
	for {
		err := op()
		var perm permanentError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &perm):
			return perm.err
		case store.IsRefused(err) || !wait.next(err):
			return err
		}
	}
}

// ledgerWait waits between tries of a ledger that cannot be reached, by
// the ledger's retry policy (store.DefaultRetryPolicy) with no bound in
// time, pausing pulls for each wait.
// It warns with msg, at most once a ledgerWarnEvery for all the waits
// sharing warned (unix ns of the last warning).
type ledgerWait struct {
	ctx     context.Context
	w       *Worker
	log     *slog.Logger
	msg     string
	warned  *atomic.Int64
	backoff backoff.BackOff
}

func newLedgerWait(ctx context.Context, w *Worker, log *slog.Logger, msg string, warned *atomic.Int64) *ledgerWait {
	return &ledgerWait{ctx: ctx, w: w, log: log, msg: msg, warned: warned, backoff: store.DefaultRetryPolicy.BackOff()}
}

// ledgerWarnEvery is how often a worker says the ledger is failing: one
// failed commit fails every result in it, and each job would say so.
const ledgerWarnEvery = time.Second

// next waits before the next try after err, false when the worker stops
// (or the job's context ends) first.
func (l *ledgerWait) next(err error) bool {
	if l.ctx.Err() != nil || l.w.stoppingNow() {
		return false
	}
	d := l.backoff.NextBackOff()
	l.w.pauseFor(d)
	if now, last := time.Now().UnixNano(), l.warned.Load(); now-last >= int64(ledgerWarnEvery) && l.warned.CompareAndSwap(last, now) {
		l.log.WarnContext(l.ctx, l.msg, slog.Duration("wait", d), slog.String("error", err.Error()))
	}
	return l.w.holdFor(l.ctx, d)
}

// saveSalvaging saves r; a result the ledger refuses for its data is saved
// as it can take it (store.Result.Salvage): first with its text, then with
// its calls' counts only. It returns the result last tried and whether it
// won. The calls were paid for: a refused row must not lose them.
func saveSalvaging(ctx context.Context, ledger Ledger, r store.Result) (store.Result, bool, error) {
	won, err := ledger.SaveResults(ctx, []store.Result{r})
	for _, bare := range []bool{false, true} {
		if !store.IsRefused(err) {
			break
		}
		refusal := err
		r = r.Salvage(refusal, bare)
		won, err = ledger.SaveResults(ctx, []store.Result{r})
	}
	return r, len(won) == 1 && won[0] && err == nil, err
}

// saveInterruptedSalvaging saves ins; when the ledger refuses them for
// their data, each is saved alone (saveEachSalvaging). refused reports
// the interruptions salvaged.
func saveInterruptedSalvaging(ctx context.Context, ledger Ledger, ins []store.Interruption) (refused int, err error) {
	err = ledger.SaveInterrupted(ctx, ins)
	if !store.IsRefused(err) || len(ins) == 0 {
		return 0, err
	}
	return saveEachSalvaging(ins, func(one []store.Interruption) error { return ledger.SaveInterrupted(ctx, one) })
}

// saveEachSalvaging saves each of ins alone with save; one the ledger
// refuses for its data is saved as the ledger can take its calls
// (store.Interruption.Salvage): with their text, then with their counts
// only. The calls were paid for: one refused row must neither lose them
// nor keep the others from the ledger. It returns how many were salvaged
// and the first refusal left, or stops at an error that is no refusal.
func saveEachSalvaging(ins []store.Interruption, save func([]store.Interruption) error) (refused int, first error) {
	for _, in := range ins {
		err := save([]store.Interruption{in})
		if store.IsRefused(err) {
			refused++
		}
		for _, bare := range []bool{false, true} {
			if !store.IsRefused(err) {
				break
			}
			err = save([]store.Interruption{in.Salvage(bare)})
		}
		switch {
		case err != nil && !store.IsRefused(err):
			return refused, err // the ledger is down: so it is for the rest
		case err != nil && first == nil:
			first = err
		}
	}
	return refused, first
}
