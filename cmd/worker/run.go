package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/fixpoint-dev/fixpoint/pipeline"
)

const runUsage = `Usage: worker [run] [flags]

Pulls jobs from the shared JetStream consumer, runs each through the repair
loop in a bounded pool, writes every result and attempt to the Postgres ledger
and acks a job only after its rows are committed. SIGINT/SIGTERM stop pulling,
let jobs in flight finish within --grace, hand the rest back for immediate
redelivery, flush writes and exit 0. With --drain the worker exits once the
queue is empty and nothing is in flight (for cron or a Kubernetes Job).`

const runEnvHelp = `  DATABASE_URL        Postgres ledger (default ` + databaseURLDefault + `)
  NATS_URL            NATS server; empty starts an embedded one (see --nats-dir, --nats-listen)
  LOG_LEVEL, LOG_FORMAT
` + providerEnvHelp

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("worker run", runUsage, runEnvHelp, stdout)
	var (
		dbURL       = fs.String("database-url", env("DATABASE_URL", databaseURLDefault), "Postgres URL of the ledger (env DATABASE_URL)")
		metricsAddr = fs.String("metrics-addr", env("FIXPOINT_METRICS_ADDR", metricsAddrDefault), "address for /metrics, /healthz, /readyz; 'off' to disable")
		cfg         pipeline.WorkerConfig
		nf          natsFlags
		pf          providerFlags
		lf          logFlags
		record      = fs.String("record-requests", "full", "keep each request in the ledger as 'full' messages or only its 'hash'")
		pricesFile  = fs.String("prices", "", "JSON file of model prices overriding the built-in table: {\"model\": {\"input_per_mtok\": 0.15, ...}}")
	)
	fs.IntVar(&cfg.Concurrency, "concurrency", pipeline.ConcurrencyDefault, "provider calls in flight at once in this process (each lane's ceiling unless --lane-max-concurrency is set)")
	ahead := fs.Int("jobs-ahead", -1, "jobs pulled ahead and waiting for a free call slot, so a finished call is replaced at once (-1 = half of --concurrency, at most 512)")
	fs.DurationVar(&cfg.Grace, "grace", pipeline.GraceDefault, "time jobs in flight get to finish after SIGTERM")
	fs.BoolVar(&cfg.Drain, "drain", false, "exit when the queue is empty and nothing is in flight")
	fs.IntVar(&cfg.MaxPromptBytes, "max-prompt-bytes", pipeline.MaxPromptBytesDefault, "reject jobs whose prompt is larger")
	fs.Int64Var(&cfg.WriteBuffer, "write-buffer-bytes", 0, "bytes of finished results that may wait for their ledger commit; when full, pulling slows down (0 = 8 KiB per job held, --concurrency plus --jobs-ahead, at least 1 MiB)")
	queueFlags(fs, &cfg.Queue)
	nf.register(fs, true)
	pf.register(fs)
	lf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	cfg.Logger = log
	if cfg.Concurrency < 1 {
		return usagef("--concurrency %d: want at least 1", cfg.Concurrency)
	}
	// --concurrency bounds calls; the pool holds the jobs ahead as well.
	pf.laneDefault = cfg.Concurrency
	if *ahead < 0 {
		*ahead = jobsAheadDefault(cfg.Concurrency)
	}
	cfg.Concurrency += *ahead
	cfg.Loop.Record = pipeline.RequestRecord(*record)
	if cfg.Loop.Record != pipeline.RecordFull && cfg.Loop.Record != pipeline.RecordHash {
		return usagef("--record-requests %q: want full or hash", *record)
	}
	if *pricesFile != "" {
		data, err := os.ReadFile(*pricesFile)
		if err != nil {
			return usagef("--prices: %v", err)
		}
		if cfg.Loop.Prices, err = pipeline.ParsePrices(pipeline.DefaultPrices(), data); err != nil {
			return usagef("--prices %s: %v", *pricesFile, err)
		}
	}
	return serve(ctx, cfg, *dbURL, *metricsAddr, &nf, &pf, log)
}

// serve wires the ledger, the queue, the providers and the metrics server
// around one pipeline.Worker and runs it.
func serve(ctx context.Context, cfg pipeline.WorkerConfig, dbURL, metricsAddr string, nf *natsFlags, pf *providerFlags, log *slog.Logger) error {
	st, err := openStore(ctx, dbURL, true)
	if err != nil {
		return err
	}
	defer st.Close()
	js, closeNATS, err := nf.connect(log)
	if err != nil {
		return err
	}
	defer closeNATS()
	m := pipeline.NewMetrics()
	cfg.Metrics = m
	clients, closeSim, err := pf.build(metricsObserver{m: m})
	if err != nil {
		return err
	}
	defer closeSim()
	cfg.Providers = clients
	w, err := pipeline.NewWorker(js, st, cfg)
	if err != nil {
		return usageError{err}
	}
	opsCtx, stopOps := context.WithCancel(context.WithoutCancel(ctx))
	defer stopOps()
	serveOps(opsCtx, metricsAddr, m, func(rctx context.Context) error {
		if err := st.Ping(rctx); err != nil {
			return err
		}
		_, err := js.AccountInfo(rctx)
		return err
	}, log)
	start := time.Now()
	err = w.Run(ctx)
	log.Info("worker: exiting", slog.Duration("uptime", time.Since(start).Round(time.Millisecond)))
	return err
}

// jobsAheadDefault is how many jobs `worker run` pulls ahead of free call
// slots for --concurrency calls: half as many, at most 512.
func jobsAheadDefault(calls int) int { return min(calls/2, 512) }
