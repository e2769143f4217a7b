package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/enqueue"
)

const revalidateUsage = `Usage: enqueue revalidate --batch NAME --schema NEW.json [--replies] [--evidence MODE]
                          [--evidence-source S] [--dry-run]

Checks the stored values of a batch's final jobs (valid, and invalid ones'
last candidates) against another schema, its rules (x-fixpoint-rules) and the
evidence stage, with no provider call, and records the outcome as a new run
of the batch: each job valid or invalid in it, its earlier run kept in the
ledger (job_runs; revalidations holds what was checked, against which schema
by hash, and what came of it). With --replies a job whose value fails has its
stored replies checked too, the newest first, and passes with the first that
does. It prints how many still pass and which fail, by class and by path.

Then 'enqueue requeue --batch NAME --status invalid' runs only the jobs that
now fail, going on from the reply checked with the errors found as feedback,
on the new schema. The batch must be done (no job queued); one revalidate,
requeue or cancel of a batch runs at a time. --evidence and --evidence-source
default to the batch's. --dry-run prints the outcome and records nothing.

  enqueue revalidate --batch nightly-2026-01-05 --schema ticket-v2.json --replies

Exit status: 0 done (whether or not jobs fail the new schema: see the
counts), 1 failed (no such batch, jobs still queued, another action of the
batch in progress), 2 bad usage (a schema that does not compile, a rule that
does not compile).`

// revalidateCommand is enqueue revalidate.
type revalidateCommand struct{ stdout, stderr io.Writer }

func (c *revalidateCommand) Run(ctx context.Context, args []string) error {
	fs := newSubFlagSet("revalidate", revalidateUsage, c.stdout)
	var (
		common     commonFlags
		cfg        enqueue.RevalidateConfig
		schemaFile = fs.String("schema", "", "the JSON Schema (with its rules) to check the stored values against (required)")
		evidence   = fs.String("evidence", "", "the evidence stage: off, check or require (default: the batch's)")
		progress   = fs.Bool("progress", true, "say how many jobs are checked as it goes (on standard error)")
	)
	common.register(fs, false)
	fs.BoolVar(&cfg.Replies, "replies", false, "when a job's value fails, check its stored replies too (the newest first)")
	fs.StringVar(&cfg.EvidenceSource, "evidence-source", "", "what values are checked against: row, prompt or field:NAME (default: the batch's)")
	fs.BoolVar(&cfg.DryRun, "dry-run", false, "check and print, record nothing")
	if err := parseSub(fs, args, &common); err != nil {
		return err
	}
	if *schemaFile == "" {
		return usageError{Err: errors.New("--schema is required")}
	}
	var err error
	if cfg.Schema, err = cli.ReadTextFile(*schemaFile); err != nil {
		return usageError{Err: fmt.Errorf("read schema: %w", err)}
	}
	if *evidence != "" {
		if cfg.Evidence, err = fixpoint.ParseEvidenceMode(*evidence); err != nil {
			return usageError{Err: fmt.Errorf("--evidence: %w", err)}
		}
	}
	if cfg.EvidenceSource != "" {
		if err := enqueue.CheckEvidenceSource(cfg.EvidenceSource, false); err != nil {
			return usageError{Err: fmt.Errorf("--evidence-source: %w", err)}
		}
	}
	if *progress {
		cfg.ProgressFunc = func(n int) { fmt.Fprintf(c.stderr, "revalidate: %s checked\n", cli.Plural(n, "job")) }
	}
	cfg.Batch = common.batch
	st, err := openLedger(ctx, common.dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := enqueue.Revalidate(ctx, st, cfg)
	if err != nil {
		return actionError(err)
	}
	writeRevalidated(c.stdout, cfg, rep)
	return nil
}

// writeRevalidated says what a revalidation found, and what to run next.
func writeRevalidated(w io.Writer, cfg enqueue.RevalidateConfig, rep enqueue.RevalidateReport) {
	what := fmt.Sprintf("recorded as run %d", rep.Run)
	if cfg.DryRun {
		what = "dry run, nothing recorded"
	}
	fmt.Fprintf(w, "batch %s: %s checked against schema %.12s (%s), evidence %s: %d still pass, %d fail",
		cfg.Batch, cli.Plural(rep.Checked, "job"), rep.SchemaHash, what, cfg.Evidence, rep.Pass, rep.Fail)
	if rep.FromReplies > 0 {
		fmt.Fprintf(w, " (%d pass with a stored reply)", rep.FromReplies)
	}
	fmt.Fprintln(w)
	if rep.Fail == 0 {
		return
	}
	fmt.Fprintln(w, "\nfailures by class:")
	for _, class := range slices.Sorted(maps.Keys(rep.Classes)) {
		fmt.Fprintf(w, "  %-10s %d\n", class, rep.Classes[class])
	}
	fmt.Fprintln(w, "\nerrors by path (the most frequent):")
	for _, p := range rep.TopPaths(10) {
		fmt.Fprintf(w, "  %-40s %d\n", p, rep.Paths[p])
	}
	if !cfg.DryRun {
		fmt.Fprintf(w, "\nto run the %s that fail again, from the reply checked with its errors as feedback:\n  enqueue requeue --batch %s --status invalid\n",
			cli.Plural(rep.Fail, "job"), cfg.Batch)
	}
}
