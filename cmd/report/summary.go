package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/store"
)

const summaryUsage = `Usage: report summary [BATCH] [--format text|json] [flags]

Prints one row per batch (only BATCH when given): jobs, valid rate,
first-attempt rate, repair rate, mean attempts, tokens and cost per valid
job, p50/p95 latency; every batch has the same columns. Below the table:
attempts of models with no price (a batch with some has its COST/VALID
marked *: those attempts count $0, unknown rather than free), what each
batch cost in all (requeued runs and interrupted calls included) and per
valid row, a capped batch's spend against its cap, rows a batch is short
of, what local repairs saved, and for a batch delivered in waves each wave,
the prompt-cache hit rate and the attempts and cost by price basis.

  report summary nightly-2026-01-05
  report summary nightly-2026-01-05 --format json | jq '.batches[0].cost.total_usd'

--format json writes the same as one JSON object, its fields documented in
docs/report.md.

Exit status: 0 done, 1 an error (an unknown batch), 2 bad usage.`

// summaryCommand is report summary.
type summaryCommand struct{ stdout io.Writer }

func (c *summaryCommand) Run(ctx context.Context, args []string) error {
	fs, dbURL := newFlagSet("summary", summaryUsage, ledgerEnv, c.stdout)
	format := formatFlag(fs)
	pos, err := parseArgs(fs, args, 0, 1)
	if err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	batch := ""
	if len(pos) == 1 {
		batch = pos[0]
	}
	st, err := openLedger(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	return writeSummary(ctx, c.stdout, st, batch, *format)
}

// summaryLedger is what report summary reads (summaryData too).
// *store.Store satisfies it.
type summaryLedger interface {
	rowsLedger
	wavesLedger
	Summary(ctx context.Context, batch string) ([]store.BatchSummary, error)
	UnpricedAttempts(ctx context.Context, batch string) ([]store.UnpricedCount, error)
	MissingModels(ctx context.Context, batch string) ([]store.MissingModel, error)
	BatchCosts(ctx context.Context, batch string) ([]store.BatchCost, error)
	InterruptedAnswered(ctx context.Context, batch string) (int64, error)
	BatchSpend(ctx context.Context, batch string) (store.Spend, error)
}

var _ summaryLedger = (*store.Store)(nil)

// writeSummary prints the summary of batch ("" for every batch) in format.
func writeSummary(ctx context.Context, w io.Writer, st summaryLedger, batch, format string) error {
	if batch != "" {
		if err := needBatch(ctx, st, batch); err != nil {
			return err
		}
	}
	rows, err := st.Summary(ctx, batch)
	if err != nil {
		return err
	}
	if batch != "" && len(rows) == 0 {
		// The batch exists and holds no jobs.
		rows = []store.BatchSummary{{Batch: batch}}
	}
	if format == "json" {
		data, err := summaryData(ctx, st, batch, rows)
		if err != nil {
			return err
		}
		return writeJSON(w, data)
	}
	unpriced, err := unpricedBatches(ctx, st, batch)
	if err != nil {
		return err
	}
	cli.WriteSummary(w, rows, unpriced)
	for _, section := range []func(context.Context, io.Writer, summaryLedger, string, []store.BatchSummary) error{
		writeMissingModels, writeUnpriced, writeCosts, writeCaps, writeMissingRows,
	} {
		if err := section(ctx, w, st, batch, rows); err != nil {
			return err
		}
	}
	return writeWaveSections(ctx, w, st, rows)
}

// writeMissingModels says which lanes (provider and model) of a batch
// found no such model at their provider: a set-up error, not the jobs'
// failure, whose jobs the workers hold queued.
func writeMissingModels(ctx context.Context, w io.Writer, st summaryLedger, batch string, _ []store.BatchSummary) error {
	missing, err := st.MissingModels(ctx, batch)
	if err != nil {
		return err
	}
	for _, m := range missing {
		fmt.Fprintln(w, "\n"+missingModelLine(m))
	}
	return nil
}

// missingModelLine is the summary's line on a lane whose model was not
// found.
func missingModelLine(m store.MissingModel) string {
	name := "batch " + m.Batch
	if m.Batch == "" {
		name = "jobs of no batch"
	}
	last := ""
	if !m.LastCall.IsZero() {
		last = ", the last at " + m.LastCall.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	line := fmt.Sprintf("model not found: %s, lane %s/%s: the provider has no model %q (%s answered model_not_found%s)",
		name, m.Provider, m.Model, m.Model, cli.Plural(int(m.Calls), "call"), last)
	if m.Queued == 0 {
		return line + "; none of its jobs is still queued"
	}
	return line + fmt.Sprintf("; %s of it wait queued, the lane stopped: pull the model (the workers try it again every 5 minutes), or fix the name with enqueue cancel --batch %s, then enqueue requeue --batch %s --status cancelled --model NAME",
		cli.Plural(int(m.Queued), "job"), m.Batch, m.Batch)
}

// unpricedBatches are the batches with attempts of their latest runs on a
// model with no price (batch "" for every batch).
func unpricedBatches(ctx context.Context, st summaryLedger, batch string) (map[string]bool, error) {
	unpriced, err := st.UnpricedAttempts(ctx, batch)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(unpriced))
	for _, u := range unpriced {
		out[u.Batch] = true
	}
	return out, nil
}

// writeUnpriced says which attempts had no price and count $0.
func writeUnpriced(ctx context.Context, w io.Writer, st summaryLedger, batch string, _ []store.BatchSummary) error {
	unpriced, err := st.UnpricedAttempts(ctx, batch)
	if err != nil {
		return err
	}
	for _, u := range unpriced {
		fmt.Fprintf(w, "\ncost unknown: %s of batch %s on %s had no price in the worker's table and count $0 (give the workers --prices with it)\n",
			cli.Plural(u.Attempts, "attempt"), u.Batch, u.Model)
	}
	return nil
}

// writeCosts says what each batch cost in all, with what a valid row cost:
// COST/VALID is the latest run's results, and requeues and interrupted
// calls cost too. Every batch has the line, a plain one too (the legend
// points to it).
func writeCosts(ctx context.Context, w io.Writer, st summaryLedger, batch string, rows []store.BatchSummary) error {
	costs, err := batchCosts(ctx, st, batch, rows)
	if err != nil {
		return err
	}
	for _, c := range costs {
		perValid := "no valid row"
		if c.PerValidRowUSD != nil {
			perValid = fmt.Sprintf("$%.6f a valid row", *c.PerValidRowUSD)
		}
		calls := cli.Plural(c.InterruptedCalls, "call")
		if c.InterruptedAnswered < c.InterruptedCalls {
			calls += fmt.Sprintf(" (%d of them answered)", c.InterruptedAnswered)
		}
		name := "batch " + c.batch
		if c.batch == "" {
			name = "jobs of no batch"
		}
		fmt.Fprintf(w, "\n%s cost $%.6f in all (%s): $%.6f in recorded attempts (of which $%.6f in runs a requeue replaced) and $%.6f in %s kept apart from the results (interrupted_attempts: see report job)\n",
			name, c.TotalUSD, perValid, c.AttemptsUSD, c.EarlierRunsUSD, c.InterruptedUSD, calls)
	}
	return nil
}

// costJSON is what a batch cost in all (summary's cost line).
type costJSON struct {
	batch string
	// TotalUSD is AttemptsUSD + InterruptedUSD.
	TotalUSD float64 `json:"total_usd"`
	// PerValidRowUSD is TotalUSD over the valid jobs, null for none.
	PerValidRowUSD *float64 `json:"per_valid_row_usd"`
	// AttemptsUSD is the calls recorded as attempts, every run's;
	// EarlierRunsUSD the part of it in runs a requeue replaced.
	AttemptsUSD    float64 `json:"attempts_usd"`
	EarlierRunsUSD float64 `json:"earlier_runs_usd"`
	// InterruptedUSD, InterruptedCalls and InterruptedAnswered are the
	// calls kept apart from the results (interrupted_attempts).
	InterruptedUSD      float64 `json:"interrupted_usd"`
	InterruptedCalls    int64   `json:"interrupted_calls"`
	InterruptedAnswered int64   `json:"interrupted_answered"`
}

// batchCosts is the cost of each batch of rows, in their order: $0 for a
// batch with no jobs (batch_spend has no row of it).
func batchCosts(ctx context.Context, st summaryLedger, batch string, rows []store.BatchSummary) ([]costJSON, error) {
	costs, err := st.BatchCosts(ctx, batch)
	if err != nil {
		return nil, err
	}
	byBatch := map[string]store.BatchCost{}
	for _, c := range costs {
		byBatch[c.Batch] = c
	}
	out := make([]costJSON, 0, len(rows))
	for _, r := range rows {
		c := byBatch[r.Batch]
		j := costJSON{batch: r.Batch, TotalUSD: c.TotalUSD, AttemptsUSD: c.FinalUSD, EarlierRunsUSD: c.EarlierRunsUSD,
			InterruptedUSD: c.InterruptedUSD, InterruptedCalls: c.InterruptedCalls}
		if r.Valid > 0 {
			v := c.TotalUSD / float64(r.Valid)
			j.PerValidRowUSD = &v
		}
		if c.InterruptedCalls > 0 {
			// Requests of a cancelled provider batch that never ran are
			// kept too, at no cost: 300 calls read as 300 paid ones.
			if j.InterruptedAnswered, err = st.InterruptedAnswered(ctx, r.Batch); err != nil {
				return nil, err
			}
		}
		out = append(out, j)
	}
	return out, nil
}

// writeCaps says a capped batch's cap and what it spent: jobs over it end
// over_budget, and nothing else said why.
func writeCaps(ctx context.Context, w io.Writer, st summaryLedger, _ string, rows []store.BatchSummary) error {
	for _, r := range rows {
		sp, err := st.BatchSpend(ctx, r.Batch)
		if err != nil {
			return err
		}
		if line := capLine(r.Batch, sp); line != "" {
			fmt.Fprintln(w, "\n"+line)
		}
	}
	return nil
}

// writeMissingRows says which batches are short of their datasets' rows.
func writeMissingRows(ctx context.Context, w io.Writer, st summaryLedger, _ string, rows []store.BatchSummary) error {
	for _, r := range rows {
		notes, err := missingRows(ctx, st, r.Batch)
		if err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintln(w, "\n"+n)
		}
	}
	return nil
}

// capLine says a capped batch's cap and its spend against it, "" for a
// batch without a cap.
func capLine(batch string, sp store.Spend) string {
	var parts []string
	if sp.MaxCostUSD != nil {
		parts = append(parts, fmt.Sprintf("$%.6f of its $%g cost cap", sp.CostUSD, *sp.MaxCostUSD))
	}
	if sp.MaxTotalTokens != nil {
		parts = append(parts, fmt.Sprintf("%d of its %d token cap", sp.Tokens, *sp.MaxTotalTokens))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("batch %s spent %s (jobs the cap stops end over_budget: raise it with enqueue cap, or, for a model the workers have no price for, give them one with worker --prices; then enqueue requeue --status over_budget)",
		batch, strings.Join(parts, " and "))
}
