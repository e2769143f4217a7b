package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/ledgerrow"
	"github.com/fixpoint-dev/fixpoint/internal/textclip"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// handBack returns a job that did not reach a final result to the queue:
// the calls it made are recorded as interrupted (they may have been paid
// for), then the message is negatively acknowledged, after at least the
// wait the provider asked for; at the last delivery the job is recorded
// dead instead.
func (w *Worker) handBack(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, delivered int, res *fixpoint.Result, cause error) {
	if res != nil && len(res.Attempts) > 0 {
		reason := store.InterruptHandedBack
		if ctx.Err() != nil || w.stoppingNow() {
			reason = store.InterruptShutdown
		}
		w.saveInterrupted(ctx, env, delivered, res.Attempts, reason, 0, w.holds.of(journalKey(env.JobID, delivered)))
	}
	w.dispose(ctx, msg, env, w.decide(ctx, delivered, cause))
}

// saveInterrupted records calls of a delivery that are not among its
// result's attempts: a delivery that ended without a result (with holds,
// its calls' holds on the batch's budget, dropped by the write), or the
// failed calls before an outage's hold-th wait. A failure to write them
// keeps them on disk (--spill-dir) and is logged: the job goes on either
// way.
func (w *Worker) saveInterrupted(ctx context.Context, env *queue.Envelope, delivered int, attempts []fixpoint.Attempt, reason string, hold int, holds []int64) {
	in := store.Interruption{JobID: env.JobID, Run: env.RunOrFirst(), Delivery: delivered, Reason: reason, Hold: hold, Holds: holds}
	for i := range attempts {
		in.Attempts = append(in.Attempts, ledgerrow.Attempt(&attempts[i]))
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	refused, err := saveInterruptedSalvaging(wctx, w.ledger, []store.Interruption{in})
	if refused > 0 {
		// The calls were paid for all the same: kept as the ledger could
		// take them.
		w.log.ErrorContext(ctx, "worker: ledger refused the calls kept apart from the job's result: recorded without what it refused",
			slog.String("job_id", env.JobID), slog.Bool("recorded", err == nil))
	}
	if err != nil {
		kept := w.spill.add(spillRecord{Interrupted: &in})
		w.log.WarnContext(ctx, "worker: record the calls kept apart from the job's result", slog.String("job_id", env.JobID),
			slog.String("reason", reason), slog.Int("calls", len(in.Attempts)), slog.Bool("kept_on_disk", kept), slog.String("error", err.Error()))
	}
}

// decide is the one place that turns why a job stopped short of a final
// result into what becomes of its message: a bad job is rejected; while
// stopping, it is released for redelivery once this worker's pull is over;
// otherwise it is handed back after a delay doubling with each delivery,
// never sooner than the provider asked (a Retry-After over what the client sleeps comes
// back here, not as a frozen lane), and at its last delivery it is dead.
func (w *Worker) decide(ctx context.Context, delivered int, cause error) queue.Disposition {
	switch {
	case errors.Is(cause, fixpoint.ErrBadJob):
		return queue.Disposition{Kind: queue.DispReject, Cause: cause}
	case ctx.Err() != nil || w.stoppingNow():
		return queue.Disposition{Kind: queue.DispRelease, Cause: cause}
	case delivered >= w.cfg.Queue.MaxDeliver:
		// The server will not send it again: record it dead now, with its
		// last error.
		return queue.Disposition{Kind: queue.DispDead, Cause: fmt.Errorf("delivered %d times without a final result; last error: %w", delivered, cause)}
	}
	delay := min(w.cfg.NakDelayMin<<min(delivered-1, 16), w.cfg.NakDelayMax)
	return queue.Disposition{Kind: queue.DispRetry, Delay: max(delay, serverWait(cause)), Cause: cause}
}

// dispose carries d out on msg. Acks wait for the server's confirmation; a
// rejected or dead job is recorded before its message is terminated, and
// if the record cannot be written the message is handed back instead:
// nothing is dropped unrecorded. Every ack, nak and term error is logged.
func (w *Worker) dispose(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, d queue.Disposition) {
	kind := d.Kind
	var err error
	switch d.Kind {
	case queue.DispAck, queue.DispSkip, queue.DispWave:
		// For queue.DispAck the result is committed: if the ack is lost, the
		// redelivery is acked without a call.
		err = confirmAck(ctx, msg, ackTryWait)
	case queue.DispRetry, queue.DispForeign:
		err = msg.NakWithDelay(d.Delay)
	case queue.DispRelease:
		// Not at once: this worker's last pull may still be open, and a
		// message back in it would be released again, a delivery spent
		// each time, until it is dead. Past the pull's wait, it goes to
		// another worker.
		err = msg.NakWithDelay(2 * w.cfg.FetchWait)
	case queue.DispReject, queue.DispDead:
		status := fixpoint.StatusRejected
		if d.Kind == queue.DispDead {
			status = fixpoint.StatusDead
		}
		if rerr := w.record(ctx, msg, env, status, d.Cause); rerr != nil {
			kind, err = queue.DispRetry, msg.NakWithDelay(w.cfg.NakDelayMin)
			break
		}
		err = msg.TermWithReason(textclip.Bytes(d.Cause.Error(), 200))
	}
	if err != nil {
		what := "worker: " + kind.Label()
		if kind == queue.DispAck || kind == queue.DispSkip {
			// A server lost or a consumer leader being elected: the ack
			// may be lost, which costs a redelivery and nothing more.
			what += " not confirmed (the result is committed: a redelivery is acked without a call)"
		}
		w.log.WarnContext(ctx, what, slog.String("job_id", jobIDOf(msg, env)), slog.String("error", err.Error()))
	}
	w.count(kind)
	traceDisposition(ctx, queue.Disposition{Kind: kind, Cause: d.Cause})
	// What the delivery's replies paid for is in the ledger or on disk.
	key := journalKey(jobIDOf(msg, env), deliveredOf(msg))
	w.journal.done(key)
	w.holds.end(key)
}

// ackTries and ackTryWait bound confirmAck: about the 10 s one ack was
// given before, in tries short enough to reach a consumer's new leader.
const (
	ackTries   = 3
	ackTryWait = 3 * time.Second
)

// confirmAck acks msg and waits for the server to confirm it, trying again
// when a try goes unanswered within wait. A consumer whose leader changes
// (a server of a cluster lost, a leader moved) drops, unanswered, the acks
// the old leader had not applied; the next try reaches the new one, where a
// lost ack would cost a redelivery after the ack wait. An ack of a message
// already acked is harmless, so a try answered late does no harm.
func confirmAck(ctx context.Context, msg jetstream.Msg, wait time.Duration) error {
	for try := 1; ; try++ {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
		err := msg.DoubleAck(actx)
		cancel()
		if err == nil || try == ackTries || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
	}
}

// deliveredOf is the queue's delivery count of msg, 1 when it cannot say.
func deliveredOf(msg jetstream.Msg) int {
	if meta, err := msg.Metadata(); err == nil {
		return int(meta.NumDelivered)
	}
	return 1
}

// record writes a rejected or dead job with its reason.
func (w *Worker) record(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, status fixpoint.Status, reason error) error {
	id := jobIDOf(msg, env)
	rj := store.Rejection{JobID: id, Reason: reason.Error(), Payload: msg.Data(), Status: status}
	if meta, err := msg.Metadata(); err == nil {
		rj.Deliveries = int(meta.NumDelivered)
	}
	if env != nil {
		rj.Batch = env.Batch
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := w.ledger.Reject(wctx, rj); err != nil {
		w.log.ErrorContext(ctx, "worker: record "+string(status)+" job", slog.String("job_id", id), slog.String("error", err.Error()))
		return err
	}
	w.log.WarnContext(ctx, "worker: job "+string(status), slog.String("job_id", id), slog.String("reason", reason.Error()))
	w.cfg.Metrics.Jobs.WithLabelValues(string(status)).Inc()
	return nil
}

// settle carries out a disposition of a message of the dead-job advisory
// stream, logging its error.
func (w *Worker) settle(ctx context.Context, what string, err error) {
	if err != nil {
		w.log.WarnContext(ctx, "worker: "+what+" dead-job advisory", slog.String("error", err.Error()))
	}
}

// foreignCount counts one batch's foreign deliveries between error lines.
type foreignCount struct {
	mu     sync.Mutex
	logged time.Time
	n      int
}

// foreign hands back a job this worker's ledger never recorded: it was
// enqueued into another ledger (this worker's DATABASE_URL is not the one
// enqueue used), and running it here would ack it and write its result
// where nobody looks, leaving the real batch queued forever. It is never
// acked and nothing is written; an error line (one a minute per batch) and
// a metric make the misconfiguration loud.
func (w *Worker) foreign(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, delivered int) {
	w.cfg.Metrics.ForeignJobs.Inc()
	w.foreignAt.Store(time.Now().UnixNano())
	// Every nak counts a delivery against the job. A worker that has run
	// none of its own jobs lately, and whose ledger has none waiting, may
	// be the one on the wrong ledger: pause pulling, then pull one job at
	// a time until one is ours, so the jobs keep their deliveries for the
	// workers on the right ledger. Otherwise the job is another ledger's,
	// and pausing would only starve this worker's own jobs behind it (one
	// probe a minute met the next of many foreign jobs every time).
	if own := w.ownAt.Load(); own == 0 || time.Since(time.Unix(0, own)) > 2*w.cfg.ForeignDelay {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		waiting, err := w.ledger.HasQueuedJobs(qctx)
		cancel()
		if err != nil || !waiting {
			w.probing.Store(true)
			w.pauseFor(w.cfg.ForeignDelay)
		}
	}
	v, _ := w.foreignLog.LoadOrStore(env.Batch, &foreignCount{})
	fc := v.(*foreignCount)
	fc.mu.Lock()
	fc.n++
	if time.Since(fc.logged) >= time.Minute {
		w.log.ErrorContext(ctx, "worker: job not in this worker's ledger, handing it back: was it enqueued with another DATABASE_URL?",
			slog.String("job_id", env.JobID), slog.String("batch", env.Batch), slog.Int("delivery", delivered),
			slog.Int("foreign_deliveries", fc.n), slog.Duration("redelivery_in", 2*w.cfg.ForeignDelay))
		fc.logged, fc.n = time.Now(), 0
	}
	fc.mu.Unlock()
	// Back after twice the pause: the one job pulled after the pause is
	// then one of this worker's if there is any, not the same foreign job
	// again (which re-armed the pause, and this worker's jobs waited behind
	// the foreign ones until their deliveries ran out).
	w.dispose(ctx, msg, env, queue.Disposition{Kind: queue.DispForeign, Delay: 2 * w.cfg.ForeignDelay})
}

// count counts a message's disposition: in the metrics, and in the
// progress log's finished jobs (a message acked for its place in a wave
// is counted there when the wave finishes its job) or jobs put in waves.
func (w *Worker) count(kind queue.DispositionKind) {
	switch kind {
	case queue.DispWave:
		w.waved.Add(1)
	case queue.DispAck, queue.DispSkip, queue.DispReject, queue.DispDead:
		w.finished.Add(1)
	}
	w.cfg.Metrics.Dispositions.WithLabelValues(kind.Label()).Inc()
}
