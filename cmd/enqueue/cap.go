package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/store"
)

const capUsage = `Usage: enqueue cap --batch NAME [--max-cost-usd X|none] [--max-total-tokens N|none]

Sets, changes or removes the batch's spend cap. Every worker of the cluster
holds each call's estimate in the ledger before sending it and charges its
real use after, so together they stay under the cap (the estimate can be
short by at most one call per worker). Jobs left when the cap is reached end
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
		writeSpend(c.stdout, batch, cur)
		return nil
	}
	next, err := newCap(cur.Cap, *cost, *tokens)
	if err != nil {
		return err
	}
	sp, err := enqueue.SetCap(ctx, st, batch, next)
	if err != nil {
		return actionError(err)
	}
	if next.MaxCostUSD != nil {
		warnUnpricedBatch(ctx, c.stderr, st, batch)
	}
	writeSpend(c.stdout, batch, sp)
	if (sp.MaxCostUSD != nil && sp.CostUSD >= *sp.MaxCostUSD) || (sp.MaxTotalTokens != nil && sp.Tokens >= *sp.MaxTotalTokens) {
		fmt.Fprintf(c.stderr, "enqueue cap: warning: batch %s has already spent what the new cap allows: its jobs not final yet end over_budget without another call\n", batch)
	}
	return nil
}

// newCap is cur with the caps the flags give (empty: unchanged).
func newCap(cur store.Cap, cost, tokens string) (store.Cap, error) {
	next := cur
	var err error
	if cost != "" {
		if next.MaxCostUSD, err = parseCost(cost); err != nil {
			return next, usageError{Err: err}
		}
	}
	if tokens != "" {
		if next.MaxTotalTokens, err = parseTokens(tokens); err != nil {
			return next, usageError{Err: err}
		}
	}
	return next, nil
}

// warnUnpricedBatch warns when the batch's model has no price, so that a
// dollar cap is enforced only by workers given one.
func warnUnpricedBatch(ctx context.Context, w io.Writer, st *store.Store, batch string) {
	b, err := st.Batch(ctx, batch)
	if err != nil {
		return
	}
	var s struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(b.Settings, &s) == nil && s.Model != "" {
		warnUnpriced(w, "enqueue cap", s.Model)
	}
}

func writeSpend(w io.Writer, batch string, sp store.Spend) {
	fmt.Fprintf(w, "batch %s: cap %s; spent %d tokens, $%.6f; %d tokens, $%.6f held by calls in flight\n",
		batch, capText(sp.Cap), sp.Tokens, sp.CostUSD, sp.HeldTokens, sp.HeldCostUSD)
}

func capText(c store.Cap) string {
	if !c.Capped() {
		return "none"
	}
	var parts []string
	if c.MaxCostUSD != nil {
		parts = append(parts, fmt.Sprintf("$%g", *c.MaxCostUSD))
	}
	if c.MaxTotalTokens != nil {
		parts = append(parts, fmt.Sprintf("%d tokens", *c.MaxTotalTokens))
	}
	return strings.Join(parts, " and ")
}
