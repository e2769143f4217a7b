package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/cliflags"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/tickets"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/wave"
)

// benchModel is the model name the bench's jobs ask for; the simulator
// answers any model, and the price table does not know this one (cost 0).
const benchModel = "sim-bench"

// benchEnv is what every figure shares: the ledger, an embedded NATS server
// listening on a loopback TCP port (so a worker subprocess can reach it) and
// the names that keep each run's streams and batches apart.
type benchEnv struct {
	st    *store.Store
	dsn   string
	ns    *server.Server
	conn  *natsconn.Conn
	js    jetstream.JetStream
	dir   string
	runID string
	// workerBin is the worker binary figures 3 and 5 run (ensureWorker);
	// workerDir, when not empty, holds the one the bench built.
	workerBin    string
	workerDir    string
	progress     io.Writer
	runs         int // timed runs so far (nextRun)
	settleWarned bool
	release      func() // ends the claim on the database
}

func newBenchEnv(ctx context.Context, dsn, workerBin string, progress io.Writer) (_ *benchEnv, err error) {
	// What is set up so far, undone in reverse if a later step fails.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	// One bench at a time per database: two would reset and load it under
	// each other and both print figures of the mix.
	release, err := store.ClaimDatabase(ctx, dsn)
	if errors.Is(err, store.ErrBusy) {
		return nil, fmt.Errorf("another fixpoint-bench is using database %s; wait for it or pass another --database-url (%w)", dbName(dsn), store.ErrBusy)
	}
	if err != nil {
		return nil, fmt.Errorf("%w (is Postgres running at --database-url?)", err)
	}
	undo = append(undo, release)
	// A fresh database each run: what earlier runs left (millions of rows)
	// would otherwise slow the writes and skew every figure.
	if err := store.ResetDatabase(ctx, dsn); errors.Is(err, store.ErrNotScratch) {
		return nil, cliflags.UsageError{Err: fmt.Errorf("--database-url: %w", err)}
	} else if err != nil {
		return nil, fmt.Errorf("%w (is Postgres running at --database-url?)", err)
	}
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		return nil, fmt.Errorf("%w (is Postgres running at --database-url?)", err)
	}
	undo = append(undo, st.Close)
	if err := st.Migrate(ctx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fixpoint-bench-nats-")
	if err != nil {
		return nil, fmt.Errorf("create NATS data directory: %w", err)
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	var ns *server.Server
	// Labelled so that a --cpuprofile tells the server's share from the
	// worker's and the simulator's (goroutines inherit the labels).
	pprof.Do(ctx, pprof.Labels("part", "nats-server"), func(context.Context) {
		ns, err = natsconn.StartServer(natsconn.ServerConfig{StoreDir: dir, Host: "127.0.0.1", Port: -1,
			// The server's own reason for an error it answers generically.
			Logger: slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	})
	if err != nil {
		return nil, err
	}
	undo = append(undo, ns.Shutdown)
	// Over loopback TCP, as a worker subprocess reaches it: not in process.
	conn, err := natsconn.Open(natsconn.Config{URL: ns.ClientURL(), Name: "fixpoint-bench"}, nil)
	if err != nil {
		return nil, err
	}
	return &benchEnv{
		st: st, dsn: dsn, ns: ns, conn: conn, js: conn.JS, dir: dir, workerBin: workerBin, progress: progress, release: release,
		runID: time.Now().UTC().Format("20060102T150405") + strconv.Itoa(os.Getpid()%1000),
	}, nil
}

func (e *benchEnv) close() {
	e.conn.Close()
	e.ns.Shutdown()
	e.ns.WaitForShutdown()
	e.st.Close()
	e.release()
	os.RemoveAll(e.dir)
	if e.workerDir != "" {
		os.RemoveAll(e.workerDir)
	}
}

// workerPackage is the command figures 3 and 5 run as a subprocess.
const workerPackage = "github.com/fixpoint-dev/fixpoint/cmd/worker"

// ensureWorker makes e.workerBin a worker binary: the one --worker-bin
// named, or else ./cmd/worker of this module built with the go command
// into a temporary directory, so the subprocess runs the same source as
// the in-process figures.
func (e *benchEnv) ensureWorker(ctx context.Context) error {
	if e.workerBin != "" {
		return nil
	}
	dir, err := os.MkdirTemp("", "fixpoint-bench-worker-")
	if err != nil {
		return fmt.Errorf("create a directory for the worker binary: %w", err)
	}
	e.workerDir = dir
	bin := filepath.Join(dir, "worker")
	start := time.Now()
	e.logf("building %s for figures 3, 5 and 11 (--worker-bin skips this)", workerPackage)
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, workerPackage).CombinedOutput()
	if err != nil {
		return fmt.Errorf("build the worker for figures 3 and 5: %w\n%s\n(run the bench from the fixpoint source tree, or pass --worker-bin with a worker binary)",
			err, strings.TrimSpace(string(out)))
	}
	e.logf("  built in %s", time.Since(start).Round(time.Millisecond))
	e.workerBin = bin
	return nil
}

func (e *benchEnv) logf(format string, args ...any) {
	fmt.Fprintf(e.progress, "bench: "+format+"\n", args...)
}

// queue returns a fresh stream, subject and consumer for one figure.
func (e *benchEnv) queue(name string, maxAckPending int) queue.Config {
	id := strings.ToUpper(name) + "_" + e.runID
	return queue.Config{
		Stream: "BENCH_" + id, Subject: "fixpoint.bench." + id, Consumer: "bench-" + id,
		MaxAckPending: max(maxAckPending, queue.MaxAckPendingDefault),
	}
}

// settle checkpoints the database before a timed run, so the previous
// figure's writes are not flushed during this one's. Without the privilege
// it says so once and goes on.
func (e *benchEnv) settle(ctx context.Context) {
	if err := e.st.Settle(ctx); err != nil && !e.settleWarned {
		e.settleWarned = true
		e.logf("  note: %v; figures may carry earlier figures' writes", err)
	}
}

// dropQueue deletes a figure's streams so the next figure starts clean.
func (e *benchEnv) dropQueue(q queue.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = e.js.DeleteStream(ctx, q.Stream)
	_ = e.js.DeleteStream(ctx, q.Stream+"_DEAD")
}

func (e *benchEnv) batchName(name string) string { return "bench-" + name + "-" + e.runID }

// nextRun numbers the runs of one kind ("baseline1", "baseline2"), so that a
// repeated run gets fresh job ids, batch and queue names.
func (e *benchEnv) nextRun(kind string) string {
	e.runs++
	return kind + strconv.Itoa(e.runs)
}

// enqueue records and publishes n generated support tickets.
func (e *benchEnv) enqueue(ctx context.Context, q queue.Config, batch string, n int, lim fixpoint.Limits) error {
	start := time.Now()
	prog, err := enqueue.Run(ctx, e.js, e.st, enqueue.Config{
		Batch: batch, Schema: []byte(tickets.Schema), Template: tickets.Template, Format: enqueue.FormatJSONL,
		Provider: llm.ProviderOpenAI, Model: benchModel, Mode: fixpoint.ModePrompt, Limits: lim, Queue: q,
		Chunk: 2000,
	}, strings.NewReader(tickets.Dataset(n, 1)))
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", batch, err)
	}
	if prog.Published != n {
		return fmt.Errorf("enqueue %s: published %d of %d jobs", batch, prog.Published, n)
	}
	e.logf("  enqueued %d jobs in %s", n, time.Since(start).Round(time.Millisecond))
	return nil
}

// startSim serves a simulator preset on loopback; latency > 0 makes every
// call take exactly that long.
func startSim(preset string, latency time.Duration) (*sim.Server, string, func(), error) {
	cfg, err := sim.Preset(preset)
	if err != nil {
		return nil, "", nil, err
	}
	cfg.Seed = 1
	if latency > 0 {
		cfg.Latency = sim.Latency{Dist: sim.DistFixed, RequestP50: latency, RequestP99: latency}
	}
	var srv *sim.Server
	var url string
	var closeSim func()
	pprof.Do(context.Background(), pprof.Labels("part", "simulator"), func(context.Context) {
		srv, url, closeSim, err = sim.Start(cfg)
	})
	if err != nil {
		return nil, "", nil, fmt.Errorf("start simulator %s: %w", preset, err)
	}
	return srv, url, closeSim, nil
}

// simClients returns the provider map of an in-process worker talking to
// the simulator at url through one lane, as OpenAI.
func simClients(url string, lane llm.LaneConfig) (map[string]pipeline.Completer, error) {
	return simClientsOf(llm.ProviderOpenAI, url, lane)
}

// simClientsOf is simClients speaking provider's wire format.
func simClientsOf(provider, url string, lane llm.LaneConfig) (map[string]pipeline.Completer, error) {
	// As `worker run` does: a lane starts at its ceiling.
	lane.InitialConcurrency = cmp.Or(lane.InitialConcurrency, lane.MaxConcurrency)
	base := url
	if llm.WireOf(provider) == llm.WireOpenAIChat {
		base += "/v1"
	}
	c, err := llm.New(llm.Config{
		Provider: provider, BaseURL: base, APIKey: "sim-bench",
		TotalTimeout: time.Minute, Retry: llm.RetryConfig{MaxRetries: 4}, Lane: lane,
	})
	if err != nil {
		return nil, fmt.Errorf("configure simulator client: %w", err)
	}
	return map[string]pipeline.Completer{provider: c}, nil
}

// simBatch is one batch a figure runs in process against a simulator of
// its own, seeded so that every run of a figure gets the same replies for
// the same rows.
type simBatch struct {
	kind, preset string
	jobs         int
	dataset      string
	// enqueue holds the batch's settings; simRun sets its Batch, Queue,
	// Format and Chunk.
	enqueue enqueue.Config
	// batchDelay is how long the simulator's provider batches take (0:
	// its default).
	batchDelay time.Duration
	wave       wave.Config
}

// simRunResult is what simRun measured.
type simRunResult struct {
	sum     store.BatchSummary
	fig     store.RepairFigures
	stats   sim.Stats
	elapsed time.Duration
	// batch is the batch's name; srv the simulator that answered it
	// (closed, its truths still readable).
	batch string
	srv   *sim.Server
}

// simRun enqueues b, runs it to the end with a drain-mode worker in this
// process and reads its summary and repair figures.
func (e *benchEnv) simRun(ctx context.Context, c benchConfig, b simBatch) (simRunResult, error) {
	var r simRunResult
	q := e.queue(b.kind, 0)
	defer e.dropQueue(q)
	cfg, err := sim.Preset(b.preset)
	if err != nil {
		return r, err
	}
	cfg.Seed, cfg.KeyByPrompt = 1, true // the same replies for the same rows in each run
	cfg.Batch.CompletionDelay = b.batchDelay
	srv, url, closeSim, err := sim.Start(cfg)
	if err != nil {
		return r, fmt.Errorf("start simulator: %w", err)
	}
	defer closeSim()
	batch := e.batchName(b.kind)
	r.batch, r.srv = batch, srv
	ecfg := b.enqueue
	ecfg.Batch, ecfg.Queue, ecfg.Format, ecfg.Chunk = batch, q, enqueue.FormatJSONL, 2000
	if _, err := enqueue.Run(ctx, e.js, e.st, ecfg, strings.NewReader(b.dataset)); err != nil {
		return r, fmt.Errorf("enqueue %s: %w", batch, err)
	}
	clients, err := simClientsOf(ecfg.Provider, url, llm.LaneConfig{MaxConcurrency: max(c.concurrency, 64)})
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	run, err := e.runInProcess(ctx, batch, b.jobs, pipeline.WorkerConfig{Queue: q, Concurrency: c.concurrency, Providers: clients, Wave: b.wave})
	if err != nil {
		return r, err
	}
	r.elapsed, r.stats = run.elapsed, srv.Stats()
	sums, err := e.st.Summary(ctx, batch)
	if err != nil {
		return r, err
	}
	if len(sums) != 1 {
		return r, fmt.Errorf("summary of %s: %d rows", batch, len(sums))
	}
	r.sum = sums[0]
	r.fig, err = e.st.Repairs(ctx, batch)
	return r, err
}

// waitFinal polls the batch until no job is queued, and returns when that
// was seen, with the batch's final counts. It polls the count of queued
// jobs, which reads the partial index of queued jobs, so each poll costs in
// proportion to what is still queued: polling a full batch every few
// milliseconds took about a tenth of the Postgres CPU the figures measure.
// The wait before the next poll is therefore half the time the queue needs
// to drain at the rate seen so far, never less than interval (the end time's
// resolution) nor more than waitFinalMaxPoll. It gives up when ctx ends or
// stopped is closed first (the worker exited).
func (e *benchEnv) waitFinal(ctx context.Context, batch string, n int, interval time.Duration, stopped <-chan struct{}) (time.Time, store.Progress, error) {
	var next pollPacer
	t := time.NewTimer(interval)
	defer t.Stop()
	done := func() (end time.Time, p store.Progress, ok bool) {
		wait := interval
		defer func() {
			if !ok {
				t.Reset(wait)
			}
		}()
		queued, err := e.st.Queued(ctx, batch)
		if err != nil {
			return end, p, false
		}
		if queued > 0 {
			wait = next.wait(time.Now(), queued, interval)
			return end, p, false
		}
		end = time.Now()
		p, err = e.st.Progress(context.WithoutCancel(ctx), batch)
		return end, p, err == nil && p.Total >= n && p.Queued == 0
	}
	for {
		if end, p, ok := done(); ok {
			return end, p, nil
		}
		select {
		case <-ctx.Done():
			p, _ := e.st.Progress(context.WithoutCancel(ctx), batch)
			return time.Time{}, p, fmt.Errorf("wait for batch %s: %d of %d jobs final: %w", batch, p.Total-p.Queued, n, ctx.Err())
		case <-stopped:
			if end, p, ok := done(); ok {
				return end, p, nil
			}
			p, _ := e.st.Progress(context.WithoutCancel(ctx), batch)
			return time.Time{}, p, fmt.Errorf("worker stopped with %d of %d jobs of %s final", p.Total-p.Queued, n, batch)
		case <-t.C:
		}
	}
}

// waitFinalMaxPoll bounds the wait between two polls of waitFinal.
const waitFinalMaxPoll = 250 * time.Millisecond

// pollPacer spaces the polls of a draining count: half the time left at the
// rate seen since the first poll that found the queue moving.
type pollPacer struct {
	at     time.Time // first poll
	queued int64     // what it counted
}

// wait returns how long to wait after a poll at now counted queued.
func (p *pollPacer) wait(now time.Time, queued int64, least time.Duration) time.Duration {
	if p.at.IsZero() || queued > p.queued {
		p.at, p.queued = now, queued
		return least
	}
	drained := p.queued - queued
	if drained == 0 {
		return least
	}
	left := time.Duration(float64(now.Sub(p.at)) * float64(queued) / float64(drained))
	return min(max(left/2, least), waitFinalMaxPoll)
}

// inProcessRun is what runInProcess measured.
type inProcessRun struct {
	elapsed  time.Duration
	progress store.Progress
	cpu      cpuUse
}

// runInProcess runs a drain-mode worker in this process until the batch is
// final and times it from the worker's start to the last commit.
func (e *benchEnv) runInProcess(ctx context.Context, batch string, n int, cfg pipeline.WorkerConfig) (inProcessRun, error) {
	cfg.Drain = true
	e.settle(ctx)
	w, err := pipeline.NewWorker(e.js, e.st, cfg)
	if err != nil {
		return inProcessRun{}, fmt.Errorf("configure worker: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	stopped := make(chan struct{})
	start, cpu0 := time.Now(), e.readCPUClock(ctx)
	go pprof.Do(runCtx, pprof.Labels("part", "worker"), func(ctx context.Context) { done <- w.Run(ctx); close(stopped) })
	end, p, err := e.waitFinal(ctx, batch, n, 10*time.Millisecond, stopped)
	cpu := e.cpuUse(ctx, cpu0, n)
	if err != nil {
		cancel()
		<-stopped
		return inProcessRun{progress: p}, err
	}
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		cancel()
		<-stopped
	}
	if err := <-done; err != nil {
		return inProcessRun{progress: p}, fmt.Errorf("worker: %w", err)
	}
	return inProcessRun{elapsed: end.Sub(start), progress: p, cpu: cpu}, nil
}

// childRun is what runChild measured of a worker subprocess.
type childRun struct {
	// hwm is the child's peak resident set in bytes: the last VmHWM read
	// from /proc while it ran (read every 10ms; it only grows). getrusage's
	// maxrss is no use here: for a child started with CLONE_VM it counts
	// the parent's resident set at the fork.
	hwm int64
	// wall is the process's whole life; span runs from the simulator's
	// first request to the moment every job was seen final.
	wall, span time.Duration
	progress   store.Progress
	// callsPerSecond counts the simulator's calls in each second from the first.
	callsPerSecond []int64
}

// runChild runs `worker run --drain` as a subprocess against the bench's
// NATS, ledger and the simulator at simURL, waits for the batch to be final
// and for the process to exit, and reports its peak memory.
func (e *benchEnv) runChild(ctx context.Context, q queue.Config, batch string, n int, srv *sim.Server, simURL string, extra []string, poll time.Duration) (childRun, error) {
	args := []string{"run", "--drain",
		"--nats-url", e.ns.ClientURL(), "--database-url", e.dsn, "--openai-base-url", simURL + "/v1",
		"--stream", q.Stream, "--subject", q.Subject, "--consumer", q.Consumer,
		"--max-ack-pending", strconv.Itoa(q.MaxAckPending),
		"--metrics-addr", "off", "--log-level", "warn", "--grace", "10s",
	}
	return e.runProcess(ctx, append(args, extra...), nil, batch, n, srv, poll)
}

func (e *benchEnv) runProcess(ctx context.Context, args, extraEnv []string, batch string, n int, srv *sim.Server, poll time.Duration) (childRun, error) {
	var res childRun
	e.settle(ctx)
	cmd := exec.Command(e.workerBin, args...)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=sim-bench", "NATS_URL=", "DATABASE_URL=")
	cmd.Env = append(cmd.Env, extraEnv...)
	var stderr tailBuffer
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start worker %s: %w", e.workerBin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()

	var hwm atomic.Int64
	var firstReq atomic.Int64
	var perSecond []int64 // simulator calls received in each second since the first
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var last int64
		for i := 0; ; i++ {
			select {
			case <-exited:
				return
			case <-t.C:
			}
			calls := srv.Stats().Requests
			if firstReq.Load() == 0 && calls > 0 {
				firstReq.Store(time.Now().UnixNano())
			}
			if first := firstReq.Load(); first > 0 && time.Since(time.Unix(0, first)) >= time.Duration(len(perSecond)+1)*time.Second {
				perSecond = append(perSecond, calls-last)
				last = calls
			}
			if i%2 == 0 {
				if v := readVmHWM(cmd.Process.Pid); v > 0 {
					hwm.Store(v)
				}
			}
		}
	}()
	end, p, err := e.waitFinal(ctx, batch, n, poll, exited)
	res.progress = p
	if err != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	wg.Wait()
	res.callsPerSecond = perSecond
	res.wall = time.Since(start)
	res.hwm = hwm.Load()
	if first := firstReq.Load(); first > 0 && err == nil {
		res.span = end.Sub(time.Unix(0, first))
	}
	if err != nil {
		return res, fmt.Errorf("%w; worker stderr: %s", err, stderr.String())
	}
	if waitErr != nil {
		return res, fmt.Errorf("worker exited: %w; stderr: %s", waitErr, stderr.String())
	}
	return res, nil
}

// readVmHWM returns the peak resident set of pid in bytes, 0 if unknown.
func readVmHWM(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// tailBuffer keeps the last 4 KiB written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-4096:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// machine describes the host the figures were measured on.
type machine struct {
	cpus     int
	model    string
	memBytes int64
	goVer    string
	load     string
}

func (m machine) String() string {
	return fmt.Sprintf("%d CPU (%s), %.1f GiB RAM, %s %s/%s", m.cpus, m.model, float64(m.memBytes)/(1<<30), m.goVer, runtime.GOOS, runtime.GOARCH)
}

func readMachine() machine {
	m := machine{cpus: runtime.NumCPU(), model: "unknown CPU", goVer: runtime.Version(), load: loadAverage()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.model = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				m.memBytes = kb * 1024
			}
		}
	}
	return m
}

// baselinePayload is a small job-like message for the bare baseline.
func baselinePayload(id string, i int) []byte {
	b, _ := json.Marshal(map[string]any{"v": 1, "job_id": id, "row_no": i, "prompt": "Triage this support ticket."})
	return b
}

// baselineResult is one job row with three attempt rows, shaped like what
// the worker writes for a job repaired twice (the request as sent, with the
// schema in the system prompt, is kept on every attempt).
func baselineResult(id, batch, hash string, i int, now time.Time) store.Result {
	prompt := fmt.Sprintf("Triage this support ticket from Ada Park (pro plan).\n\nSubject: Sync stuck at 99%%\n\nTicket %d: sync has been stuck since yesterday.", i)
	req, _ := json.Marshal([]map[string]string{
		{"role": "system", "content": "Reply with one JSON value that matches this JSON Schema, and nothing else.\n" + tickets.Schema},
		{"role": "user", "content": prompt},
	})
	value := json.RawMessage(`{"category":"bug","priority":3,"sentiment":"negative","summary":"Sync stuck at 99% since yesterday","tags":["sync"],"needs_human":false}`)
	errs := json.RawMessage(`[{"path":"/priority","keyword":"type","class":"shape","message":"expected integer, found string"}]`)
	r := store.Result{
		JobID: id, Status: fixpoint.StatusValid, Value: value, Attempts: 3, Calls: 3,
		TokensIn: 1500, TokensOut: 150, StartedAt: now, FinishedAt: now, WallMS: 1, Deliveries: 1,
		Job: &store.NewJob{ID: id, Batch: batch, RowNo: i, SchemaHash: hash, Prompt: prompt, Provider: llm.ProviderOpenAI,
			Model: benchModel, Mode: string(fixpoint.ModePrompt), Strategy: string(fixpoint.StrategyConversation),
			Metadata: json.RawMessage(fmt.Sprintf(`{"ticket_id":"T%06d"}`, i))},
	}
	for no := 1; no <= 3; no++ {
		a := store.Attempt{No: no, Request: req, RequestHash: fmt.Sprintf("%064x", i*3+no), Source: "raw",
			Raw: string(value), Errors: errs, Class: "shape", FinishReason: "stop", LatencyMS: 1,
			TokensIn: 500, TokensOut: 50, Model: benchModel, RequestID: fmt.Sprintf("req-%d-%d", i, no), StartedAt: now}
		if no == 3 {
			a.Errors, a.Class, a.Valid = json.RawMessage(`[]`), "", true
		}
		r.AttemptRows = append(r.AttemptRows, a)
	}
	return r
}

// baseline measures the bare path: publish n small messages, consume them
// with a pull consumer, write one job row and three attempt rows each with
// store.SaveResults in batches of the worker's writer size from one writer,
// and ack each message after its batch commits. It returns jobs per second.
func (e *benchEnv) baseline(ctx context.Context, n int) (timedRun, error) {
	q := e.queue("base", 0)
	defer e.dropQueue(q)
	_, cons, err := queue.Ensure(ctx, e.js, q)
	if err != nil {
		return timedRun{}, err
	}
	batch, hash, err := e.seedBaseline(ctx, q, n)
	if err != nil {
		return timedRun{}, err
	}
	e.settle(ctx)
	start, cpu0 := time.Now(), e.readCPUClock(ctx)
	if err := e.consumeBaseline(ctx, cons, batch, hash, n); err != nil {
		return timedRun{}, err
	}
	elapsed := time.Since(start)
	return timedRun{rate: float64(n) / elapsed.Seconds(), took: elapsed, cpu: e.cpuUse(ctx, cpu0, n)}, nil
}

// seedBaseline records n jobs of a new batch and publishes a message for
// each on q, and returns the batch and its schema's hash. The job rows
// exist before the clock starts, as enqueue leaves them for the worker:
// both rates then time the same writes.
func (e *benchEnv) seedBaseline(ctx context.Context, q queue.Config, n int) (batch, hash string, err error) {
	// Fresh job ids every run: a second run over the same ids would find
	// them final and write nothing.
	batch = e.batchName(e.nextRun("baseline"))
	if hash, err = e.st.PutSchema(ctx, []byte(tickets.Schema)); err != nil {
		return "", "", err
	}
	if err := e.st.PutBatch(ctx, store.BatchParams{Name: batch}); err != nil {
		return "", "", err
	}
	now := time.Now()
	for i := 0; i < n; {
		var jobs []store.NewJob
		for j := 0; j < 1000 && i < n; i, j = i+1, j+1 {
			jobs = append(jobs, *baselineResult(fmt.Sprintf("%s-%d", batch, i+1), batch, hash, i+1, now).Job)
		}
		if _, err := e.st.InsertJobs(ctx, jobs); err != nil {
			return "", "", err
		}
	}
	for i := 0; i < n; {
		for j := 0; j < 1000 && i < n; i, j = i+1, j+1 {
			id := fmt.Sprintf("%s-%d", batch, i+1)
			if _, err := e.js.PublishAsync(q.Subject, baselinePayload(id, i+1), jetstream.WithMsgID(id)); err != nil {
				return "", "", fmt.Errorf("publish: %w", err)
			}
		}
		select {
		case <-e.js.PublishAsyncComplete():
		case <-ctx.Done():
			return "", "", ctx.Err()
		}
	}
	return batch, hash, nil
}

// consumeBaseline consumes the n messages of the baseline with a pull
// consumer, in batches of up to the worker's writer size, writing each
// batch's results and then acking its messages.
func (e *benchEnv) consumeBaseline(ctx context.Context, cons jetstream.Consumer, batch, hash string, n int) error {
	flushMax := pipeline.FlushMaxDefault
	it, err := cons.Messages(jetstream.PullMaxMessages(2 * flushMax))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	msgs := make(chan jetstream.Msg, flushMax)
	stop := make(chan struct{})
	go func() {
		defer close(msgs)
		for {
			m, err := it.Next()
			if err != nil {
				return
			}
			select {
			case msgs <- m:
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); it.Stop() }()
	got := make([]jetstream.Msg, 0, flushMax)
	results := make([]store.Result, 0, flushMax) // reused, as the worker's writer does
	for done := 0; done < n; {
		got = got[:0]
		select {
		case m := <-msgs:
			got = append(got, m)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return fmt.Errorf("baseline: no message for 30s after %d of %d", done, n)
		}
	fill:
		for len(got) < flushMax {
			select {
			case m := <-msgs:
				got = append(got, m)
			default:
				break fill
			}
		}
		if results, err = e.writeBaseline(ctx, got, results[:0], batch, hash); err != nil {
			return err
		}
		done += len(got)
	}
	return nil
}

// writeBaseline writes the results of a batch of baseline messages in one
// SaveResults, built in results, then acks them; it returns results for
// the next batch.
func (e *benchEnv) writeBaseline(ctx context.Context, got []jetstream.Msg, results []store.Result, batch, hash string) ([]store.Result, error) {
	var env struct {
		JobID string `json:"job_id"`
		RowNo int    `json:"row_no"`
	}
	now := time.Now()
	for _, m := range got {
		if err := json.Unmarshal(m.Data(), &env); err != nil {
			return results, fmt.Errorf("baseline: decode message: %w", err)
		}
		results = append(results, baselineResult(env.JobID, batch, hash, env.RowNo, now))
	}
	won, err := e.st.SaveResults(ctx, results)
	if err != nil {
		return results, err
	}
	for i, ok := range won {
		if !ok {
			// A result that did not win wrote nothing: the rate would
			// not be a write rate.
			return results, fmt.Errorf("baseline: result for job %s was not written (already final)", results[i].JobID)
		}
	}
	for _, m := range got {
		if err := m.Ack(); err != nil {
			return results, fmt.Errorf("baseline: ack: %w", err)
		}
	}
	return results, nil
}

// cpuClock is the machine's CPU time from /proc/stat, in clock ticks: what
// all its cores spent busy (anything but idle and iowait), and in total;
// and this process's own CPU time (user and system, from getrusage). Over a
// run where the machine is saturated, busy time per job says what a job
// costs better than jobs per second alone, which moves with everything else
// the machine does; the process's share separates what runs in it (the
// embedded NATS server and, in figure 2, the worker and the simulator) from
// Postgres and the rest of the machine. The CPU time of the Postgres
// backends serving the bench's database (by pid, read from /proc when
// Postgres runs on this host) is Postgres's share, which other work on a
// shared machine does not inflate the way it does machine-wide busy time.
type cpuClock struct {
	busy, total int64
	self        time.Duration
	pg          map[int]time.Duration
}

// readCPUClock is readCPUClock with the bench database's backends' CPU.
func (e *benchEnv) readCPUClock(ctx context.Context) cpuClock {
	c := readCPUClock()
	c.pg = e.backendCPU(ctx)
	return c
}

// cpuUse is c.use with the backends' CPU per job: that of the backends
// alive now less what they had used at c (a backend started since counts
// whole).
func (e *benchEnv) cpuUse(ctx context.Context, c cpuClock, jobs int) cpuUse {
	u := c.use(jobs)
	now := e.backendCPU(ctx)
	if len(now) == 0 || jobs <= 0 {
		return u
	}
	var d time.Duration
	for pid, t := range now {
		d += t - c.pg[pid]
	}
	u.pgJob = d / time.Duration(jobs)
	return u
}

// backendCPU is the CPU time (user and system) of each Postgres backend
// connected to the bench's database, by pid; nil when it cannot be read
// (Postgres on another host).
func (e *benchEnv) backendCPU(ctx context.Context) map[int]time.Duration {
	pids, err := e.st.BackendPIDs(ctx)
	if err != nil {
		return nil
	}
	out := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		if t, ok := procCPU(pid); ok {
			out[pid] = t
		}
	}
	return out
}

// procCPU reads a process's user and system CPU time from /proc.
func procCPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return statCPU(data)
}

// statCPU is the user and system CPU time in a /proc/PID/stat line.
func statCPU(data []byte) (time.Duration, bool) {
	// Fields after the command, which is in parentheses and may hold
	// spaces: state is the first, utime the 12th and stime the 13th.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / cpuTicksPerSecond, true
}

func readCPUClock() cpuClock {
	var c cpuClock
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuClock{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuClock{}
	}
	// user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest time is already counted in user and nice.
	for i, v := range f[1:min(len(f), 9)] {
		n, _ := strconv.ParseInt(v, 10, 64)
		c.total += n
		if i != 3 && i != 4 { // idle, iowait
			c.busy += n
		}
	}
	return c
}

// cpuTicksPerSecond is USER_HZ, 100 on every Linux architecture Go runs on.
const cpuTicksPerSecond = 100

// timedRun is one timed run of figure 1 or 2: jobs per second, how long
// it took and the machine's CPU meanwhile.
type timedRun struct {
	rate float64
	took time.Duration
	cpu  cpuUse
}

// cpuUse is the machine's CPU over a timed run of jobs.
type cpuUse struct {
	busy    float64       // share of all cores' time, 0..1
	perJob  time.Duration // busy time per job
	selfJob time.Duration // this process's CPU time per job
	pgJob   time.Duration // the bench database's Postgres backends' CPU time per job (0: unknown)
}

// use is the CPU spent since c, over jobs jobs.
func (c cpuClock) use(jobs int) cpuUse {
	now := readCPUClock()
	busy, total := now.busy-c.busy, now.total-c.total
	if c.total == 0 || total <= 0 || jobs <= 0 {
		return cpuUse{}
	}
	return cpuUse{
		busy:    float64(busy) / float64(total),
		perJob:  time.Duration(float64(busy) / cpuTicksPerSecond / float64(jobs) * float64(time.Second)),
		selfJob: (now.self - c.self) / time.Duration(jobs),
	}
}

func (u cpuUse) String() string {
	if u.perJob == 0 {
		return "machine CPU unknown"
	}
	s := fmt.Sprintf("machine CPU %s busy, %d µs a job, %d µs of it in this process", pct(u.busy), u.perJob.Microseconds(), u.selfJob.Microseconds())
	if u.pgJob > 0 {
		s += fmt.Sprintf(", %d µs in Postgres's backends", u.pgJob.Microseconds())
	}
	return s
}

// mib formats a byte count in MiB.
func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

var _ io.Writer = (*tailBuffer)(nil)

// loadAverage returns the 1-minute load average, "?" when unknown: figures
// measured while other work ran are worth less.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
