package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/wave"
)

// Defaults for settings read from the environment.
const (
	databaseURLDefault  = "postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable"
	embeddedNATSDefault = natsconn.ListenDefault
	// spillDirDefault is where a worker keeps the results the ledger could
	// not take at a stop, beside the embedded queue's data: spillDirName
	// beside natsDirDefault (runFlags.followQueueDir).
	spillDirDefault    = ".fixpoint/" + spillDirName
	spillDirName       = "unwritten"
	natsDirDefault     = natsconn.DirDefault
	metricsAddrDefault = "127.0.0.1:9464"
)

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func newFlagSet(name, usage, envHelp string, stdout io.Writer) *flag.FlagSet {
	return cliflags.NewFlagSet(name, usage, envHelp, stdout)
}

// parseFlags parses the flags of a command that takes no arguments: a
// stray word is a usage error, not the silent end of the flags.
func parseFlags(fs *flag.FlagSet, args []string) error { return cliflags.NoArgs(fs, args) }

// logFlags configures the one slog handler.
type logFlags struct{ level, format string }

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", env("LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	fs.StringVar(&l.format, "log-format", env("LOG_FORMAT", "text"), "log format: text or json")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", l.format)
}

// providerFlags configures the provider clients (or the simulator).
type providerFlags struct {
	// baseURLs holds each provider's --NAME-base-url, by name.
	baseURLs           map[string]*string
	rpm, tpm           int
	maxConcurrency     int
	initialConcurrency int
	// laneDefault is the lane ceiling when --lane-max-concurrency is 0:
	// the worker's --concurrency, set by the command before build.
	laneDefault                  int
	timeout                      time.Duration
	flexTimeout                  time.Duration
	flexFallback                 string
	flexFallbackAfter            time.Duration
	maxHintWait                  time.Duration
	maxRetries                   int
	simPreset                    string
	simSeed                      uint64
	simLatencyP50, simLatencyP99 time.Duration
	// shared is worker run's --budget cluster: the lanes' --rpm and --tpm
	// are shared with the other workers through granter, set once NATS
	// is reached.
	shared  bool
	granter llm.Granter
}

// --flex-fallback values.
const (
	flexFallbackDefault = "default"
	flexFallbackNone    = "none"
)

// providerEnvHelp lists each provider's variables, from the provider
// table.
var providerEnvHelp = providerEnv()

func providerEnv() string {
	var b strings.Builder
	for _, r := range llm.Providers() {
		if r.KeyEnv != "" {
			fmt.Fprintf(&b, "  %-22s key for the %s provider (never logged or stored)\n", r.KeyEnv, r.Name)
		}
		fmt.Fprintf(&b, "  %-22s %s base URL (default %s): %s\n", r.BaseURLEnv, r.Name, r.BaseURLDefault, r.Description)
	}
	return b.String()
}

// providerChoices is the help of a --provider flag: the table's names.
func providerChoices() string {
	return "provider: " + strings.Join(llm.ProviderNames(), ", ")
}

// baseURLFlag is the flag of provider name's base URL.
func baseURLFlag(name string) string { return name + "-base-url" }

// baseURLFlags are the providers' base URL flags, in the table's order.
func baseURLFlags() []string {
	var names []string
	for _, r := range llm.Providers() {
		names = append(names, baseURLFlag(r.Name))
	}
	return names
}

func (p *providerFlags) register(fs *flag.FlagSet) {
	p.baseURLs = map[string]*string{}
	for _, r := range llm.Providers() {
		p.baseURLs[r.Name] = fs.String(baseURLFlag(r.Name), env(r.BaseURLEnv, ""), fmt.Sprintf("%s base URL (env %s)", r.Name, r.BaseURLEnv))
	}
	fs.IntVar(&p.rpm, "rpm", envInt("FIXPOINT_RPM", 0), "request-per-minute budget of each lane (provider, base URL, model, key); worker run shares it with every worker on the same NATS (see --budget); 0 = unlimited")
	fs.IntVar(&p.tpm, "tpm", envInt("FIXPOINT_TPM", 0), "token-per-minute budget of each lane (like --rpm); 0 = unlimited")
	fs.IntVar(&p.maxConcurrency, "lane-max-concurrency", 0, "ceiling of each lane's adaptive concurrency limit (0 = the calls the command makes at once: the worker's --concurrency)")
	fs.IntVar(&p.initialConcurrency, "lane-initial-concurrency", 0, "starting concurrency limit of each lane (0 = the ceiling; a 429 or overload halves it)")
	fs.DurationVar(&p.timeout, "provider-timeout", 300*time.Second, "total timeout of one provider call")
	fs.DurationVar(&p.flexTimeout, "flex-timeout", llm.FlexTimeoutDefault, "total timeout of one provider call of a job delivered flex (the flex tier is slower; OpenAI's guide gives it 15 minutes)")
	fs.StringVar(&p.flexFallback, "flex-fallback", flexFallbackDefault, "what a flex call refused for want of capacity (429 Resource Unavailable) does after --flex-fallback-after: 'default' sends it on the provider's default tier at the realtime price; 'none' keeps retrying on the flex tier")
	fs.DurationVar(&p.flexFallbackAfter, "flex-fallback-after", llm.FlexFallbackAfterDefault, "how long a flex call retries capacity refusals (jittered backoff, not counted in --transport-retries) before --flex-fallback")
	fs.DurationVar(&p.maxHintWait, "max-hint-wait", llm.LaneMaxHintWaitDefault, "longest wait a provider's retry hint (Retry-After, rate-limit resets) may impose on a lane; a job asked to wait longer is handed back with that delay (worker try: the call fails)")
	fs.IntVar(&p.maxRetries, "transport-retries", 4, "transport retries per provider call (429, 5xx, timeouts); separate from repair attempts")
	fs.StringVar(&p.simPreset, "sim", "", "serve every provider from an in-process simulator with this preset: "+strings.Join(simPresetNames(), ", "))
	fs.Uint64Var(&p.simSeed, "sim-seed", 1, "seed of the in-process simulator")
	fs.DurationVar(&p.simLatencyP50, "sim-latency-p50", 0, "median latency of the in-process simulator (lognormal)")
	fs.DurationVar(&p.simLatencyP99, "sim-latency-p99", 0, "99th percentile latency of the in-process simulator")
}

// check refuses flag values the provider clients or the simulator cannot
// work with, before the command starts anything: they used to surface as
// "invalid llm config: Lane.RPM: -1 must be >= 0" after the queue was up.
func (p *providerFlags) check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"rpm", p.rpm}, {"tpm", p.tpm}, {"lane-max-concurrency", p.maxConcurrency}, {"lane-initial-concurrency", p.initialConcurrency}, {"transport-retries", p.maxRetries}} {
		if f.v < 0 {
			return usagef("--%s %d: want 0 or more", f.name, f.v)
		}
	}
	if p.maxConcurrency > 0 && p.initialConcurrency > p.maxConcurrency {
		return usagef("--lane-initial-concurrency %d is over --lane-max-concurrency %d", p.initialConcurrency, p.maxConcurrency)
	}
	if p.maxRetries > transportRetriesMax {
		return usagef("--transport-retries %d: want at most %d (a job's repair attempts and the worker's outage waits retry beyond it)", p.maxRetries, transportRetriesMax)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"max-hint-wait", p.maxHintWait}, {"sim-latency-p50", p.simLatencyP50}, {"sim-latency-p99", p.simLatencyP99}} {
		if f.d < 0 {
			return usagef("--%s %s is negative", f.name, f.d)
		}
	}
	if p.timeout <= 0 {
		return usagef("--provider-timeout %s: want a positive duration", p.timeout)
	}
	if p.flexTimeout <= 0 {
		return usagef("--flex-timeout %s: want a positive duration", p.flexTimeout)
	}
	switch p.flexFallback {
	case flexFallbackDefault, flexFallbackNone:
	default:
		return usagef("--flex-fallback %q: want %s or %s", p.flexFallback, flexFallbackDefault, flexFallbackNone)
	}
	if p.flexFallbackAfter <= 0 {
		return usagef("--flex-fallback-after %s: want a positive duration (--flex-fallback none never falls back)", p.flexFallbackAfter)
	}
	if p.simLatencyP99 > 0 && p.simLatencyP99 < p.simLatencyP50 {
		return usagef("--sim-latency-p99 %s is below --sim-latency-p50 %s", p.simLatencyP99, p.simLatencyP50)
	}
	if p.simPreset != "" {
		if _, err := sim.Preset(p.simPreset); err != nil {
			return usagef("--sim: %v", err)
		}
	}
	return nil
}

// transportRetriesMax bounds --transport-retries.
const transportRetriesMax = 100

// givenPositive refuses 0 or less for the named flags when they were
// given: their settings read 0 as "the default", which a typed 0 is not.
func givenPositive(fs *flag.FlagSet, names ...string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil || !slices.Contains(names, f.Name) {
			return
		}
		positive := true
		switch v := f.Value.(flag.Getter).Get().(type) {
		case int:
			positive = v > 0
		case int64:
			positive = v > 0
		case time.Duration:
			positive = v > 0
		}
		if !positive {
			err = usagef("--%s %s: want more than 0 (leave it out for the default)", f.Name, f.Value)
		}
	})
	return err
}

func simPresetNames() []string {
	var names []string
	for _, p := range sim.PresetNames() {
		names = append(names, p.Name)
	}
	return names
}

// build returns a client per provider sharing one lane registry. With --sim
// every provider points at one in-process simulator.
func (p *providerFlags) build(obs llm.Observer) (map[string]pipeline.Completer, func(), error) {
	cleanup := func() {}
	urls := map[string]string{}
	for name, u := range p.baseURLs {
		urls[name] = *u
	}
	if p.simPreset != "" {
		cfg, err := sim.Preset(p.simPreset)
		if err != nil {
			return nil, nil, usagef("--sim: %v", err)
		}
		cfg.Seed = p.simSeed
		if p.simLatencyP50 > 0 {
			cfg.Latency = sim.Latency{RequestP50: p.simLatencyP50, RequestP99: max(p.simLatencyP99, p.simLatencyP50)}
		}
		_, url, closeSim, err := sim.Start(cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("start simulator: %w", err)
		}
		cleanup = closeSim
		for _, r := range llm.Providers() {
			urls[r.Name] = simBaseURL(url, r.Wire)
		}
	}
	if obs == nil {
		obs = llm.NopObserver{}
	}
	lanes := llm.NewRegistry(nil, obs)
	if p.granter != nil {
		lanes.SetGranter(p.granter)
	}
	ceiling := cmp.Or(p.maxConcurrency, p.laneDefault, llm.LaneMaxConcurrencyDefault)
	fallbackAfter := p.flexFallbackAfter
	if p.flexFallback == flexFallbackNone {
		fallbackAfter = llm.FlexNoFallback
	}
	base := llm.Config{
		TotalTimeout: p.timeout,
		FlexTimeout:  p.flexTimeout, FlexFallbackAfter: fallbackAfter,
		Retry: llm.RetryConfig{MaxRetries: p.maxRetries, Disabled: p.maxRetries == 0},
		Lane: llm.LaneConfig{RPM: p.rpm, TPM: p.tpm, MaxConcurrency: ceiling,
			InitialConcurrency: cmp.Or(p.initialConcurrency, ceiling), MaxHintWait: p.maxHintWait},
		Lanes:    lanes,
		Observer: obs,
	}
	clients := map[string]pipeline.Completer{}
	for _, r := range llm.Providers() {
		cfg := base
		cfg.Provider, cfg.BaseURL = r.Name, urls[r.Name]
		if r.KeyEnv != "" {
			cfg.APIKey = os.Getenv(r.KeyEnv)
		}
		if p.simPreset != "" {
			cfg.APIKey = "sim"
		}
		c, err := llm.New(cfg)
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("configure provider %s: %w", r.Name, err)
		}
		clients[r.Name] = c
	}
	return clients, cleanup, nil
}

// simBaseURL is the base URL a provider of wire format w reaches the
// simulator at url by: the simulator serves every wire format, the Chat
// Completions one under /v1.
func simBaseURL(url string, w llm.Wire) string {
	if w == llm.WireOpenAIChat {
		return url + "/v1"
	}
	return url
}

// metricsObserver turns llm events into Prometheus metrics.
type metricsObserver struct {
	llm.NopObserver
	m *pipeline.Metrics
}

func (o metricsObserver) OnCall(ev llm.CallEvent) {
	outcome := string(ev.Class)
	if outcome == "" {
		outcome = "ok"
	}
	o.m.ProviderCalls.WithLabelValues(ev.Lane.Provider, outcome).Inc()
}

func (o metricsObserver) OnPause(lane llm.LaneKey, _ time.Duration) {
	o.m.LanePauses.WithLabelValues(lane.Provider, lane.Model).Inc()
}

func (o metricsObserver) OnConcurrency(lane llm.LaneKey, limit int) {
	o.m.LaneLimit.WithLabelValues(lane.Provider, lane.Model).Set(float64(limit))
}

// natsFlags picks an external NATS or an embedded one.
type natsFlags struct {
	url, dir, addr string
	// ledger names the worker's ledger (store.LedgerName), announced by
	// its embedded server so enqueue can tell it from another setup's.
	ledger string
}

func (n *natsFlags) register(fs *flag.FlagSet, embedded bool) {
	fs.StringVar(&n.url, "nats-url", env("NATS_URL", ""), "NATS server URL (env NATS_URL); empty starts an embedded NATS server")
	if embedded {
		fs.StringVar(&n.dir, "nats-dir", env("FIXPOINT_NATS_DIR", natsDirDefault), "data directory of the embedded NATS server")
		fs.StringVar(&n.addr, "nats-listen", env("FIXPOINT_NATS_LISTEN", embeddedNATSDefault), "address the embedded NATS server listens on, so enqueue can reach it")
	}
}

// connect returns a JetStream context and a close function that drains the
// connection (waiting until it is closed) and then stops an embedded server.
func (n *natsFlags) connect(log *slog.Logger) (jetstream.JetStream, func(), error) {
	c, err := natsconn.Open(natsconn.Config{URL: n.url, Dir: n.dir, Listen: n.addr, Name: "fixpoint", Ledger: n.ledger}, log)
	if errors.Is(err, natsconn.ErrStoreDirInUse) {
		return nil, nil, fmt.Errorf("%w\n(another worker serves this queue: run this one with NATS_URL=%s, or give it another --nats-dir)", err,
			cmp.Or(natsconn.RunningURL(n.dir), "nats://"+cmp.Or(n.addr, natsconn.ListenDefault)))
	}
	if err != nil {
		return nil, nil, err
	}
	if c.Embedded() {
		log.Info("worker: embedded NATS started", slog.String("where", c.Where))
	}
	return c.JS, c.Close, nil
}

// queueFlags sets the stream and consumer names and limits.
func queueFlags(fs *flag.FlagSet, q *queue.Config) {
	fs.StringVar(&q.Stream, "stream", queue.StreamDefault, "JetStream stream of jobs")
	fs.StringVar(&q.Subject, "subject", queue.SubjectDefault, "subject jobs are published on")
	fs.StringVar(&q.Consumer, "consumer", queue.ConsumerDefault, "durable consumer shared by every worker")
	fs.DurationVar(&q.AckWait, "ack-wait", queue.AckWaitDefault, "redeliver a job after this long without an ack or progress report")
	fs.IntVar(&q.MaxDeliver, "max-deliver", queue.MaxDeliverDefault, "deliveries before a job is recorded dead")
	fs.IntVar(&q.MaxAckPending, "max-ack-pending", queue.MaxAckPendingDefault, "jobs in flight across all workers, counting those waiting for their commit (global cap)")
	fs.DurationVar(&q.Duplicates, "duplicates-window", queue.DuplicatesDefault, "a job id published twice within this window is stored once")
	fs.IntVar(&q.Replicas, "stream-replicas", 1, streamReplicasHelp)
}

// streamReplicasHelp is --stream-replicas' help, the worker's and enqueue's.
const streamReplicasHelp = "servers of a JetStream cluster that keep the job stream, its consumer and the dead-job stream: 1, 3 or 5 (they take work while a majority is up: 3 survive one server down, 5 two); the workers set it on an existing stream"

func openStore(ctx context.Context, dsn string, migrate bool, log *slog.Logger) (*store.Store, error) {
	if migrate {
		created, err := store.EnsureDatabase(ctx, dsn)
		if err != nil {
			return nil, err
		}
		if created && log != nil {
			// A typo in the database name makes a new, empty ledger:
			// say so, where the operator looks.
			log.Warn("worker: created the database, which did not exist: if enqueue records to another, this worker finds none of its jobs (check DATABASE_URL)",
				slog.String("database", store.DatabaseName(dsn)))
		}
	}
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		return nil, err
	}
	if migrate {
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// serveOps serves /metrics, /healthz and /readyz until ctx ends. An
// address that cannot be listened on is an error when the operator chose
// it (their scrapes and probes would fail unseen), and a warning for the
// default, which a second worker on one machine finds taken.
func serveOps(ctx context.Context, addr string, chosen bool, m *pipeline.Metrics, ready func(context.Context) error, log *slog.Logger) error {
	if addr == "" || addr == "off" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if chosen {
			return fmt.Errorf("metrics address (--metrics-addr, env FIXPOINT_METRICS_ADDR): %w (give each worker on a machine its own address, or 'off')", err)
		}
		log.Warn("worker: no /metrics, /healthz or /readyz: the default address is taken (another worker on this machine?); set --metrics-addr to serve them",
			slog.String("addr", addr), slog.String("error", err.Error()))
		return nil
	}
	srv := &http.Server{Addr: addr, Handler: opsHandler(m, ready), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("worker: metrics server", slog.String("addr", addr), slog.String("error", err.Error()))
		}
	}()
	return nil
}

// opsHandler serves /metrics, /healthz and /readyz. /healthz says the
// process is alive, whatever its work: a worker with a lane stopped (its
// provider has no such model) must not be restarted in a loop for it.
// /readyz answers 503 with why the worker is not ready (Postgres or NATS
// unreachable, jobs of another ledger, a stopped lane naming its provider
// and model), else 200.
func opsHandler(m *pipeline.Metrics, ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		rctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ready(rctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// waveFlags registers the flags of batch delivery (batches enqueued with
// --delivery batch).
func waveFlags(fs *flag.FlagSet, w *wave.Config) {
	fs.IntVar(&w.MaxRequests, "wave-max-requests", wave.MaxRequestsDefault, "batch delivery: most requests in one provider batch (collected jobs hold their messages until it is recorded: keep it under --max-ack-pending)")
	fs.DurationVar(&w.Collect, "wave-collect", wave.CollectDefault, "batch delivery: how long a wave's first job waits for more before the wave is submitted")
	fs.DurationVar(&w.PollMin, "wave-poll-min", wave.PollMinDefault, "batch delivery: first wait between polls of a provider batch (doubling up to --wave-poll-max)")
	fs.DurationVar(&w.PollMax, "wave-poll-max", wave.PollMaxDefault, "batch delivery: longest wait between polls of a provider batch")
	fs.DurationVar(&w.Lease, "wave-lease", wave.LeaseDefault, "batch delivery: how long a worker owns a wave it drives before another may take it over (renewed while it works)")
	fs.IntVar(&w.RealtimeBelow, "wave-realtime-below", wave.RealtimeBelowDefault, "batch delivery: a repair wave of fewer jobs runs realtime instead (-1 = never)")
	fs.DurationVar(&w.DeadlineMargin, "wave-deadline-margin", wave.DeadlineMarginDefault, "batch delivery: a wave still running this close to its batch's deadline is cancelled and the rest runs realtime; no wave starts within it")
}
