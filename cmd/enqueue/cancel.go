package main

import (
	"context"
	"fmt"
	"io"

	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/store"
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
	fmt.Fprintf(c.stdout, "batch %s: cancelled %d jobs not yet final\n", batch, n)
	if before != nil && before.Recording != nil {
		writeRecordingAfterCancel(ctx, c.stdout, st, before)
	}
	return nil
}

// writeRecordingAfterCancel says what became of the rows of a batch that
// was being recorded when it was cancelled: the rows a stopped enqueue
// never recorded are given up, and a live one records rows that will run.
func writeRecordingAfterCancel(ctx context.Context, w io.Writer, st *store.Store, before *store.Batch) {
	batch := before.Name
	after, err := st.Batch(ctx, batch)
	if p, perr := st.Progress(ctx, batch); err == nil && perr == nil && (after.Recording == nil || after.Recording.Runs < before.Recording.Runs) {
		fmt.Fprintf(w, "batch %s: the rows its stopped enqueue never recorded are given up: the batch ends with the %d jobs it holds\n", batch, p.Total)
	}
	if err == nil && after.Recording != nil && after.Recording.Live {
		fmt.Fprintf(w, "batch %s: an enqueue is still recording rows into it; they will run (a cancel ends the jobs it found)\n", batch)
	}
}
