package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sourcegraph/conc"
	"github.com/sourcegraph/conc/panics"
	"github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/singleflight"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// Worker defaults.
const (
	ConcurrencyDefault    = 16
	GraceDefault          = 30 * time.Second
	MaxPromptBytesDefault = 256 << 10
	NakDelayMinDefault    = 2 * time.Second
	NakDelayMaxDefault    = 5 * time.Minute
	QuotaPauseDefault     = time.Minute
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
	Schema(ctx context.Context, hash string) ([]byte, error)
	SaveResults(ctx context.Context, results []store.Result) ([]bool, error)
	SaveInterrupted(ctx context.Context, ins []store.Interruption) error
	Reject(ctx context.Context, r store.Rejection) (bool, error)
	// The spend caps: each call of a capped batch holds its estimate
	// before it is sent and is charged after.
	BatchCaps(ctx context.Context, batches []string) (map[string]store.Cap, error)
	Reserve(ctx context.Context, batch string, tokens int64, costUSD float64, ttl time.Duration) (store.Hold, error)
	Charge(ctx context.Context, h store.Hold, tokens int64, costUSD float64) error
}

var _ Ledger = (*store.Store)(nil)

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Queue names the stream and consumer; see QueueConfig for defaults.
	Queue QueueConfig
	// Concurrency is the number of jobs run at once by this process.
	// Defaults to 16.
	Concurrency int
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
	// Drain makes Run return once the queue is empty and nothing is in
	// flight: the nightly-job mode.
	Drain bool
	// MaxPromptBytes rejects jobs whose prompt is larger. Defaults to 256 KiB.
	MaxPromptBytes int
	// NakDelayMin and NakDelayMax bound the delay before a transiently
	// failed job is delivered again; it doubles with each delivery.
	NakDelayMin, NakDelayMax time.Duration
	// QuotaPause is how long pulling stops after a provider reports its
	// quota exhausted without saying for how long. Defaults to 1m.
	QuotaPause time.Duration
	// ForeignDelay is how long a job this worker's ledger never recorded is
	// handed back for, so a worker on the right ledger can take it.
	// Defaults to 1m.
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
	// Providers maps a provider name ("openai", "anthropic", "ollama") to
	// its client. A job for a provider not listed is rejected.
	Providers map[string]Completer
	// Loop configures the repair loop.
	Loop LoopConfig
	// Logger defaults to a discarding logger. Prompts and replies are never
	// logged.
	Logger *slog.Logger
	// Metrics may be nil.
	Metrics *Metrics
	// AfterCommitFunc, when set, runs after a job's result is committed and
	// before its message is acked. Tests use it to crash in that window.
	AfterCommitFunc func(jobID string)
	// ProgressEvery is how often Run logs a progress line (jobs finished,
	// rate, in flight). Defaults to 30s; negative turns it off.
	ProgressEvery time.Duration
	// BeforeJobFunc, when set, runs at the start of each job's repair loop.
	// Tests use it to inject panics.
	BeforeJobFunc func(env *Envelope)
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
	c.MaxPromptBytes = cmp.Or(c.MaxPromptBytes, MaxPromptBytesDefault)
	c.NakDelayMin = cmp.Or(c.NakDelayMin, NakDelayMinDefault)
	c.NakDelayMax = cmp.Or(c.NakDelayMax, NakDelayMaxDefault)
	c.QuotaPause = cmp.Or(c.QuotaPause, QuotaPauseDefault)
	c.ForeignDelay = cmp.Or(c.ForeignDelay, ForeignDelayDefault)
	c.FlushMax = cmp.Or(c.FlushMax, FlushMaxDefault)
	c.FlushInterval = cmp.Or(c.FlushInterval, FlushIntervalDefault)
	c.WriteBuffer = cmp.Or(c.WriteBuffer, max(WriteBufferMin, WriteBufferPerJob*int64(c.Concurrency)))
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c WorkerConfig) validate() error {
	switch {
	case c.Concurrency < 1:
		return fmt.Errorf("worker: concurrency %d must be at least 1", c.Concurrency)
	case c.Prefetch < 1:
		return fmt.Errorf("worker: prefetch %d must be at least 1", c.Prefetch)
	case c.WriteBuffer < 64<<10:
		return fmt.Errorf("worker: write buffer %d bytes is below the minimum of 64 KiB", c.WriteBuffer)
	case len(c.Providers) == 0:
		return errors.New("worker: no provider configured")
	}
	return c.Queue.validate()
}

// Worker pulls jobs from the shared JetStream consumer, runs each through the
// repair loop in a bounded pool and writes results to the ledger, acking
// each message only after its rows are committed.
type Worker struct {
	cfg     WorkerConfig
	js      jetstream.JetStream
	ledger  Ledger
	loops   map[string]*Loop // one per provider, sharing its prompt cache
	log     *slog.Logger
	schemas sync.Map // schema hash -> *schemaEntry
	// schemaLoads makes the jobs that miss the schema cache together (all
	// of them, when a worker starts on a full queue) share one read and
	// one compile.
	schemaLoads singleflight.Group

	background conc.WaitGroup // ledger-write retries waiting out a pause

	inFlight   atomic.Int64
	finished   atomic.Int64 // messages acked, skipped or terminated
	foreignLog sync.Map     // batch -> *foreignCount, for one error line a minute per batch
	probing    atomic.Bool  // the last job seen was not in this ledger
	caps       sync.Map     // batch -> *capEntry
	foreignAt  atomic.Int64 // unix nanos of the last foreign job
	pauseUntil atomic.Int64 // unix nanos; pulling waits until then
	writer     *writer
	reader     *statusReader
	beats      *heartbeats
	stopping   <-chan struct{} // closed when Run stops pulling
}

// NewWorker checks cfg and returns a worker. Nothing runs until Run.
func NewWorker(js jetstream.JetStream, ledger Ledger, cfg WorkerConfig) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, js: js, ledger: ledger, log: cfg.Logger, beats: newHeartbeats(cfg.Queue.AckWait / 3)}
	w.loops = make(map[string]*Loop, len(cfg.Providers))
	for name, client := range cfg.Providers {
		w.loops[name] = NewLoop(client, cfg.Loop)
	}
	return w, nil
}

// Refusing returns an error while this worker hands back jobs its ledger
// never recorded (the last job it saw was one, within the last two
// ForeignDelay): for a readiness probe, since such a worker does no work.
func (w *Worker) Refusing() error {
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
	stream, cons, err := EnsureQueue(ctx, w.js, w.cfg.Queue)
	if err != nil {
		return err
	}
	// Jobs run under their own context: a stop request does not cancel them
	// until the grace period has passed.
	jobCtx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	// Progress reports outlive the jobs: they stop after the last commit
	// and its ack, when Run returns.
	beatsStop, beatsDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(beatsDone); w.beats.run(beatsStop) }()
	defer func() { close(beatsStop); <-beatsDone }()
	// The queue has room for every job: the write buffer, in bytes, is
	// what bounds the backlog.
	w.writer = newWriter(w.ledger, w.cfg.FlushMax, w.cfg.Concurrency, w.cfg.WriteBuffer, w.cfg.FlushInterval, w.cfg.Metrics)
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); w.writer.run() }()
	w.reader = newStatusReader(w.ledger, w.cfg.FlushMax)
	readerDone := make(chan struct{})
	go func() { defer close(readerDone); w.reader.run() }()
	defer func() { w.reader.close(); <-readerDone }()

	pullCtx, stopPull := context.WithCancel(ctx)
	defer stopPull()
	w.stopping = pullCtx.Done()
	deadDone := make(chan struct{})
	go func() { defer close(deadDone); w.watchDead(pullCtx, stream) }()
	if w.cfg.Drain {
		go w.watchDrain(pullCtx, stopPull, cons)
	}
	progressDone := make(chan struct{})
	go func() { defer close(progressDone); w.logProgress(pullCtx) }()
	defer func() { <-progressDone }()

	if room := w.cfg.Queue.MaxAckPending - pendingWriteRoom(w.cfg); room < w.cfg.Concurrency {
		w.log.WarnContext(ctx, "worker: max ack pending leaves too little room: jobs waiting for their commit count against it, so fewer jobs than the concurrency can run at once",
			slog.Int("max_ack_pending", w.cfg.Queue.MaxAckPending), slog.Int("concurrency", w.cfg.Concurrency),
			slog.Int("want_at_least", w.cfg.Concurrency+pendingWriteRoom(w.cfg)))
	}
	w.log.InfoContext(ctx, "worker: started", slog.Int("concurrency", w.cfg.Concurrency),
		slog.String("stream", w.cfg.Queue.Stream), slog.String("consumer", w.cfg.Queue.Consumer), slog.Bool("drain", w.cfg.Drain))
	p := pool.New().WithMaxGoroutines(w.cfg.Concurrency)
	slots := make(chan struct{}, w.cfg.Concurrency)
	stopping := func() bool { return pullCtx.Err() != nil }
	// Pull only for free slots: a message is fetched when a slot is there
	// to run it, so no client-side buffer holds messages whose ack timers
	// run out while they wait.
	for !stopping() {
		select {
		case slots <- struct{}{}:
		case <-pullCtx.Done():
			continue
		}
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
			case slots <- struct{}{}:
				free++
			default:
				break more
			}
		}
		w.waitPause(pullCtx)
		if w.probing.Load() && free > 1 {
			// A foreign job was seen while this pull was being prepared.
			releaseSlots(slots, free-1)
			free = 1
		}
		if stopping() {
			releaseSlots(slots, free)
			break
		}
		batch, err := cons.Fetch(free, jetstream.FetchMaxWait(w.cfg.FetchWait))
		if err != nil {
			releaseSlots(slots, free)
			w.log.WarnContext(ctx, "worker: pull", slog.String("error", err.Error()))
			select {
			case <-time.After(250 * time.Millisecond):
			case <-pullCtx.Done():
			}
			continue
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			if stopping() {
				// Stopping: hand back what arrives at once.
				_ = msg.Nak()
				<-slots
				continue
			}
			w.inFlight.Add(1)
			if w.cfg.Metrics != nil {
				w.cfg.Metrics.InFlight.Inc()
			}
			run := func() {
				defer func() {
					w.inFlight.Add(-1)
					if w.cfg.Metrics != nil {
						w.cfg.Metrics.InFlight.Dec()
					}
					<-slots
				}()
				w.handleSafely(jobCtx, msg)
			}
			if w.probing.Load() {
				// Probing after a foreign job: run this one before pulling
				// the next, so the pause its refusal sets is seen.
				run()
				continue
			}
			p.Go(run)
		}
		releaseSlots(slots, free-got)
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && !stopping() {
			w.log.WarnContext(ctx, "worker: pull", slog.String("error", err.Error()))
		}
	}
	w.log.InfoContext(ctx, "worker: stopped pulling", slog.Int64("in_flight", w.inFlight.Load()))

	poolDone := make(chan struct{})
	go func() { p.Wait(); close(poolDone) }()
	select {
	case <-poolDone:
	case <-time.After(w.cfg.Grace):
		w.log.WarnContext(ctx, "worker: grace period over, handing back jobs in flight",
			slog.Int64("in_flight", w.inFlight.Load()), slog.Duration("grace", w.cfg.Grace))
		hardStop()
		<-poolDone
	}
	// Retries waiting out a ledger pause see the stop and hand their
	// messages back; then the writer flushes what is queued.
	w.background.Wait()
	w.writer.close()
	<-writerDone
	stopPull()
	<-deadDone
	w.log.InfoContext(ctx, "worker: stopped")
	return nil
}

// pendingWriteRoom is how many finished jobs may wait for their commit
// with their messages unacked, at most: the writer's queue, the batch it
// is filling and two committing (the write buffer usually binds first).
func pendingWriteRoom(c WorkerConfig) int {
	return c.Concurrency + 3*c.FlushMax
}

// resumeHoldsMax is how often a job with paid attempts waits out a provider
// failure inside one delivery before it is handed back.
const resumeHoldsMax = 3

func paidAttempts(res *Result) bool {
	for i := range res.Attempts {
		if res.Attempts[i].TokensIn+res.Attempts[i].TokensOut > 0 {
			return true
		}
	}
	return false
}

// ledgerPause is how long pulling stops while the ledger cannot be written.
const ledgerPause = time.Second

func (w *Worker) pauseFor(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := w.pauseUntil.Load()
		if cur >= until || w.pauseUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

func (w *Worker) stoppingNow() bool {
	select {
	case <-w.stopping:
		return true
	default:
		return false
	}
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// permanent marks an error retryLedger must not retry.
func permanent(err error) error { return permanentError{err} }

// retryLedger runs op until it succeeds, returns a permanent error, or the
// worker stops. A ledger that is down is not the job's fault: the message is
// kept (its progress reported) and pulling pauses, instead of a nak that
// would count a delivery and let an outage burn jobs to dead.
func (w *Worker) retryLedger(ctx context.Context, log *slog.Logger, op func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := op()
		if err == nil {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return perm.err
		}
		log.WarnContext(ctx, "worker: ledger unavailable, retrying", slog.Duration("wait", wait), slog.String("error", err.Error()))
		w.pauseFor(wait)
		if !w.holdFor(ctx, wait) {
			return err
		}
		wait = min(2*wait, 5*time.Second)
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
		w.log.InfoContext(ctx, "worker: progress", slog.Int64("finished", done),
			slog.Float64("per_second", float64(done-last)/w.cfg.ProgressEvery.Seconds()),
			slog.Int64("in_flight", w.inFlight.Load()), slog.Duration("uptime", time.Since(start).Round(time.Second)))
		last = done
	}
}

// watchDrain stops pulling once the consumer has nothing pending, nothing
// unacknowledged and nothing runs here, seen twice in a row.
func (w *Worker) watchDrain(ctx context.Context, stop context.CancelFunc, cons jetstream.Consumer) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	idle := 0
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
		if info.NumPending == 0 && info.NumAckPending == 0 && w.inFlight.Load() == 0 {
			idle++
		} else {
			idle = 0
		}
		if idle >= 2 {
			w.log.InfoContext(ctx, "worker: queue drained")
			stop()
			return
		}
	}
}

// handleSafely runs one message; a panic is recovered, recorded as the job's
// failure and the message terminated, and the pool carries on.
func (w *Worker) handleSafely(ctx context.Context, msg jetstream.Msg) {
	var env *Envelope
	recovered := panics.Try(func() { w.handle(ctx, msg, &env) })
	if recovered == nil {
		return
	}
	err := recovered.AsError()
	w.log.ErrorContext(ctx, "worker: job panicked", slog.String("job_id", jobIDOf(msg, env)), slog.String("error", err.Error()))
	res := &Result{JobID: jobIDOf(msg, env), Status: StatusFailed, Class: "panic", Error: fmt.Sprintf("panic: %v", recovered.Value), StartedAt: time.Now()}
	// Recording the failure may panic too (the same hook, a broken ledger
	// driver): then hand the message back instead of letting the panic reach
	// the pool, which would re-panic at Wait and take the process down. A
	// redelivery of a job already final is acked without a call.
	if again := panics.Try(func() { w.finish(ctx, msg, env, res) }); again != nil {
		w.log.ErrorContext(ctx, "worker: recording a panicked job panicked", slog.String("job_id", res.JobID), slog.String("error", again.AsError().Error()))
		_ = msg.NakWithDelay(w.cfg.NakDelayMin)
		w.count("nak")
	}
}

func jobIDOf(msg jetstream.Msg, env *Envelope) string {
	if env != nil && env.JobID != "" {
		return env.JobID
	}
	if id, ok := JobIDFromMsgID(msg.Headers().Get(jetstream.MsgIDHeader)); ok && id != "" {
		return id
	}
	if meta, err := msg.Metadata(); err == nil {
		return fmt.Sprintf("seq-%d", meta.Sequence.Stream)
	}
	return "unknown"
}

func (w *Worker) handle(ctx context.Context, msg jetstream.Msg, envOut **Envelope) {
	meta, _ := msg.Metadata()
	delivered := 1
	if meta != nil {
		delivered = int(meta.NumDelivered)
	}
	// Progress is reported from the first moment to the ack: ledger reads,
	// the loop and the (batched) write all count against AckWait, and a
	// slow database must not get a job redelivered to another worker while
	// this one is still writing it.
	stopBeat := w.heartbeat(msg)
	defer stopBeat()
	env, decodeErr := DecodeEnvelope(msg.Data())
	*envOut = env
	if env == nil || env.JobID == "" {
		// Not a job message at all: record it with its reason.
		w.reject(ctx, msg, env, store.StatusRejected, decodeErr)
		return
	}
	log := w.log.With(slog.String("job_id", env.JobID), slog.String("batch", env.Batch), slog.Int("delivery", delivered))

	// What the ledger knows of the job. A job it never recorded was
	// enqueued into another ledger: leave it for a worker on that one. A
	// redelivery of a job already final (a crash between commit and ack)
	// is acked without calling the provider.
	var state jobState
	err := w.retryLedger(ctx, log, func() error {
		var err error
		state, err = w.reader.state(ctx, env.JobID)
		return err
	})
	if err != nil {
		w.nak(ctx, msg, env, delivered, fmt.Errorf("%w: read ledger: %w", ErrTransient, err))
		return
	}
	if !state.known {
		w.foreign(ctx, msg, env, delivered)
		return
	}
	w.probing.Store(false)
	if decodeErr != nil {
		w.reject(ctx, msg, env, store.StatusRejected, decodeErr)
		return
	}
	if state.run != env.RunOrFirst() {
		// A message of another run than the job's: the job was requeued
		// since (its new run has its own message), so this one is done.
		log.InfoContext(ctx, "worker: message of an earlier run, acked unrun", slog.Int("message_run", env.RunOrFirst()),
			slog.Int("job_run", state.run))
		w.ack(ctx, msg, "skip")
		return
	}
	if state.final {
		w.ack(ctx, msg, "skip")
		return
	}
	var job *Job
	err = w.retryLedger(ctx, log, func() error {
		var err error
		job, err = w.buildJob(ctx, env)
		if errors.Is(err, ErrBadJob) {
			return permanent(err) // a bad job is not a ledger outage
		}
		return err
	})
	if err != nil {
		if errors.Is(err, ErrBadJob) {
			w.reject(ctx, msg, env, store.StatusRejected, err)
		} else {
			w.nak(ctx, msg, env, delivered, err)
		}
		return
	}
	if w.cfg.BeforeJobFunc != nil {
		w.cfg.BeforeJobFunc(env)
	}
	var capped bool
	err = w.retryLedger(ctx, log, func() error {
		var err error
		capped, err = w.capped(ctx, env.Batch)
		return err
	})
	if err != nil {
		w.nak(ctx, msg, env, delivered, fmt.Errorf("%w: read the batch's spend cap: %w", ErrTransient, err))
		return
	}
	if capped {
		job.GateFunc = w.budgetGate(env, log)
	}
	loop := w.loops[env.Provider]
	res, err := loop.Run(ctx, job)
	for holds := 0; errors.Is(err, ErrTransient); {
		hint := serverWait(err)
		if errors.Is(err, ErrQuotaExhausted) {
			// Permanent for the lane until someone raises the limit (or
			// for as long as the lane says): pause pulling, and keep this
			// message (the heartbeat reports progress) to try again after
			// the pause. A nak would count a delivery, and an outage longer
			// than MaxDeliver pauses would burn every job in flight to dead.
			pause := cmp.Or(hint, w.cfg.QuotaPause)
			w.pauseFor(pause)
			if w.cfg.Metrics != nil {
				w.cfg.Metrics.QuotaExhausted.WithLabelValues(env.Provider).Set(1)
			}
			log.WarnContext(ctx, "worker: provider quota exhausted, pausing pulls", slog.String("provider", env.Provider),
				slog.Duration("pause", pause), slog.String("error", err.Error()))
			if !w.holdFor(ctx, pause) {
				w.handBack(ctx, msg, env, delivered, res, err)
				return
			}
		} else {
			// The provider is still failing after the transport retries,
			// or asked for a wait longer than a worker holds a job. With
			// nothing paid yet, or such a wait, hand the job back (below)
			// after the wait it asked for. With paid attempts, keep the
			// message and resume a few times, so those attempts and their
			// tokens reach the job's result.
			if !paidAttempts(res) || holds >= resumeHoldsMax || hint > w.cfg.NakDelayMax || overCap(err) {
				break
			}
			wait := max(min(w.cfg.NakDelayMin<<holds, w.cfg.NakDelayMax), hint)
			holds++
			log.WarnContext(ctx, "worker: provider unavailable, resuming the job after a pause",
				slog.Duration("pause", wait), slog.String("error", err.Error()))
			if !w.holdFor(ctx, wait) {
				w.handBack(ctx, msg, env, delivered, res, err)
				return
			}
		}
		res, err = loop.Resume(ctx, job, res)
	}
	if err != nil {
		switch {
		case errors.Is(err, ErrBadJob):
			w.reject(ctx, msg, env, store.StatusRejected, err)
		default:
			log.WarnContext(ctx, "worker: job will be retried", slog.String("error", err.Error()))
			w.handBack(ctx, msg, env, delivered, res, err)
		}
		return
	}
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.QuotaExhausted.WithLabelValues(env.Provider).Set(0)
	}
	w.finish(ctx, msg, env, res)
}

// capEntry is a batch's cap as last read.
type capEntry struct {
	capped bool
	read   time.Time
}

// capTTL is how long a batch's cap is trusted before it is read again: a
// cap set while the batch runs takes effect within it.
const capTTL = 2 * time.Second

// capped reports whether the batch has a spend cap.
func (w *Worker) capped(ctx context.Context, batch string) (bool, error) {
	if v, ok := w.caps.Load(batch); ok {
		if e := v.(*capEntry); time.Since(e.read) < capTTL {
			return e.capped, nil
		}
	}
	caps, err := w.ledger.BatchCaps(ctx, []string{batch})
	if err != nil {
		return false, err
	}
	_, capped := caps[batch]
	w.caps.Store(batch, &capEntry{capped: capped, read: time.Now()})
	return capped, nil
}

// Spend holds: how long a hold outlives a worker that died holding it,
// and how long a call waits for the holds of calls in flight.
const (
	holdTTL         = 10 * time.Minute
	budgetHeldWait  = 30 * time.Second
	budgetHeldPause = 100 * time.Millisecond
)

// budgetGate holds a capped batch's budget for each call of the job: the
// call's estimate (prompt bytes / 4 plus its output allowance, priced) is
// reserved in the ledger before it is sent and its real use charged after,
// so every worker of the cluster together stays under the cap. When only
// the holds of calls in flight are in the way, the call waits for them.
func (w *Worker) budgetGate(env *Envelope, log *slog.Logger) func(context.Context, *llm.Request) (func(*llm.Response, error), error) {
	prices := w.prices()
	return func(ctx context.Context, req *llm.Request) (func(*llm.Response, error), error) {
		out := req.MaxTokens
		in := estimateTokens(req) - out
		cost := prices.Cost(env.Model, in, out, 0)
		var hold store.Hold
		deadline := time.Now().Add(budgetHeldWait)
		for {
			var err error
			hold, err = w.ledger.Reserve(ctx, env.Batch, int64(in+out), cost, holdTTL)
			if err == nil {
				break
			}
			if errors.Is(err, store.ErrOverBudget) {
				return nil, fmt.Errorf("%w: %w", ErrOverBudget, err)
			}
			if !errors.Is(err, store.ErrBudgetHeld) || time.Now().After(deadline) {
				return nil, fmt.Errorf("%w: hold the batch's budget: %w", ErrTransient, err)
			}
			if !w.holdFor(ctx, budgetHeldPause) {
				return nil, fmt.Errorf("%w: stopping while waiting for the batch's budget", ErrTransient)
			}
		}
		return func(resp *llm.Response, _ error) {
			var tokens int64
			var spent float64
			if resp != nil {
				tokens = int64(resp.Usage.InputTokens + resp.Usage.OutputTokens)
				spent = prices.Cost(cmp.Or(resp.Model, env.Model), resp.Usage.InputTokens, resp.Usage.OutputTokens, resp.Usage.CachedInputTokens)
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := w.ledger.Charge(cctx, hold, tokens, spent); err != nil {
				log.WarnContext(ctx, "worker: charge the batch's budget (the hold expires on its own)", slog.String("error", err.Error()))
			}
		}, nil
	}
}

// serverWait is how long the provider asked to wait before the job's next
// call (a retry hint, or the time a quota-exhausted lane refuses calls); 0
// when it named none.
func serverWait(err error) time.Duration {
	var perr *llm.Error
	if errors.As(err, &perr) {
		return perr.RetryAfter
	}
	return 0
}

// overCap reports that the provider asked for a wait longer than the
// client sleeps (llm.LaneConfig.MaxHintWait).
func overCap(err error) bool {
	var perr *llm.Error
	return errors.As(err, &perr) && perr.HintOverCap
}

// handBack returns a job that did not reach a final result to the queue:
// the calls it made are recorded as interrupted (they may have been paid
// for), then the message is negatively acknowledged, after at least the
// wait the provider asked for; at the last delivery the job is recorded
// dead instead.
func (w *Worker) handBack(ctx context.Context, msg jetstream.Msg, env *Envelope, delivered int, res *Result, cause error) {
	if res != nil && len(res.Attempts) > 0 {
		reason := store.InterruptHandedBack
		if ctx.Err() != nil || w.stoppingNow() {
			reason = store.InterruptShutdown
		}
		w.saveInterrupted(ctx, env, delivered, res, reason)
	}
	w.nak(ctx, msg, env, delivered, cause)
}

// saveInterrupted records the calls of a delivery that ended without a
// result. A failure is logged: the job is handed back either way.
func (w *Worker) saveInterrupted(ctx context.Context, env *Envelope, delivered int, res *Result, reason string) {
	in := store.Interruption{JobID: env.JobID, Run: env.RunOrFirst(), Delivery: delivered, Reason: reason}
	prices := w.prices()
	for i := range res.Attempts {
		a := toStoreAttempt(&res.Attempts[i])
		a.CostUSD = prices.Cost(cmp.Or(res.Attempts[i].Model, env.Model), res.Attempts[i].TokensIn, res.Attempts[i].TokensOut, res.Attempts[i].TokensCached)
		in.Attempts = append(in.Attempts, a)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := w.ledger.SaveInterrupted(wctx, []store.Interruption{in}); err != nil {
		w.log.WarnContext(ctx, "worker: record the calls of a job handed back", slog.String("job_id", env.JobID),
			slog.Int("calls", len(in.Attempts)), slog.String("error", err.Error()))
	}
}

// prices is the price table the loops use.
func (w *Worker) prices() Prices {
	for _, l := range w.loops {
		return l.cfg.Prices
	}
	return DefaultPrices()
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

// finish hands a final result to the batched writer and returns, freeing
// the job's slot; the message is acked after the batch commits (or
// negatively acknowledged if it cannot be written). Progress is reported
// until then.
func (w *Worker) finish(ctx context.Context, msg jetstream.Msg, env *Envelope, res *Result) {
	delivered := 1
	if meta, err := msg.Metadata(); err == nil {
		delivered = int(meta.NumDelivered)
	}
	// Only the store's form of the result waits for the commit: res, with
	// its per-attempt values and feedback, is garbage from here on.
	r := toStoreResult(res, env, delivered)
	// Each attempt's cost is kept if the result loses to another delivery
	// (its calls are then recorded as superseded).
	prices, model := w.prices(), ""
	if env != nil {
		model = env.Model
	}
	for i := range r.AttemptRows {
		a := &r.AttemptRows[i]
		a.CostUSD = prices.Cost(cmp.Or(a.Model, model), int(a.TokensIn), int(a.TokensOut), int(a.TokensCached))
	}
	w.submitResult(ctx, msg, env, &r, delivered, w.heartbeat(msg))
}

func (w *Worker) submitResult(ctx context.Context, msg jetstream.Msg, env *Envelope, r *store.Result, delivered int, stopBeat func()) {
	w.writer.submit(*r, func(err error) {
		if store.IsRefused(err) {
			// The ledger refuses this result itself (say, a number beyond
			// its range): writing it again cannot help, and retrying would
			// hold pulling back for everyone. Hand the job back; it runs
			// again, and at its last delivery it is recorded dead with
			// this error.
			stopBeat()
			w.log.ErrorContext(ctx, "worker: ledger refused the result", slog.String("job_id", r.JobID), slog.String("error", err.Error()))
			w.nak(ctx, msg, env, delivered, fmt.Errorf("ledger refused the result: %w", err))
			return
		}
		if err != nil && !w.stoppingNow() && ctx.Err() == nil {
			// The ledger is down, not the job: pause pulling and write it
			// again after the pause, keeping the message (progress is still
			// reported) instead of a nak that would count a delivery.
			w.pauseFor(ledgerPause)
			w.log.WarnContext(ctx, "worker: ledger write failed, retrying", slog.String("job_id", r.JobID), slog.String("error", err.Error()))
			w.background.Go(func() {
				if w.holdFor(ctx, ledgerPause) {
					w.submitResult(ctx, msg, env, r, delivered, stopBeat)
					return
				}
				stopBeat()
				w.nak(ctx, msg, env, delivered, fmt.Errorf("%w: write result: %w", ErrTransient, err))
			})
			return
		}
		stopBeat()
		if err != nil {
			w.nak(ctx, msg, env, delivered, fmt.Errorf("%w: write result: %w", ErrTransient, err))
			return
		}
		w.cfg.Metrics.observe(r)
		if hook := w.cfg.AfterCommitFunc; hook != nil {
			if recovered := panics.Try(func() { hook(r.JobID) }); recovered != nil {
				// The rows are committed: a redelivery is acked without a call.
				w.log.ErrorContext(ctx, "worker: after-commit hook panicked", slog.String("job_id", r.JobID),
					slog.String("error", recovered.AsError().Error()))
				_ = msg.Nak()
				w.count("nak")
				return
			}
		}
		w.ack(ctx, msg, "ack")
	})
}

func (w *Worker) buildJob(ctx context.Context, env *Envelope) (*Job, error) {
	if len(env.Prompt)+len(env.System) > w.cfg.MaxPromptBytes {
		return nil, fmt.Errorf("%w: prompt is %d bytes, over the limit of %d", ErrBadJob, len(env.Prompt)+len(env.System), w.cfg.MaxPromptBytes)
	}
	if _, ok := w.cfg.Providers[env.Provider]; !ok {
		return nil, fmt.Errorf("%w: provider %q is not configured on this worker", ErrBadJob, env.Provider)
	}
	schema, raw, err := w.schema(ctx, env.SchemaHash)
	if err != nil {
		return nil, err
	}
	return &Job{
		ID: env.JobID, System: env.System, Prompt: env.Prompt, Schema: schema, SchemaRaw: raw,
		Model: env.Model, Mode: env.Mode, Temperature: env.Temp, MaxTokens: env.MaxTokens, Limits: env.Limits,
	}, nil
}

type schemaEntry struct {
	schema *validate.Schema
	raw    []byte
	err    error
}

func (w *Worker) schema(ctx context.Context, hash string) (*validate.Schema, []byte, error) {
	if e, ok := w.schemas.Load(hash); ok {
		se := e.(*schemaEntry)
		return se.schema, se.raw, se.err
	}
	// The first caller's context serves all: canceling it must not fail
	// the others (the store bounds the read with its own timeout).
	v, err, _ := w.schemaLoads.Do(hash, func() (any, error) {
		if e, ok := w.schemas.Load(hash); ok {
			return e, nil // stored while this call waited for its turn
		}
		raw, err := w.ledger.Schema(context.WithoutCancel(ctx), hash)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: unknown schema %s", ErrBadJob, hash)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: read schema %s: %w", ErrTransient, hash, err)
		}
		s, err := validate.Compile(raw)
		se := &schemaEntry{schema: s, raw: raw}
		if err != nil {
			se.err = fmt.Errorf("%w: schema %s does not compile: %w", ErrBadJob, hash, err)
		}
		w.schemas.Store(hash, se)
		return se, nil
	})
	if err != nil {
		return nil, nil, err
	}
	se := v.(*schemaEntry)
	return se.schema, se.raw, se.err
}

// heartbeat reports progress while a job runs longer than a third of the
// ack wait, so the server does not hand it to another worker.
func (w *Worker) heartbeat(msg jetstream.Msg) (stop func()) { return w.beats.add(msg) }

// The dispositions, decided here and nowhere else.

func (w *Worker) ack(ctx context.Context, msg jetstream.Msg, kind string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := msg.DoubleAck(actx); err != nil {
		// The result is committed; a redelivery is acked without a call.
		w.log.WarnContext(ctx, "worker: ack", slog.String("error", err.Error()))
	}
	w.count(kind)
}

func (w *Worker) nak(ctx context.Context, msg jetstream.Msg, env *Envelope, delivered int, cause error) {
	if ctx.Err() != nil {
		// Shutting down: hand the job back for immediate redelivery.
		_ = msg.Nak()
		w.count("nak")
		return
	}
	delay := min(w.cfg.NakDelayMin<<min(delivered-1, 16), w.cfg.NakDelayMax)
	// Never sooner than the provider asked (a Retry-After over what the
	// client sleeps comes back here, not as a frozen lane).
	w.nakDelay(ctx, msg, env, delivered, max(delay, serverWait(cause)), cause)
}

func (w *Worker) nakDelay(ctx context.Context, msg jetstream.Msg, env *Envelope, delivered int, delay time.Duration, cause error) {
	if delivered >= w.cfg.Queue.MaxDeliver && ctx.Err() == nil {
		// The last delivery: the server will not send it again, so record
		// it dead with its last error now.
		w.reject(ctx, msg, env, store.StatusDead, fmt.Errorf("delivered %d times without a final result; last error: %w", delivered, cause))
		return
	}
	if ctx.Err() != nil {
		_ = msg.Nak()
	} else {
		_ = msg.NakWithDelay(delay)
	}
	w.count("nak")
}

// foreignCount counts one batch's foreign deliveries between error lines.
type foreignCount struct {
	mu     sync.Mutex
	logged time.Time
	n      int
}

// foreign hands back a job this worker's ledger never recorded: it was
// enqueued into another ledger (this worker's DATABASE_URL is not the one
// enqueue used), and running it here would ack it and write its result
// where nobody looks, leaving the real batch queued forever. It is never
// acked and nothing is written; an error line (one a minute per batch) and
// a metric make the misconfiguration loud.
func (w *Worker) foreign(ctx context.Context, msg jetstream.Msg, env *Envelope, delivered int) {
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.ForeignJobs.Inc()
	}
	// Every nak counts a delivery against the job: pause pulling, then pull
	// one job at a time until one is ours, so the jobs keep their
	// deliveries for the workers on the right ledger.
	w.probing.Store(true)
	w.foreignAt.Store(time.Now().UnixNano())
	w.pauseFor(w.cfg.ForeignDelay)
	v, _ := w.foreignLog.LoadOrStore(env.Batch, &foreignCount{})
	fc := v.(*foreignCount)
	fc.mu.Lock()
	fc.n++
	if time.Since(fc.logged) >= time.Minute {
		w.log.ErrorContext(ctx, "worker: job not in this worker's ledger, handing it back: was it enqueued with another DATABASE_URL?",
			slog.String("job_id", env.JobID), slog.String("batch", env.Batch), slog.Int("delivery", delivered),
			slog.Int("foreign_deliveries", fc.n), slog.Duration("redelivery_in", w.cfg.ForeignDelay))
		fc.logged, fc.n = time.Now(), 0
	}
	fc.mu.Unlock()
	if err := msg.NakWithDelay(w.cfg.ForeignDelay); err != nil {
		w.log.WarnContext(ctx, "worker: nak", slog.String("job_id", env.JobID), slog.String("error", err.Error()))
	}
	w.count("nak")
}

// reject records a job that will never be run (or is dead) with its reason,
// then terminates its message. If the record cannot be written the message
// is left for redelivery instead: nothing is dropped unrecorded.
func (w *Worker) reject(ctx context.Context, msg jetstream.Msg, env *Envelope, status string, reason error) {
	id := jobIDOf(msg, env)
	rj := store.Rejection{JobID: id, Reason: reason.Error(), Payload: msg.Data(), Status: status}
	if meta, err := msg.Metadata(); err == nil {
		rj.Deliveries = int(meta.NumDelivered)
	}
	if env != nil {
		rj.Batch = env.Batch
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := w.ledger.Reject(wctx, rj); err != nil {
		w.log.ErrorContext(ctx, "worker: record rejected job", slog.String("job_id", id), slog.String("error", err.Error()))
		_ = msg.NakWithDelay(w.cfg.NakDelayMin)
		w.count("nak")
		return
	}
	w.log.WarnContext(ctx, "worker: job "+status, slog.String("job_id", id), slog.String("reason", reason.Error()))
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.Jobs.WithLabelValues(status).Inc()
	}
	_ = msg.TermWithReason(truncate(reason.Error(), 200))
	w.count("term")
}

func (w *Worker) count(kind string) {
	if kind != "nak" {
		w.finished.Add(1)
	}
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.Dispositions.WithLabelValues(kind).Inc()
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// maxDeliveriesAdvisory is the part of the server's MAX_DELIVERIES advisory
// the worker reads.
type maxDeliveriesAdvisory struct {
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// watchDead records jobs the server gave up on (a worker died or timed out
// on their last delivery). The advisories are kept in their own stream, so
// the ones raised while no worker ran are handled at the next start.
func (w *Worker) watchDead(ctx context.Context, stream jetstream.Stream) {
	adv, err := w.js.Consumer(ctx, advisoryStreamName(w.cfg.Queue), w.cfg.Queue.Consumer+"-dead")
	if err != nil {
		if ctx.Err() == nil {
			w.log.ErrorContext(ctx, "worker: open dead-job advisories", slog.String("error", err.Error()))
		}
		return
	}
	for ctx.Err() == nil {
		batch, err := adv.Fetch(16, jetstream.FetchMaxWait(w.cfg.FetchWait))
		if err != nil {
			continue
		}
		for m := range batch.Messages() {
			w.handleDead(ctx, stream, m)
		}
	}
}

func (w *Worker) handleDead(ctx context.Context, stream jetstream.Stream, m jetstream.Msg) {
	var a maxDeliveriesAdvisory
	if err := json.Unmarshal(m.Data(), &a); err != nil || a.StreamSeq == 0 {
		_ = m.Term()
		return
	}
	raw, err := stream.GetMsg(ctx, a.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		_ = m.Ack() // already acked or terminated
		return
	}
	if err != nil {
		_ = m.NakWithDelay(time.Second)
		return
	}
	env, _ := DecodeEnvelope(raw.Data)
	id := fmt.Sprintf("seq-%d", a.StreamSeq)
	if env != nil && env.JobID != "" {
		id = env.JobID
	} else if h, ok := JobIDFromMsgID(raw.Header.Get(jetstream.MsgIDHeader)); ok && h != "" {
		id = h
	}
	if env != nil && env.JobID != "" {
		// A job this ledger never recorded belongs to another ledger's
		// workers: leave the advisory to them.
		st, err := w.ledger.JobStates(ctx, []string{id})
		if err != nil {
			_ = m.NakWithDelay(time.Second)
			return
		}
		if _, ok := st[id]; !ok {
			w.log.ErrorContext(ctx, "worker: dead job not in this worker's ledger, leaving it for a worker on the right one",
				slog.String("job_id", id), slog.String("batch", env.Batch))
			_ = m.NakWithDelay(w.cfg.ForeignDelay)
			return
		}
	}
	rj := store.Rejection{JobID: id, Status: store.StatusDead, Payload: raw.Data, Deliveries: int(a.Deliveries),
		Reason: fmt.Sprintf("delivered %d times without a final result (the last delivery was never acknowledged)", a.Deliveries)}
	if env != nil {
		rj.Batch = env.Batch
	}
	if _, err := w.ledger.Reject(ctx, rj); err != nil {
		_ = m.NakWithDelay(time.Second)
		return
	}
	_ = stream.DeleteMsg(ctx, a.StreamSeq)
	w.log.WarnContext(ctx, "worker: job dead", slog.String("job_id", id), slog.Uint64("deliveries", a.Deliveries))
	_ = m.Ack()
}

func toStoreResult(res *Result, env *Envelope, delivered int) store.Result {
	r := store.Result{
		JobID: res.JobID, Status: string(res.Status), Value: res.Value, Error: res.Error, FinalClass: res.Class,
		Attempts: len(res.Attempts), Calls: res.Calls, FirstAttemptValid: res.FirstAttemptValid,
		RepairedLocally: res.RepairedLocally, TokensIn: int64(res.TokensIn), TokensOut: int64(res.TokensOut),
		TokensCached: int64(res.TokensCached), CostUSD: res.CostUSD, StartedAt: res.StartedAt,
		FinishedAt: res.StartedAt.Add(res.Wall), WallMS: res.Wall.Milliseconds(), Deliveries: delivered,
	}
	if env != nil {
		r.Run = env.RunOrFirst()
		r.Job = &store.NewJob{ID: env.JobID, Batch: env.Batch, RowNo: env.RowNo, SchemaHash: env.SchemaHash,
			Prompt: env.Prompt, Provider: env.Provider, Model: env.Model, Mode: string(env.Mode),
			Strategy: string(env.Limits.WithDefaults().Strategy), Metadata: env.Metadata}
	}
	for i := range res.Attempts {
		r.AttemptRows = append(r.AttemptRows, toStoreAttempt(&res.Attempts[i]))
	}
	return r
}

func toStoreAttempt(a *Attempt) store.Attempt {
	repairs, _ := json.Marshal(nonNil(a.Repairs))
	errs, _ := json.Marshal(nonNil(a.Errors))
	classes := make([]llm.ErrorClass, 0, len(a.Retries))
	for _, r := range a.Retries {
		classes = append(classes, r.Class)
	}
	rc, _ := json.Marshal(classes)
	var sys *store.Prompt
	if a.System != nil && a.System.SHA256() != "" {
		sys = store.PromptWithHash(a.System.Text(), a.System.SHA256())
	}
	return store.Attempt{
		No: a.No, Request: a.Request, System: sys, RequestHash: a.RequestHash, Raw: a.Raw, Source: string(a.Source),
		Repairs: repairs, Errors: errs, Class: a.Class, Valid: a.Valid, RepairedLocally: a.RepairedLocally,
		FinishReason: string(a.FinishReason), LatencyMS: a.Latency.Milliseconds(),
		TokensIn: int64(a.TokensIn), TokensOut: int64(a.TokensOut), TokensCached: int64(a.TokensCached),
		TransportRetries: len(a.Retries), RetryClasses: rc, ProviderStatus: a.ProviderStatus,
		ProviderError: a.ProviderError, Model: a.Model, RequestID: a.RequestID, StartedAt: a.StartedAt,
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
