package main

import (
	"context"
	"io"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/batchaction"
	"github.com/fixpoint-dev/fixpoint/enqueue"
)

const cancelUsage = `Usage: enqueue cancel --batch NAME

Ends every job of the batch that is not final yet as 'cancelled', without a
provider call: a worker that pulls one acks it unrun, and the result of a job
already in flight loses to the cancellation (its calls are kept in the ledger
as interrupted). Requeueing cancelled jobs (requeue --status cancelled) runs
them again. Repeating it cancels nothing more.

  enqueue cancel --batch nightly-2026-01-05

Exit status: 0 done, 1 failed (no such batch, or a requeue or cancel of it in
progress), 2 bad usage.`

// cancelCommand is enqueue cancel.
type cancelCommand struct{ stdout io.Writer }

func (c *cancelCommand) Run(ctx context.Context, args []string) error {
	fs := newSubFlagSet("cancel", cancelUsage, c.stdout)
	var common commonFlags
	common.register(fs, false)
	if err := parseSub(fs, args, &common); err != nil {
		return err
	}
	st, err := openLedger(ctx, common.dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	batch := common.batch
	before, _ := st.Batch(ctx, batch) // its marks, to say what the cancel ended
	n, err := enqueue.Cancel(ctx, st, batch)
	if err != nil {
		return actionError(err)
	}
	batchaction.WriteCancelled(ctx, c.stdout, st, before, batch, n)
	return nil
}
