package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// watchDead records jobs the server gave up on (a worker died or timed out
// on their last delivery). The advisories are kept in their own stream, so
// the ones raised while no worker ran are handled at the next start.
func (w *Worker) watchDead(ctx context.Context, stream jetstream.Stream) {
	adv, err := w.js.Consumer(ctx, w.cfg.Queue.DeadStream(), w.cfg.Queue.DeadConsumer())
	if err != nil {
		if ctx.Err() == nil {
			w.log.ErrorContext(ctx, "worker: open dead-job advisories", slog.String("error", err.Error()))
		}
		return
	}
	for ctx.Err() == nil {
		batch, err := adv.Fetch(16, jetstream.FetchMaxWait(w.cfg.FetchWait))
		if err != nil {
			continue
		}
		for m := range batch.Messages() {
			w.handleDead(ctx, stream, m)
		}
	}
}

func (w *Worker) handleDead(ctx context.Context, stream jetstream.Stream, m jetstream.Msg) {
	a, err := queue.DecodeMaxDeliveries(m.Data())
	if err != nil {
		w.settle(ctx, "terminate", m.Term())
		return
	}
	raw, err := stream.GetMsg(ctx, a.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		w.settle(ctx, "ack", m.Ack()) // already acked or terminated
		return
	}
	if err != nil {
		w.settle(ctx, "nak", m.NakWithDelay(time.Second))
		return
	}
	env, _ := queue.DecodeEnvelope(raw.Data)
	id := fmt.Sprintf("seq-%d", a.StreamSeq)
	if env != nil && env.JobID != "" {
		id = env.JobID
	} else if h, ok := queue.JobIDFromMsgID(raw.Header.Get(jetstream.MsgIDHeader)); ok && h != "" {
		id = h
	}
	if env != nil && env.JobID != "" {
		// A job this ledger never recorded belongs to another ledger's
		// workers: leave the advisory to them.
		st, err := w.ledger.JobStates(ctx, []string{id})
		if err != nil {
			w.settle(ctx, "nak", m.NakWithDelay(time.Second))
			return
		}
		if _, ok := st[id]; !ok {
			w.log.ErrorContext(ctx, "worker: dead job not in this worker's ledger, leaving it for a worker on the right one",
				slog.String("job_id", id), slog.String("batch", env.Batch))
			w.settle(ctx, "nak", m.NakWithDelay(w.cfg.ForeignDelay))
			return
		}
	}
	rj := store.Rejection{JobID: id, Status: fixpoint.StatusDead, Payload: raw.Data, Deliveries: int(a.Deliveries),
		Reason: fmt.Sprintf("delivered %d times without a final result (the last delivery was never acknowledged)", a.Deliveries)}
	if env != nil {
		rj.Batch = env.Batch
	}
	if _, err := w.ledger.Reject(ctx, rj); err != nil {
		w.settle(ctx, "nak", m.NakWithDelay(time.Second))
		return
	}
	w.settle(ctx, "delete the message of a", stream.DeleteMsg(ctx, a.StreamSeq))
	w.log.WarnContext(ctx, "worker: job dead", slog.String("job_id", id), slog.Uint64("deliveries", a.Deliveries))
	w.settle(ctx, "ack", m.Ack())
}
