package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/internal/textclip"
	"github.com/fixpoint-dev/fixpoint/store"
)

const jobUsage = `Usage: report job ID [--format text|json] [flags]

Prints one job (its batch, row, status, provider, model and mode, and its
error) and each attempt of its latest run as a card: what the model
answered, where the JSON was found, the local repairs, the validation errors
and the feedback sent next. Calls kept apart from its result (interrupted
by a stop, an outage or a cancel) are listed after the cards. A document
job's steps (chunk n with its offsets, merge, repair, agent turn) follow
the cards, one line each: its outcome, the fields its value held, its tool
calls and a merge's conflicts. A requeued job's earlier runs are in
job_runs.

  report job nightly-2026-01-05:42

--format json writes the job, its attempts and its interrupted calls as one
JSON object, its fields documented in docs/report.md.

Exit status: 0 done, 1 an error (an unknown job), 2 bad usage.`

// jobCommand is report job.
type jobCommand struct{ stdout io.Writer }

func (c *jobCommand) Run(ctx context.Context, args []string) error {
	fs, dbURL := newFlagSet("job", jobUsage, ledgerEnv, c.stdout)
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
	return printJob(ctx, c.stdout, st, pos[0], *format)
}

// jobLedger is what report job reads. *store.Store satisfies it.
type jobLedger interface {
	Job(ctx context.Context, id string) (*store.JobRecord, []store.Attempt, error)
	JobInterrupted(ctx context.Context, id string) ([]store.InterruptedCalls, error)
}

var _ jobLedger = (*store.Store)(nil)

// printJob prints job id and its attempts in format.
func printJob(ctx context.Context, w io.Writer, st jobLedger, id, format string) error {
	job, attempts, err := st.Job(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no job %q in the ledger", id)
	}
	if err != nil {
		return err
	}
	if format == "json" {
		kept, err := st.JobInterrupted(ctx, id)
		if err != nil {
			return err
		}
		return writeJSON(w, jobData(job, attempts, kept))
	}
	run := ""
	if job.Run > 1 {
		// A requeued job: the cards are its latest run's; the runs before
		// it are in job_runs and their attempts keep their run number.
		run = fmt.Sprintf(", run %d (runs 1 to %d in job_runs)", job.Run, job.Run-1)
	}
	fmt.Fprintf(w, "job %s (batch %s, row %d%s): %s, %s/%s, %s mode\n", job.ID, job.Batch, job.RowNo, run, strings.ToUpper(string(job.Status)), job.Provider, job.Model, job.Mode)
	if job.Error != "" {
		fmt.Fprintf(w, "error: %s\n", job.Error)
	}
	res := &fixpoint.Result{JobID: job.ID, Status: fixpoint.Status(job.Status), Value: job.Value, Error: job.Error, Class: job.FinalClass,
		Calls: job.Calls, TokensIn: int(job.TokensIn), TokensOut: int(job.TokensOut), TokensCached: int(job.TokensCached),
		CostUSD: job.CostUSD, FirstAttemptValid: job.FirstAttemptValid, RepairedLocally: job.RepairedLocally,
		Wall: time.Duration(job.WallMS) * time.Millisecond}
	for i := range attempts {
		a := cli.AttemptFromStore(&attempts[i])
		if a.Valid {
			a.Value = job.Value
		}
		res.Attempts = append(res.Attempts, a)
	}
	if p := job.Purged; p != nil {
		fmt.Fprintf(w, "attempts purged %s by report purge (%d attempts, %d calls kept apart, of every run): the job's totals and its batch's figures still count them\n",
			p.At.UTC().Format(time.RFC3339), p.Attempts, p.Interrupted)
	}
	if len(res.Attempts) > 0 {
		cli.WriteCards(w, res)
	}
	writeJobSteps(w, attempts)
	kept, err := st.JobInterrupted(ctx, id)
	if err != nil {
		return err
	}
	writeInterrupted(w, kept)
	return nil
}

// writeJobSteps lists the steps of a document job's attempts, one line
// each, after the cards: which chunk each attempt read, what it found,
// and where a merge chose between the chunks. Nothing for a job of
// another strategy.
func writeJobSteps(w io.Writer, attempts []store.Attempt) {
	if !slices.ContainsFunc(attempts, func(a store.Attempt) bool { return a.Step != "" }) {
		return
	}
	fmt.Fprintln(w, "steps:")
	for _, a := range attempts {
		title := cmp.Or(a.Step, "attempt")
		if c := a.Chunk; c != nil {
			title += fmt.Sprintf(" %d [%d, %d)", c.N, c.Start, c.End)
		}
		outcome := a.Class
		if outcome == "" {
			outcome = "not valid"
			if a.Valid {
				outcome = "valid"
			}
		}
		line := fmt.Sprintf("  %d %s: %s", a.No, title, outcome)
		if a.Fields != nil {
			line += ", " + cli.Plural(int64(*a.Fields), "field")
		}
		if n := jsonLen(a.ToolCalls); n > 0 {
			line += ", " + cli.Plural(int64(n), "tool call")
		}
		var conflicts []fixpoint.Conflict
		if json.Unmarshal(a.Conflicts, &conflicts) == nil && len(conflicts) > 0 {
			paths := make([]string, len(conflicts))
			for i, c := range conflicts {
				paths[i] = cmp.Or(c.Path, "(root)")
			}
			line += fmt.Sprintf(", %s at %s", cli.Plural(int64(len(conflicts)), "conflict"), textclip.Bytes(strings.Join(paths, " "), 200))
		}
		fmt.Fprintln(w, line)
	}
}

// jsonLen is the length of a JSON array, 0 for none.
func jsonLen(r json.RawMessage) int {
	var a []json.RawMessage
	if json.Unmarshal(r, &a) != nil {
		return 0
	}
	return len(a)
}

// interruptedWhy says what each reason of interrupted_attempts means.
var interruptedWhy = map[string]string{
	store.InterruptHandedBack: "handed back to the queue",
	store.InterruptShutdown:   "cut off by a worker's stop",
	store.InterruptSuperseded: "another delivery, or a requeue's newer run, overtook it",
	store.InterruptOutage:     "failed while the provider was unavailable; the job waited",
	store.InterruptCancelled:  "of a delivery that enqueue cancel overtook",
	store.InterruptCrashed:    "made by a worker that died before it wrote them, kept by its reply journal",
}

// writeInterrupted lists a job's calls that are not among its result's
// attempts (interrupted_attempts), so that its attempts and calls add up.
func writeInterrupted(w io.Writer, kept []store.InterruptedCalls) {
	if len(kept) == 0 {
		return
	}
	fmt.Fprintln(w, "calls kept apart from the result (interrupted_attempts):")
	for _, c := range kept {
		where := fmt.Sprintf("run %d, delivery %d", c.Run, c.Delivery)
		if c.Hold > 0 {
			where += fmt.Sprintf(", before wait %d", c.Hold)
		}
		line := fmt.Sprintf("  %s: %s %s (%s)", where, cli.Plural(int64(c.Calls), "call"), c.Reason, interruptedWhy[c.Reason])
		if c.Paid > 0 {
			line += fmt.Sprintf(", %d paid, $%.6f", c.Paid, c.CostUSD)
		} else {
			line += ", none paid"
		}
		if c.LastError != "" {
			line += ": " + textclip.Runes(c.LastError, 160)
		}
		fmt.Fprintln(w, line)
	}
}
