package main

import (
	"context"
	"io"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/store"
)

const failuresUsage = `Usage: report failures BATCH [--format text|json] [flags]

Prints why a batch's attempts failed: failure classes by attempt number,
how often a repair turned each class valid, the 15 most common error paths,
the rules of the schema that failed (by rule, path and severity), how the
strings and numbers of the final values were found in their source (by
field, the least grounded first: which fields the model invents), and the
jobs that ended without a result (dead, rejected, cancelled) with their
reasons.

  report failures nightly-2026-01-05

--format json writes one JSON object with every row (the text shows the
15 first of each list), its fields documented in docs/report.md.

Exit status: 0 done, 1 an error (an unknown batch), 2 bad usage.`

// failuresCommand is report failures.
type failuresCommand struct{ stdout io.Writer }

func (c *failuresCommand) Run(ctx context.Context, args []string) error {
	fs, dbURL := newFlagSet("failures", failuresUsage, ledgerEnv, c.stdout)
	format := formatFlag(fs)
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	st, err := openLedger(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	return writeFailures(ctx, c.stdout, st, pos[0], *format)
}

// failuresLedger is what report failures reads. *store.Store satisfies it.
type failuresLedger interface {
	batchLedger
	cli.ReportLedger
}

var _ failuresLedger = (*store.Store)(nil)

// writeFailures prints why batch's attempts failed in format.
func writeFailures(ctx context.Context, w io.Writer, l failuresLedger, batch, format string) error {
	if err := needBatch(ctx, l, batch); err != nil {
		return err
	}
	if format == "json" {
		data, err := failuresData(ctx, l, batch)
		if err != nil {
			return err
		}
		return writeJSON(w, data)
	}
	return cli.WriteFailureReport(ctx, w, l, batch, 15)
}
