package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/batchaction"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/web"
)

// actionsLedger is what the dashboard's batch actions read and change.
// *store.Store satisfies it.
type actionsLedger interface {
	enqueue.ActionLedger
	batchaction.CancelLedger
}

var _ actionsLedger = (*store.Store)(nil)

// ledgerActions are the dashboard's batch actions: what enqueue requeue,
// enqueue cancel and enqueue cap run (package enqueue's Requeue, Cancel and
// SetCap, with batchaction's parsing and texts), on the ledger st and the
// queue the serve flags name.
type ledgerActions struct {
	st actionsLedger
	// queue is where requeued jobs are published (unless the batch
	// recorded a stream of its own); nats connects to the queue's server,
	// for one requeue at a time, as enqueue requeue does.
	queue queue.Config
	nats  natsconn.Config
}

var _ web.Actions = (*ledgerActions)(nil)

// capNames name the dashboard form's cap fields in errors.
var capNames = batchaction.CapNames{Cost: "max cost (USD)", Tokens: "max total tokens"}

func (a *ledgerActions) Requeue(ctx context.Context, batch string, r web.RequeueRequest) (web.Outcome, error) {
	cfg := enqueue.RequeueConfig{Batch: batch, Jobs: r.Jobs, Statuses: r.Statuses, Class: r.Class, Model: r.Model, MaxAttempts: r.MaxAttempts, Queue: a.queue}
	if _, err := a.st.Batch(ctx, batch); err != nil {
		return web.Outcome{}, err // store.ErrNotFound: 404, before the queue is reached
	}
	conn, err := natsconn.Open(a.nats, nil)
	if err != nil {
		return web.Outcome{}, fmt.Errorf("reach the queue to publish the requeued jobs: %w", err)
	}
	defer conn.Close()
	rep, err := enqueue.Requeue(ctx, conn.JS, a.st, cfg)
	if err != nil {
		return web.Outcome{}, actionErr(err)
	}
	var buf bytes.Buffer
	batchaction.WriteRequeued(&buf, cfg, rep)
	if left := len(r.Jobs) - (store.RequeueResult{Jobs: rep.Jobs}).Total(); len(r.Jobs) > 0 && left > 0 {
		fmt.Fprintf(&buf, "%d of the %d jobs chosen %s not requeued: not final yet, or not of batch %s\n",
			left, len(r.Jobs), map[bool]string{true: "was", false: "were"}[left == 1], batch)
	}
	return outcome(buf.String(), nil), nil
}

func (a *ledgerActions) Cancel(ctx context.Context, batch string, r web.CancelRequest) (web.Outcome, error) {
	if len(r.Jobs) > 0 {
		n, err := enqueue.CancelJobs(ctx, a.st, batch, r.Jobs)
		if err != nil {
			return web.Outcome{}, actionErr(err)
		}
		text := fmt.Sprintf("batch %s: cancelled %d of the %d jobs chosen", batch, n, len(r.Jobs))
		if n < len(r.Jobs) {
			text += "; the others were final already, or not of the batch"
		}
		return outcome(text, nil), nil
	}
	before, _ := a.st.Batch(ctx, batch) // its marks, to say what the cancel ended
	n, err := enqueue.Cancel(ctx, a.st, batch)
	if err != nil {
		return web.Outcome{}, actionErr(err)
	}
	var buf bytes.Buffer
	batchaction.WriteCancelled(ctx, &buf, a.st, before, batch, n)
	return outcome(buf.String(), nil), nil
}

func (a *ledgerActions) SetCap(ctx context.Context, batch string, r web.CapRequest) (web.Outcome, error) {
	cur, err := a.st.BatchSpend(ctx, batch)
	if err != nil {
		return web.Outcome{}, err
	}
	next, err := batchaction.NewCap(cur.Cap, r.MaxCostUSD, r.MaxTotalTokens, capNames)
	if err != nil {
		return web.Outcome{}, web.BadAction(err)
	}
	sp, err := enqueue.SetCap(ctx, a.st, batch, next)
	if err != nil {
		return web.Outcome{}, actionErr(err)
	}
	var buf bytes.Buffer
	batchaction.WriteSpend(&buf, batch, sp)
	return outcome(buf.String(), batchaction.CapWarnings(ctx, a.st, batch, next, sp, "a cost cap")), nil
}

// actionErr maps an action's error to the dashboard's: bad settings are
// the request's fault, a batch the ledger lacks is not found.
func actionErr(err error) error {
	switch {
	case errors.Is(err, enqueue.ErrBadConfig):
		return web.BadAction(err)
	case errors.Is(err, enqueue.ErrNoBatch) && !errors.Is(err, store.ErrNotFound):
		return notFound{err}
	}
	return err
}

// notFound is an error that is store.ErrNotFound too, its message unchanged.
type notFound struct{ error }

func (e notFound) Unwrap() error        { return e.error }
func (e notFound) Is(target error) bool { return target == store.ErrNotFound }

// outcome splits what the commands print into sentences, the lines
// starting "warning: " apart.
func outcome(text string, warnings []string) web.Outcome {
	o := web.Outcome{Warnings: warnings}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if w, ok := strings.CutPrefix(line, "warning: "); ok {
			o.Warnings = append(o.Warnings, w)
		} else if line != "" {
			o.Lines = append(o.Lines, line)
		}
	}
	return o
}
