// Command report runs the ledger's documented queries: batch summaries,
// failure classes, one job's attempts, exports and a progress wait. Plain SQL
// on the views stays the main interface; see the README.
package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/store"
)

const usage = `Usage: report COMMAND [flags]

  report summary [BATCH]          per-batch summary: jobs, valid rate, first-attempt rate,
                                  repair rate, mean attempts, tokens and cost per valid job, p50/p95
  report failures BATCH           failure classes by attempt, repair effectiveness, top error paths
  report job ID                   one job and each attempt as a card
  report export BATCH [--format jsonl|csv]
                                  input row metadata joined with the value, one line per job
  report wait BATCH [--max-failure-rate R]
                                  progress until every job is final; exit 1 when the share of
                                  jobs not valid exceeds R

Environment:
  DATABASE_URL  Postgres ledger (default postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable)`

type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

var errThreshold = errors.New("failure rate over the threshold")

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
		fmt.Fprintf(stderr, "report: %v\n\n%s\n", err, usage)
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
			return usageError{errors.New("no command")}
		}
		return nil
	}
	cmd := args[0]
	fs := flag.NewFlagSet("report "+cmd, flag.ContinueOnError)
	fs.SetOutput(stdout)
	dbURL := fs.String("database-url", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable"), "Postgres URL of the ledger")
	format := fs.String("format", "jsonl", "export format: jsonl or csv")
	maxFail := fs.Float64("max-failure-rate", 1, "report wait: exit 1 when (jobs not valid)/(jobs) exceeds this")
	every := fs.Duration("interval", time.Second, "report wait: how often to poll")
	fs.Usage = func() { fmt.Fprintln(stdout, usage); fmt.Fprintln(stdout, "\nFlags:"); fs.PrintDefaults() }
	// Flags may come before or after the positional argument.
	var pos []string
	rest := args[1:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usageError{err}
		}
		rest = fs.Args()
		if len(rest) > 0 {
			pos = append(pos, rest[0])
			rest = rest[1:]
		}
	}
	arg := func() (string, error) {
		if len(pos) != 1 {
			return "", usageError{fmt.Errorf("%s wants one argument, got %d", cmd, len(pos))}
		}
		return pos[0], nil
	}
	st, err := store.Open(ctx, *dbURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	switch cmd {
	case "summary":
		batch := ""
		if len(pos) > 1 {
			return usageError{errors.New("summary takes at most one batch")}
		}
		if len(pos) == 1 {
			batch = pos[0]
		}
		rows, err := st.Summary(ctx, batch)
		if err != nil {
			return err
		}
		if batch != "" && len(rows) == 0 {
			return fmt.Errorf("no batch %q in the ledger", batch)
		}
		pipeline.WriteSummary(stdout, rows)
	case "failures":
		batch, err := arg()
		if err != nil {
			return err
		}
		if err := pipeline.WriteFailureReport(ctx, stdout, st, batch, 15); err != nil {
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
		return export(ctx, stdout, st, batch, *format)
	case "wait":
		batch, err := arg()
		if err != nil {
			return err
		}
		return wait(ctx, stdout, stderr, st, batch, *maxFail, *every)
	default:
		return usageError{fmt.Errorf("unknown command %q", cmd)}
	}
	return nil
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
	fmt.Fprintf(w, "job %s (batch %s, row %d): %s, %s/%s, %s mode\n", job.ID, job.Batch, job.RowNo, strings.ToUpper(job.Status), job.Provider, job.Model, job.Mode)
	if job.Error != "" {
		fmt.Fprintf(w, "error: %s\n", job.Error)
	}
	res := &pipeline.Result{JobID: job.ID, Status: pipeline.Status(job.Status), Value: job.Value, Error: job.Error, Class: job.FinalClass,
		Calls: job.Calls, TokensIn: int(job.TokensIn), TokensOut: int(job.TokensOut), TokensCached: int(job.TokensCached),
		CostUSD: job.CostUSD, FirstAttemptValid: job.FirstAttemptValid, RepairedLocally: job.RepairedLocally,
		Wall: time.Duration(job.WallMS) * time.Millisecond}
	for i := range attempts {
		a := pipeline.AttemptFromStore(&attempts[i])
		if a.Valid {
			a.Value = job.Value
		}
		res.Attempts = append(res.Attempts, a)
	}
	if len(res.Attempts) > 0 {
		pipeline.WriteCards(w, res)
	}
	return nil
}

func export(ctx context.Context, w io.Writer, st *store.Store, batch, format string) error {
	switch format {
	case "jsonl":
		enc := json.NewEncoder(w)
		return st.Export(ctx, batch, func(r store.ExportRow) error {
			return enc.Encode(map[string]any{"id": r.ID, "row": r.RowNo, "status": r.Status,
				"input": rawOrNull(r.Metadata), "value": rawOrNull(r.Value), "error": r.Error})
		})
	case "csv":
		cw := csv.NewWriter(w)
		var header []string
		err := st.Export(ctx, batch, func(r store.ExportRow) error {
			var meta map[string]any
			_ = json.Unmarshal(r.Metadata, &meta)
			if header == nil {
				for k := range meta {
					header = append(header, k)
				}
				sort.Strings(header)
				// The job's own columns are prefixed so an input field named
				// id, status or value cannot clash with them.
				if err := cw.Write(append(append([]string{"job_id", "job_status"}, header...), "job_value", "job_error")); err != nil {
					return err
				}
			}
			rec := []string{r.ID, r.Status}
			for _, h := range header {
				rec = append(rec, fmt.Sprint(orEmpty(meta[h])))
			}
			rec = append(rec, string(r.Value), r.Error)
			return cw.Write(rec)
		})
		cw.Flush()
		if err != nil {
			return err
		}
		return cw.Error()
	}
	return usageError{fmt.Errorf("--format %q: want jsonl or csv", format)}
}

func rawOrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func wait(ctx context.Context, stdout, stderr io.Writer, st *store.Store, batch string, maxFail float64, every time.Duration) error {
	bar := pipeline.NewProgressBar(stderr, false, "wait", 0)
	for {
		p, err := st.Progress(ctx, batch)
		if err != nil {
			return err
		}
		if p.Total == 0 {
			return fmt.Errorf("no jobs for batch %q in the ledger", batch)
		}
		done := p.Total - p.Queued
		note := fmt.Sprintf("of %d: valid %d, invalid %d, failed %d, rejected %d, dead %d", p.Total, p.Valid, p.Invalid, p.Failed, p.Rejected, p.Dead)
		if p.Done() {
			bar.Update(done, note, true)
			rate := float64(p.Total-p.Valid) / float64(p.Total)
			fmt.Fprintf(stdout, "batch %s done: %d jobs, %.1f%% not valid\n", batch, p.Total, 100*rate)
			if rate > maxFail {
				return fmt.Errorf("%w: %.1f%% of jobs not valid, limit %.1f%%", errThreshold, 100*rate, 100*maxFail)
			}
			return nil
		}
		bar.Update(done, note, false)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
