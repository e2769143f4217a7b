package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sourcegraph/conc"
	"github.com/sourcegraph/conc/pool"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/wave"
)

// Worker defaults.
const (
	ConcurrencyDefault = 16
	// ConcurrencyMax bounds the calls one process makes at once, and
	// JobsAheadMax the jobs it holds ahead of them: each job held costs
	// memory up front (its write buffer share), and past this many one
	// process is better scaled out to several.
	ConcurrencyMax        = 10_000
	JobsAheadMax          = 10_000
	GraceDefault          = 30 * time.Second
	MaxPromptBytesDefault = 256 << 10
	NakDelayMinDefault    = 2 * time.Second
	NakDelayMaxDefault    = 5 * time.Minute
	QuotaPauseDefault     = time.Minute
	LaneProbeDefault      = 5 * time.Minute
	FlushMaxDefault       = 256
	FlushIntervalDefault  = 5 * time.Millisecond
	// WriteBufferPerJob and WriteBufferMin size the default write buffer:
	// per job of concurrency, so a wave of jobs finishing together does not
	// wait on the buffer, and at least 1 MiB.
	WriteBufferPerJob    = 8 << 10
	WriteBufferMin       = 1 << 20
	FetchWaitDefault     = 500 * time.Millisecond
	ProgressEveryDefault = 30 * time.Second
	ForeignDelayDefault  = time.Minute
)

// Ledger is what the worker needs from the Postgres ledger. *store.Store
// satisfies it.
type Ledger interface {
	JobStates(ctx context.Context, ids []string) (map[string]store.JobState, error)
	// HasQueuedJobs tells a worker meeting another ledger's jobs whether
	// its own ledger has jobs waiting in the queue.
	HasQueuedJobs(ctx context.Context) (bool, error)
	Schema(ctx context.Context, hash string) ([]byte, error)
	DocumentLoader
	SaveResults(ctx context.Context, results []store.Result) ([]bool, error)
	SaveInterrupted(ctx context.Context, ins []store.Interruption) error
	// SaveCrashed records the calls a dead worker's reply journal kept
	// that the ledger does not have.
	SaveCrashed(ctx context.Context, ins []store.Interruption) (int, error)
	Reject(ctx context.Context, r store.Rejection) (bool, error)
	// A batch's spend cap: each call of a capped batch holds its estimate
	// before it is sent, then what it cost, until its row is written
	// (which charges the batch).
	BatchCap(ctx context.Context, batch string) (store.Cap, error)
	Reserve(ctx context.Context, batch string, tokens int64, costUSD float64, ttl time.Duration) (store.Hold, error)
	SettleHold(ctx context.Context, h store.Hold, tokens int64, costUSD float64) error
	RenewHolds(ctx context.Context, ids []int64, ttl time.Duration) error
}

var _ Ledger = (*store.Store)(nil)

// JobsAheadDefault is how many jobs a worker making calls provider calls
// at once pulls ahead of free call slots by default, so a finished call is
// replaced at once: half as many, at most 512.
func JobsAheadDefault(calls int) int { return min(calls/2, 512) }

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Queue names the stream and consumer; see queue.Config for defaults.
	Queue queue.Config
	// Concurrency is the number of jobs run at once by this process.
	// Defaults to 16.
	Concurrency int
	// JobsAhead is how many of Concurrency are jobs pulled ahead to wait
	// for a provider call slot (worker --jobs-ahead): the logs report the
	// calls (Concurrency - JobsAhead) and the jobs ahead apart.
	JobsAhead int
	// Prefetch is the most messages asked for in one pull. Messages are
	// only pulled for free slots, so none waits in a client buffer while
	// its ack timer runs. Defaults to Concurrency, at most 256.
	Prefetch int
	// FetchWait is how long one pull waits for messages when the queue is
	// empty; a stop request is noticed within it. Defaults to 500ms.
	FetchWait time.Duration
	// Grace is how long jobs in flight may run after a stop is asked for;
	// the rest are negatively acknowledged for immediate redelivery.
	// Defaults to 30s.
	Grace time.Duration
	// SpillDir is where results and interrupted calls the ledger could not
	// take at a stop are kept, to be written by the next worker started
	// with the same directory (before it pulls a job). "" keeps nothing:
	// those calls would be paid for and not recorded.
	SpillDir string
	// SpendHoldTTL is how long a hold on a capped batch's budget outlives a
	// worker killed while its call was in flight: a live worker renews its
	// holds every third of it. A call finding the budget held only by holds
	// waits up to SpendHoldTTL + 30s for them. Defaults to 1m.
	SpendHoldTTL time.Duration
	// Drain makes Run return once the queue is empty and nothing is in
	// flight: the nightly-job mode.
	Drain bool
	// MaxPromptBytes rejects jobs whose prompt is larger, counted with the
	// system prompt and the schema every request carries (a job's document
	// is not counted: enqueue bounds it, --max-document-bytes). Defaults to
	// 256 KiB.
	MaxPromptBytes int
	// DocumentCacheBytes bounds the text of the documents the worker
	// keeps after loading them for their jobs (least recently used out
	// first). Defaults to DocumentCacheBytesDefault.
	DocumentCacheBytes int64
	// NakDelayMin and NakDelayMax bound the delay before a transiently
	// failed job is delivered again; it doubles with each delivery.
	NakDelayMin, NakDelayMax time.Duration
	// QuotaPause is how long pulling stops after a provider reports its
	// quota exhausted without saying for how long. Defaults to 1m.
	QuotaPause time.Duration
	// LaneProbe is how often a lane stopped for a missing model runs one
	// of its held jobs to see whether the model is there now. Defaults
	// to 5m.
	LaneProbe time.Duration
	// ForeignDelay is how long a worker that has run none of its own jobs
	// lately pauses pulling after a job its ledger never recorded; the job
	// is handed back for twice as long, so a worker on the right ledger can
	// take it. Defaults to 1m.
	ForeignDelay time.Duration
	// FlushMax and FlushInterval batch ledger writes across jobs: a batch
	// is committed when it holds FlushMax results or its oldest waited
	// FlushInterval. Each message is acked only after its batch commits.
	FlushMax      int
	FlushInterval time.Duration
	// WriteBuffer bounds the estimated bytes of results waiting for their
	// commit. When the ledger is slow, finished jobs wait for room here
	// and hold their slots, so pulling slows down instead of memory
	// growing. Defaults to WriteBufferPerJob per job of Concurrency, and
	// at least WriteBufferMin.
	WriteBuffer int64
	// Providers maps a provider's name (a row of llm.Providers) to
	// its client. A job for a provider not listed is rejected.
	Providers map[string]Completer
	// Loop configures the repair loop.
	Loop LoopConfig
	// Wave tunes batch delivery (jobs of batches enqueued with
	// --delivery batch), for the providers whose clients have a batch
	// API (BatchClient).
	Wave wave.Config
	// Logger defaults to a discarding logger. Prompts and replies are never
	// logged.
	Logger *slog.Logger
	// Metrics defaults to metrics of the worker's own that nothing serves
	// (a no-op, as the logger's default).
	Metrics *Metrics
	// Tracer, when set, traces each delivery of a job (JobSpanName) and,
	// unless Loop.Tracer is set, each provider call under it. Nil (the
	// default) traces nothing.
	Tracer trace.Tracer

	// ProgressEvery is how often Run logs a progress line (jobs finished,
	// rate, in flight). Defaults to 30s; negative turns it off.
	ProgressEvery time.Duration

	// Test hooks, set through export_test.go. afterCommit runs after a
	// job's result is committed and before its message is acked (tests
	// crash in that window); beforeJob runs at the start of each job's
	// repair loop (tests inject panics).
	afterCommit func(jobID string)
	beforeJob   func(env *queue.Envelope)
	// waveHook runs at each point of a wave's life where a crash leaves
	// the ledger in another state (tests kill workers there).
	waveHook func(point string, waveID int64)
}

// WithDefaults returns a copy with zero fields set to their defaults.
func (c WorkerConfig) WithDefaults() WorkerConfig {
	c.Queue = c.Queue.WithDefaults()
	c.Concurrency = cmp.Or(c.Concurrency, ConcurrencyDefault)
	if c.Prefetch == 0 {
		c.Prefetch = min(c.Concurrency, 256)
	}
	c.FetchWait = cmp.Or(c.FetchWait, FetchWaitDefault)
	c.ProgressEvery = cmp.Or(c.ProgressEvery, ProgressEveryDefault)
	c.Grace = cmp.Or(c.Grace, GraceDefault)
	c.SpendHoldTTL = cmp.Or(c.SpendHoldTTL, SpendHoldTTLDefault)
	c.MaxPromptBytes = cmp.Or(c.MaxPromptBytes, MaxPromptBytesDefault)
	c.DocumentCacheBytes = cmp.Or(c.DocumentCacheBytes, DocumentCacheBytesDefault)
	c.NakDelayMin = cmp.Or(c.NakDelayMin, NakDelayMinDefault)
	c.NakDelayMax = cmp.Or(c.NakDelayMax, NakDelayMaxDefault)
	c.QuotaPause = cmp.Or(c.QuotaPause, QuotaPauseDefault)
	c.LaneProbe = cmp.Or(c.LaneProbe, LaneProbeDefault)
	c.ForeignDelay = cmp.Or(c.ForeignDelay, ForeignDelayDefault)
	c.FlushMax = cmp.Or(c.FlushMax, FlushMaxDefault)
	c.FlushInterval = cmp.Or(c.FlushInterval, FlushIntervalDefault)
	c.WriteBuffer = cmp.Or(c.WriteBuffer, max(WriteBufferMin, WriteBufferPerJob*int64(c.Concurrency)))
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	return c
}

// settingErr is a WorkerConfig setting that cannot work, by its field path
// ("Concurrency", "Queue.AckWait", "Wave.Lease").
func settingErr(setting string, v any, problem string) error {
	return &fixpoint.SettingError{Scope: "worker", Setting: setting, Value: v, Problem: problem}
}

// Validate reports the first setting of c (after WithDefaults) that cannot
// work: a negative duration, a size below its minimum, a queue or wave
// setting out of range. It does not look at Providers; NewWorker does. A
// command checks its flags with it before it connects to anything.
func (c WorkerConfig) Validate() error {
	switch {
	case c.Concurrency < 1:
		return settingErr("Concurrency", c.Concurrency, "must be at least 1")
	case c.JobsAhead < 0 || c.JobsAhead > JobsAheadMax:
		return settingErr("JobsAhead", c.JobsAhead, fmt.Sprintf("must be between 0 and %d", JobsAheadMax))
	case c.Concurrency-c.JobsAhead > ConcurrencyMax:
		return settingErr("Concurrency", c.Concurrency-c.JobsAhead, fmt.Sprintf("is over the %d calls one process makes at once (start more workers)", ConcurrencyMax))
	case c.Prefetch < 1:
		return settingErr("Prefetch", c.Prefetch, "must be at least 1")
	case c.WriteBuffer < 64<<10:
		return settingErr("WriteBuffer", c.WriteBuffer, "bytes is below the minimum of 64 KiB")
	case c.Grace < 0:
		return settingErr("Grace", c.Grace, "is negative")
	case c.MaxPromptBytes < 1:
		return settingErr("MaxPromptBytes", c.MaxPromptBytes, "must be at least 1")
	case c.DocumentCacheBytes < 0:
		return settingErr("DocumentCacheBytes", c.DocumentCacheBytes, "is negative")
	}
	if err := c.Queue.Validate(); err != nil {
		return nested("Queue.", err)
	}
	if err := c.Wave.WithDefaults().Validate(); err != nil {
		return nested("Wave.", err)
	}
	return nil
}

// nested is the error of a setting of the queue or wave configuration, as
// a setting of the worker's (Queue.AckWait).
func nested(prefix string, err error) error {
	var se *fixpoint.SettingError
	if errors.As(err, &se) {
		return settingErr(prefix+se.Setting, se.Value, se.Problem)
	}
	return err
}

func (c WorkerConfig) validate() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if len(c.Providers) == 0 {
		return errors.New("worker: no provider configured")
	}
	return nil
}

// Worker pulls jobs from the shared JetStream consumer, runs each through the
// repair loop in a bounded pool and writes results to the ledger, acking
// each message only after its rows are committed.
type Worker struct {
	cfg     WorkerConfig
	js      jetstream.JetStream
	ledger  Ledger
	loops   map[string]*Loop // one per provider, sharing its prompt cache
	tracer  trace.Tracer
	log     *slog.Logger
	schemas sync.Map // schema hash -> *schemaEntry
	// schemaLoads makes the jobs that miss the schema cache together (all
	// of them, when a worker starts on a full queue) share one read and
	// one compile.
	schemaLoads singleflight.Group
	// documents keeps the jobs' documents loaded last.
	documents *documentCache

	spill *spill // what the ledger could not take at a stop
	// journal keeps each reply until its delivery ends, for a kill -9.
	journal *journal
	// ledgerWarned and ledgerReadWarned are when a failed result write,
	// and another failed ledger call, were last logged (unix ns).
	ledgerWarned, ledgerReadWarned atomic.Int64
	// anomalies counts the attempts with usage anomalies since anomalyWarned
	// (unix ns), when they were last logged.
	anomalies, anomalyWarned atomic.Int64
	background               conc.WaitGroup // results between their first write and their message's disposal
	// submitted counts the results handed to the writer whose first write
	// has not called back yet: its callback starts their background
	// goroutine, so shutdown waits for these before background.
	submitted sync.WaitGroup
	// holds are the holds on capped batches' budgets of the calls whose
	// rows are not written yet, by delivery.
	holds *holdBook

	inFlight   atomic.Int64
	finished   atomic.Int64 // jobs finished here: messages acked, skipped or terminated, and jobs a wave finished
	waved      atomic.Int64 // jobs put in waves (their messages acked)
	foreignLog sync.Map     // batch -> *foreignCount, for one error line a minute per batch
	probing    atomic.Bool  // the last job seen was not in this ledger
	caps       sync.Map     // batch -> *capEntry
	foreignAt  atomic.Int64 // unix nanos of the last foreign job
	queueLost  atomic.Bool  // the consumer is gone from NATS, not yet made again
	ownAt      atomic.Int64 // unix nanos of the last job of this worker's ledger
	pauseUntil atomic.Int64 // unix nanos; pulling waits until then
	writer     *writer
	reader     *statusReader
	waves      *wave.Driver // nil: batch-delivery jobs run realtime
	beats      *heartbeats
	stopping   <-chan struct{} // closed when Run stops pulling
	stopNow    chan struct{}   // closed by StopNow: the grace period ends
	stopOnce   sync.Once
	// abort stops Run, which then returns err: a fault no job of this
	// worker can get past (a provider refusing the API key).
	abort func(err error)
	// lanes are the lanes stopped for a missing model, and their jobs
	// held here.
	lanes *lanes
}

// NewWorker checks cfg and returns a worker. Nothing runs until Run.
func NewWorker(js jetstream.JetStream, ledger Ledger, cfg WorkerConfig) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, js: js, ledger: ledger, log: cfg.Logger, beats: newHeartbeats(cfg.Queue.AckWait / 3), abort: func(error) {},
		stopNow: make(chan struct{}), lanes: newLanes(cfg.Concurrency, cfg.LaneProbe), holds: newHoldBook()}
	w.documents = newDocumentCache(ledger, cfg.DocumentCacheBytes)
	w.loops = make(map[string]*Loop, len(cfg.Providers))
	w.tracer = tracerOr(cfg.Tracer)
	for name, client := range cfg.Providers {
		lc := cfg.Loop
		if lc.Tracer == nil {
			lc.Tracer = cfg.Tracer
		}
		w.loops[name] = NewLoop(client, lc)
		w.loops[name].target = targetOf(name, client)
	}
	w.waves = newWaveDriver(w, ledger)
	return w, nil
}

// Refusing returns an error while this worker hands back jobs its ledger
// never recorded (the last job it saw was one, within the last two
// ForeignDelay), or holds a lane stopped because its provider has no such
// model (naming the lane and the model): for a readiness probe, since
// such a worker does no work, or not all of it.
func (w *Worker) Refusing() error {
	if err := w.lanes.err(); err != nil {
		return err
	}
	if w.queueLost.Load() {
		return fmt.Errorf("consumer %s of stream %s is gone from NATS (its data lost?): making it again", w.cfg.Queue.Consumer, w.cfg.Queue.Stream)
	}
	at := w.foreignAt.Load()
	if !w.probing.Load() || at == 0 || time.Since(time.Unix(0, at)) > 2*w.cfg.ForeignDelay {
		return nil
	}
	return errors.New("the jobs on the queue are not in this worker's ledger: is DATABASE_URL the one enqueue used?")
}

// InFlight reports how many jobs this worker is running now.
func (w *Worker) InFlight() int { return int(w.inFlight.Load()) }

// Run creates or updates the queue, then pulls and runs jobs until ctx ends
// (or, in drain mode, until the queue is empty). On ctx's end it stops
// pulling, lets jobs in flight finish within the grace period, negatively
// acknowledges the rest so they are redelivered at once, flushes ledger
// writes and returns nil. It returns an error only when the queue cannot be
// set up or consumed.
func (w *Worker) Run(ctx context.Context) error {
	stream, cons, err := queue.Ensure(ctx, w.js, w.cfg.Queue)
	if err != nil {
		return err
	}
	w.replayKept(ctx)
	w.spill = &spill{dir: w.cfg.SpillDir, log: w.log}
	defer w.spill.close()
	w.journal = newJournal(w.cfg.SpillDir, w.log)
	defer w.journal.close()
	r := &runState{cons: cons, jobs: pool.New().WithMaxGoroutines(w.cfg.Concurrency), slots: make(chan struct{}, w.cfg.Concurrency)}
	// Jobs run under their own context: a stop request does not cancel them
	// until the grace period has passed.
	r.jobCtx, r.hardStop = context.WithCancel(context.WithoutCancel(ctx))
	defer r.hardStop()
	stopLedgerIO := w.startLedgerIO(r)
	defer stopLedgerIO()
	r.pullCtx, r.stopPull = context.WithCancel(ctx)
	defer r.stopPull()
	waitProgress := w.startWatchers(ctx, r, stream)
	defer waitProgress()
	w.logStarted(ctx)
	w.pull(ctx, r)
	return w.shutdown(ctx, r)
}

// runState is what the steps of one Run share.
type runState struct {
	cons jetstream.Consumer
	// jobCtx is the jobs' context: hardStop ends it when the grace period
	// is over.
	jobCtx   context.Context
	hardStop context.CancelFunc
	// pullCtx ends when pulling stops: ctx's end, an abort, or in drain
	// mode an empty queue.
	pullCtx  context.Context
	stopPull context.CancelFunc
	jobs     *pool.Pool
	// slots holds one token per job pulled and not finished.
	slots        chan struct{}
	queueChecked time.Time
	// fatal is what an abort stopped Run with.
	fatal     error
	fatalOnce sync.Once
	// Closed when the goroutine of the same name returns.
	writerDone, deadDone, drainDone, wavesDone, probeDone <-chan struct{}
}

func (r *runState) stopping() bool { return r.pullCtx.Err() != nil }

// goDone runs f in a goroutine of its own and returns a channel closed
// when f returns.
func goDone(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	return done
}

// closedChan is the done channel of a goroutine not started.
func closedChan() <-chan struct{} {
	done := make(chan struct{})
	close(done)
	return done
}

// replayKept writes to the ledger what a worker stopped while the ledger
// was down kept on disk, and the replies a worker that died had received
// (its journal), before any job is pulled.
func (w *Worker) replayKept(ctx context.Context) {
	if _, err := replaySpill(ctx, w.cfg.SpillDir, w.ledger, w.log); err != nil {
		w.log.WarnContext(ctx, "worker: write what a stopped worker kept on disk (kept for the next start)", slog.String("error", err.Error()))
	}
	if _, err := replayJournals(ctx, w.cfg.SpillDir, w.ledger, w.log); err != nil {
		w.log.WarnContext(ctx, "worker: record the replies a worker that died had received (kept for the next start)", slog.String("error", err.Error()))
	}
}

// startLedgerIO starts the goroutines between the jobs and NATS and the
// ledger: the heartbeats on messages in progress, the renewal of the
// holds on capped batches' budgets, the result writer and the status
// reader. shutdown closes the writer after the last job; the
// function returned stops the reader, then the heartbeats.
func (w *Worker) startLedgerIO(r *runState) (stop func()) {
	// Progress reports outlive the jobs: they stop after the last commit
	// and its ack, when Run returns.
	beatsStop := make(chan struct{})
	beatsDone := goDone(func() { w.beats.run(beatsStop) })
	holdsDone := goDone(func() { w.renewHolds(beatsStop) })
	// The queue has room for every job: the write buffer, in bytes, is
	// what bounds the backlog.
	w.writer = newWriter(w.ledger, w.cfg.FlushMax, w.cfg.Concurrency, w.cfg.WriteBuffer, w.cfg.FlushInterval, w.cfg.Metrics)
	r.writerDone = goDone(w.writer.run)
	w.reader = newStatusReader(w.ledger, w.cfg.FlushMax)
	readerDone := goDone(w.reader.run)
	return func() {
		w.reader.close()
		<-readerDone
		close(beatsStop)
		<-beatsDone
		<-holdsDone
	}
}

// startWatchers sets how a fault no job can get past stops the pull
// (w.abort) and starts what runs beside it until pulling stops: the
// dead-letter watch, the drain watch (in drain mode), the progress log
// and the wave driver. shutdown joins all but the progress log, which
// the function returned waits for.
func (w *Worker) startWatchers(ctx context.Context, r *runState, stream jetstream.Stream) (wait func()) {
	w.stopping = r.pullCtx.Done()
	w.abort = func(err error) {
		r.fatalOnce.Do(func() {
			r.fatal = err
			w.log.ErrorContext(ctx, "worker: stopping", slog.String("error", err.Error()))
			r.stopPull()
		})
	}
	r.deadDone = goDone(func() { w.watchDead(r.pullCtx, stream) })
	r.drainDone = closedChan()
	if w.cfg.Drain {
		r.drainDone = goDone(func() { w.watchDrain(r.pullCtx, r.stopPull, r.cons) })
	}
	progressDone := goDone(func() { w.logProgress(r.pullCtx) })
	r.probeDone = goDone(func() { w.probeLanes(r) })
	r.wavesDone = closedChan()
	if w.waves.Drives() {
		r.wavesDone = goDone(func() { w.waves.Run(r.pullCtx) })
	}
	return func() { <-progressDone }
}

// logStarted logs the worker's settings, and warns when the queue's max
// ack pending keeps it from running Concurrency jobs at once.
func (w *Worker) logStarted(ctx context.Context) {
	if room := w.cfg.Queue.MaxAckPending - pendingWriteRoom(w.cfg); room < w.cfg.Concurrency {
		w.log.WarnContext(ctx, "worker: max ack pending leaves too little room: jobs waiting for their commit count against it, so fewer jobs than the concurrency can run at once",
			slog.Int("max_ack_pending", w.cfg.Queue.MaxAckPending), slog.Int("concurrency", w.cfg.Concurrency-w.cfg.JobsAhead),
			slog.Int("jobs_ahead", w.cfg.JobsAhead), slog.Int("want_at_least", w.cfg.Concurrency+pendingWriteRoom(w.cfg)))
	}
	// Where its spill files and reply journal go, as an absolute path: only
	// a worker started on that directory records what a crash left there.
	spillDir := w.cfg.SpillDir
	if abs, err := filepath.Abs(spillDir); err == nil && spillDir != "" {
		spillDir = abs
	}
	w.log.InfoContext(ctx, "worker: started", slog.Int("concurrency", w.cfg.Concurrency-w.cfg.JobsAhead), slog.Int("jobs_ahead", w.cfg.JobsAhead),
		slog.String("stream", w.cfg.Queue.Stream), slog.String("consumer", w.cfg.Queue.Consumer), slog.Bool("drain", w.cfg.Drain),
		slog.String("spill_dir", spillDir))
}

// pull pulls jobs and starts them until pulling stops. It pulls only for
// free slots: a message is fetched when a slot is there to run it, so no
// client-side buffer holds messages whose ack timers run out while they
// wait.
func (w *Worker) pull(ctx context.Context, r *runState) {
	for !r.stopping() {
		if full, unfull := w.lanes.full(); full {
			// Jobs of stopped lanes hold as many messages as this worker
			// runs jobs: pulling more would only hold more.
			select {
			case <-r.pullCtx.Done():
			case <-unfull:
			}
			continue
		}
		select {
		case r.slots <- struct{}{}:
		case <-r.pullCtx.Done():
			continue
		}
		free := w.claimSlots(r)
		if r.stopping() {
			releaseSlots(r.slots, free)
			break
		}
		if full, _ := w.lanes.full(); full { // filled while the slots were claimed
			releaseSlots(r.slots, free)
			continue
		}
		batch, err := r.cons.Fetch(free, jetstream.FetchMaxWait(w.cfg.FetchWait))
		if err != nil {
			releaseSlots(r.slots, free)
			w.log.WarnContext(ctx, "worker: pull", slog.String("error", err.Error()))
			w.checkQueue(r.pullCtx, r.cons, &r.queueChecked)
			select {
			case <-time.After(250 * time.Millisecond):
			case <-r.pullCtx.Done():
			}
			continue
		}
		got := w.startJobs(ctx, r, batch)
		releaseSlots(r.slots, free-got)
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && !r.stopping() {
			w.log.WarnContext(ctx, "worker: pull", slog.String("error", err.Error()))
		}
		if got == 0 {
			w.checkQueue(r.pullCtx, r.cons, &r.queueChecked)
		}
	}
}

// claimSlots adds to the one slot the pull holds the free ones it finds
// without waiting, up to a pull's worth, then waits out a pause in
// pulling. It returns how many slots the pull holds.
func (w *Worker) claimSlots(r *runState) int {
	free := 1
	want := w.cfg.Prefetch
	if w.probing.Load() {
		// Jobs lately were not in this ledger: pull one at a time, so a
		// misconfigured worker costs the right workers' jobs as few
		// deliveries as it can.
		want = 1
	}
more:
	for free < want {
		select {
		case r.slots <- struct{}{}:
			free++
		default:
			break more
		}
	}
	w.waitPause(r.pullCtx)
	if w.probing.Load() && free > 1 {
		// A foreign job was seen while this pull was being prepared.
		releaseSlots(r.slots, free-1)
		free = 1
	}
	return free
}

// startJobs runs a job for each message of a pull, each on a slot the
// pull holds, and returns how many messages came. The messages that come
// once pulling stops are handed back.
func (w *Worker) startJobs(ctx context.Context, r *runState, batch jetstream.MessageBatch) int {
	got := 0
	for msg := range batch.Messages() {
		got++
		if r.stopping() {
			// Stopping: hand back what arrives at once.
			w.dispose(ctx, msg, nil, queue.Disposition{Kind: queue.DispRelease})
			<-r.slots
			continue
		}
		w.inFlight.Add(1)
		w.cfg.Metrics.InFlight.Inc()
		run := func() {
			defer func() {
				w.inFlight.Add(-1)
				w.cfg.Metrics.InFlight.Dec()
				<-r.slots
			}()
			w.handleSafely(r.jobCtx, msg)
		}
		if w.probing.Load() {
			// Probing after a foreign job: run this one before pulling
			// the next, so the pause its refusal sets is seen.
			run()
			continue
		}
		r.jobs.Go(run)
	}
	return got
}

// shutdown ends a Run whose pulling has stopped: the waves hand back what
// they collected, the jobs in flight finish or are cut off, the ledger
// writes are flushed and the goroutines beside the pull are joined. It
// returns Run's error.
func (w *Worker) shutdown(ctx context.Context, r *runState) error {
	w.log.InfoContext(ctx, "worker: stopped pulling", slog.Int64("in_flight", w.inFlight.Load()))
	if w.waves != nil {
		// Jobs collected for a wave not yet recorded go back to the queue;
		// a wave being recorded or driven finishes its step.
		w.waves.Stop(ctx)
	}
	<-r.probeDone // it starts jobs: done before they are awaited
	w.awaitJobs(ctx, r)
	w.releaseParked(ctx)
	// Retries waiting out a ledger pause see the stop and hand their
	// messages back; then the writer flushes what is queued. A result's
	// first write calls back from the writer and starts its background
	// goroutine then: every such call is awaited first, or a result still
	// in the writer would be disposed of (and spilled) after the stop.
	w.submitted.Wait()
	w.background.Wait()
	w.writer.close()
	<-r.writerDone
	r.stopPull()
	<-r.deadDone
	<-r.drainDone
	<-r.wavesDone
	w.log.InfoContext(ctx, "worker: stopped")
	r.fatalOnce.Do(func() {}) // no abort after this point
	if n := w.spill.lost.Load(); n > 0 && r.fatal == nil {
		return fmt.Errorf("%d results or interrupted deliveries, their calls paid for, could not be written to the ledger nor kept in the spill directory %q", n, w.cfg.SpillDir)
	}
	return r.fatal
}

// awaitJobs waits for the jobs in flight to finish within the grace
// period; when it is over, or StopNow is called, their context ends and
// they hand their messages back.
func (w *Worker) awaitJobs(ctx context.Context, r *runState) {
	poolDone := goDone(r.jobs.Wait)
	select {
	case <-poolDone:
	case <-time.After(w.cfg.Grace):
		w.log.WarnContext(ctx, "worker: grace period over, handing back jobs in flight",
			slog.Int64("in_flight", w.inFlight.Load()), slog.Duration("grace", w.cfg.Grace))
		r.hardStop()
		<-poolDone
	case <-w.stopNow:
		w.log.WarnContext(ctx, "worker: asked to stop now, handing back jobs in flight",
			slog.Int64("in_flight", w.inFlight.Load()))
		r.hardStop()
		<-poolDone
	}
}

// pendingWriteRoom is how many finished jobs may wait for their commit
// with their messages unacked, at most: the writer's queue, the batch it
// is filling and two committing (the write buffer usually binds first).
func pendingWriteRoom(c WorkerConfig) int {
	return c.Concurrency + 3*c.FlushMax
}

func (w *Worker) pauseFor(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := w.pauseUntil.Load()
		if cur >= until || w.pauseUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// StopNow ends the grace period of a Run that is stopping (its context
// cancelled): the jobs still in flight are cut off, their calls recorded
// as interrupted, and handed back at once (a second SIGINT or SIGTERM). It
// does nothing before the stop and is safe to call more than once.
func (w *Worker) StopNow() { w.stopOnce.Do(func() { close(w.stopNow) }) }

func (w *Worker) stoppingNow() bool {
	select {
	case <-w.stopping:
		return true
	default:
		return false
	}
}

func releaseSlots(slots chan struct{}, n int) {
	for i := 0; i < n; i++ {
		<-slots
	}
}

func (w *Worker) waitPause(ctx context.Context) {
	for {
		until := time.Unix(0, w.pauseUntil.Load())
		d := time.Until(until)
		if d <= 0 {
			return
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return
		}
	}
}

// logProgress logs what the worker has done every ProgressEvery until ctx
// ends: long nightly runs show their progress in the logs.
func (w *Worker) logProgress(ctx context.Context) {
	if w.cfg.ProgressEvery < 0 {
		return
	}
	t := time.NewTicker(w.cfg.ProgressEvery)
	defer t.Stop()
	start, last := time.Now(), int64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		done := w.finished.Load()
		attrs := []any{slog.Int64("finished", done),
			slog.Float64("per_second", math.Round(10*float64(done-last)/w.cfg.ProgressEvery.Seconds())/10),
			slog.Int64("in_flight", w.inFlight.Load()), slog.Duration("uptime", time.Since(start).Round(time.Second))}
		if n := w.waved.Load(); n > 0 {
			attrs = append(attrs, slog.Int64("put_in_waves", n))
		}
		w.log.InfoContext(ctx, "worker: progress", attrs...)
		last = done
	}
}

// watchDrain stops pulling once the consumer has nothing pending, nothing
// unacknowledged, nothing runs here and no wave is open, seen twice in a
// row.
func (w *Worker) watchDrain(ctx context.Context, stop context.CancelFunc, cons jetstream.Consumer) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	idle, stuck := 0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := cons.Info(ictx)
		cancel()
		if err != nil {
			idle = 0
			continue
		}
		parked, stopped := w.lanes.state()
		if stopped && w.inFlight.Load() == 0 && !w.waves.Open(ctx) && int(info.NumAckPending) <= parked && (info.NumPending == 0 || parked >= w.cfg.Concurrency) {
			// Nothing runs, and what is left is held for stopped lanes:
			// the drain cannot finish, and its exit must say so.
			stuck++
		} else {
			stuck = 0
		}
		if info.NumPending == 0 && info.NumAckPending == 0 && w.inFlight.Load() == 0 && !w.waves.Open(ctx) {
			idle++
		} else {
			idle = 0
		}
		if stuck >= 2 {
			w.abort(fmt.Errorf("drain cannot finish: %w: fix the model name (or pull the model) and run again", w.lanes.err()))
			return
		}
		if idle >= 2 {
			w.log.InfoContext(ctx, "worker: queue drained")
			stop()
			return
		}
	}
}

// holdFor waits d while a job keeps its message; false when the worker is
// stopping or the job's context ended first.
func (w *Worker) holdFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-w.stopping:
		return false
	}
}

// queueCheckEvery is how often a worker that pulls nothing asks whether
// its consumer still exists.
const queueCheckEvery = 2 * time.Second

// checkQueue makes the stream and consumer again when NATS no longer has
// them (a server restarted without its data directory), at most every
// queueCheckEvery: a pull from a missing consumer gets nothing and no
// error, and the workers sat idle, ready, while enqueue filled the new
// stream. The consumer handle addresses it by name, so pulls find the
// new one.
func (w *Worker) checkQueue(ctx context.Context, cons jetstream.Consumer, last *time.Time) {
	if time.Since(*last) < queueCheckEvery || ctx.Err() != nil {
		return
	}
	*last = time.Now()
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := cons.Info(ictx)
	cancel()
	if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		w.queueLost.Store(false)
		return
	}
	w.queueLost.Store(true)
	w.log.WarnContext(ctx, "worker: the queue is gone from NATS (a server restarted without its data?): making it again",
		slog.String("stream", w.cfg.Queue.Stream), slog.String("consumer", w.cfg.Queue.Consumer), slog.String("error", err.Error()))
	if _, _, err := queue.Ensure(ctx, w.js, w.cfg.Queue); err != nil {
		w.log.ErrorContext(ctx, "worker: make the queue again (tried again in a moment)", slog.String("error", err.Error()))
		return
	}
	w.queueLost.Store(false)
	w.log.InfoContext(ctx, "worker: queue made again: jobs the ledger holds as queued but the queue lost need enqueue --resume --batch NAME",
		slog.String("stream", w.cfg.Queue.Stream))
}
