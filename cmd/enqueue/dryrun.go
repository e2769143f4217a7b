package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// dryRun checks the dataset and prints what enqueue would do with it. A
// dry run records nothing, and migrates nothing either: a newer binary's
// dry run moved a shared ledger to a schema the running workers refused.
// On a ledger behind this binary, or a database not made yet, it estimates
// without it.
func dryRun(ctx context.Context, stdout, stderr io.Writer, dbURL string, cfg enqueue.Config, data io.Reader, limit int) error {
	st, err := store.Open(ctx, dbURL, nil)
	if store.IsNoDatabase(err) {
		// The real run creates it: the estimate needs none of it.
		fmt.Fprintf(stderr, "enqueue: the database %s does not exist yet (enqueue creates it): the dry run estimates without a ledger (no earlier batches to estimate from)\n", store.DatabaseName(dbURL))
		return dryRunReport(ctx, nil, cfg, data, limit, stdout)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	if applied, known, err := st.SchemaVersion(ctx); errors.Is(err, store.ErrUnreleasedLedger) {
		return err
	} else if err != nil || applied != known {
		fmt.Fprintf(stderr, "enqueue: the ledger is at migration %d of this binary's %d: the dry run reads nothing of it (no earlier batches to estimate from, no jobs it already holds)\n", applied, known)
		return dryRunReport(ctx, nil, cfg, data, limit, stdout)
	}
	return dryRunReport(ctx, st, cfg, data, limit, stdout)
}

// dryRunReport prints what enqueue would do with the dataset and what it
// would cost; it exits 1 (ErrTooManyBadRows) when the real run would stop
// on bad rows.
func dryRunReport(ctx context.Context, st enqueue.DryRunLedger, cfg enqueue.Config, data io.Reader, limit int, stdout io.Writer) error {
	rep, err := enqueue.DryRun(ctx, st, cfg, data, limit, nil)
	if errors.Is(err, enqueue.ErrBadConfig) {
		return usageError{Err: err}
	}
	if err != nil {
		return err
	}
	read := cli.Plural(rep.Rows, "row")
	if rep.Limited {
		read = fmt.Sprintf("the first %s (--limit)", cli.Plural(rep.Rows, "row"))
	}
	fmt.Fprintf(stdout, "dry run of batch %s: read %s: %d would be jobs, %d already enqueued, %d bad, %d repeated; nothing recorded or published\n",
		cfg.Batch, read, rep.Jobs, rep.Existing, len(rep.Bad), rep.Repeated)
	for _, b := range rep.Bad {
		fmt.Fprintf(stdout, "  bad row: %v\n", b)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stdout, "  warning: %s\n", w)
	}
	if rep.Jobs > 0 {
		writeEstimate(stdout, cfg, rep)
	}
	return rep.Refusal(cfg.MaxBadRows)
}

// writeEstimate prints the first job's prompt and what the batch would
// take and cost.
func writeEstimate(stdout io.Writer, cfg enqueue.Config, rep enqueue.DryRunReport) {
	fmt.Fprintf(stdout, "\n--- system prompt (every attempt) ---\n%s\n--- prompt of line %d ---\n%s\n---\n\n", rep.System, rep.PromptLine, rep.Prompt)
	from := "no earlier batch of this schema and model to measure: one attempt a job, repairs add more"
	if rep.Chunked {
		from = "the chunks of each job's document"
	} else if rep.Measured.Jobs > 0 {
		from = fmt.Sprintf("measured on %s of %s of this schema and model", cli.Plural(rep.Measured.Jobs, "job"), earlierBatches(rep.Measured.Batches))
	}
	fmt.Fprintf(stdout, "estimate: %s x %.2f attempts (%s)\n", cli.Plural(rep.Jobs, "job"), rep.Attempts, from)
	price := fmt.Sprintf("$%.4f at %s list prices", rep.CostUSD, cfg.Model)
	switch rep.PriceBasis {
	case fixpoint.PriceBasisBatch:
		price = fmt.Sprintf("$%.4f at %s batch prices", rep.CostUSD, cfg.Model)
	case fixpoint.PriceBasisFlex:
		price = fmt.Sprintf("$%.4f at %s flex prices (batch rates; a call that falls back to the default tier costs the list price)", rep.CostUSD, cfg.Model)
	}
	if !rep.PriceKnown {
		price = fmt.Sprintf("cost unknown: %s is not in the price table", cfg.Model)
		if _, priced := repair.DefaultPrices().Lookup(cfg.Model); priced && rep.MergeCalls > 0 {
			price = fmt.Sprintf("cost unknown: the merge model %s is not in the price table", cfg.Limits.MergeModel)
		}
	}
	fmt.Fprintf(stdout, "  ~%.0f input and ~%.0f output tokens an attempt: ~%.0f tokens in all, %s\n",
		rep.InputTokens, rep.OutputTokens, rep.Tokens, price)
	if rep.Documents > 0 {
		sends := "every attempt of a job sends its document"
		if rep.Chunked {
			sends = "each chunk call sends its chunk"
		}
		fmt.Fprintf(stdout, "  documents: %s, %d bytes, ~%.0f tokens (each stored once; %s)\n",
			cli.Plural(rep.Documents, "document"), rep.DocumentBytes, rep.DocumentTokens, sends)
	}
	if rep.MergeCalls > 0 {
		fmt.Fprintf(stdout, "  merge: %s to %s (one a job of two or more chunks), ~%.0f tokens, $%.4f (counted above)\n",
			cli.Plural(rep.MergeCalls, "call"), cfg.Limits.MergeModel, rep.MergeTokens, rep.MergeCostUSD)
	}
	if rep.Chunked {
		fmt.Fprintf(stdout, "  strategy %s: the attempts are its chunk calls, one per chunk of %d tokens; a lower bound: repairs of the merged value, the value so far a sequential call carries and an agent's further turns are not counted\n",
			cfg.Limits.Strategy, cfg.Limits.WithDefaults().ChunkTokens)
	}
	if rep.Limited {
		fmt.Fprintln(stdout, "  (for the rows read; the dataset has more)")
	}
}

// earlierBatches is "1 earlier batch" or "n earlier batches".
func earlierBatches(n int) string {
	if n == 1 {
		return "1 earlier batch"
	}
	return fmt.Sprintf("%d earlier batches", n)
}
