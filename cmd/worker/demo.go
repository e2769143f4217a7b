package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/tickets"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/store"
	"golang.org/x/term"
)

// demoNATSDirDefault is where the demo keeps its queue: not the worker's
// own directory, which a running worker may hold.
const demoNATSDirDefault = ".fixpoint/demo-nats"

const demoUsage = `Usage: worker demo [flags]

Runs the main job end to end on one machine: creates and migrates the ledger
database, starts an embedded NATS server (its data in --nats-dir) and an
in-process simulator, enqueues a generated dataset of support tickets, runs
the workers until the batch is done (--drain), then prints the batch summary
and the failure classes.

Interrupted (Ctrl-C) while its jobs run, it stops within the grace period and
keeps its queue in --nats-dir: 'worker --drain --batch NAME --sim PRESET
--nats-dir DIR' (the command it prints) finishes the batch. Interrupted while
it enqueues, it cancels the batch: its dataset exists only in that run.

  worker demo
  worker demo --rows 500 --preset messy --mode tool --provider anthropic
  worker demo --preset messy --evidence require   (invented customers, orders and amounts are fed back)

Exit status: 0 done, 1 failed or interrupted, 2 bad usage.`

// The demo's contract, template and data are the tickets the benchmark
// runs on too (cmd/internal/tickets).
const (
	demoSchema   = tickets.Schema
	demoTemplate = tickets.Template
)

// demoFlags are worker demo's flags.
type demoFlags struct {
	fs                *flag.FlagSet
	dbURL             string
	rows, concurrency int
	preset            string
	seed              uint64
	provider, mode    string
	latency           time.Duration
	strategy, natsDir string
	evidence          string
	lf                logFlags
}

func newDemoFlags(stdout io.Writer) *demoFlags {
	f := &demoFlags{fs: newFlagSet("worker demo", demoUsage, "  DATABASE_URL  Postgres ledger (default "+databaseURLDefault+")", stdout)}
	fs := f.fs
	fs.StringVar(&f.dbURL, "database-url", env("DATABASE_URL", databaseURLDefault), "Postgres URL of the ledger (env DATABASE_URL)")
	fs.IntVar(&f.rows, "rows", 3000, "rows in the generated dataset")
	fs.StringVar(&f.preset, "preset", "typical", "simulator preset: "+strings.Join(simPresetNames(), ", "))
	fs.Uint64Var(&f.seed, "seed", 1, "simulator and dataset seed (each run names its batch anew, and the simulator draws by job id, so two runs differ even with one seed)")
	fs.IntVar(&f.concurrency, "concurrency", 64, "jobs run at once")
	fs.StringVar(&f.provider, "provider", llm.ProviderOpenAI, "provider whose wire format the simulator speaks: "+strings.Join(llm.ProviderNames(), ", "))
	fs.StringVar(&f.mode, "mode", string(fixpoint.ModePrompt), "prompt, json_schema or tool")
	fs.DurationVar(&f.latency, "latency", 20*time.Millisecond, "simulated median provider latency (p99 is 10x)")
	fs.StringVar(&f.strategy, "strategy", string(fixpoint.StrategyDefault), "repair strategy: conversation, repair, or patch (an RFC 6902 JSON Patch of the failing locations, mode prompt only)")
	fs.StringVar(&f.evidence, "evidence", string(fixpoint.EvidenceDefault), "check each valid ticket's customer, order and amount against the ticket: off; check (grade and record them); require (one the ticket does not hold, which the simulator invents, is an error fed back)")
	fs.StringVar(&f.natsDir, "nats-dir", demoNATSDirDefault, "data directory of the demo's embedded NATS server; kept, so an interrupted demo can be finished")
	fs.StringVar(&f.lf.level, "log-level", env("LOG_LEVEL", "warn"), "log level: debug, info, warn, error")
	fs.StringVar(&f.lf.format, "log-format", env("LOG_FORMAT", "text"), "log format: text or json")
	return f
}

// check refuses values the demo cannot run with.
func (f *demoFlags) check() error {
	switch {
	case f.rows < 1:
		return usagef("--rows must be at least 1")
	case f.concurrency < 1 || f.concurrency > pipeline.ConcurrencyMax:
		return usagef("--concurrency %d: want 1 to %d", f.concurrency, pipeline.ConcurrencyMax)
	case f.latency < 0:
		return usagef("--latency %s: want 0 (instant) or more", f.latency)
	case !slices.Contains(llm.ProviderNames(), f.provider):
		return usagef("--provider %q: want %s", f.provider, strings.Join(llm.ProviderNames(), ", "))
	case !slices.Contains([]fixpoint.Mode{fixpoint.ModePrompt, fixpoint.ModeJSONSchema, fixpoint.ModeTool}, fixpoint.Mode(f.mode)):
		return usagef("--mode %q: want prompt, json_schema or tool", f.mode)
	}
	if _, err := fixpoint.ParseEvidenceMode(f.evidence); err != nil {
		return usagef("--evidence: %v", err)
	}
	return nil
}

// enqueueConfig is the demo batch's: a name of its own for every run (two
// demos in one second shared one batch, and the second printed the
// first's summary as its own).
func (f *demoFlags) enqueueConfig() (enqueue.Config, error) {
	batch := fmt.Sprintf("demo-%s-%04x", time.Now().UTC().Format("20060102-150405"), rand.Uint32N(1<<16))
	ecfg := enqueue.Config{
		Batch: batch, Schema: []byte(demoSchema), Template: demoTemplate, Format: enqueue.FormatJSONL,
		IDField: "ticket_id", Provider: f.provider, Model: "sim-" + f.preset, Mode: fixpoint.Mode(f.mode),
		Limits: fixpoint.Limits{Strategy: fixpoint.Strategy(f.strategy)}, Evidence: fixpoint.EvidenceMode(f.evidence),
	}
	if err := enqueue.Check(ecfg); err != nil { // --strategy and --mode are the demo's settings that can fail
		return ecfg, usagef("--strategy %s with --mode %s: %v", f.strategy, f.mode, err)
	}
	return ecfg, nil
}

// demoCommand is worker demo.
type demoCommand struct{ stdout, stderr io.Writer }

func (c *demoCommand) Run(ctx context.Context, args []string) error {
	stdout, stderr := c.stdout, c.stderr
	f := newDemoFlags(stdout)
	if err := parseFlags(f.fs, args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	log, err := f.lf.logger(stderr)
	if err != nil {
		return err
	}
	ecfg, err := f.enqueueConfig()
	if err != nil {
		return err
	}
	pf := providerFlags{simPreset: f.preset, simSeed: f.seed, maxConcurrency: f.concurrency, maxRetries: 4, timeout: time.Minute,
		flexTimeout: llm.FlexTimeoutDefault, flexFallback: flexFallbackDefault, flexFallbackAfter: llm.FlexFallbackAfterDefault,
		simLatencyP50: f.latency, simLatencyP99: 10 * f.latency}
	if err := pf.check(); err != nil {
		return err
	}
	tty := isTerminal(stdout)

	fmt.Fprintf(stdout, "fixpoint demo: %d support tickets, simulator preset %q, %s (%s wire format), %s mode\n", f.rows, f.preset, f.provider, llm.WireOf(f.provider), f.mode)
	st, err := openStore(ctx, f.dbURL, true, nil)
	if err != nil {
		return fmt.Errorf("%w (is Postgres running at DATABASE_URL?)", err)
	}
	defer st.Close()

	// The queue lives in a kept directory: an interrupted demo is finished
	// by a worker on the same directory, as the last line says.
	nf := natsFlags{dir: f.natsDir, addr: "127.0.0.1:-1", ledger: store.LedgerName(f.dbURL)}
	js, closeNATS, err := nf.connect(log)
	if err != nil {
		return err
	}
	defer closeNATS()
	clients, closeSim, err := pf.build(nil)
	if err != nil {
		return err
	}
	defer closeSim()

	published, err := enqueueDemo(ctx, stdout, tty, js, st, ecfg, demoDataset(f.rows, f.seed), f.rows)
	if err != nil {
		return err
	}
	start := time.Now()
	p, err := drainDemo(ctx, stdout, tty, js, st, pipeline.WorkerConfig{
		Concurrency: f.concurrency, Drain: true, Providers: clients, Logger: log, Metrics: pipeline.NewMetrics(),
	}, ecfg.Batch, published)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return demoInterrupted(ecfg.Batch, f.natsDir, f.preset, fmt.Sprintf("%d of %s not final", p.Queued, cli.Plural(p.Total, "job")))
	}
	fmt.Fprintf(stdout, "\nbatch %s done in %s\n\n", ecfg.Batch, time.Since(start).Round(time.Millisecond))
	return printReport(ctx, stdout, st, ecfg.Batch, f.dbURL)
}

// enqueueDemo enqueues the demo's dataset of rows, with a progress bar,
// and returns the jobs published. Interrupted, it cancels the batch: the
// dataset lives only in this run, no enqueue can record the rest, and the
// partly recorded batch could never be done.
func enqueueDemo(ctx context.Context, stdout io.Writer, tty bool, js jetstream.JetStream, st *store.Store, ecfg enqueue.Config, data string, rows int) (int, error) {
	bar := cli.NewProgressBar(stdout, tty, "enqueue", rows)
	ecfg.ProgressFunc = func(p enqueue.Progress) {
		if p.Phase == enqueue.PhasePublish { // the check pass is quick here
			bar.Update(p.Rows, fmt.Sprintf("%d published", p.Published), false)
		}
	}
	prog, err := enqueue.Run(ctx, js, st, ecfg, strings.NewReader(data))
	bar.Update(prog.Rows, fmt.Sprintf("%d published", prog.Published), true)
	if err == nil {
		return prog.Published, nil
	}
	if ctx.Err() == nil {
		return 0, err
	}
	batch := ecfg.Batch
	if _, cerr := st.Cancel(context.WithoutCancel(ctx), batch); cerr != nil && !errors.Is(cerr, store.ErrNotFound) {
		return 0, fmt.Errorf("interrupted while enqueueing; cancelling batch %s failed too: %w", batch, cerr)
	}
	return 0, fmt.Errorf("interrupted while enqueueing: batch %s is cancelled (its dataset is generated by each run); run worker demo again", batch)
}

// drainDemo runs a draining worker on the demo's queue until it is empty
// or ctx ends, with a progress bar of the batch's jobs, and returns the
// batch's progress then.
func drainDemo(ctx context.Context, stdout io.Writer, tty bool, js jetstream.JetStream, st *store.Store, cfg pipeline.WorkerConfig, batch string, published int) (store.Progress, error) {
	w, err := pipeline.NewWorker(js, st, cfg)
	if err != nil {
		return store.Progress{}, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	bar := cli.NewProgressBar(stdout, tty, "jobs   ", published)
	show := func(p store.Progress, final bool) {
		bar.Update(p.Total-p.Queued, fmt.Sprintf("valid %d, invalid %d, failed %d", p.Valid, p.Invalid, p.Failed), final)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				return store.Progress{}, err
			}
			running = false
		case <-tick.C:
			if p, err := st.Progress(ctx, batch); err == nil {
				show(p, false)
			}
		}
	}
	p, err := st.Progress(context.WithoutCancel(ctx), batch)
	if err != nil {
		return p, err
	}
	show(p, true)
	return p, nil
}

// demoInterrupted says how to finish an interrupted demo batch: its queue
// is kept in dir.
func demoInterrupted(batch, dir, preset, state string) error {
	return fmt.Errorf(`interrupted (%s); the queue is kept in %s. To finish batch %s, with the same DATABASE_URL:
  worker --drain --batch %s --sim %s --nats-dir %s`, state, dir, batch, batch, preset, dir)
}

func printReport(ctx context.Context, w io.Writer, st *store.Store, batch, dbURL string) error {
	sum, err := st.Summary(ctx, batch)
	if err != nil {
		return err
	}
	cli.WriteSummary(w, sum, nil) // the demo's model has a price
	fmt.Fprintln(w)
	if err := cli.WriteFailureReport(ctx, w, st, batch, 8); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nAsk the ledger yourself: psql %q -c \"SELECT * FROM batch_summary WHERE batch = '%s'\"\n", withoutPassword(dbURL), batch)
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// demoDataset generates n support tickets as JSONL, the same for the same
// seed.
func demoDataset(n int, seed uint64) string { return tickets.Dataset(n, seed) }

// withoutPassword is a database URL fit to print: its password left out
// (psql asks for it, or takes it from PGPASSWORD or ~/.pgpass).
func withoutPassword(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		return u.String()
	}
	return keywordPassword.ReplaceAllString(dsn, "")
}

// keywordPassword is the password of a keyword/value connection string.
var keywordPassword = regexp.MustCompile(`\s*\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S*)`)
