package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/batchaction"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/store"
)

const capUsage = `Usage: enqueue cap --batch NAME [--max-cost-usd X|none] [--max-total-tokens N|none]

Sets, changes or removes the batch's spend cap. Every worker of the cluster
holds each call's estimate in the ledger before sending it, and charges its
real use with the call's row, so together they stay under the cap (the
estimate can be short by at most one call per worker). Every reply is
charged, whatever its usage says (usage that cannot be true is charged by
estimate). Jobs left when the cap is reached end
'over_budget'; raise the cap and requeue --status over_budget to run them.
The cost is estimated from the workers' price table (worker --prices over
the built-in one); a worker with no price for the batch's model cannot
enforce a cost cap and ends its jobs 'over_budget' without calling the
model, the reason naming the model. Prints what the batch has spent; with
neither flag it prints only that, changing nothing.

  enqueue cap --batch nightly-2026-01-05 --max-cost-usd 25
  enqueue requeue --batch nightly-2026-01-05 --status over_budget

Exit status: 0 done, 1 failed (no such batch), 2 bad usage.`

// capCommand is enqueue cap.
type capCommand struct{ stdout, stderr io.Writer }

func (c *capCommand) Run(ctx context.Context, args []string) error {
	fs := newSubFlagSet("cap", capUsage, c.stdout)
	var common commonFlags
	common.register(fs, false)
	cost := fs.String("max-cost-usd", "", "spend cap in US dollars (estimated cost); 'none' removes it")
	tokens := fs.String("max-total-tokens", "", "cap on input plus output tokens; 'none' removes it")
	if err := parseSub(fs, args, &common); err != nil {
		return err
	}
	st, err := openLedger(ctx, common.dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	batch := common.batch
	cur, err := st.BatchSpend(ctx, batch)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", enqueue.ErrNoBatch, batch)
	}
	if err != nil {
		return err
	}
	if *cost == "" && *tokens == "" {
		// No new cap: say the one it has and what it spent, changing
		// nothing.
		batchaction.WriteSpend(c.stdout, batch, cur)
		return nil
	}
	next, err := batchaction.NewCap(cur.Cap, *cost, *tokens, batchaction.CapNames{Cost: "--max-cost-usd", Tokens: "--max-total-tokens"})
	if err != nil {
		return usageError{Err: err}
	}
	sp, err := enqueue.SetCap(ctx, st, batch, next)
	if err != nil {
		return actionError(err)
	}
	batchaction.WriteSpend(c.stdout, batch, sp)
	for _, w := range batchaction.CapWarnings(ctx, st, batch, next, sp, "--max-cost-usd") {
		fmt.Fprintf(c.stderr, "enqueue cap: warning: %s\n", w)
	}
	return nil
}
