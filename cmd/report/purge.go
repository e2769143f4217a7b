package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

const purgeUsage = `Usage: report purge --older-than D [--batch B] [--dry-run] [flags]

Deletes the attempts (requests and reply text), the calls kept apart
(interrupted_attempts), the revalidations and the recorded wave requests
of the jobs that finished more than D ago (of batch B only with --batch),
a thousand jobs per transaction, oldest first, with progress on stderr.
Each job keeps its row (status, final value, totals) and is marked
purged; every rollup stays, so report summary, report failures and the
dashboard give the same figures after a purge. A purged job's page, and
report job, say that its attempts were purged. A cancelled job with
running totals keeps its attempts (its batch's cost counts them).

D is a Go duration (36h, 90m) or a number of days (30d).

  report purge --older-than 90d --dry-run
  report purge --older-than 30d --batch nightly-2026-01-05

A nightly cron line that keeps 90 days of attempts:

  15 3 * * * DATABASE_URL=postgres://... report purge --older-than 90d

Exit status: 0 done, 1 an error (an unknown batch), 2 bad usage.`

// purgeCommand is report purge.
type purgeCommand struct{ stdout, stderr io.Writer }

func (c *purgeCommand) Run(ctx context.Context, args []string) error {
	fs, dbURL := newFlagSet("purge", purgeUsage, ledgerEnv, c.stdout)
	olderThan := fs.String("older-than", "", "purge the jobs finished longer ago than this: a Go duration (36h) or days (30d); required")
	batch := fs.String("batch", "", "purge this batch's jobs only (default: every batch's)")
	dry := fs.Bool("dry-run", false, "count what would be purged; delete nothing")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	if *olderThan == "" {
		return usageError{Err: fmt.Errorf("--older-than is required: how long ago a job finished for its attempts to go (30d, 36h)")}
	}
	age, err := parseAge(*olderThan)
	if err != nil {
		return usageError{Err: fmt.Errorf("--older-than %q: %w", *olderThan, err)}
	}
	st, err := openLedger(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if *batch != "" {
		if err := needBatch(ctx, st, *batch); err != nil {
			return err
		}
	}
	before := time.Now().Add(-age)
	verb := "purged"
	if *dry {
		verb = "would purge"
	}
	var last time.Time
	res, err := st.Purge(ctx, store.PurgeParams{Before: before, Batch: *batch, DryRun: *dry,
		Progress: func(b string, done store.PurgeResult) {
			// A line a second at most: a large purge runs for minutes.
			if time.Since(last) < time.Second {
				return
			}
			last = time.Now()
			fmt.Fprintf(c.stderr, "purge: %s %d jobs, %d attempts so far (at %s)\n", verb, done.Jobs, done.Attempts, batchOf(b))
		}})
	fmt.Fprintf(c.stdout, "%s the attempts of %d jobs finished before %s: %d attempts, %d calls kept apart, %d revalidations, %d wave requests\n",
		verb, res.Jobs, before.UTC().Format(time.RFC3339), res.Attempts, res.Interrupted, res.Revalidations, res.WaveRequests)
	return err
}

func batchOf(b string) string {
	if b == "" {
		return "the jobs of no batch"
	}
	return "batch " + b
}

// parseAge reads --older-than: a positive Go duration, or a whole number
// of days ("30d"), which time.ParseDuration does not take.
func parseAge(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 {
			return 0, fmt.Errorf("want a positive whole number of days (30d) or a Go duration (36h)")
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive Go duration (36h, 90m) or a number of days (30d)")
	}
	return d, nil
}
