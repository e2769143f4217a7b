package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/store"
)

// handBack returns a job that did not reach a final result to the queue:
// the calls it made are recorded as interrupted (they may have been paid
// for), then the message is negatively acknowledged, after at least the
// wait the provider asked for; at the last delivery the job is recorded
// dead instead.
func (w *Worker) handBack(ctx context.Context, msg jetstream.Msg, env *Envelope, delivered int, res *Result, cause error) {
	if res != nil && len(res.Attempts) > 0 {
		reason := store.InterruptHandedBack
		if ctx.Err() != nil || w.stoppingNow() {
			reason = store.InterruptShutdown
		}
		w.saveInterrupted(ctx, env, delivered, res, reason)
	}
	w.nak(ctx, msg, env, delivered, cause)
}

// saveInterrupted records the calls of a delivery that ended without a
// result. A failure is logged: the job is handed back either way.
func (w *Worker) saveInterrupted(ctx context.Context, env *Envelope, delivered int, res *Result, reason string) {
	in := store.Interruption{JobID: env.JobID, Run: env.RunOrFirst(), Delivery: delivered, Reason: reason}
	prices := w.prices()
	for i := range res.Attempts {
		a := toStoreAttempt(&res.Attempts[i])
		a.CostUSD = prices.Cost(cmp.Or(res.Attempts[i].Model, env.Model), res.Attempts[i].TokensIn, res.Attempts[i].TokensOut, res.Attempts[i].TokensCached)
		in.Attempts = append(in.Attempts, a)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := w.ledger.SaveInterrupted(wctx, []store.Interruption{in}); err != nil {
		w.log.WarnContext(ctx, "worker: record the calls of a job handed back", slog.String("job_id", env.JobID),
			slog.Int("calls", len(in.Attempts)), slog.String("error", err.Error()))
	}
}

// The dispositions, decided here and nowhere else.

func (w *Worker) ack(ctx context.Context, msg jetstream.Msg, kind string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := msg.DoubleAck(actx); err != nil {
		// The result is committed; a redelivery is acked without a call.
		w.log.WarnContext(ctx, "worker: ack", slog.String("error", err.Error()))
	}
	w.count(kind)
}

func (w *Worker) nak(ctx context.Context, msg jetstream.Msg, env *Envelope, delivered int, cause error) {
	if ctx.Err() != nil {
		// Shutting down: hand the job back for immediate redelivery.
		_ = msg.Nak()
		w.count("nak")
		return
	}
	delay := min(w.cfg.NakDelayMin<<min(delivered-1, 16), w.cfg.NakDelayMax)
	// Never sooner than the provider asked (a Retry-After over what the
	// client sleeps comes back here, not as a frozen lane).
	w.nakDelay(ctx, msg, env, delivered, max(delay, serverWait(cause)), cause)
}

func (w *Worker) nakDelay(ctx context.Context, msg jetstream.Msg, env *Envelope, delivered int, delay time.Duration, cause error) {
	if delivered >= w.cfg.Queue.MaxDeliver && ctx.Err() == nil {
		// The last delivery: the server will not send it again, so record
		// it dead with its last error now.
		w.reject(ctx, msg, env, store.StatusDead, fmt.Errorf("delivered %d times without a final result; last error: %w", delivered, cause))
		return
	}
	if ctx.Err() != nil {
		_ = msg.Nak()
	} else {
		_ = msg.NakWithDelay(delay)
	}
	w.count("nak")
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
func (w *Worker) foreign(ctx context.Context, msg jetstream.Msg, env *Envelope, delivered int) {
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.ForeignJobs.Inc()
	}
	// Every nak counts a delivery against the job: pause pulling, then pull
	// one job at a time until one is ours, so the jobs keep their
	// deliveries for the workers on the right ledger.
	w.probing.Store(true)
	w.foreignAt.Store(time.Now().UnixNano())
	w.pauseFor(w.cfg.ForeignDelay)
	v, _ := w.foreignLog.LoadOrStore(env.Batch, &foreignCount{})
	fc := v.(*foreignCount)
	fc.mu.Lock()
	fc.n++
	if time.Since(fc.logged) >= time.Minute {
		w.log.ErrorContext(ctx, "worker: job not in this worker's ledger, handing it back: was it enqueued with another DATABASE_URL?",
			slog.String("job_id", env.JobID), slog.String("batch", env.Batch), slog.Int("delivery", delivered),
			slog.Int("foreign_deliveries", fc.n), slog.Duration("redelivery_in", w.cfg.ForeignDelay))
		fc.logged, fc.n = time.Now(), 0
	}
	fc.mu.Unlock()
	if err := msg.NakWithDelay(w.cfg.ForeignDelay); err != nil {
		w.log.WarnContext(ctx, "worker: nak", slog.String("job_id", env.JobID), slog.String("error", err.Error()))
	}
	w.count("nak")
}

// reject records a job that will never be run (or is dead) with its reason,
// then terminates its message. If the record cannot be written the message
// is left for redelivery instead: nothing is dropped unrecorded.
func (w *Worker) reject(ctx context.Context, msg jetstream.Msg, env *Envelope, status string, reason error) {
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
		w.log.ErrorContext(ctx, "worker: record rejected job", slog.String("job_id", id), slog.String("error", err.Error()))
		_ = msg.NakWithDelay(w.cfg.NakDelayMin)
		w.count("nak")
		return
	}
	w.log.WarnContext(ctx, "worker: job "+status, slog.String("job_id", id), slog.String("reason", reason.Error()))
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.Jobs.WithLabelValues(status).Inc()
	}
	_ = msg.TermWithReason(truncate(reason.Error(), 200))
	w.count("term")
}

func (w *Worker) count(kind string) {
	if kind != "nak" {
		w.finished.Add(1)
	}
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.Dispositions.WithLabelValues(kind).Inc()
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
