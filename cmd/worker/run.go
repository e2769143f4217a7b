package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/budget"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

const runUsage = `Usage: worker [run] [flags]
       worker migrate | check | try | demo   (worker COMMAND --help)

Pulls jobs from the shared JetStream consumer, runs each through the repair
loop in a bounded pool, writes every result and attempt to the Postgres ledger
and acks a job only after its rows are committed. SIGINT/SIGTERM stop pulling,
let jobs in flight finish within --grace, hand the rest back for immediate
redelivery (their calls are recorded as interrupted), flush writes and exit 0;
a second signal ends the grace at once.

The worker creates the database DATABASE_URL names when it does not exist
(with a warning: a typo makes a new, empty ledger) and migrates it.
Postgres and NATS may start after the worker: it keeps trying for
--start-timeout, /readyz answering not ready meanwhile. A job the worker's
ledger never recorded (a worker on another DATABASE_URL than enqueue's) is
handed back, never run or acked; the worker then pulls one job at a time and
/readyz says why. A model the provider does not have (a typo, a model not
pulled) stops its lane, that provider and model, not the worker: it says so
once in the log, makes no more calls for it and holds its jobs, still
queued, while its other lanes go on; every 5 minutes one held job tries
the model again, and once the provider answers the lane resumes and its held
jobs run; meanwhile /readyz answers 503 naming the lane, and --drain exits 1
when only such jobs are left.

With --drain the worker exits once the queue is empty and nothing is in
flight (cron, a Kubernetes Job); with --batch it then checks that batch and
exits 1 when a job of it is not final, more than --max-failure-rate of its
jobs are not valid, or none is (a provider unreachable all night is not a
success). A provider that fails after the transport retries is waited out
inside each job's delivery (pulling paused), so an outage of minutes spends
no deliveries.

--rpm and --tpm are a lane's budget (a provider, base URL, model and API
key) across every worker on the same NATS: each worker leases a few
seconds of it at a time from a KV bucket and holds its calls when its grant
is spent; a 429 slows the lane for all of them. --budget local makes them
this process's own instead.

Without NATS_URL the queue is the embedded one in
--nats-dir, which enqueue (also without NATS_URL) writes to, so a nightly
cron line needs only Postgres:

  enqueue --batch nightly-$(date +%F) --schema s.json --template t.txt --model gpt-4o-mini data.jsonl &&
  worker --drain --batch nightly-$(date +%F) --max-failure-rate 0.05

Other commands: migrate (apply the ledger migrations), check (extract and
validate a reply), try (one job live, each attempt as a card), demo (a demo
batch end to end on the simulator). The throughput figures are a separate
command, fixpoint-bench.`

var runEnvHelp = `  DATABASE_URL           Postgres ledger (default ` + databaseURLDefault + `)
  NATS_URL               NATS server; empty (the default) serves the embedded queue (see --nats-dir, --nats-listen)
  FIXPOINT_NATS_DIR      the embedded queue's directory (default ` + natsDirDefault + `)
  FIXPOINT_SPILL_DIR     results kept on disk when the ledger was down at a stop, and the reply journal (default ` + spillDirName + ` beside the queue's directory: ` + spillDirDefault + `)
  FIXPOINT_NATS_LISTEN   where the embedded server listens for enqueue and other workers (default ` + embeddedNATSDefault + `)
  FIXPOINT_METRICS_ADDR  /metrics, /healthz, /readyz (default ` + metricsAddrDefault + `; off to disable)
  FIXPOINT_RPM, FIXPOINT_TPM
                         per-lane request and token budgets per minute, shared by the workers on this NATS (default 0: unlimited)
  FIXPOINT_BUDGET        cluster (default) or local: who shares FIXPOINT_RPM and FIXPOINT_TPM (see --budget)
  LOG_LEVEL, LOG_FORMAT  info|debug|warn|error, text|json; prompts and replies are never logged
` + tracesEnvHelp + providerEnvHelp

// runFlags are worker run's flags: cfg holds what maps onto the pipeline's
// WorkerConfig as given; pipelineConfig completes it from the rest.
type runFlags struct {
	fs  *flag.FlagSet
	cfg pipeline.WorkerConfig

	dbURL, metricsAddr, record, pricesFile string
	ahead                                  int
	budgetMode                             string
	startTimeout                           time.Duration
	chk                                    drainCheck
	nf                                     natsFlags
	pf                                     providerFlags
	lf                                     logFlags
	tf                                     traceFlags
}

// runFlagGroups lays out worker run's help by topic: its flags are too
// many for one sorted list.
var runFlagGroups = []cliflags.FlagGroup{
	{Title: "Queue (NATS JetStream)", Flags: []string{"nats-url", "nats-dir", "nats-listen", "stream", "subject", "consumer",
		"ack-wait", "max-deliver", "max-ack-pending", "duplicates-window", "stream-replicas"}},
	{Title: "Providers", Flags: append(baseURLFlags(), "provider-timeout", "flex-timeout", "flex-fallback", "flex-fallback-after",
		"transport-retries", "max-hint-wait", "sim", "sim-seed", "sim-latency-p50", "sim-latency-p99")},
	{Title: "Limits", Flags: []string{"concurrency", "jobs-ahead", "rpm", "tpm", "budget", "lane-max-concurrency", "lane-initial-concurrency",
		"max-prompt-bytes", "write-buffer-bytes"}},
	{Title: "Ledger", Flags: []string{"database-url", "start-timeout", "record-requests", "prices", "spill-dir"}},
	{Title: "Drain and stop", Flags: []string{"drain", "batch", "max-failure-rate", "grace"}},
	{Title: "Batch delivery (waves)", Flags: []string{"wave-max-requests", "wave-collect", "wave-poll-min", "wave-poll-max",
		"wave-lease", "wave-realtime-below", "wave-deadline-margin"}},
	{Title: "Metrics, traces and logs", Flags: []string{"metrics-addr", "traces", "log-level", "log-format"}},
}

func newRunFlags(stdout io.Writer) *runFlags {
	f := &runFlags{fs: newFlagSet("worker run", runUsage, runEnvHelp, stdout)}
	fs, cfg := f.fs, &f.cfg
	fs.Usage = func() {
		fmt.Fprintln(stdout, strings.TrimSpace(runUsage))
		cliflags.PrintGroups(stdout, fs, runFlagGroups)
		fmt.Fprintln(stdout, "\nEnvironment:")
		fmt.Fprintln(stdout, strings.TrimRight(runEnvHelp, "\n"))
	}
	fs.StringVar(&f.dbURL, "database-url", env("DATABASE_URL", databaseURLDefault), "Postgres URL of the ledger (env DATABASE_URL)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", env("FIXPOINT_METRICS_ADDR", metricsAddrDefault), "address for /metrics, /healthz, /readyz; 'off' to disable")
	fs.StringVar(&f.record, "record-requests", "full", "keep each request in the ledger as 'full' messages or only its 'hash'")
	fs.StringVar(&f.pricesFile, "prices", "", "JSON file of model prices overriding the built-in table: {\"model\": {\"input_per_mtok\": 0.15, ...}}")
	fs.IntVar(&cfg.Concurrency, "concurrency", pipeline.ConcurrencyDefault, "provider calls in flight at once in this process (each lane's ceiling unless --lane-max-concurrency is set)")
	fs.IntVar(&f.ahead, "jobs-ahead", -1, "jobs pulled ahead and waiting for a free call slot, so a finished call is replaced at once (-1 = half of --concurrency, at most 512)")
	fs.DurationVar(&cfg.Grace, "grace", pipeline.GraceDefault, "time jobs in flight get to finish after SIGTERM (0: none, they are handed back at once; a second signal ends it too); with the ledger down, results then wait up to 10s more for it before they are kept in --spill-dir")
	fs.StringVar(&cfg.SpillDir, "spill-dir", env("FIXPOINT_SPILL_DIR", spillDirDefault), "where results and calls the ledger could not take at a stop, and the journal of replies received (for a kill -9), are kept until the next start writes them ('' keeps nothing); unset, "+spillDirName+" beside --nats-dir")
	fs.BoolVar(&cfg.Drain, "drain", false, "exit when the queue is empty and nothing is in flight (stopped before that by a signal: exit 1)")
	fs.IntVar(&cfg.MaxPromptBytes, "max-prompt-bytes", pipeline.MaxPromptBytesDefault, "reject jobs whose prompt is larger, counted with the system prompt and the schema every request carries")
	fs.StringVar(&f.chk.batch, "batch", "", "with --drain: once drained, check this batch: exit 1 when any of its jobs is not final (lost from the queue) or its failure rate passes --max-failure-rate")
	fs.Float64Var(&f.chk.maxFailureRate, "max-failure-rate", 1, "with --drain --batch: exit 1 when the share of the batch's jobs not valid is above this (0.05 = 5%)")
	fs.DurationVar(&f.startTimeout, "start-timeout", startTimeoutDefault, "how long to keep trying to reach Postgres and NATS at start (they may start after the worker); 0 = try once")
	fs.Int64Var(&cfg.WriteBuffer, "write-buffer-bytes", 0, "bytes of finished results that may wait for their ledger commit; when full, pulling slows down (0 = 8 KiB per job held, --concurrency plus --jobs-ahead, at least 1 MiB)")
	fs.StringVar(&f.budgetMode, "budget", env("FIXPOINT_BUDGET", budgetCluster), "who shares --rpm and --tpm: 'cluster' (every worker on this NATS calling the same provider, base URL, model and key, through a KV bucket) or 'local' (this process alone: N workers on one key then spend N times it)")
	queueFlags(fs, &cfg.Queue)
	waveFlags(fs, &cfg.Wave)
	f.nf.register(fs, true)
	f.pf.register(fs)
	f.lf.register(fs)
	f.tf.register(fs)
	return f
}

// runCommand is worker run, the worker itself.
type runCommand struct{ stdout, stderr io.Writer }

func (c *runCommand) Run(ctx context.Context, args []string) error {
	stdout, stderr := c.stdout, c.stderr
	f := newRunFlags(stdout)
	if err := parseFlags(f.fs, args); err != nil {
		return err
	}
	log, err := f.lf.logger(stderr)
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	cfg, err := f.pipelineConfig(log)
	if err != nil {
		return err
	}
	tracer, stopTraces, err := f.tf.start(ctx, log)
	if err != nil {
		return err
	}
	defer stopTraces()
	cfg.Tracer = tracer
	ops := opsAddr{addr: f.metricsAddr, chosen: os.Getenv("FIXPOINT_METRICS_ADDR") != "" || given(f.fs, "metrics-addr")}
	return serve(ctx, cfg, f.dbURL, ops, f.startTimeout, &f.nf, &f.pf, f.chk, stdout, log)
}

// given reports whether the flag name was on the command line.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// check refuses flag values that cannot work, and flags that need others,
// before anything is started.
func (f *runFlags) check() error {
	if c := f.cfg.Concurrency; c < 1 || c > pipeline.ConcurrencyMax {
		return usagef("--concurrency %d: want 1 to %d (past that, start more workers on the queue)", c, pipeline.ConcurrencyMax)
	}
	if f.ahead < -1 || f.ahead > pipeline.JobsAheadMax {
		return usagef("--jobs-ahead %d: want 0 to %d, or -1 for the default", f.ahead, pipeline.JobsAheadMax)
	}
	if err := f.pf.check(); err != nil {
		return err
	}
	if err := f.tf.check(); err != nil {
		return err
	}
	switch f.budgetMode {
	case budgetCluster:
		f.pf.shared = true
	case budgetLocal:
	default:
		return usagef("--budget %q: want cluster or local", f.budgetMode)
	}
	if err := givenPositive(f.fs, "max-deliver", "max-ack-pending", "ack-wait", "wave-max-requests", "max-prompt-bytes", "provider-timeout"); err != nil {
		return err
	}
	f.followQueueDir()
	if err := pipeline.CheckSpillDir(f.cfg.SpillDir); err != nil {
		return usagef("--spill-dir %q cannot hold results: %v", f.cfg.SpillDir, err)
	}
	if f.startTimeout < 0 {
		return usagef("--start-timeout %s is negative (0 tries once)", f.startTimeout)
	}
	if f.nf.url != "" {
		if err := natsconn.CheckURL(f.nf.url); err != nil {
			return usagef("--nats-url (env NATS_URL): %v", err)
		}
	}
	if err := natsconn.CheckReplicas(f.nf.url, f.cfg.Queue.Replicas); err != nil {
		return usageError{Err: err}
	}
	if err := f.checkDrain(); err != nil {
		return err
	}
	if a := f.metricsAddr; a != "" && a != "off" {
		if _, port, err := net.SplitHostPort(a); err != nil || !validPort(port) {
			return usagef("--metrics-addr %q (env FIXPOINT_METRICS_ADDR): want host:port (port 0 to 65535), :port or off", a)
		}
	}
	return nil
}

// followQueueDir puts the spill directory beside the embedded queue's
// directory (--nats-dir) unless --spill-dir or FIXPOINT_SPILL_DIR names
// one: an operator who keeps the queue elsewhere keeps the worker's state
// there, not in whatever directory cron started it in. The default queue
// directory, .fixpoint/nats, gives the default, .fixpoint/unwritten.
func (f *runFlags) followQueueDir() {
	if given(f.fs, "spill-dir") || os.Getenv("FIXPOINT_SPILL_DIR") != "" || f.nf.dir == "" {
		return
	}
	f.cfg.SpillDir = filepath.Join(filepath.Dir(filepath.Clean(f.nf.dir)), spillDirName)
}

// checkDrain checks --batch and --max-failure-rate, which check a batch
// once --drain has drained the queue.
func (f *runFlags) checkDrain() error {
	if f.chk.batch != "" && !f.cfg.Drain {
		return usagef("--batch checks a batch once the queue is drained: it needs --drain")
	}
	if r := f.chk.maxFailureRate; !(r >= 0 && r <= 1) { // NaN too
		return usagef("--max-failure-rate %v: want a share between 0 and 1", r)
	}
	if given(f.fs, "max-failure-rate") && f.chk.batch == "" {
		return usagef("--max-failure-rate is checked on a batch: it needs --drain --batch NAME")
	}
	return nil
}

// pipelineConfig builds the worker's pipeline configuration from the
// flags, and validates it: a value that cannot work is a usage error
// naming its flag.
func (f *runFlags) pipelineConfig(log *slog.Logger) (pipeline.WorkerConfig, error) {
	cfg := f.cfg
	cfg.Logger = log
	if cfg.SpillDir == "" {
		log.Warn("worker: no spill directory: results the ledger cannot take at a stop, and the replies of a worker killed with them in memory, are not kept")
	}
	if cfg.Grace == 0 {
		// WorkerConfig reads 0 as its default; --grace 0 means none.
		cfg.Grace = time.Nanosecond
	}
	// --concurrency bounds calls; the pool holds the jobs ahead as well.
	f.pf.laneDefault = cfg.Concurrency
	ahead := f.ahead
	if ahead < 0 {
		ahead = pipeline.JobsAheadDefault(cfg.Concurrency)
	}
	cfg.Concurrency += ahead
	cfg.JobsAhead = ahead
	cfg.Loop.Record = repair.RequestRecord(f.record)
	if cfg.Loop.Record != repair.RecordFull && cfg.Loop.Record != repair.RecordHash {
		return cfg, usagef("--record-requests %q: want full or hash", f.record)
	}
	if f.pricesFile != "" {
		data, err := os.ReadFile(f.pricesFile)
		if err != nil {
			return cfg, usagef("--prices: %v", err)
		}
		if cfg.Loop.Prices, err = repair.ParsePrices(repair.DefaultPrices(), data); err != nil {
			return cfg, usagef("--prices %s: %v", f.pricesFile, err)
		}
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		return cfg, settingUsage(err)
	}
	return cfg, nil
}

// validPort reports whether p is a port number, 0 to 65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}

// opsAddr is where /metrics, /healthz and /readyz are served, and whether
// the operator chose it (flag or environment) rather than took the default.
type opsAddr struct {
	addr   string
	chosen bool
}

// settingFlags names the flag behind each WorkerConfig setting the worker's
// flags set, so a value that cannot work is reported as the flag typed.
var settingFlags = map[string]string{
	"Concurrency":         "--concurrency",
	"JobsAhead":           "--jobs-ahead",
	"Grace":               "--grace",
	"MaxPromptBytes":      "--max-prompt-bytes",
	"WriteBuffer":         "--write-buffer-bytes",
	"Queue.AckWait":       "--ack-wait",
	"Queue.MaxDeliver":    "--max-deliver",
	"Queue.MaxAckPending": "--max-ack-pending",
	"Queue.Duplicates":    "--duplicates-window",
	"Queue.Stream":        "--stream",
	"Queue.Subject":       "--subject",
	"Queue.Consumer":      "--consumer",
	"Queue.Replicas":      "--stream-replicas",
	"Wave.MaxRequests":    "--wave-max-requests",
	"Wave.Collect":        "--wave-collect",
	"Wave.PollMin":        "--wave-poll-min",
	"Wave.Lease":          "--wave-lease",
	"Wave.DeadlineMargin": "--wave-deadline-margin",
}

// settingUsage turns a WorkerConfig.Validate error into a usage error
// naming the flag.
func settingUsage(err error) error { return cliflags.SettingUsage(err, settingFlags) }

// checkKeys asks each provider the worker has a key for whether it takes
// it, before a job is pulled: a refused key would stop the worker at its
// first call anyway, and every job pulled until then spends a delivery.
// A check that cannot be made (the provider down, a server without a model
// list) is a warning.
func checkKeys(ctx context.Context, clients map[string]pipeline.Completer, log *slog.Logger) error {
	for _, name := range slices.Sorted(maps.Keys(clients)) {
		c, ok := clients[name].(*llm.Client)
		if !ok {
			continue
		}
		if cfg := c.Config(); cfg.APIKey == "" {
			// A worker may serve other providers' jobs only; the public
			// APIs refuse a call without a key, a local compatible server
			// may not.
			if c.MissingKey() {
				row, _ := llm.ProviderNamed(name)
				log.Warn("worker: no API key for this provider: its first job stops the worker (nothing is sent without a key)",
					slog.String("provider", name), slog.String("env", row.KeyEnv))
			}
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.CheckKey(cctx)
		cancel()
		switch {
		case errors.Is(err, llm.ErrKeyRefused):
			return fmt.Errorf("%s refused the API key (asked for its model list at start): fix the key and start the worker again: %w", name, err)
		case err != nil:
			log.Warn("worker: could not check the API key at start; a refused key stops the worker at its first call",
				slog.String("provider", name), slog.String("error", err.Error()))
		}
	}
	return nil
}

// drainCheck is what --drain --batch checks once the queue is drained.
type drainCheck struct {
	batch          string
	maxFailureRate float64
}

// errInterrupted is returned when a --drain run is stopped before the queue
// is drained: exit 1.
var errInterrupted = errors.New("stopped before the queue was drained")

// interrupted is the error of a --drain run stopped early, with what is
// left of the batch when one is named.
func (c drainCheck) interrupted(ctx context.Context, st *store.Store) error {
	if c.batch == "" {
		return fmt.Errorf("%w: what was left (jobs in the queue, jobs in flight, which were handed back, or open provider batches) is finished by the next worker run", errInterrupted)
	}
	p, err := st.Progress(ctx, c.batch)
	if err != nil {
		return fmt.Errorf("%w (and reading batch %s: %v)", errInterrupted, c.batch, err)
	}
	if p.Queued == 0 {
		// The batch asked about is done; the queue held other work.
		return fmt.Errorf("%w (other work was left: other batches' jobs in the queue or open provider batches), though every job of batch %s is final: check it with report wait %s",
			errInterrupted, c.batch, c.batch)
	}
	where := ""
	if n, err := st.InWaves(ctx, c.batch); err == nil && n > 0 {
		where = fmt.Sprintf(", %d of them in open provider batches (report summary %s lists the waves)", n, c.batch)
	}
	return fmt.Errorf("%w: %d of %s of batch %s %s not final yet%s; run the worker again to finish", errInterrupted, p.Queued, cli.Plural(p.Total, "job"), c.batch, cli.Are(p.Queued), where)
}

// check reports the batch and fails when it is not done or fails too much:
// a nightly cron line must not exit 0 with work stuck or refused.
func (c drainCheck) check(ctx context.Context, st *store.Store, stdout io.Writer) error {
	if c.batch == "" {
		return nil
	}
	p, err := st.Progress(ctx, c.batch)
	if err != nil {
		return err
	}
	if p.Total == 0 {
		return fmt.Errorf("no batch %q in the ledger (was it enqueued into this DATABASE_URL?)", c.batch)
	}
	if p.Recording != nil {
		// Its enqueue is not done: jobs not final may not be published
		// yet, and --resume would be refused.
		return cli.NotFullyEnqueued(c.batch, p.Recording)
	}
	if p.Queued > 0 {
		// Jobs a wave holds are not in the queue, and --resume does not
		// republish them: a wave another home drives (another provider
		// URL or queue) waits for a worker of that home.
		if n, err := st.InWaves(ctx, c.batch); err == nil && n > 0 {
			return fmt.Errorf("the queue is drained but %d of %s of batch %s %s not final: %d of them %s in open provider batches this worker does not drive (%s); run a worker with those settings, or wait for the one that does (report summary %s lists the waves)",
				p.Queued, cli.Plural(p.Total, "job"), c.batch, cli.Are(p.Queued), n, cli.Are(n), openWaveHomes(ctx, st, c.batch), c.batch)
		}
		return fmt.Errorf("the queue is drained but %d of %s of batch %s %s not final: their messages are not in the queue (run enqueue --batch %s --resume to republish them)",
			p.Queued, cli.Plural(p.Total, "job"), c.batch, cli.Are(p.Queued), c.batch)
	}
	line, notes, err := cli.BatchVerdict(c.batch, p, cli.OverBudgetSpend(ctx, st, c.batch, p), c.maxFailureRate)
	fmt.Fprintln(stdout, line)
	for _, n := range notes {
		fmt.Fprintln(stdout, n)
	}
	return err
}

// sameQueue refuses to drain a queue the batch was not enqueued on.
func sameQueue(b *store.Batch, q queue.Config) error {
	s, err := enqueue.ParseBatchSettings(b)
	if err != nil {
		return err
	}
	q = q.WithDefaults()
	def := queue.Config{}.WithDefaults()
	s.Stream, s.Subject = cmp.Or(s.Stream, def.Stream), cmp.Or(s.Subject, def.Subject) // "" is the defaults
	if s.Stream == q.Stream && s.Subject == q.Subject {
		return nil
	}
	return usagef("batch %s was enqueued on stream %s (subject %s); this worker reads stream %s (subject %s): run it with --stream %s --subject %s",
		b.Name, s.Stream, s.Subject, q.Stream, q.Subject, s.Stream, s.Subject)
}

// startTimeoutDefault is how long a worker waits for Postgres and NATS at
// start: in compose or Kubernetes they may come up after it.
const startTimeoutDefault = 2 * time.Minute

// serve wires the ledger, the queue, the providers and the metrics server
// around one pipeline.Worker and runs it. Postgres and NATS may come up
// after the worker (compose, Kubernetes): the first connection to each is
// retried with backoff for startTimeout, /readyz answering not ready
// meanwhile; a failure no retry can fix (bad credentials, a bad URL) ends it
// at once.
func serve(ctx context.Context, cfg pipeline.WorkerConfig, dbURL string, ops opsAddr, startTimeout time.Duration, nf *natsFlags, pf *providerFlags,
	chk drainCheck, stdout io.Writer, log *slog.Logger) error {
	m := pipeline.NewMetrics()
	cfg.Metrics = m
	var readiness atomic.Pointer[func(context.Context) error]
	starting := func(context.Context) error { return errors.New("starting: connecting to Postgres and NATS") }
	readiness.Store(&starting)
	opsCtx, stopOps := context.WithCancel(context.WithoutCancel(ctx))
	defer stopOps()
	if err := serveOps(opsCtx, ops.addr, ops.chosen, m, func(rctx context.Context) error { return (*readiness.Load())(rctx) }, log); err != nil {
		return err
	}
	st, err := startLedger(ctx, dbURL, startTimeout, cfg, chk, log)
	if err != nil {
		return err
	}
	defer st.Close()
	var js jetstream.JetStream
	var closeNATS func()
	err = retryStart(ctx, startTimeout, log, "NATS", natsRetryable, func() (err error) {
		nf.ledger = store.LedgerName(dbURL)
		js, closeNATS, err = nf.connect(log)
		return err
	})
	if err != nil {
		return err
	}
	defer closeNATS()
	if err := shareBudget(ctx, js, pf, m, log); err != nil {
		return err
	}
	clients, closeSim, err := pf.build(metricsObserver{m: m})
	if err != nil {
		return err
	}
	defer closeSim()
	if pf.simPreset == "" {
		if err := checkKeys(ctx, clients, log); err != nil {
			return err
		}
	}
	cfg.Providers = clients
	w, err := pipeline.NewWorker(js, st, cfg)
	if err != nil {
		return usageError{Err: err}
	}
	ready := func(rctx context.Context) error {
		if err := st.Ping(rctx); err != nil {
			return err
		}
		if _, err := js.AccountInfo(rctx); err != nil {
			return err
		}
		return w.Refusing()
	}
	readiness.Store(&ready)
	stopNow := w.StopNow
	secondSignal.Store(&stopNow)
	defer secondSignal.Store(nil)
	start := time.Now()
	err = w.Run(ctx)
	log.Info("worker: exiting", slog.Duration("uptime", time.Since(start).Round(time.Millisecond)))
	if err != nil || !cfg.Drain {
		return err
	}
	if ctx.Err() != nil {
		// Asked to run until the queue is empty and stopped first (a
		// signal, a cron timeout): the work is not done, and the exit code
		// must say so.
		return chk.interrupted(context.WithoutCancel(ctx), st)
	}
	return chk.check(context.WithoutCancel(ctx), st, stdout)
}

// --budget's values.
const (
	budgetCluster = "cluster"
	budgetLocal   = "local"
)

// shareBudget makes the lanes' --rpm and --tpm a budget shared by every
// worker on this NATS (--budget cluster): each lane leases its share from
// a KV bucket (package budget). Without a budget there is nothing to share.
func shareBudget(ctx context.Context, js jetstream.JetStream, pf *providerFlags, m *pipeline.Metrics, log *slog.Logger) error {
	if !pf.shared || pf.rpm == 0 && pf.tpm == 0 {
		return nil
	}
	g, err := budget.Open(ctx, js, budget.Config{Logger: log, OnOp: func(op string, err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		m.BudgetOps.WithLabelValues(op, outcome).Inc()
	}})
	if err != nil {
		return err
	}
	pf.granter = g
	log.Info("worker: --rpm and --tpm are shared with every worker on this NATS calling the same lane",
		slog.Int("rpm", pf.rpm), slog.Int("tpm", pf.tpm), slog.String("bucket", budget.BucketDefault))
	return nil
}

// startLedger opens and migrates the ledger, retrying for startTimeout,
// writes the prices the worker charges into it, and checks the batch
// --drain --batch names.
func startLedger(ctx context.Context, dbURL string, startTimeout time.Duration, cfg pipeline.WorkerConfig, chk drainCheck, log *slog.Logger) (*store.Store, error) {
	var st *store.Store
	err := retryStart(ctx, startTimeout, log, "Postgres", store.IsTransient, func() (err error) {
		st, err = openStore(ctx, dbURL, true, log)
		return err
	})
	if err != nil {
		return nil, err
	}
	// model_prices holds what this worker charges, for SQL that reprices
	// attempts: a worker that cannot write it still works.
	prices := cfg.Loop.Prices
	if prices == nil {
		prices = repair.DefaultPrices()
	}
	if err := st.PutModelPrices(ctx, pipeline.ChargedPrices(prices)); err != nil {
		log.Warn("worker: write the price table into model_prices", slog.String("error", err.Error()))
	}
	if err := chk.precheck(ctx, st, cfg.Queue); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// precheck checks the batch to check before the queue is drained: a
// misspelt --batch is said then, not after, and a worker on another queue
// than the batch's would drain it and then report the batch's jobs as
// lost from the queue, with a --resume that republishes nothing.
func (c drainCheck) precheck(ctx context.Context, st *store.Store, q queue.Config) error {
	if c.batch == "" {
		return nil
	}
	b, err := st.Batch(ctx, c.batch)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no batch %q in the ledger (was it enqueued into this DATABASE_URL?)", c.batch)
	} else if err != nil {
		return err
	}
	return sameQueue(b, q)
}

// retryStart runs connect until it succeeds, fails in a way retryable says
// no retry can fix, ctx ends or timeout has passed, logging each failure.
func retryStart(ctx context.Context, timeout time.Duration, log *slog.Logger, what string, retryable func(error) bool, connect func() error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 250*time.Millisecond, 5*time.Second, timeout
	var bo backoff.BackOff = b
	if timeout <= 0 {
		bo = &backoff.StopBackOff{}
	}
	return backoff.RetryNotify(func() error {
		err := connect()
		if err != nil && !retryable(err) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(bo, ctx), func(err error, next time.Duration) {
		log.Warn("worker: "+what+" not reachable yet, trying again", slog.Duration("in", next.Round(time.Millisecond)),
			slog.String("error", err.Error()))
	})
}

// natsRetryable reports whether a failure to reach NATS at start may pass:
// a server not up yet, not a refused login, a bad URL or a store directory
// another worker holds.
func natsRetryable(err error) bool {
	var uerr usageError
	switch {
	case errors.As(err, &uerr), errors.Is(err, natsconn.ErrStoreDirInUse), errors.Is(err, natsconn.ErrListenInUse), errors.Is(err, nats.ErrAuthorization),
		errors.Is(err, natsconn.ErrBadURL), errors.Is(err, syscall.ENOTDIR), errors.Is(err, fs.ErrPermission),
		errors.Is(err, nats.ErrBadSubject), strings.Contains(err.Error(), "url"):
		return false
	}
	return true
}

// openWaveHomes names where batch's open waves can be driven.
func openWaveHomes(ctx context.Context, st *store.Store, batch string) string {
	waves, err := st.Waves(ctx, batch)
	if err != nil {
		return "see report summary"
	}
	var homes []string
	for _, w := range waves {
		if w.Status == store.WaveDone || w.Status == store.WaveFailed {
			continue
		}
		h := cmp.Or(w.Home, "any worker")
		if !slices.Contains(homes, h) {
			homes = append(homes, h)
		}
	}
	if len(homes) == 0 {
		return "see report summary"
	}
	return "driven from " + strings.Join(homes, "; ")
}
