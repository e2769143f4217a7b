package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

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
it enqueues, it cancels the batch: its dataset exists only in that run.`

// The demo's contract, template and data are the tickets the benchmark
// runs on too (cmd/internal/tickets).
const (
	demoSchema   = tickets.Schema
	demoTemplate = tickets.Template
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("worker demo", demoUsage, "  DATABASE_URL  Postgres ledger (default "+databaseURLDefault+")", stdout)
	var (
		dbURL       = fs.String("database-url", env("DATABASE_URL", databaseURLDefault), "Postgres URL of the ledger (env DATABASE_URL)")
		rows        = fs.Int("rows", 3000, "rows in the generated dataset")
		preset      = fs.String("preset", "typical", "simulator preset: "+strings.Join(simPresetNames(), ", "))
		seed        = fs.Uint64("seed", 1, "simulator and dataset seed (each run names its batch anew, and the simulator draws by job id, so two runs differ even with one seed)")
		concurrency = fs.Int("concurrency", 64, "jobs run at once")
		provider    = fs.String("provider", llm.ProviderOpenAI, "wire format the simulator speaks: openai, anthropic or ollama")
		mode        = fs.String("mode", string(fixpoint.ModePrompt), "prompt, json_schema or tool")
		latency     = fs.Duration("latency", 20*time.Millisecond, "simulated median provider latency (p99 is 10x)")
		strategy    = fs.String("strategy", string(fixpoint.StrategyDefault), "repair strategy: conversation, repair, or patch (an RFC 6902 JSON Patch of the failing locations, mode prompt only)")
		natsDir     = fs.String("nats-dir", demoNATSDirDefault, "data directory of the demo's embedded NATS server; kept, so an interrupted demo can be finished")
		lf          logFlags
	)
	fs.StringVar(&lf.level, "log-level", env("LOG_LEVEL", "warn"), "log level: debug, info, warn, error")
	fs.StringVar(&lf.format, "log-format", env("LOG_FORMAT", "text"), "log format: text or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *rows < 1:
		return usagef("--rows must be at least 1")
	case *concurrency < 1 || *concurrency > pipeline.ConcurrencyMax:
		return usagef("--concurrency %d: want 1 to %d", *concurrency, pipeline.ConcurrencyMax)
	case *latency < 0:
		return usagef("--latency %s: want 0 (instant) or more", *latency)
	case !slices.Contains([]string{llm.ProviderOpenAI, llm.ProviderAnthropic, llm.ProviderOllama}, *provider):
		return usagef("--provider %q: want openai, anthropic or ollama", *provider)
	case !slices.Contains([]fixpoint.Mode{fixpoint.ModePrompt, fixpoint.ModeJSONSchema, fixpoint.ModeTool}, fixpoint.Mode(*mode)):
		return usagef("--mode %q: want prompt, json_schema or tool", *mode)
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	// A name of its own for every run: two demos in one second shared one
	// batch, and the second printed the first's summary as its own.
	batch := fmt.Sprintf("demo-%s-%04x", time.Now().UTC().Format("20060102-150405"), rand.Uint32N(1<<16))
	ecfg := enqueue.Config{
		Batch: batch, Schema: []byte(demoSchema), Template: demoTemplate, Format: enqueue.FormatJSONL,
		IDField: "ticket_id", Provider: *provider, Model: "sim-" + *preset, Mode: fixpoint.Mode(*mode),
		Limits: fixpoint.Limits{Strategy: fixpoint.Strategy(*strategy)},
	}
	if err := enqueue.Check(ecfg); err != nil { // --strategy and --mode are the demo's settings that can fail
		return usagef("--strategy %s with --mode %s: %v", *strategy, *mode, err)
	}
	pf := providerFlags{simPreset: *preset, simSeed: *seed, maxConcurrency: *concurrency, maxRetries: 4, timeout: time.Minute,
		simLatencyP50: *latency, simLatencyP99: 10 * *latency}
	if err := pf.check(); err != nil {
		return err
	}
	tty := isTerminal(stdout)

	fmt.Fprintf(stdout, "fixpoint demo: %d support tickets, simulator preset %q, %s wire format, %s mode\n", *rows, *preset, *provider, *mode)
	st, err := openStore(ctx, *dbURL, true, nil)
	if err != nil {
		return fmt.Errorf("%w (is Postgres running at DATABASE_URL?)", err)
	}
	defer st.Close()

	// The queue lives in a kept directory: an interrupted demo is finished
	// by a worker on the same directory, as the last line says.
	nf := natsFlags{dir: *natsDir, addr: "127.0.0.1:-1"}
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

	data := demoDataset(*rows, *seed)
	bar := cli.NewProgressBar(stdout, tty, "enqueue", *rows)
	ecfg.ProgressFunc = func(p enqueue.Progress) {
		if p.Phase == enqueue.PhasePublish { // the check pass is quick here
			bar.Update(p.Rows, fmt.Sprintf("%d published", p.Published), false)
		}
	}
	prog, err := enqueue.Run(ctx, js, st, ecfg, strings.NewReader(data))
	bar.Update(prog.Rows, fmt.Sprintf("%d published", prog.Published), true)
	if err != nil {
		if ctx.Err() != nil {
			// The dataset lives only in this run: no enqueue can record
			// the rest, and the partly recorded batch could never be
			// done. It is cancelled, to end as it is.
			if _, cerr := st.Cancel(context.WithoutCancel(ctx), batch); cerr != nil && !errors.Is(cerr, store.ErrNotFound) {
				return fmt.Errorf("interrupted while enqueueing; cancelling batch %s failed too: %w", batch, cerr)
			}
			return fmt.Errorf("interrupted while enqueueing: batch %s is cancelled (its dataset is generated by each run); run worker demo again", batch)
		}
		return err
	}

	m := pipeline.NewMetrics()
	w, err := pipeline.NewWorker(js, st, pipeline.WorkerConfig{
		Concurrency: *concurrency, Drain: true, Providers: clients, Logger: log, Metrics: m,
	})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- w.Run(runCtx) }()
	wbar := cli.NewProgressBar(stdout, tty, "jobs   ", prog.Published)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			break wait
		case <-tick.C:
			if p, err := st.Progress(ctx, batch); err == nil {
				wbar.Update(p.Total-p.Queued, fmt.Sprintf("valid %d, invalid %d, failed %d", p.Valid, p.Invalid, p.Failed), false)
			}
		}
	}
	p, err := st.Progress(context.WithoutCancel(ctx), batch)
	if err != nil {
		return err
	}
	wbar.Update(p.Total-p.Queued, fmt.Sprintf("valid %d, invalid %d, failed %d", p.Valid, p.Invalid, p.Failed), true)
	if ctx.Err() != nil {
		return demoInterrupted(batch, *natsDir, *preset, fmt.Sprintf("%d of %d jobs not final", p.Queued, p.Total))
	}
	fmt.Fprintf(stdout, "\nbatch %s done in %s\n\n", batch, time.Since(start).Round(time.Millisecond))
	return printReport(ctx, stdout, st, batch, *dbURL)
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
	cli.WriteSummary(w, sum)
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
