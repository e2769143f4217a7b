// Command fixpoint-bench measures the pipeline's end-to-end figures on this
// machine: the bare NATS+Postgres rate, the worker's share of it, throughput
// and memory at simulated latency, rate-limit behaviour and the two repair
// strategies. It is a separate command so that the production worker binary
// carries no benchmark code; it runs `worker run` as a subprocess for the
// figures that need one.
//
//	go run ./cmd/fixpoint-bench [--quick] [--memory] [flags]
//	go run ./cmd/fixpoint-bench docs [flags]
//
// Run `fixpoint-bench --help` for the figures and flags; the docs
// subcommand is the long-document bench (`fixpoint-bench docs --help`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the bench could not run (not a figure below its target)
	exitUsage = 2 // bad usage
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var err error
	if len(args) > 0 && args[0] == "docs" {
		err = runDocs(ctx, args[1:], stdout, stderr)
	} else {
		err = runBench(ctx, args, stdout, stderr)
	}
	var uerr cliflags.UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "fixpoint-bench: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "fixpoint-bench: %v\n", err)
		return exitFail
	}
}
