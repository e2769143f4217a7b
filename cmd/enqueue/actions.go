package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/store"
)

const requeueUsage = `Usage: enqueue requeue --batch NAME [--status invalid,failed,rejected,dead] [--class C]
                       [--model M] [--provider P] [--max-attempts N] [--strategy S] [--dry-run]

Runs chosen jobs of a batch again, as a new run of the batch. Each job keeps
its outcome so far in the ledger (job_runs, and its attempts keep their run
number, so SQL can still answer what the first run did); the job row shows
the new run's outcome, and its run, when it ends. --model, --provider,
--max-attempts and --strategy change the settings the jobs run with; the rest
are those of the batch's latest run. Repeating the same requeue requeues
nothing new until the jobs have ended again (and publishes what an
interrupted requeue left unpublished). --dry-run prints what it would requeue.
Over-budget jobs run again once the cap is raised: enqueue cap, then
requeue --status over_budget.

Exit status: 0 done (also when nothing matched), 1 failed, 2 bad usage.`

const cancelUsage = `Usage: enqueue cancel --batch NAME

Ends every job of the batch that is not final yet as 'cancelled', without a
provider call: a worker that pulls one acks it unrun, and the result of a job
already in flight loses to the cancellation (its calls are kept in the ledger
as interrupted). Requeueing cancelled jobs (requeue --status cancelled) runs
them again. Repeating it cancels nothing more.

Exit status: 0 done, 1 failed (no such batch), 2 bad usage.`

const capUsage = `Usage: enqueue cap --batch NAME [--max-cost-usd X|none] [--max-total-tokens N|none]

Sets, changes or removes the batch's spend cap. Every worker of the cluster
holds each call's estimate in the ledger before sending it and charges its
real use after, so together they stay under the cap (the estimate can be
short by at most one call per worker). Jobs left when the cap is reached end
'over_budget'; raise the cap and requeue --status over_budget to run them.
The cost is estimated from the workers' price table (worker --prices over
the built-in one); a worker with no price for the batch's model cannot
enforce a cost cap and ends its jobs 'over_budget' without calling the
model, the reason naming the model. Prints what the batch has spent; with
neither flag it prints only that, changing nothing.

Exit status: 0 done, 1 failed (no such batch), 2 bad usage.`

// commonFlags are the ledger and queue flags of every subcommand.
type commonFlags struct {
	dbURL, natsURL, natsDir, natsListen string
	queue                               pipeline.QueueConfig
	batch                               string
}

func (c *commonFlags) register(fs *flag.FlagSet, queue bool) {
	fs.StringVar(&c.batch, "batch", "", "batch name (required): 1 to 128 letters, digits, '.', '_' and '-'")
	fs.StringVar(&c.dbURL, "database-url", env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable"), "Postgres URL of the ledger (env DATABASE_URL)")
	if queue {
		fs.StringVar(&c.natsURL, "nats-url", env("NATS_URL", ""), "NATS server URL (env NATS_URL); empty: the embedded queue in --nats-dir")
		fs.StringVar(&c.natsDir, "nats-dir", env("FIXPOINT_NATS_DIR", natsconn.DirDefault), "directory of the embedded queue (env FIXPOINT_NATS_DIR)")
		fs.StringVar(&c.natsListen, "nats-listen", env("FIXPOINT_NATS_LISTEN", natsconn.ListenDefault), "where a running worker's embedded NATS listens (env FIXPOINT_NATS_LISTEN)")
		fs.StringVar(&c.queue.Stream, "stream", pipeline.StreamDefault, "JetStream stream of jobs")
		fs.StringVar(&c.queue.Subject, "subject", pipeline.SubjectDefault, "subject jobs are published on")
	}
}

// openQueue connects to the queue the flags name.
func (c *commonFlags) openQueue() (*natsconn.Conn, error) {
	return natsconn.Open(natsconn.Config{URL: c.natsURL, Dir: c.natsDir, Running: c.natsListen, Name: "fixpoint-enqueue"}, nil)
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
	return queueUsage(c.queue)
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

func requeue(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newSubFlagSet("requeue", requeueUsage, stdout)
	var (
		c        commonFlags
		cfg      enqueue.RequeueConfig
		statuses = fs.String("status", joinStatuses(enqueue.RequeueStatusesDefault), "statuses to run again, comma-separated: invalid, failed, rejected, dead, cancelled, over_budget, valid")
		strategy = fs.String("strategy", "", "repair strategy of the new run: conversation, repair or patch (default: unchanged)")
	)
	c.register(fs, true)
	fs.StringVar(&cfg.Class, "class", "", "only jobs whose final class is this (syntax, shape, semantic, truncated, refusal, provider, budget, panic)")
	fs.StringVar(&cfg.Model, "model", "", "model of the new run (default: unchanged)")
	fs.StringVar(&cfg.Provider, "provider", "", "provider of the new run: openai, anthropic or ollama (default: unchanged)")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", 0, "repair attempts per job in the new run (0: unchanged)")
	fs.BoolVar(&cfg.DryRun, "dry-run", false, "print what would be requeued and change nothing")
	if err := parseSub(fs, args, &c); err != nil {
		return err
	}
	cfg.Batch, cfg.Queue, cfg.Strategy = c.batch, c.queue, fixpoint.Strategy(*strategy)
	for _, s := range strings.Split(*statuses, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.Statuses = append(cfg.Statuses, fixpoint.Status(s))
		}
	}
	if len(cfg.Statuses) == 0 {
		// Empty would mean the default statuses, a different request.
		return usageError{Err: fmt.Errorf("--status %q names no status: want final statuses, comma-separated (default %s)", *statuses, joinStatuses(enqueue.RequeueStatusesDefault))}
	}
	for _, s := range cfg.Statuses {
		if !s.Final() {
			return usageError{Err: fmt.Errorf("--status %q: want final statuses: valid, invalid, failed, rejected, dead, cancelled, over_budget", s)}
		}
	}
	st, err := openLedger(ctx, c.dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	var conn *natsconn.Conn
	if !cfg.DryRun {
		if conn, err = c.openQueue(); err != nil {
			return err
		}
		defer conn.Close()
	}
	var js jetstream.JetStream
	if conn != nil {
		js = conn.JS
	}
	rep, err := enqueue.Requeue(ctx, js, st, cfg)
	if err != nil {
		return actionError(err)
	}
	total := 0
	var parts []string
	keys := make([]string, 0, len(rep.Jobs))
	for k := range rep.Jobs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		total += rep.Jobs[k]
		parts = append(parts, fmt.Sprintf("%d %s", rep.Jobs[k], k))
	}
	what := "requeued"
	if cfg.DryRun {
		what = "would requeue"
	}
	if total == 0 {
		fmt.Fprintf(stdout, "batch %s: no job matched (statuses %s%s); nothing requeued\n", c.batch, joinStatuses(cfg.Statuses), classNote(cfg.Class))
		if rep.Published > 0 {
			fmt.Fprintf(stdout, "published %d jobs an earlier requeue had left unpublished\n", rep.Published)
		}
		return nil
	}
	s := rep.Settings
	fmt.Fprintf(stdout, "batch %s: %s %d jobs (%s) as run %d: %s/%s, %d attempts, %s strategy",
		c.batch, what, total, strings.Join(parts, ", "), rep.Run, s.Provider, s.Model, s.Limits.MaxAttempts, s.Limits.Strategy)
	if !cfg.DryRun {
		fmt.Fprintf(stdout, "; %d published", rep.Published)
	}
	fmt.Fprintln(stdout)
	for _, w := range rep.Warnings {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	return nil
}

func classNote(class string) string {
	if class == "" {
		return ""
	}
	return ", class " + class
}

func cancel(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newSubFlagSet("cancel", cancelUsage, stdout)
	var c commonFlags
	c.register(fs, false)
	if err := parseSub(fs, args, &c); err != nil {
		return err
	}
	st, err := openLedger(ctx, c.dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	before, _ := st.Batch(ctx, c.batch) // its marks, to say what the cancel ended
	n, err := enqueue.Cancel(ctx, st, c.batch)
	if err != nil {
		return actionError(err)
	}
	fmt.Fprintf(stdout, "batch %s: cancelled %d jobs not yet final\n", c.batch, n)
	if before != nil && before.Recording != nil {
		after, err := st.Batch(ctx, c.batch)
		if p, perr := st.Progress(ctx, c.batch); err == nil && perr == nil && (after.Recording == nil || after.Recording.Runs < before.Recording.Runs) {
			fmt.Fprintf(stdout, "batch %s: the rows its stopped enqueue never recorded are given up: the batch ends with the %d jobs it holds\n", c.batch, p.Total)
		}
		if err == nil && after.Recording != nil && after.Recording.Live {
			fmt.Fprintf(stdout, "batch %s: an enqueue is still recording rows into it; they will run (a cancel ends the jobs it found)\n", c.batch)
		}
	}
	return nil
}

func capCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newSubFlagSet("cap", capUsage, stdout)
	var c commonFlags
	c.register(fs, false)
	cost := fs.String("max-cost-usd", "", "spend cap in US dollars (estimated cost); 'none' removes it")
	tokens := fs.String("max-total-tokens", "", "cap on input plus output tokens; 'none' removes it")
	if err := parseSub(fs, args, &c); err != nil {
		return err
	}
	if c.batch == "" {
		return usageError{Err: errors.New("--batch is required (see --help)")}
	}
	st, err := openLedger(ctx, c.dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	cur, err := st.BatchSpend(ctx, c.batch)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %s", enqueue.ErrNoBatch, c.batch)
	}
	if err != nil {
		return err
	}
	if *cost == "" && *tokens == "" {
		// No new cap: say the one it has and what it spent, changing
		// nothing.
		fmt.Fprintf(stdout, "batch %s: cap %s; spent %d tokens, $%.6f; %d tokens, $%.6f held by calls in flight\n",
			c.batch, capText(cur.Cap), cur.Tokens, cur.CostUSD, cur.HeldTokens, cur.HeldCostUSD)
		return nil
	}
	next := cur.Cap
	if *cost != "" {
		if next.MaxCostUSD, err = parseCost(*cost); err != nil {
			return usageError{Err: err}
		}
	}
	if *tokens != "" {
		if next.MaxTotalTokens, err = parseTokens(*tokens); err != nil {
			return usageError{Err: err}
		}
	}
	sp, err := enqueue.SetCap(ctx, st, c.batch, next)
	if err != nil {
		return actionError(err)
	}
	if next.MaxCostUSD != nil {
		if b, err := st.Batch(ctx, c.batch); err == nil {
			var s struct {
				Model string `json:"model"`
			}
			if json.Unmarshal(b.Settings, &s) == nil && s.Model != "" {
				warnUnpriced(stderr, "enqueue cap", s.Model)
			}
		}
	}
	fmt.Fprintf(stdout, "batch %s: cap %s; spent %d tokens, $%.6f; %d tokens, $%.6f held by calls in flight\n",
		c.batch, capText(sp.Cap), sp.Tokens, sp.CostUSD, sp.HeldTokens, sp.HeldCostUSD)
	if (sp.MaxCostUSD != nil && sp.CostUSD >= *sp.MaxCostUSD) || (sp.MaxTotalTokens != nil && sp.Tokens >= *sp.MaxTotalTokens) {
		fmt.Fprintf(stderr, "enqueue cap: warning: batch %s has already spent what the new cap allows: its jobs not final yet end over_budget without another call\n", c.batch)
	}
	return nil
}

func capText(c store.Cap) string {
	if !c.Capped() {
		return "none"
	}
	var parts []string
	if c.MaxCostUSD != nil {
		parts = append(parts, fmt.Sprintf("$%g", *c.MaxCostUSD))
	}
	if c.MaxTotalTokens != nil {
		parts = append(parts, fmt.Sprintf("%d tokens", *c.MaxTotalTokens))
	}
	return strings.Join(parts, " and ")
}

// queueUsage checks the queue flags before anything is connected: a value
// NATS refuses is a usage error naming the flag.
func queueUsage(q pipeline.QueueConfig) error {
	if err := q.WithDefaults().Validate(); err != nil {
		return cliflags.SettingUsage(err, map[string]string{"Stream": "--stream", "Subject": "--subject", "Duplicates": "--duplicates-window"})
	}
	return nil
}

// parseCost reads a --max-cost-usd value: a non-negative number, or none.
func parseCost(s string) (*float64, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	// NaN compares false with every bound, so it is refused by name; the
	// ledger holds a cap below 10^10 dollars (numeric(18,8)).
	if err != nil || math.IsNaN(v) || v < 0 || v >= maxCostUSD {
		return nil, fmt.Errorf("--max-cost-usd %q: want a number of dollars from 0 to %.0f, or none", s, maxCostUSD-1)
	}
	return &v, nil
}

// maxCostUSD bounds a cost cap: batches.max_cost_usd is numeric(18,8).
const maxCostUSD = 1e10

// parseTokens reads a --max-total-tokens value: a non-negative integer, or
// none.
func parseTokens(s string) (*int64, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return nil, fmt.Errorf("--max-total-tokens %q: want a non-negative number of tokens, or none", s)
	}
	return &v, nil
}

func joinStatuses(statuses []fixpoint.Status) string {
	parts := make([]string, len(statuses))
	for i, st := range statuses {
		parts[i] = string(st)
	}
	return strings.Join(parts, ",")
}
