// Command worker runs fixpoint's job workers and its single-job tools.
//
//	worker [run] [flags]   pull jobs from the queue and run the repair loop
//	worker migrate         apply the ledger migrations
//	worker check           extract and validate a reply, print JSON
//	worker try             run one job live and print each attempt
//	worker demo            a demo batch end to end on the simulator
//
// Run `worker COMMAND --help` for each command's flags and environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the job or check did not succeed
	exitUsage = 2 // bad usage or unreadable input
)

// usageError marks errors caused by how the command was called.
type usageError = cliflags.UsageError

func usagef(format string, args ...any) error { return cliflags.Usagef(format, args...) }

// errNotValid is returned by check and try when the result is not valid:
// exit 1 with nothing more on stderr.
var errNotValid = errors.New("not valid")

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		if exitAtFirstSignal.Load() {
			os.Exit(130) // check: nothing to finish or hand back
		}
		cancel() // the first signal: stop, within the grace period
		for range sigs {
			// A second one: a running worker cuts the grace short; any
			// other command exits at once.
			if f := secondSignal.Load(); f != nil {
				(*f)()
				continue
			}
			os.Exit(130)
		}
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// secondSignal is what a second SIGINT or SIGTERM does, once a worker runs.
var secondSignal atomic.Pointer[func()]

// exitAtFirstSignal is set by commands that have nothing to finish at a
// stop: worker check reads and validates without a context, and a single
// SIGTERM (timeout(1)'s) left it running.
var exitAtFirstSignal atomic.Bool

const topUsage = `fixpoint worker: turns LLM output into JSON that matches a schema.

Usage:
  worker [run] [flags]      pull jobs from NATS JetStream, run the repair loop, write the ledger
  worker migrate            apply the Postgres ledger migrations
  worker check [flags] [FILE|-]
                            extract and validate one reply (or JSONL of replies), print JSON
  worker try [flags]        run one job live and print each attempt as a card
  worker demo [flags]       enqueue a sample batch on the simulator, run it, print the report

Run 'worker COMMAND --help' for a command's flags and environment variables.

  worker demo                                  the whole path on one machine, on the simulator
  worker --drain --batch nightly-2026-01-05    run a batch's jobs, exit 1 when it failed
`

// commands are the worker's commands; without one, it runs.
var commands = []string{"run", "migrate", "check", "try", "demo"}

// command is one worker command: it parses its own flags and arguments
// from args (everything after its name) and runs.
type command interface {
	Run(ctx context.Context, args []string) error
}

// newCommand returns the command name, nil for no such command. Each is a
// file of its own: run.go, migrate.go, check.go, try.go, demo.go.
func newCommand(name string, stdin io.Reader, stdout, stderr io.Writer) command {
	switch name {
	case "run":
		return &runCommand{stdout: stdout, stderr: stderr}
	case "migrate":
		return &migrateCommand{stdout: stdout}
	case "check":
		// check reads and validates without a context: nothing to finish
		// at a stop.
		exitAtFirstSignal.Store(true)
		return &checkCommand{stdin: stdin, stdout: stdout, stderr: stderr}
	case "try":
		return &tryCommand{stdout: stdout, stderr: stderr}
	case "demo":
		return &demoCommand{stdout: stdout, stderr: stderr}
	}
	return nil
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	if cmd == "help" || cmd == "-h" || cmd == "--help" {
		fmt.Fprint(stdout, topUsage)
		return exitOK
	}
	c := newCommand(cmd, stdin, stdout, stderr)
	if c == nil {
		// One line naming the typo (the usage after it scrolled it out of
		// sight).
		fmt.Fprintf(stderr, "worker: %v\n", cliflags.UnknownCommand("worker", cmd, commands...))
		return exitUsage
	}
	err := c.Run(ctx, args)
	var uerr usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errNotValid):
		return exitFail
	case errors.As(err, &uerr), errors.Is(err, store.ErrBadURL), errors.Is(err, natsconn.ErrBadURL):
		fmt.Fprintf(stderr, "worker %s: %v\n", cmd, err)
		if c := cliflags.CommandAfterFlags(args, commands...); cmd == "run" && c != "" {
			// worker --database-url X check r.txt: the flags went to run.
			fmt.Fprintf(stderr, "worker: %q comes first, before any flag: worker %s [flags]\n", c, c)
		}
		return exitUsage
	default:
		fmt.Fprintf(stderr, "worker %s: %v\n", cmd, err)
		return exitFail
	}
}
