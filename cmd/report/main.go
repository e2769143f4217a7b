// Command report runs the ledger's documented queries: batch summaries,
// failure classes, one job's attempts, exports and a progress wait. Plain SQL
// on the views stays the main interface; see the README.
//
// Each command is a file of its own (summary.go, failures.go, job.go,
// steps.go, export.go, wait.go, serve.go, purge.go) with its own flag set: a flag
// another command reads is an unknown flag there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/store"
)

const usage = `Usage: report COMMAND [flags]

  report summary [BATCH] [--format text|json]
                                  per-batch summary: jobs, valid rate, first-attempt rate,
                                  repair rate, mean attempts, tokens and cost per valid job, p50/p95;
                                  for a batch delivered in waves, each wave, the prompt-cache
                                  hit rate and the attempts and cost by price basis
  report failures BATCH [--format text|json]
                                  failure classes by attempt, repair effectiveness, top error paths
  report job ID [--format text|json]
                                  one job and each attempt as a card
  report steps BATCH [--format text|json] [--top N]
                                  a batch's document jobs by step (chunk, merge, repair, agent
                                  turn): attempts, valid rate, failure classes, tokens, cost;
                                  fields per chunk, merge conflicts, grounding by step
  report export BATCH [--format jsonl|csv] [--require-done] [--csv-raw]
                                  each job's input row and value, one line per job in row order
  report wait BATCH [--max-failure-rate R] [--timeout D]
                                  progress until every job is final; exit 1 when the share of
                                  jobs not valid exceeds R, when no job is valid (unless every
                                  one was cancelled), or when jobs are still queued after D
                                  (a batch with no jobs is done at once), or when jobs stop
                                  finishing and the queue (--nats-url, or the embedded one a
                                  worker serves from --nats-dir) holds none of their messages
  report serve [--addr 127.0.0.1:8090]
                                  the dashboard: a web UI over the ledger (batches, live
                                  progress, funnels, failure clusters, jobs, attempts); with an
                                  admin token, requeue, cancel and caps from a batch's page
  report purge --older-than D [--batch B] [--dry-run]
                                  delete the attempts of jobs finished more than D ago (30d,
                                  36h); jobs, final values and every rollup stay

Run 'report COMMAND --help' for a command's flags, output and exit status.

A BATCH or ID that is not in the ledger is an error (exit 1); a batch with no
jobs is not.

Exit status: 0 done, 1 an error or the failure rate over R, 2 bad usage.

Environment:
  DATABASE_URL       Postgres ledger (default ` + databaseURLDefault + `)
  NATS_URL           report wait, serve: the queue's NATS server (empty: the embedded queue)
  FIXPOINT_NATS_DIR  report wait, serve: the embedded queue's directory (default .fixpoint/nats)
  FIXPOINT_NATS_LISTEN  report serve: where a running worker's embedded NATS listens
  FIXPOINT_ADMIN_TOKEN  report serve: admin token, needed to listen off loopback; enables the actions`

const databaseURLDefault = "postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable"

// ledgerEnv is the environment every command reads.
const ledgerEnv = "  DATABASE_URL  Postgres ledger (default " + databaseURLDefault + ")"

// usageError marks errors caused by how the command was called (exit 2).
type usageError = cliflags.UsageError

// command is one report command: it parses its own flags and arguments
// from args (everything after its name) and runs.
type command interface {
	Run(ctx context.Context, args []string) error
}

// commandEntry names a command and makes it, writing on stdout and stderr.
type commandEntry struct {
	name string
	new  func(stdout, stderr io.Writer) command
}

// commands are report's commands, in the order the usage lists them.
var commands = []commandEntry{
	{"summary", func(stdout, _ io.Writer) command { return &summaryCommand{stdout: stdout} }},
	{"failures", func(stdout, _ io.Writer) command { return &failuresCommand{stdout: stdout} }},
	{"job", func(stdout, _ io.Writer) command { return &jobCommand{stdout: stdout} }},
	{"steps", func(stdout, _ io.Writer) command { return &stepsCommand{stdout: stdout} }},
	{"export", func(stdout, stderr io.Writer) command { return &exportCommand{stdout: stdout, stderr: stderr} }},
	{"wait", func(stdout, stderr io.Writer) command { return &waitCommand{stdout: stdout, stderr: stderr} }},
	{"serve", func(stdout, stderr io.Writer) command { return &serveCommand{stdout: stdout, stderr: stderr} }},
	{"purge", func(stdout, stderr io.Writer) command { return &purgeCommand{stdout: stdout, stderr: stderr} }},
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

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

// dispatch runs the command args name.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, usage)
		if len(args) == 0 {
			return usageError{Err: errors.New("no command")}
		}
		return nil
	}
	names := commandNames()
	if c := cliflags.CommandAfterFlags(args, names...); c != "" {
		return usageError{Err: fmt.Errorf("%q comes first, before any flag: report %s [flags]", c, c)}
	}
	name := args[0]
	if strings.HasPrefix(name, "-") {
		return usageError{Err: fmt.Errorf("a command comes first, before any flag (%s is a flag): report %s [flags]", name, strings.Join(names, "|"))}
	}
	i := slices.IndexFunc(commands, func(c commandEntry) bool { return c.name == name })
	if i < 0 {
		return cliflags.UnknownCommand("report", name, names...)
	}
	err := commands[i].new(stdout, stderr).Run(ctx, args[1:])
	var uerr usageError
	if errors.As(err, &uerr) && !strings.Contains(err.Error(), "--help") {
		// Point at the help of the command, which lists what it takes.
		err = usageError{Err: fmt.Errorf("%w (see report %s --help)", err, name)}
	}
	return err
}

// newFlagSet returns the flag set of command name, with the --database-url
// flag every command reads. Its --help prints usage (the command's
// synopsis, what it does and its exit status), the flags and env.
func newFlagSet(name, usage, env string, stdout io.Writer) (*flag.FlagSet, *string) {
	fs := cliflags.NewFlagSet("report "+name, usage, env, stdout)
	dbURL := fs.String("database-url", envOr("DATABASE_URL", databaseURLDefault), "Postgres URL of the ledger (env DATABASE_URL)")
	return fs, dbURL
}

// parseArgs parses the flags of command fs, which may come before or
// after its arguments, and returns the arguments: from least to most of
// them. A mistyped argument count is said before the ledger is reached
// (unreachable, it hid the typo behind a connection error).
func parseArgs(fs *flag.FlagSet, args []string, least, most int) ([]string, error) {
	pos, err := cliflags.ParseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	name := strings.TrimPrefix(fs.Name(), "report ")
	if slices.Contains(pos, "") {
		// summary '' listed every batch (an unset shell variable).
		return nil, usageError{Err: fmt.Errorf("%s: an argument is empty (an unset variable?)", name)}
	}
	switch {
	case most == 0 && len(pos) > 0:
		return nil, usageError{Err: fmt.Errorf("%s takes no argument, got %q", name, pos[0])}
	case least == 0 && len(pos) > most:
		return nil, usageError{Err: fmt.Errorf("%s takes at most one batch", name)}
	case len(pos) < least || len(pos) > most:
		return nil, usageError{Err: fmt.Errorf("%s wants one argument, got %d", name, len(pos))}
	}
	return pos, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
