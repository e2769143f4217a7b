package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/batchaction"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// commonFlags are the ledger and queue flags of every subcommand.
type commonFlags struct {
	dbURL, natsURL, natsDir, natsListen string
	queue                               queue.Config
	batch                               string
}

func (c *commonFlags) register(fs *flag.FlagSet, withQueue bool) {
	fs.StringVar(&c.batch, "batch", "", "batch name (required): 1 to 128 letters, digits, '.', '_' and '-'")
	fs.StringVar(&c.dbURL, "database-url", env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable"), "Postgres URL of the ledger (env DATABASE_URL)")
	if withQueue {
		fs.StringVar(&c.natsURL, "nats-url", env("NATS_URL", ""), "NATS server URL (env NATS_URL); empty: the embedded queue in --nats-dir")
		fs.StringVar(&c.natsDir, "nats-dir", env("FIXPOINT_NATS_DIR", natsconn.DirDefault), "directory of the embedded queue (env FIXPOINT_NATS_DIR)")
		fs.StringVar(&c.natsListen, "nats-listen", env("FIXPOINT_NATS_LISTEN", natsconn.ListenDefault), "where a running worker's embedded NATS listens (env FIXPOINT_NATS_LISTEN)")
		fs.StringVar(&c.queue.Stream, "stream", queue.StreamDefault, "JetStream stream of jobs")
		fs.StringVar(&c.queue.Subject, "subject", queue.SubjectDefault, "subject jobs are published on")
		fs.IntVar(&c.queue.Replicas, "stream-replicas", 1, "servers of a JetStream cluster that keep the job stream when enqueue creates it: 1, 3 or 5, as the workers' --stream-replicas (which set it on an existing stream)")
	}
}

// openQueue connects to the queue the flags name.
func (c *commonFlags) openQueue() (*natsconn.Conn, error) {
	return natsconn.Open(natsconn.Config{URL: c.natsURL, Dir: c.natsDir, Running: c.natsListen, Name: "fixpoint-enqueue",
		Ledger: store.LedgerName(c.dbURL)}, nil)
}

func newSubFlagSet(name, usage string, stdout io.Writer) *flag.FlagSet {
	return newFlagSet("enqueue "+name, usage, stdout)
}

// newFlagSet returns a flag set whose --help prints usage, the flags and
// the environment.
func newFlagSet(name, usage string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintln(stdout, usage)
		fmt.Fprintln(stdout, "\nFlags:")
		fs.PrintDefaults()
		fmt.Fprintln(stdout, "\nEnvironment:")
		if fs.Lookup("nats-url") == nil {
			// A command that does not touch the queue: only the ledger's
			// variable is its (enqueue cancel listed NATS_URL).
			fmt.Fprintln(stdout, strings.SplitN(envHelp, "\n", 2)[0])
			return
		}
		fmt.Fprintln(stdout, envHelp)
	}
	return fs
}

func parseSub(fs *flag.FlagSet, args []string, c *commonFlags) error {
	if err := cliflags.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{Err: fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())}
	}
	if c.batch == "" {
		return usageError{Err: errors.New("--batch is required (see --help)")}
	}
	return queueUsage(c.queue, c.natsURL)
}

func openLedger(ctx context.Context, dsn string) (*store.Store, error) {
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		return nil, err
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// actionError maps a batch action's error to the command's: a batch the
// ledger does not hold is a failure (exit 1), bad settings a usage error.
func actionError(err error) error {
	if errors.Is(err, enqueue.ErrBadConfig) {
		return usageError{Err: err}
	}
	return err
}

// warnUnpriced warns that a dollar cap on model can be enforced only by
// workers given its price, when fixpoint's table has none.
func warnUnpriced(w io.Writer, cmd, model string) {
	if warning := batchaction.UnpricedWarning(model, "--max-cost-usd"); warning != "" {
		fmt.Fprintf(w, "%s: warning: %s\n", cmd, warning)
	}
}

// warnNoPrice warns that model has no price in fixpoint's table: its
// attempts are recorded with no cost (and marked unpriced) unless the
// workers are given one.
func warnNoPrice(w io.Writer, model string) {
	if _, priced := repair.DefaultPrices().Lookup(model); !priced {
		fmt.Fprintf(w, "enqueue: warning: %s has no price in fixpoint's table: its attempts are recorded at $0, marked unpriced, unless the workers run with --prices FILE listing it ({%q: {\"input_per_mtok\": ..., \"output_per_mtok\": ...}})\n", model, model)
	}
}

// queueUsage checks the queue flags before anything is connected: a value
// NATS refuses is a usage error naming the flag.
func queueUsage(q queue.Config, natsURL string) error {
	if err := q.WithDefaults().Validate(); err != nil {
		return cliflags.SettingUsage(err, map[string]string{"Stream": "--stream", "Subject": "--subject", "Duplicates": "--duplicates-window",
			"Replicas": "--stream-replicas"})
	}
	if err := natsconn.CheckReplicas(natsURL, q.Replicas); err != nil {
		return usageError{Err: err}
	}
	return nil
}

// parseCost reads a --max-cost-usd value: a non-negative number, or none.
func parseCost(s string) (*float64, error) { return batchaction.ParseCost("--max-cost-usd", s) }

// parseTokens reads a --max-total-tokens value: a non-negative integer, or
// none.
func parseTokens(s string) (*int64, error) { return batchaction.ParseTokens("--max-total-tokens", s) }
