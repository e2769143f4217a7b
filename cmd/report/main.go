// Command report runs the ledger's documented queries: batch summaries,
// failure classes, one job's attempts, exports and a progress wait. Plain SQL
// on the views stays the main interface; see the README.
package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsaddr"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/store"
)

const usage = `Usage: report COMMAND [flags]

  report summary [BATCH]          per-batch summary: jobs, valid rate, first-attempt rate,
                                  repair rate, mean attempts, tokens and cost per valid job, p50/p95;
                                  for a batch delivered in waves, each wave, the prompt-cache
                                  hit rate and the attempts and cost by price basis
  report failures BATCH           failure classes by attempt, repair effectiveness, top error paths
  report job ID                   one job and each attempt as a card
  report export BATCH [--format jsonl|csv]
                                  each job's input row and value, one line per job in row order
  report wait BATCH [--max-failure-rate R] [--timeout D]
                                  progress until every job is final; exit 1 when the share of
                                  jobs not valid exceeds R, when no job is valid (unless every
                                  one was cancelled), or when jobs are still queued after D
                                  (a batch with no jobs is done at once), or when jobs stop
                                  finishing and the queue (--nats-url, or the embedded one a
                                  worker serves from --nats-dir) holds none of their messages

A BATCH or ID that is not in the ledger is an error (exit 1); a batch with no
jobs is not.

Export formats:
  jsonl  {"id", "row", "status", "input": the input row, "value", "error"} per job.
  csv    the input's columns in the file's order (sorted for a batch enqueued
         before the order was recorded; keys only some rows have come after,
         sorted), then job_id, job_status, then one column per top-level
         property of the batch's schema in name order (the ledger keeps schemas
         with their keys sorted), then job_error. A property named like an input
         column or a job_ column is written as value.NAME, an input column named
         like a job_ column as input.NAME. Strings are written
         as themselves, other values as compact JSON, null or missing as empty;
         keys of a value that the schema does not list are left out (jsonl has
         the whole value). A schema without properties gives one job_value
         column (the whole value as JSON) instead of the property columns.

Exit status: 0 done, 1 an error or the failure rate over R, 2 bad usage.

Environment:
  DATABASE_URL       Postgres ledger (default postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable)
  NATS_URL           report wait: the queue's NATS server (empty: the embedded queue)
  FIXPOINT_NATS_DIR  report wait: the embedded queue's directory (default .fixpoint/nats)`

// commandFlags names the flags each command reads besides --database-url.
var commandFlags = map[string][]string{
	"export": {"format"},
	"wait":   {"max-failure-rate", "interval", "timeout", "nats-url", "nats-dir"},
}

// commandHelp prints the help of one command: its lines of the usage, the
// flags it reads, and for export the formats (report wait --help listed
// every command and --format). An unknown command gets the whole usage.
func commandHelp(w io.Writer, cmd string, fs *flag.FlagSet) {
	lines := strings.Split(usage, "\n")
	var own []string
	for i, l := range lines {
		if !strings.HasPrefix(l, "  report "+cmd+" ") && l != "  report "+cmd {
			continue
		}
		own = append(own, l)
		for _, c := range lines[i+1:] {
			if !strings.HasPrefix(c, "       ") { // a continuation is indented under the description
				break
			}
			own = append(own, c)
		}
	}
	if len(own) == 0 {
		fmt.Fprintln(w, usage)
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
		return
	}
	fmt.Fprintln(w, "Usage:")
	fmt.Fprintln(w, strings.Join(own, "\n"))
	only := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	only.SetOutput(w)
	for _, name := range append([]string{"database-url"}, commandFlags[cmd]...) {
		if f := fs.Lookup(name); f != nil {
			only.Var(f.Value, f.Name, f.Usage)
		}
	}
	fmt.Fprintln(w, "\nFlags:")
	only.PrintDefaults()
	if cmd == "export" {
		if i := strings.Index(usage, "Export formats:"); i >= 0 {
			end := strings.Index(usage[i:], "\n\n")
			fmt.Fprintln(w, "\n"+usage[i:i+end])
		}
	}
	if cmd == "wait" {
		fmt.Fprintln(w, "\nExit status: 0 done, 1 an error, not done in time or the failure rate over --max-failure-rate, 2 bad usage.")
	} else {
		fmt.Fprintln(w, "\nExit status: 0 done, 1 an error (an unknown batch or job), 2 bad usage.")
	}
	fmt.Fprintln(w, "\nEnvironment:\n  DATABASE_URL  Postgres ledger (default postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable)")
}

// usageError marks errors caused by how the command was called (exit 2).
type usageError = cliflags.UsageError

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	var uerr usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &uerr):
		// The one line says what is wrong; the usage after it scrolled it
		// out of sight.
		if !strings.Contains(err.Error(), "--help") {
			err = fmt.Errorf("%w (see report --help)", err)
		}
		fmt.Fprintf(stderr, "report: %v\n", err)
		return 2
	case errors.Is(err, store.ErrBadURL):
		fmt.Fprintf(stderr, "report: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "report: %v\n", err)
		return 1
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, usage)
		if len(args) == 0 {
			return usageError{Err: errors.New("no command")}
		}
		return nil
	}
	cmd := args[0]
	if c := cliflags.CommandAfterFlags(args, "summary", "failures", "job", "export", "wait"); c != "" {
		return usageError{Err: fmt.Errorf("%q comes first, before any flag: report %s [flags]", c, c)}
	}
	if strings.HasPrefix(cmd, "-") {
		return usageError{Err: fmt.Errorf("a command comes first, before any flag (%s is a flag): report summary|failures|job|export|wait [flags]", cmd)}
	}
	fs := flag.NewFlagSet("report "+cmd, flag.ContinueOnError)
	fs.SetOutput(stdout)
	dbURL := fs.String("database-url", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable"), "Postgres URL of the ledger")
	format := fs.String("format", "jsonl", "export format: jsonl or csv")
	maxFail := fs.Float64("max-failure-rate", 1, "report wait: exit 1 when (jobs not valid)/(jobs) exceeds this")
	every := fs.Duration("interval", time.Second, "report wait: how often to poll")
	timeout := fs.Duration("timeout", 0, "report wait: exit 1 when the batch is not done after this long (0 = wait as long as it takes)")
	natsURL := fs.String("nats-url", envOr("NATS_URL", ""), "report wait: the queue's NATS server (env NATS_URL), to see whether it still holds jobs that stop finishing; empty: the embedded queue a running worker serves from --nats-dir")
	natsDir := fs.String("nats-dir", envOr("FIXPOINT_NATS_DIR", natsaddr.DirDefault), "report wait: the embedded queue's directory (env FIXPOINT_NATS_DIR)")
	fs.Usage = func() { commandHelp(stdout, cmd, fs) }
	// Flags may come before or after the positional argument.
	pos, err := cliflags.ParseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	// A flag another command reads was ignored: report export --timeout.
	var misplaced error
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "database-url" || slices.Contains(commandFlags[cmd], f.Name) || misplaced != nil {
			return
		}
		for other, names := range commandFlags {
			if slices.Contains(names, f.Name) {
				misplaced = usageError{Err: fmt.Errorf("--%s is for report %s, not %s", f.Name, other, cmd)}
			}
		}
	})
	if misplaced != nil {
		return misplaced
	}
	arg := func() (string, error) {
		if len(pos) != 1 {
			return "", usageError{Err: fmt.Errorf("%s wants one argument, got %d", cmd, len(pos))}
		}
		return pos[0], nil
	}
	if slices.Contains(pos, "") {
		// summary '' listed every batch (an unset shell variable).
		return usageError{Err: fmt.Errorf("%s: an argument is empty (an unset variable?)", cmd)}
	}
	// A command or argument count mistyped is said before the ledger is
	// reached (unreachable, it hid the typo behind a connection error).
	switch cmd {
	case "summary":
		if len(pos) > 1 {
			return usageError{Err: errors.New("summary takes at most one batch")}
		}
	case "failures", "job", "export", "wait":
		if _, err := arg(); err != nil {
			return err
		}
	default:
		return usageError{Err: fmt.Errorf("unknown command %q", cmd)}
	}
	// So are values that cannot work.
	switch {
	case cmd == "export" && *format != "jsonl" && *format != "csv":
		return usageError{Err: fmt.Errorf("--format %q: want jsonl or csv", *format)}
	case cmd != "wait":
	case *every <= 0:
		return usageError{Err: fmt.Errorf("--interval %s: want a positive duration", *every)}
	case *timeout < 0:
		return usageError{Err: fmt.Errorf("--timeout %s: want 0 (no limit) or a positive duration", *timeout)}
	case !(*maxFail >= 0 && *maxFail <= 1): // NaN too
		return usageError{Err: fmt.Errorf("--max-failure-rate %v: want a share between 0 and 1", *maxFail)}
	case *natsURL != "":
		if err := natsaddr.CheckURL(*natsURL); err != nil {
			return usageError{Err: fmt.Errorf("--nats-url (env NATS_URL): %w", err)}
		}
	}
	st, err := store.Open(ctx, *dbURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	// report reads; it does not migrate. A ledger behind this version
	// failed with "relation batch_summary does not exist" or a column
	// missing.
	if applied, known, err := st.SchemaVersion(ctx); err != nil {
		return err
	} else if applied < known {
		return fmt.Errorf("the ledger at DATABASE_URL is at migration %d of the %d this report knows: run worker migrate (a worker migrates at start too)", applied, known)
	}
	switch cmd {
	case "summary":
		batch := ""
		if len(pos) > 1 {
			return usageError{Err: errors.New("summary takes at most one batch")}
		}
		if len(pos) == 1 {
			batch = pos[0]
		}
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
		cli.WriteSummary(stdout, rows)
		unpriced, err := st.UnpricedAttempts(ctx, batch)
		if err != nil {
			return err
		}
		for _, u := range unpriced {
			fmt.Fprintf(stdout, "\ncost unknown: %d attempts of batch %s on %s had no price in the worker's table and count $0 (give the workers --prices with it)\n",
				u.Attempts, u.Batch, u.Model)
		}
		// COST/VALID is the latest run's results; what the batch cost in
		// all includes what those results do not show.
		costs, err := st.BatchCosts(ctx, batch)
		if err != nil {
			return err
		}
		valid := map[string]int64{}
		for _, r := range rows {
			valid[r.Batch] = r.Valid
		}
		for _, c := range costs {
			if c.EarlierRunsUSD == 0 && c.InterruptedUSD == 0 {
				continue // the latest results show every cent (an outage's calls cost nothing)
			}
			perValid := "no valid row"
			if n := valid[c.Batch]; n > 0 {
				perValid = fmt.Sprintf("$%.6f a valid row", c.TotalUSD/float64(n))
			}
			calls := cli.Plural(c.InterruptedCalls, "call")
			if c.InterruptedCalls > 0 {
				// Requests of a cancelled provider batch that never ran are
				// kept too, at no cost: 300 calls read as 300 paid ones.
				answered, err := st.InterruptedAnswered(ctx, c.Batch)
				if err != nil {
					return err
				}
				if answered < c.InterruptedCalls {
					calls += fmt.Sprintf(" (%d of them answered)", answered)
				}
			}
			fmt.Fprintf(stdout, "\nbatch %s cost $%.6f in all (%s): $%.6f in recorded attempts (of which $%.6f in runs a requeue replaced) and $%.6f in %s kept apart from the results (interrupted_attempts: see report job)\n",
				c.Batch, c.TotalUSD, perValid, c.FinalUSD, c.EarlierRunsUSD, c.InterruptedUSD, calls)
		}
		// A capped batch says its cap and what it spent: jobs over it end
		// over_budget, and nothing else said why.
		for _, r := range rows {
			sp, err := st.BatchSpend(ctx, r.Batch)
			if err != nil {
				return err
			}
			if line := capLine(r.Batch, sp); line != "" {
				fmt.Fprintln(stdout, "\n"+line)
			}
		}
		for _, r := range rows {
			notes, err := missingRows(ctx, st, r.Batch)
			if err != nil {
				return err
			}
			for _, n := range notes {
				fmt.Fprintln(stdout, "\n"+n)
			}
		}
		if err := writeWaveSections(ctx, stdout, st, rows); err != nil {
			return err
		}
	case "failures":
		batch, err := arg()
		if err != nil {
			return err
		}
		if err := needBatch(ctx, st, batch); err != nil {
			return err
		}
		if err := cli.WriteFailureReport(ctx, stdout, st, batch, 15); err != nil {
			return err
		}
	case "job":
		id, err := arg()
		if err != nil {
			return err
		}
		return printJob(ctx, stdout, st, id)
	case "export":
		batch, err := arg()
		if err != nil {
			return err
		}
		if err := export(ctx, stdout, st, batch, *format); err != nil {
			return err
		}
		// A file of a batch still running is partial: say so where a
		// script's log sees it (its rows say job_status queued).
		if p, err := st.Progress(ctx, batch); err == nil && p.Queued > 0 {
			fmt.Fprintf(stderr, "report: warning: batch %s is not done: %d of %d jobs are still queued, exported without a value\n", batch, p.Queued, p.Total)
		}
		// So is one short of rows its dataset had: nothing in the file
		// shows a row that is not there.
		notes, err := missingRows(ctx, st, batch)
		if err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintf(stderr, "report: warning: %s\n", n)
		}
		return nil
	case "wait":
		batch, err := arg()
		if err != nil {
			return err
		}
		return wait(ctx, stdout, stderr, st, batch, *maxFail, *every, *timeout, unpublishedGrace, queueCheck(st, batch, *natsURL, *natsDir))
	default:
		return usageError{Err: fmt.Errorf("unknown command %q", cmd)}
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

// needBatch returns an error naming batch when the ledger has no such batch,
// so that a mistyped name fails instead of printing an empty report.
// missingRows says how batch is short of the rows of its datasets: an
// enqueue that has not finished recording them (killed, or still going),
// and bad rows enqueue left out because --max-bad-rows let them pass.
// Neither shows in the batch's jobs, so its summary and export looked
// complete.
func missingRows(ctx context.Context, st *store.Store, batch string) ([]string, error) {
	b, err := st.Batch(ctx, batch)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // the jobs of no batch (summary's "" row)
	}
	if err != nil {
		return nil, err
	}
	var notes []string
	if b.Recording != nil {
		notes = append(notes, strings.TrimPrefix(cli.NotFullyEnqueued(batch, b.Recording).Error(), cli.ErrBatchFailed.Error()+": ")+
			": its summary and export hold only the rows recorded so far")
	}
	bad, err := st.BadRows(ctx, batch)
	if err != nil {
		return nil, err
	}
	if bad > 0 {
		notes = append(notes, fmt.Sprintf("batch %s is short of %s its datasets had: enqueue found them bad and left them out (--max-bad-rows let them pass; it listed them with their line numbers)",
			batch, cli.Plural(int(bad), "row")))
	}
	return notes, nil
}

func needBatch(ctx context.Context, st *store.Store, batch string) error {
	_, err := st.Batch(ctx, batch)
	if errors.Is(err, store.ErrNotFound) {
		if nerr := enqueue.CheckBatchName(batch); nerr != nil {
			// Not a name enqueue would take: a typo (exit 2), not a
			// batch missing from this ledger.
			return usageError{Err: errors.New(strings.TrimPrefix(nerr.Error(), enqueue.ErrBadConfig.Error()+": "))}
		}
		return fmt.Errorf("no batch %q in the ledger", batch)
	}
	return err
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func printJob(ctx context.Context, w io.Writer, st *store.Store, id string) error {
	job, attempts, err := st.Job(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no job %q in the ledger", id)
	}
	if err != nil {
		return err
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
	if len(res.Attempts) > 0 {
		cli.WriteCards(w, res)
	}
	kept, err := st.JobInterrupted(ctx, id)
	if err != nil {
		return err
	}
	writeInterrupted(w, kept)
	return nil
}

// clipRunes cuts s to n runes, marking the cut.
func clipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
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
			line += ": " + clipRunes(c.LastError, 160)
		}
		fmt.Fprintln(w, line)
	}
}

func export(ctx context.Context, w io.Writer, st *store.Store, batch, format string) error {
	switch format {
	case "jsonl":
		if err := needBatch(ctx, st, batch); err != nil {
			return err
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // "<b>" as written, not "\u003cb\u003e"
		return st.Export(ctx, batch, func(r store.ExportRow) error {
			return enc.Encode(map[string]any{"id": r.ID, "row": r.RowNo, "status": r.Status,
				"input": rawOrNull(r.Metadata), "value": rawOrNull(r.Value), "error": r.Error})
		})
	case "csv":
		shape, err := st.ExportShape(ctx, batch)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no batch %q in the ledger", batch)
		}
		if err != nil {
			return err
		}
		cols := newCSVColumns(shape)
		cw := csv.NewWriter(w)
		if err := cw.Write(cols.header); err != nil {
			return err
		}
		err = st.Export(ctx, batch, func(r store.ExportRow) error {
			rec, err := cols.record(r)
			if err != nil {
				return fmt.Errorf("job %s: %w", r.ID, err)
			}
			return cw.Write(rec)
		})
		cw.Flush()
		if err != nil {
			return err
		}
		return cw.Error()
	}
	return usageError{Err: fmt.Errorf("--format %q: want jsonl or csv", format)}
}

// csvColumns lays out a batch's CSV export: the input columns, the job's
// own columns and one column per schema property (or job_value).
type csvColumns struct {
	header []string
	// inputs and props are the input keys and schema properties, in the
	// order of their columns; wholeValue writes job_value instead of props.
	inputs, props []string
	wholeValue    bool
}

// newCSVColumns builds the header: inputs (renamed input.NAME when NAME is
// one of the job's own columns), job_id, job_status, properties (renamed
// value.NAME when NAME is taken by an input or job column, and again while
// the new name is taken), job_error. No two columns share a name.
func newCSVColumns(shape store.ExportShape) *csvColumns {
	c := &csvColumns{inputs: shape.InputColumns, props: shape.Properties, wholeValue: len(shape.Properties) == 0}
	own := []string{"job_id", "job_status", "job_error", "job_value"}
	taken := map[string]bool{}
	for _, name := range own {
		taken[name] = true
	}
	for _, in := range c.inputs {
		taken[in] = true
	}
	for _, in := range c.inputs {
		name := in
		if slices.Contains(own, in) {
			for name = "input." + in; taken[name]; {
				name = "input." + name
			}
			taken[name] = true
		}
		c.header = append(c.header, name)
	}
	c.header = append(c.header, "job_id", "job_status")
	if c.wholeValue {
		c.header = append(c.header, "job_value")
	}
	for _, p := range c.props {
		name := p
		for taken[name] {
			name = "value." + name
		}
		taken[name] = true
		c.header = append(c.header, name)
	}
	c.header = append(c.header, "job_error")
	return c
}

// record is one job's CSV row under the header.
func (c *csvColumns) record(r store.ExportRow) ([]string, error) {
	var meta map[string]json.RawMessage
	if err := unmarshalObject(r.Metadata, &meta); err != nil {
		return nil, fmt.Errorf("input row: %w", err)
	}
	rec := make([]string, 0, len(c.header))
	for _, in := range c.inputs {
		cell, err := csvCell(meta[in])
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", in, err)
		}
		rec = append(rec, cell)
	}
	rec = append(rec, r.ID, string(r.Status))
	if c.wholeValue {
		cell, err := csvCell(r.Value)
		if err != nil {
			return nil, fmt.Errorf("value: %w", err)
		}
		rec = append(rec, cell)
	} else {
		// A value that is not an object (an invalid job's last candidate)
		// has no properties: its columns stay empty.
		var value map[string]json.RawMessage
		_ = unmarshalObject(r.Value, &value)
		for _, p := range c.props {
			cell, err := csvCell(value[p])
			if err != nil {
				return nil, fmt.Errorf("value %s: %w", p, err)
			}
			rec = append(rec, cell)
		}
	}
	return append(rec, r.Error), nil
}

// unmarshalObject decodes a JSON object; empty input and null leave m nil.
func unmarshalObject(b json.RawMessage, m *map[string]json.RawMessage) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, m)
}

// csvCell writes a JSON value as a CSV cell: a string as itself, null or
// nothing as empty, anything else as compact JSON.
func csvCell(v json.RawMessage) (string, error) {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return "", nil
	case v[0] == '"':
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	}
	var buf bytes.Buffer
	err := json.Compact(&buf, v)
	return buf.String(), err
}

func rawOrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// unpublishedGrace is how long every queued job of a batch must stay
// unpublished, with no enqueue recording it, before report wait gives up.
const unpublishedGrace = 30 * time.Second

// queueHolds reports whether the batch's queue holds any message of it,
// and says where it looked.
type queueHolds func(ctx context.Context) (held bool, where string, err error)

// queueScanMax bounds the messages queueCheck reads; past them it cannot
// say, and report wait goes on waiting.
const queueScanMax = 20000

// queueCheck looks in the queue the batch was enqueued on: the server at
// url, or the one a running worker serves from dir (report never starts
// one: it would hold the directory a worker needs).
func queueCheck(st *store.Store, batch, url, dir string) queueHolds {
	return func(ctx context.Context) (bool, string, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		b, err := st.Batch(ctx, batch)
		if err != nil {
			return false, "", err
		}
		settings, err := enqueue.ParseBatchSettings(b)
		if err != nil {
			return false, "", err
		}
		q := pipeline.QueueConfig{Stream: settings.Stream, Subject: settings.Subject}.WithDefaults()
		if url == "" {
			if url = natsaddr.RunningURL(dir); url == "" {
				return false, "", fmt.Errorf("no worker serves the embedded queue in %s (set --nats-dir, or --nats-url for a NATS server)", dir)
			}
		}
		nc, err := nats.Connect(url, nats.Name("fixpoint-report"), nats.Timeout(5*time.Second))
		if err != nil {
			return false, "", fmt.Errorf("connect to NATS at %s: %w", url, err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false, "", err
		}
		held, err := pipeline.QueueHoldsBatch(ctx, js, q, batch, queueScanMax)
		return held, fmt.Sprintf("the queue (stream %s at %s)", q.Stream, url), err
	}
}

// wait polls the batch until it is done, then prints its verdict. Jobs
// that stop finishing are checked against the queue (queue, nil for none)
// once they have not moved for grace: published jobs whose messages the
// queue does not hold would be waited for for ever.
func wait(ctx context.Context, stdout, stderr io.Writer, st *store.Store, batch string, maxFail float64, every, timeout, grace time.Duration, queue queueHolds) error {
	if err := needBatch(ctx, st, batch); err != nil {
		return err
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	bar := cli.NewProgressBar(stderr, false, "wait", 0)
	first := true            // a batch done at the first look needs no progress line
	var stuckSince time.Time // since when every queued job is unpublished, with no run recording
	// Since when no job has become final (stillDone of them), and when the
	// queue was last looked at.
	var stillSince, looked time.Time
	stillDone, noted := -1, false
	startDone, start := -1, time.Now()
	for {
		p, err := st.Progress(ctx, batch)
		if err != nil {
			return err
		}
		done := p.Total - p.Queued
		if startDone < 0 {
			startDone = done
		}
		note := fmt.Sprintf("of %d: %s", p.Total, cli.Statuses(p))
		// A batch with no jobs has nothing to wait for. While an enqueue
		// is recording the batch's rows more may come; once its runs are
		// all killed, the batch cannot be done however long it waits.
		live := p.Recording != nil && p.Recording.Live
		if (p.Done() || p.Total == 0) && !live || p.Recording != nil && !live {
			if !first {
				bar.Update(done, note, true)
			}
			line, notes, err := cli.BatchVerdict(batch, p, maxFail)
			fmt.Fprintln(stdout, line)
			for _, n := range notes {
				fmt.Fprintln(stdout, n)
			}
			return err
		}
		// Jobs recorded but never published (their enqueue stopped in
		// between) run only once published: waiting for them waited for
		// ever. A requeue publishes what it queued a moment later, so it
		// must hold for a while.
		if p.Recording == nil && p.Queued > 0 && p.Unpublished == p.Queued {
			if stuckSince.IsZero() {
				stuckSince = time.Now()
			} else if time.Since(stuckSince) >= grace {
				bar.Update(done, note, true)
				return fmt.Errorf("batch %s cannot finish: its %d queued jobs were recorded but never published (the enqueue or requeue stopped before publishing them): run enqueue --batch %s --resume",
					batch, p.Queued, batch)
			}
		} else {
			stuckSince = time.Time{}
		}
		if done != stillDone {
			stillDone, stillSince = done, time.Now()
		} else if queue != nil && p.Recording == nil && p.Queued > p.Unpublished &&
			time.Since(stillSince) >= grace && time.Since(looked) >= grace {
			looked = time.Now()
			held, where, err := queue(ctx)
			switch {
			case err != nil && ctx.Err() == nil && !noted:
				noted = true
				fmt.Fprintf(stderr, "report: no job of batch %s has finished for %s, and its queue cannot be checked (%v); waiting on\n",
					batch, grace, err)
			case err == nil && !held:
				// Counted after the look: a job acked meanwhile is final
				// in the ledger by then (a result commits before its ack).
				owed, err := st.OwedByQueue(ctx, batch)
				if err != nil {
					return err
				}
				if owed > 0 {
					bar.Update(done, note, true)
					return fmt.Errorf("batch %s cannot finish: %d of its queued jobs were published, but %s holds none of their messages (its data was lost, or they went to another queue): run enqueue --batch %s --resume to republish them",
						batch, owed, where, batch)
				}
			}
		}
		first = false
		bar.Update(done, note, false)
		select {
		case <-ctx.Done():
			bar.Update(done, note, true)
			return fmt.Errorf("stopped waiting: batch %s is not done (%d of %d jobs still queued)", batch, p.Queued, p.Total)
		case <-expired:
			bar.Update(done, note, true)
			if live {
				return fmt.Errorf("batch %s not done after %s: an enqueue is still recording its rows (since %s); %d of %d jobs recorded so far are queued",
					batch, timeout, p.Recording.Since.UTC().Format(time.RFC3339), p.Queued, p.Total)
			}
			if p.Unpublished > 0 {
				return fmt.Errorf("batch %s not done after %s: %d of %d jobs still queued, %d of them never published (run enqueue --batch %s --resume)", batch, timeout, p.Queued, p.Total, p.Unpublished, batch)
			}
			if n, err := st.InWaves(ctx, batch); err == nil && n > 0 {
				// The rest sit in provider batches a worker drives.
				return fmt.Errorf("batch %s not done after %s: %d of %d jobs still queued, %d of them in open provider batches (waves take minutes to hours: see them in report summary %s)",
					batch, timeout, p.Queued, p.Total, n, batch)
			}
			if moved := done - startDone; moved > 0 {
				// Workers are at it: say at what pace, not ask whether
				// they run.
				rate := float64(moved) / time.Since(start).Seconds()
				return fmt.Errorf("batch %s not done after %s: %d of %d jobs still queued; %d finished while waiting (%.1f a second: about %s more at that pace)",
					batch, timeout, p.Queued, p.Total, moved, rate, (time.Duration(float64(p.Queued)/rate) * time.Second).Round(time.Second))
			}
			return fmt.Errorf("batch %s not done after %s: %d of %d jobs still queued, none finished while waiting (are workers running on this ledger?)", batch, timeout, p.Queued, p.Total)
		case <-time.After(every):
		}
	}
}
