package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sourcegraph/conc/panics"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/ledgerrow"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// resultWrite is a delivery's final result on its way to the ledger; its
// message is disposed of once the write is over.
type resultWrite struct {
	msg       jetstream.Msg
	env       *queue.Envelope
	delivered int
	// row is the store's form of the result, the delivery's holds on the
	// batch's budget with it (dropped by the write).
	row      store.Result
	stopBeat func()
	salvaged bool // row is what the ledger could take of a refused result
}

// finish hands a final result to the batched writer and returns, freeing
// the job's slot; its message is disposed of once the write is over
// (written). Progress is reported until then.
func (w *Worker) finish(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, res *fixpoint.Result) {
	w.finishFrom(ctx, msg, env, res, 0)
}

// finishFrom is finish for a result whose first recorded attempts the
// ledger has already (a batch-delivery job finishing realtime).
func (w *Worker) finishFrom(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, res *fixpoint.Result, recorded int) {
	rw := &resultWrite{msg: msg, env: env, delivered: deliveredOf(msg), stopBeat: w.heartbeat(msg)}
	// Only the store's form of the result waits for the commit: res, with
	// its per-attempt values and feedback, is garbage from here on.
	rw.row = ledgerrow.Result(res, env, rw.delivered)
	rw.row.Recorded = recorded
	rw.row.Holds = w.holds.of(journalKey(env.JobID, rw.delivered))
	w.submitted.Add(1)
	w.writer.submit(rw.row, func(won bool, err error) {
		defer w.submitted.Done()
		// Not on the writer's callback: waiting out a ledger outage
		// there would hold the commits of every other result.
		w.background.Go(func() { w.written(ctx, rw, won, err) })
	})
}

// written ends a result's write, whose first try came out won and err,
// and disposes of its message: acked once the rows are committed; the job
// dead when the ledger refuses even the calls' bare counts; handed back,
// the result kept on disk, when the worker stops with the ledger down.
func (w *Worker) written(ctx context.Context, rw *resultWrite, won bool, err error) {
	if err != nil {
		won, err = w.rewrite(ctx, rw, err)
	}
	rw.stopBeat()
	r := &rw.row
	switch {
	case store.IsRefused(err):
		// Writing it again cannot help, and handing the job back would
		// pay for its calls again on every delivery.
		w.log.ErrorContext(ctx, "worker: ledger refused the result, even without its text", slog.String("job_id", r.JobID),
			slog.Int("calls", len(r.AttemptRows)), slog.String("error", err.Error()))
		w.dispose(ctx, rw.msg, rw.env, queue.Disposition{Kind: queue.DispDead, Cause: fmt.Errorf("ledger refused the result: %w", err)})
	case err != nil:
		// Stopping with the ledger down: the job is handed back, and its
		// result, paid for, is kept on disk for the next worker.
		if w.spill.add(spillRecord{Result: r}) {
			w.log.WarnContext(ctx, "worker: ledger unreachable at stop: result kept on disk", slog.String("job_id", r.JobID), slog.String("error", err.Error()))
		}
		w.dispose(ctx, rw.msg, rw.env, w.decide(ctx, rw.delivered, fmt.Errorf("%w: write result: %w", fixpoint.ErrTransient, err)))
	default:
		w.cfg.Metrics.observe(r, won)
		w.afterCommit(ctx, rw)
	}
}

// rewrite writes a result again after its write failed with err: while
// the ledger is down, the worker's ledger retry policy apart (the message
// kept, pulls paused); once as the ledger can take it when it refuses the
// result itself (salvage). It returns the last write's outcome; an error
// left is a refusal of the salvaged result, or the ledger still down as
// the worker stops.
func (w *Worker) rewrite(ctx context.Context, rw *resultWrite, err error) (won bool, _ error) {
	wait := newLedgerWait(ctx, w, w.log.With(slog.String("job_id", rw.row.JobID)),
		"worker: ledger write failed, retrying after a pause (said once a second)", &w.ledgerWarned)
	for {
		switch {
		case store.IsRefused(err) && !rw.salvaged:
			won, err = w.salvage(ctx, rw, err)
		case store.IsRefused(err) || err == nil:
			return won, err
		default:
			if !wait.next(err) {
				return won, err
			}
			won, err = w.writer.write(rw.row)
		}
	}
}

// salvage writes rw's result as the ledger can still take it after
// refusing it (store.Result.Salvage): the job failed, its value dropped,
// its calls kept, first with their text, then with their counts only. The
// calls were paid for: a refused row must not lose them.
func (w *Worker) salvage(ctx context.Context, rw *resultWrite, refusal error) (bool, error) {
	w.log.ErrorContext(ctx, "worker: ledger refused the result: recording its calls without what it refused, the job failed",
		slog.String("job_id", rw.row.JobID), slog.Int("calls", len(rw.row.AttemptRows)), slog.String("error", refusal.Error()))
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var won bool
	var err error
	rw.row, won, err = saveSalvaging(wctx, w.ledger, rw.row.Salvage(refusal, false))
	rw.salvaged = true
	return won, err
}

// afterCommit acks a committed result's message, after the test hook
// that runs between the commit and the ack.
func (w *Worker) afterCommit(ctx context.Context, rw *resultWrite) {
	if hook := w.cfg.afterCommit; hook != nil {
		if recovered := panics.Try(func() { hook(rw.row.JobID) }); recovered != nil {
			// The rows are committed: a redelivery is acked without a call.
			w.log.ErrorContext(ctx, "worker: after-commit hook panicked", slog.String("job_id", rw.row.JobID),
				slog.String("error", recovered.AsError().Error()))
			w.dispose(ctx, rw.msg, rw.env, queue.Disposition{Kind: queue.DispRelease, Cause: recovered.AsError()})
			return
		}
	}
	w.dispose(ctx, rw.msg, rw.env, queue.Disposition{Kind: queue.DispAck})
}
