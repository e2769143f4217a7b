package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// ledgerPause is how long pulling stops while the ledger cannot be written.
const ledgerPause = time.Second

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// permanent marks an error retryLedger must not retry.
func permanent(err error) error { return permanentError{err} }

// retryLedger runs op until it succeeds, returns a permanent error or one
// the ledger refuses (store.IsRefused), or the worker stops. A ledger that is down is not the job's fault: the message is
// kept (its progress reported) and pulling pauses, instead of a nak that
// would count a delivery and let an outage burn jobs to dead.
func (w *Worker) retryLedger(ctx context.Context, log *slog.Logger, op func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := op()
		if err == nil {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return perm.err
		}
		if store.IsRefused(err) {
			// The ledger refuses the write itself (a constraint, a value
			// out of range): trying again cannot help, and it held the
			// job (and a --drain run) forever.
			return err
		}
		log.WarnContext(ctx, "worker: ledger unavailable, retrying", slog.Duration("wait", wait), slog.String("error", err.Error()))
		w.pauseFor(wait)
		if !w.holdFor(ctx, wait) {
			return err
		}
		wait = min(2*wait, 5*time.Second)
	}
}
