// Package wave drives batch delivery: the repair step driven in waves of
// provider batches (OpenAI's Batch API, Anthropic's Message Batches) at
// half the realtime price, answered within hours instead of seconds. The
// worker (package pipeline) hands its batch-delivery jobs to a Driver,
// which reaches back to it through the Worker interface.
//
// A worker pulls a batch-delivery job from the queue as any other, starts
// its repair step and, instead of calling the provider, collects the
// step's first request with others of the same batch and model. When the
// collection is full or has waited Config.Collect, the wave is
// recorded in the ledger with each job's place in it, and only then are
// the messages acked: from that commit on the ledger owns the jobs (a
// queue's ack wait is no use for a wait of hours). The recording worker
// holds the wave's lease and submits it; any worker polls the open waves,
// one at a time each (a lease in Postgres, taken over when its holder dies
// and it expires). When a wave ends its results go through the step one by
// one, each recorded as an attempt exactly as in realtime (plus the wave
// and the price basis), valid jobs are final, and the jobs the step says
// need another attempt go into the next wave with their feedback, or,
// near the deadline or when few remain, back to the queue to finish
// realtime, going on from the attempts the ledger holds.
//
// Every step leaves the ledger able to go on after a crash: a wave is
// recorded before anything is sent; its input file and provider batch ids
// are recorded as soon as they exist, and one created but not recorded is
// found again (ListBatches: OpenAI by the metadata naming the wave,
// Anthropic by its size and time); a result is recorded once (its request
// is marked in the same transaction); a job keeps its place in an ended
// wave until the next wave holds it or the queue has it again.
package wave

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/ledgerrow"
	"github.com/fixpoint-dev/fixpoint/internal/textclip"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Worker is what the driver needs of the worker whose batch-delivery jobs
// it collects: what becomes of their messages, and the realtime side's
// repair step, ledger retries, metrics and stop stay the worker's.
type Worker interface {
	// Dispose carries d out on a job's message.
	Dispose(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, d queue.Disposition)
	// HandBack hands a job's message back for cause, as the worker
	// decides for its delivered-th delivery (dead at the last).
	HandBack(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, delivered int, cause error)
	// Finish hands a job final before any call to the worker's writer.
	Finish(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, res *fixpoint.Result)
	// Heartbeat reports progress on msg until stop is called.
	Heartbeat(msg jetstream.Msg) (stop func())
	// Stopping reports that the worker is stopping.
	Stopping() bool
	// Abort stops the worker with err: a fault no job of it can get past.
	Abort(err error)
	// Job builds the repair step's job of env.
	Job(ctx context.Context, env *queue.Envelope) (*repair.Job, error)
	// StepConfig is the repair step's configuration for the provider's
	// calls billed at basis.
	StepConfig(provider string, basis fixpoint.PriceBasis) repair.Config
	// RetryLedger runs op until it succeeds, the ledger refuses it
	// (store.IsRefused) or the worker stops, pausing pulls meanwhile.
	RetryLedger(ctx context.Context, log *slog.Logger, op func() error) error
	// WaveStep counts a step of a provider's wave ("recorded",
	// "submitted", "done").
	WaveStep(provider, step string)
	// Observe counts the outcomes of a wave's requests the ledger took:
	// attempts, tokens and the jobs they finished.
	Observe(outs []store.WaveOutcome)
}

// BatchClient is what the wave driver needs of a provider with a batch
// API. *llm.Client satisfies it.
type BatchClient interface {
	SupportsBatch() bool
	EncodeBatchItem(it llm.BatchItem) ([]byte, error)
	BatchLimits() (maxRequests int, maxBytes int64)
	UploadBatchFile(ctx context.Context, items []llm.BatchItem) (string, error)
	CreateBatch(ctx context.Context, fileID string, items []llm.BatchItem, metadata map[string]string) (llm.BatchStatus, error)
	RetrieveBatch(ctx context.Context, id string) (llm.BatchStatus, error)
	CancelBatch(ctx context.Context, id string) (llm.BatchStatus, error)
	ListBatchesSince(ctx context.Context, since time.Time, max int) ([]llm.BatchStatus, error)
	BatchResults(ctx context.Context, st llm.BatchStatus, request func(customID string) (fixpoint.Request, bool), fn func(llm.BatchResult) error) error
}

var _ BatchClient = (*llm.Client)(nil)

// Ledger is what the wave driver needs from the ledger. *store.Store
// satisfies it; a worker whose ledger does not runs batch-delivery jobs
// realtime.
type Ledger interface {
	RecordWave(ctx context.Context, p store.WaveParams) (*store.Wave, []store.WaveRequest, error)
	WaveRequests(ctx context.Context, waveID int64) ([]store.WaveRequest, error)
	ClaimWave(ctx context.Context, owner string, lease time.Duration, homes []string) (*store.Wave, error)
	StrayWaves(ctx context.Context, homes []string) (map[[2]string]int, error)
	UpdateWave(ctx context.Context, id int64, owner string, u store.WaveUpdate) error
	RecordWaveOutcomes(ctx context.Context, outs []store.WaveOutcome) (int, error)
	ReleaseWaveJobs(ctx context.Context, waveID int64, ids []string) error
	PlacedJobs(ctx context.Context, waveID int64) ([]store.WaveRequest, error)
	WaveAttempts(ctx context.Context, waveID int64) (map[string][]store.Attempt, error)
	JobAttempts(ctx context.Context, jobID string, run int) ([]store.Attempt, error)
	ProviderBatchRecorded(ctx context.Context, provider, id string) (bool, error)
	OpenWaves(ctx context.Context, providers, homes []string) (int, error)
}

var _ Ledger = (*store.Store)(nil)

// Wave defaults.
const (
	MaxRequestsDefault = 2048
	CollectDefault     = 10 * time.Second
	PollMinDefault     = 30 * time.Second
	PollMaxDefault     = 10 * time.Minute
	LeaseDefault       = 5 * time.Minute
	IdleDefault        = 5 * time.Second
	// RealtimeBelowDefault: a repair wave of fewer jobs runs realtime
	// instead: a provider batch takes minutes at best, and a handful of
	// jobs costs cents either way.
	RealtimeBelowDefault = 25
	// DeadlineMarginDefault is how long before the deadline a wave
	// still running is cancelled, so its jobs have time to finish
	// realtime.
	DeadlineMarginDefault = time.Hour
	// NotFoundGraceDefault is how long a provider batch may answer 404
	// before its wave is given up (failed, its jobs run realtime): Anthropic
	// answers 404 for a few seconds after a create, but a batch deleted, or
	// created under another key or organization, never comes back, and
	// polling it for ever held a draining worker up without end.
	NotFoundGraceDefault = 5 * time.Minute
	// waveNoReplyMax is how many of a job's wave attempts may get no reply
	// (expired, errored) before it goes on realtime.
	waveNoReplyMax = 2
	// waveMetadataKey names the wave in an OpenAI batch's metadata.
	waveMetadataKey = "fixpoint_wave"
	// waveDeadlineCancel is the error of a wave cancelled because its
	// deadline came near.
	waveDeadlineCancel = "cancelled: the deadline is near"
	// waveOutcomesChunk is how many outcomes one ledger transaction
	// records.
	waveOutcomesChunk = 256
)

// Config tunes batch delivery.
type Config struct {
	// MaxRequests caps a wave's requests (and the provider's own limits
	// apply). Collected jobs hold their messages unacked until their wave
	// is recorded, so it should stay well under the queue's
	// MaxAckPending. Defaults to 2,048.
	MaxRequests int
	// Collect is how long a wave's first job waits for more before the
	// wave is recorded and submitted. Defaults to 10s.
	Collect time.Duration
	// PollMin and PollMax bound the wait between two polls of a wave: it
	// starts at PollMin and doubles up to PollMax. Defaults 30s and 10m.
	PollMin, PollMax time.Duration
	// Lease is how long a worker owns a wave it polls or processes before
	// another may take it over; renewed while it works. Defaults to 5m.
	Lease time.Duration
	// Idle is how often a worker looks for due waves when none was due.
	// Defaults to 5s.
	Idle time.Duration
	// RealtimeBelow: a repair wave of fewer jobs runs realtime instead.
	// Defaults to 25; negative never does.
	RealtimeBelow int
	// DeadlineMargin is how long before a job's deadline a wave holding it
	// is cancelled (its replies so far recorded, the rest run realtime),
	// and within which no new wave starts. Defaults to 1h.
	DeadlineMargin time.Duration
	// Owner names this worker in wave leases; defaults to host, pid and a
	// start time.
	Owner string
	// NotFoundGrace is how long a wave's provider batch may answer 404 to
	// this worker's polls before the wave is failed and its jobs run
	// realtime. Defaults to 5m.
	NotFoundGrace time.Duration
}

// WithDefaults returns a copy with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.MaxRequests = cmp.Or(c.MaxRequests, MaxRequestsDefault)
	c.Collect = cmp.Or(c.Collect, CollectDefault)
	c.PollMin = cmp.Or(c.PollMin, PollMinDefault)
	c.PollMax = max(cmp.Or(c.PollMax, PollMaxDefault), c.PollMin)
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.Idle = cmp.Or(c.Idle, IdleDefault)
	c.RealtimeBelow = cmp.Or(c.RealtimeBelow, RealtimeBelowDefault)
	c.DeadlineMargin = cmp.Or(c.DeadlineMargin, DeadlineMarginDefault)
	c.NotFoundGrace = cmp.Or(c.NotFoundGrace, NotFoundGraceDefault)
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), strconv.FormatInt(time.Now().UnixNano(), 36))
	}
	return c
}

// leaseMin is the shortest wave lease: a lease is renewed between
// provider calls, and one that lapses while its owner still works lets a
// second worker take the wave over.
const leaseMin = time.Second

// settingErr is a Config setting that cannot work, by its field name
// ("Lease").
func settingErr(setting string, v any, problem string) error {
	return &fixpoint.SettingError{Scope: "wave", Setting: setting, Value: v, Problem: problem}
}

// Validate reports the first setting of c (after WithDefaults) that cannot
// work, as a *fixpoint.SettingError.
func (c Config) Validate() error {
	switch {
	case c.MaxRequests < 1:
		return settingErr("MaxRequests", c.MaxRequests, "must be at least 1")
	case c.Collect < 0:
		return settingErr("Collect", c.Collect, "is negative")
	case c.PollMin < 0:
		return settingErr("PollMin", c.PollMin, "is negative")
	case c.Lease < leaseMin:
		return settingErr("Lease", c.Lease, "must be at least "+leaseMin.String())
	case c.Idle < 0:
		return settingErr("Idle", c.Idle, "is negative")
	case c.DeadlineMargin < 0:
		return settingErr("DeadlineMargin", c.DeadlineMargin, "is negative")
	}
	return nil
}

// Driver drives a worker's batch-delivery jobs: it collects their first
// requests into waves, submits and polls the waves, and records their
// results. A nil Driver drives nothing.
type Driver struct {
	w       Worker
	ledger  Ledger
	clients map[string]BatchClient
	// homes are where this worker drives waves, by provider: its queue
	// stream and the provider's endpoint (store.WaveParams.Home).
	homes map[string]string
	cfg   Config
	log   *slog.Logger
	js    jetstream.JetStream
	queue queue.Config

	mu      sync.Mutex
	pending map[waveKey]*collecting
	flushes sync.WaitGroup
	// driving are the waves a goroutine of this driver holds, from their
	// record or claim to the end of their step: its Run loop, claiming
	// one whose lease lapsed meanwhile (the same owner), leaves it be.
	dmu     sync.Mutex
	driving map[int64]bool
	// Setup.Hook (tests): called at each point a crash
	// leaves the ledger in another state.
	hook func(point string, waveID int64)
}

// waveKey is what a wave's requests share.
type waveKey struct {
	batch           string
	run             int
	provider, model string
}

// collecting is a wave being filled.
type collecting struct {
	key      waveKey
	deadline time.Time
	items    []collected
	bytes    int64
	timer    *time.Timer
	flushed  bool
}

// collected is a job waiting for its wave to be recorded, its message
// unacked (its heartbeat keeps it).
type collected struct {
	msg       jetstream.Msg
	env       *queue.Envelope
	delivered int
	req       store.WaveRequest
	stopBeat  func()
}

// Setup is what a Driver works with besides its worker.
type Setup struct {
	Ledger Ledger
	// Clients are the worker's providers that have a batch API, by name.
	Clients map[string]BatchClient
	// JS and Queue are where jobs go back to finish realtime.
	JS     jetstream.JetStream
	Queue  queue.Config
	Config Config
	Log    *slog.Logger
	// Hook, when set, runs at each point of a wave's life where a crash
	// leaves the ledger in another state (tests kill workers there).
	Hook func(point string, waveID int64)
}

// New returns a driver of the waves of w's batch-delivery jobs.
func New(w Worker, s Setup) *Driver {
	v := &Driver{w: w, ledger: s.Ledger, clients: map[string]BatchClient{}, homes: map[string]string{}, cfg: s.Config.WithDefaults(),
		log: s.Log, js: s.JS, queue: s.Queue.WithDefaults(), pending: map[waveKey]*collecting{}, hook: s.Hook,
		driving: map[int64]bool{}}
	for name, bc := range s.Clients {
		if !bc.SupportsBatch() {
			continue
		}
		v.clients[name] = bc
		endpoint := name
		if cc, ok := bc.(interface{ Config() llm.Config }); ok {
			endpoint = name + " " + llm.RedactURL(cc.Config().BaseURL)
		}
		v.homes[name] = "stream " + v.queue.Stream + ", " + endpoint
	}
	return v
}

// strayWaveEvery is how often an idle wave driver looks for open waves it
// may not drive.
const strayWaveEvery = time.Minute

// warnStray says which open waves no worker like this one will drive: a
// worker started with another queue or provider endpoint than the one
// that submitted them (a changed base URL in a cron line) would otherwise
// wait for them in silence.
func (v *Driver) warnStray(ctx context.Context) {
	stray, err := v.ledger.StrayWaves(ctx, v.homeList())
	if err != nil || len(stray) == 0 {
		return
	}
	for k, n := range stray {
		v.log.WarnContext(ctx, "worker: open provider batches this worker does not drive: their queue or provider endpoint is another; start a worker with theirs",
			slog.String("batch", k[0]), slog.Int("waves", n), slog.String("their_home", k[1]), slog.String("this_worker", strings.Join(v.homeList(), "; ")))
	}
}

// homeList is every home of this worker, for ClaimWave.
func (v *Driver) homeList() []string {
	return slices.Sorted(maps.Values(v.homes))
}

func (v *Driver) at(point string, waveID int64) {
	if v.hook != nil {
		v.hook(point, waveID)
	}
}

// CanCollect reports whether the job can go into a wave: the worker drives
// waves for its provider, and its deadline leaves time for one.
func (v *Driver) CanCollect(env *queue.Envelope) bool {
	if v == nil || v.clients[env.Provider] == nil {
		return false
	}
	d := env.DeadlineTime()
	return d.IsZero() || time.Now().Add(v.cfg.DeadlineMargin).Before(d)
}

// Collect starts the job's repair step and adds its first request to the
// wave being filled for its batch and model. The message stays unacked
// (its heartbeat runs) until the wave is recorded.
func (v *Driver) Collect(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, job *repair.Job, delivered int) {
	step, err := repair.Start(job, nil, v.w.StepConfig(env.Provider, fixpoint.PriceBasisBatch))
	if err != nil {
		v.w.Dispose(ctx, msg, env, queue.Disposition{Kind: queue.DispReject, Cause: err})
		return
	}
	act := step.Next()
	if act.Request == nil {
		// Final before any call (a token budget too small for one).
		v.w.Finish(ctx, msg, env, step.Result())
		return
	}
	reqJSON, err := json.Marshal(act.Request)
	if err != nil {
		v.w.Dispose(ctx, msg, env, queue.Disposition{Kind: queue.DispReject, Cause: fmt.Errorf("%w: encode request: %v", fixpoint.ErrBadJob, err)})
		return
	}
	client := v.clients[env.Provider]
	item, err := client.EncodeBatchItem(llm.BatchItem{CustomID: "w0-0", Request: *act.Request})
	if err != nil {
		v.w.Dispose(ctx, msg, env, queue.Disposition{Kind: queue.DispReject, Cause: fmt.Errorf("%w: %v", fixpoint.ErrBadJob, err)})
		return
	}
	envJSON, err := queue.EncodeEnvelope(env)
	if err != nil {
		v.w.Dispose(ctx, msg, env, queue.Disposition{Kind: queue.DispReject, Cause: err})
		return
	}
	c := collected{msg: msg, env: env, delivered: delivered, stopBeat: v.w.Heartbeat(msg),
		req: store.WaveRequest{JobID: env.JobID, Run: env.RunOrFirst(), AttemptNo: 1, Request: reqJSON, Envelope: envJSON, Delivered: delivered}}
	size := int64(len(item)) + 16 // the custom id is longer than the placeholder
	key := waveKey{batch: env.Batch, run: env.RunOrFirst(), provider: env.Provider, model: env.Model}
	maxReq, maxBytes := client.BatchLimits()
	maxReq = min(maxReq, v.cfg.MaxRequests)

	v.mu.Lock()
	col := v.pending[key]
	if col != nil && (len(col.items) >= maxReq || col.bytes+size > maxBytes) {
		v.flushLocked(ctx, col)
		col = nil
	}
	if col == nil {
		col = &collecting{key: key, deadline: env.DeadlineTime()}
		v.pending[key] = col
		col.timer = time.AfterFunc(v.cfg.Collect, func() {
			v.mu.Lock()
			defer v.mu.Unlock()
			v.flushLocked(ctx, col)
		})
	}
	col.items = append(col.items, c)
	col.bytes += size
	if len(col.items) >= maxReq {
		v.flushLocked(ctx, col)
	}
	v.mu.Unlock()
}

// flushLocked takes col out of the pending waves and records and submits
// it in the background. v.mu is held.
func (v *Driver) flushLocked(ctx context.Context, col *collecting) {
	if col.flushed {
		return
	}
	col.flushed = true
	col.timer.Stop()
	if v.pending[col.key] == col {
		delete(v.pending, col.key)
	}
	v.flushes.Add(1)
	go func() {
		defer v.flushes.Done()
		v.record(ctx, col)
	}()
}

// record records a collected wave, acks the messages of the jobs it holds
// and submits it.
func (v *Driver) record(ctx context.Context, col *collecting) {
	reqs := make([]store.WaveRequest, len(col.items))
	for i, c := range col.items {
		reqs[i] = c.req
	}
	log := v.log.With(slog.String("batch", col.key.batch), slog.String("provider", col.key.provider))
	var wave *store.Wave
	var taken []store.WaveRequest
	err := v.w.RetryLedger(ctx, log, func() error {
		var err error
		wave, taken, err = v.ledger.RecordWave(context.WithoutCancel(ctx), store.WaveParams{
			Batch: col.key.batch, Run: col.key.run, Provider: col.key.provider, Model: col.key.model,
			Deadline: col.deadline, Requests: reqs, Owner: v.cfg.Owner, Lease: v.cfg.Lease, Home: v.homes[col.key.provider]})
		return err // refused (store.ErrInvalid): RetryLedger returns it at once
	})
	stopKeep := func() {}
	if err == nil && wave != nil {
		// Held from its record on: acking its jobs may take a while.
		v.take(wave.ID)
		stopKeep = v.keepLease(ctx, log, wave)
	}
	in := map[string]bool{}
	for _, r := range taken {
		in[r.JobID] = true
	}
	for _, c := range col.items {
		c.stopBeat()
		switch {
		case err != nil:
			v.w.HandBack(ctx, c.msg, c.env, c.delivered, fmt.Errorf("%w: record wave: %w", fixpoint.ErrTransient, err))
		case in[c.env.JobID]:
			v.w.Dispose(ctx, c.msg, c.env, queue.Disposition{Kind: queue.DispWave})
		default:
			// Final already, requeued, or in a wave another worker recorded.
			v.w.Dispose(ctx, c.msg, c.env, queue.Disposition{Kind: queue.DispSkip})
		}
	}
	if err != nil || wave == nil {
		if err != nil {
			log.WarnContext(ctx, "worker: record wave", slog.String("error", err.Error()))
		}
		return
	}
	v.w.WaveStep(col.key.provider, "recorded")
	log.InfoContext(ctx, "worker: wave recorded", slog.Int64("wave", wave.ID), slog.Int("number", wave.Number),
		slog.Int("requests", len(taken)))
	v.at("recorded", wave.ID)
	stopKeep()
	if ctx.Err() != nil || v.w.Stopping() {
		// Stopping: release the lease for the next worker to submit it.
		v.update(ctx, log, wave, store.WaveUpdate{NextPoll: time.Millisecond})
		v.drop(wave.ID)
		return
	}
	v.drive(context.WithoutCancel(ctx), wave, taken)
}

// Run polls the open waves until ctx ends: it claims one that is due,
// moves it on, and claims the next.
func (v *Driver) Run(ctx context.Context) {
	var strayChecked time.Time
	for ctx.Err() == nil {
		wave, err := v.ledger.ClaimWave(ctx, v.cfg.Owner, v.cfg.Lease, v.homeList())
		if err != nil {
			if ctx.Err() == nil {
				v.log.WarnContext(ctx, "worker: claim a wave", slog.String("error", err.Error()))
			}
		}
		if wave == nil && time.Since(strayChecked) >= strayWaveEvery {
			strayChecked = time.Now()
			v.warnStray(ctx)
		}
		if wave == nil {
			select {
			case <-ctx.Done():
			case <-time.After(v.cfg.Idle):
			}
			continue
		}
		if !v.take(wave.ID) {
			// Another goroutine of this worker still acts on it (its lease
			// lapsed on a loaded machine): its step goes on, and the claim
			// only renewed the lease.
			continue
		}
		v.drive(ctx, wave, nil)
	}
}

// take marks wave id held by a goroutine of this driver; false when one
// already holds it.
func (v *Driver) take(id int64) bool {
	v.dmu.Lock()
	defer v.dmu.Unlock()
	if v.driving[id] {
		return false
	}
	v.driving[id] = true
	return true
}

// drop ends the hold take marked.
func (v *Driver) drop(id int64) {
	v.dmu.Lock()
	defer v.dmu.Unlock()
	delete(v.driving, id)
}

// drive moves a wave this worker holds the lease of one step on: submit
// it, poll it, or process its results. reqs are its requests when known.
// The caller took the wave (take); drive drops it.
func (v *Driver) drive(ctx context.Context, wave *store.Wave, reqs []store.WaveRequest) {
	defer v.drop(wave.ID)
	log := v.log.With(slog.Int64("wave", wave.ID), slog.String("batch", wave.Batch), slog.String("provider", wave.Provider))
	client := v.clients[wave.Provider]
	if client == nil {
		// Another worker's provider: leave it to one configured for it.
		log.WarnContext(ctx, "worker: wave of a provider this worker has no batch client for")
		v.update(ctx, log, wave, store.WaveUpdate{NextPoll: v.cfg.PollMax})
		return
	}
	stop := v.keepLease(ctx, log, wave)
	defer stop()
	var err error
	switch {
	case wave.Status == store.WaveCancelling && wave.ProviderBatchID == "":
		err = v.cancelUnsubmitted(ctx, log, wave)
	case wave.Status == store.WaveEnded:
		err = v.process(ctx, log, client, wave, nil)
	case wave.ProviderBatchID == "":
		err = v.submit(ctx, log, client, wave, reqs)
	default:
		err = v.poll(ctx, log, client, wave)
	}
	if refusedKey(err) {
		// As for a realtime call: the key is wrong for every wave and job
		// of the provider. The wave waits, unchanged and unleased, for a
		// worker with a good key.
		v.w.Abort(fmt.Errorf("%s refused the API key: fix the key and start the worker again: %w", wave.Provider, err))
		v.update(ctx, log, wave, store.WaveUpdate{Error: textclip.Bytes(err.Error(), 500), NextPoll: v.cfg.PollMin})
		return
	}
	if err != nil && !errors.Is(err, store.ErrLeaseLost) {
		log.WarnContext(ctx, "worker: wave", slog.String("status", wave.Status), slog.String("error", err.Error()))
		next := v.backoff(wave)
		if errors.Is(err, llm.ErrBatchMaybeCreated) {
			// A create whose answer was lost (a client timeout) may still
			// be under way at the provider: the next try reconciles
			// first, and a batch not landed yet would be created twice.
			// It waits a lease, the time the driver already gives a
			// holder that may still be acting.
			next = max(next, v.cfg.Lease)
		}
		up := store.WaveUpdate{Error: textclip.Bytes(err.Error(), 500), NextPoll: next}
		if wave.Error == waveDeadlineCancel || wave.Error == store.CancelledReason {
			// Why the wave was cancelled stays its error (the report and
			// the realtime fallback read it); the retried step's error is
			// in the log line above.
			up.Error = ""
		}
		v.update(ctx, log, wave, up)
	}
}

// keepLease renews this worker's lease of wave every third of the lease
// until stop is called (or the lease is released or lost), so that a step
// outlasting the lease (a slow upload or create, a loaded machine) is not
// taken over while it still acts: another holder, or this worker's own
// Run loop (the same owner), found no batch yet and created a second one,
// orphaned and paid for. A lease still expires when its holder dies or
// cannot reach the ledger.
func (v *Driver) keepLease(ctx context.Context, log *slog.Logger, wave *store.Wave) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(v.cfg.Lease/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			// A killed worker's renewals stop too (tests kill it here).
			v.at("lease", wave.ID)
			select {
			case <-done:
				return
			default:
			}
			err := v.ledger.UpdateWave(context.WithoutCancel(ctx), wave.ID, v.cfg.Owner, store.WaveUpdate{Lease: v.cfg.Lease})
			if errors.Is(err, store.ErrLeaseLost) {
				return // released by the step, or taken over
			}
			if err != nil {
				log.WarnContext(ctx, "worker: renew a wave's lease", slog.String("error", err.Error()))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// update applies u, logging a failure (the lease expires on its own).
func (v *Driver) update(ctx context.Context, log *slog.Logger, wave *store.Wave, u store.WaveUpdate) {
	if err := v.ledger.UpdateWave(context.WithoutCancel(ctx), wave.ID, v.cfg.Owner, u); err != nil {
		log.WarnContext(ctx, "worker: update wave", slog.String("error", err.Error()))
	}
}

// backoff is the wait before the wave's next poll: PollMin doubling with
// each poll, at most PollMax.
func (v *Driver) backoff(wave *store.Wave) time.Duration {
	return min(v.cfg.PollMin<<min(max(wave.Polls-1, 0), 20), v.cfg.PollMax)
}

// items decodes a wave's requests as batch items.
func (v *Driver) items(ctx context.Context, wave *store.Wave, reqs []store.WaveRequest) ([]llm.BatchItem, error) {
	if reqs == nil {
		var err error
		if reqs, err = v.ledger.WaveRequests(ctx, wave.ID); err != nil {
			return nil, err
		}
	}
	items := make([]llm.BatchItem, len(reqs))
	for i, r := range reqs {
		items[i].CustomID = r.CustomID
		if err := json.Unmarshal(r.Request, &items[i].Request); err != nil {
			return nil, fmt.Errorf("decode request %s of wave %d: %w", r.CustomID, wave.ID, err)
		}
	}
	return items, nil
}

// submit uploads (OpenAI) and creates the wave's provider batch, recording
// each id as soon as it exists. A wave an earlier holder may have created
// is looked for first.
func (v *Driver) submit(ctx context.Context, log *slog.Logger, client BatchClient, wave *store.Wave, reqs []store.WaveRequest) error {
	if reqs == nil {
		// Claimed, not fresh from its recording: an earlier holder (or an
		// earlier try) may have created the batch.
		if st, ok, pending, err := v.reconcile(ctx, client, wave); err != nil {
			return err
		} else if ok {
			log.InfoContext(ctx, "worker: wave's provider batch found again", slog.String("provider_batch", st.ID))
			return v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Status: store.WaveSubmitted,
				ProviderBatchID: st.ID, NextPoll: v.cfg.PollMin})
		} else if pending {
			// Created before this worker came? Not known until the
			// batches that could be it end.
			log.InfoContext(ctx, "worker: wave waits for a provider batch of its size to end: it may be the wave's, created but not recorded")
			return v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{NextPoll: v.backoff(wave)})
		}
		if wave.Status == store.WaveRecorded && wave.Provider == llm.ProviderOpenAI {
			log.WarnContext(ctx, "worker: uploading a wave again: an earlier upload may have left an unused input file (OpenAI deletes it after 30 days)")
		}
	}
	items, err := v.items(ctx, wave, reqs)
	if err != nil {
		return err
	}
	fileID := wave.InputFileID
	if wave.Provider == llm.ProviderOpenAI && fileID == "" {
		v.at("upload", wave.ID)
		if fileID, err = client.UploadBatchFile(ctx, items); err != nil {
			return v.submitFailed(ctx, log, wave, err)
		}
		v.at("upload_done", wave.ID)
		if err := v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Status: store.WaveUploaded,
			InputFileID: fileID, Lease: v.cfg.Lease}); err != nil {
			return err
		}
		v.at("uploaded", wave.ID)
	}
	v.at("create", wave.ID)
	st, err := client.CreateBatch(ctx, fileID, items, map[string]string{waveMetadataKey: strconv.FormatInt(wave.ID, 10),
		"fixpoint_batch": textclip.Bytes(wave.Batch, 500)})
	if err != nil {
		return v.submitFailed(ctx, log, wave, err)
	}
	v.at("created", wave.ID)
	if err := v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Status: store.WaveSubmitted,
		ProviderBatchID: st.ID, NextPoll: v.cfg.PollMin}); err != nil {
		return err
	}
	v.w.WaveStep(wave.Provider, "submitted")
	log.InfoContext(ctx, "worker: wave submitted", slog.String("provider_batch", st.ID), slog.Int("requests", len(items)))
	return nil
}

// submitFailed handles an upload or create that failed: one that may have
// acted is reconciled on the next try; a retryable one is tried again
// later; a refused one fails the wave, and its jobs run realtime.
func (v *Driver) submitFailed(ctx context.Context, log *slog.Logger, wave *store.Wave, err error) error {
	var perr *fixpoint.ProviderError
	if errors.Is(err, llm.ErrBatchMaybeCreated) || !errors.As(err, &perr) || !perr.Permanent() || refusedKey(err) {
		// Try again (reconciling first) at the next poll.
		return fmt.Errorf("submit: %w", err)
	}
	log.ErrorContext(ctx, "worker: provider refused the wave; its jobs run realtime", slog.String("error", err.Error()))
	if err := v.toRealtime(ctx, wave, nil); err != nil {
		return err
	}
	return v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Status: store.WaveFailed,
		Error: textclip.Bytes("submit: "+err.Error(), 500), NextPoll: time.Second})
}

// refusedKey reports a provider's 401: the API key is wrong for every call
// of that provider (a 403 may concern one model or one call only).
func refusedKey(err error) bool {
	var perr *fixpoint.ProviderError
	return errors.As(err, &perr) && perr.Class == fixpoint.ClassAuth && perr.Status == 401
}

// reconcile looks for the provider batch of a wave that may have been
// created but not recorded (its holder died between the create and its
// record, or the create's answer was lost). It reads the key's batches
// back to a minute before the wave was recorded, every page (the newest
// hundred missed it once a cluster had made a hundred more). On OpenAI the
// batch's metadata names the wave. Anthropic batches carry none: a batch of
// the wave's size created since, that no wave recorded, may be the wave's,
// another client's on the same key, or another wave's whose record was
// lost too. Only the custom_ids of its results tell (they name the wave),
// and only once it has ended: while one such batch runs, reconcile
// reports it pending and the wave waits for it, rather than create a batch
// that may be paid for twice or take another's (adopting the only one of
// the wave's size took another client's batch, and with two a second
// batch was created: 120 paid replies never recorded).
func (v *Driver) reconcile(ctx context.Context, client BatchClient, wave *store.Wave) (st llm.BatchStatus, found, pending bool, err error) {
	list, err := client.ListBatchesSince(ctx, wave.CreatedAt.Add(-time.Minute), 0)
	if err != nil {
		return llm.BatchStatus{}, false, false, fmt.Errorf("reconcile: list batches: %w", err)
	}
	want := strconv.FormatInt(wave.ID, 10)
	var ids map[string]bool // the wave's custom_ids, read when needed
	for _, b := range list {
		if wave.Provider == llm.ProviderOpenAI {
			if b.Metadata[waveMetadataKey] == want {
				return b, true, false, nil
			}
			continue
		}
		if b.Counts.Total != wave.Requests {
			continue
		}
		taken, err := v.ledger.ProviderBatchRecorded(ctx, wave.Provider, b.ID)
		if err != nil {
			return llm.BatchStatus{}, false, false, err
		}
		if taken {
			continue
		}
		if !b.Ended {
			pending = true
			continue
		}
		if ids == nil {
			reqs, err := v.ledger.WaveRequests(ctx, wave.ID)
			if err != nil {
				return llm.BatchStatus{}, false, false, err
			}
			ids = make(map[string]bool, len(reqs))
			for _, r := range reqs {
				ids[r.CustomID] = true
			}
		}
		ours, err := batchOf(ctx, client, b, ids)
		if err != nil {
			return llm.BatchStatus{}, false, false, fmt.Errorf("reconcile: read batch %s: %w", b.ID, err)
		}
		if ours {
			return b, true, false, nil
		}
	}
	return llm.BatchStatus{}, false, pending, nil
}

// errSeen stops a read of results once one has told what batchOf needs.
var errSeen = errors.New("seen")

// batchOf reports whether the ended batch b holds the requests of ids: its
// first result's custom_id is one of them.
func batchOf(ctx context.Context, client BatchClient, b llm.BatchStatus, ids map[string]bool) (bool, error) {
	ours, seen := false, false
	err := client.BatchResults(ctx, b, nil, func(r llm.BatchResult) error {
		seen, ours = true, ids[r.CustomID]
		return errSeen
	})
	if err != nil && !errors.Is(err, errSeen) {
		return false, err
	}
	return seen && ours, nil
}

// cancelUnsubmitted ends a wave cancelled before it reached the provider.
func (v *Driver) cancelUnsubmitted(ctx context.Context, log *slog.Logger, wave *store.Wave) error {
	if client := v.clients[wave.Provider]; client != nil && wave.Polls > 1 {
		// It may have been created after all.
		st, ok, pending, err := v.reconcile(ctx, client, wave)
		if err == nil && ok {
			return v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{ProviderBatchID: st.ID, NextPoll: time.Millisecond})
		}
		if err == nil && pending {
			// It may be running: cancelled once it is found, or known
			// not to exist.
			return v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{NextPoll: v.backoff(wave)})
		}
	}
	if err := v.toRealtime(ctx, wave, nil); err != nil {
		return err
	}
	log.InfoContext(ctx, "worker: wave cancelled before it was submitted")
	return v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Status: store.WaveFailed,
		Error: "cancelled before it was submitted", NextPoll: time.Second})
}

// poll asks the provider about a submitted wave: cancelling it if asked
// to or if its deadline is near, and processing its results once it ended.
func (v *Driver) poll(ctx context.Context, log *slog.Logger, client BatchClient, wave *store.Wave) error {
	cancelWhy := ""
	switch {
	case wave.Status == store.WaveCancelling:
		cancelWhy = store.CancelledReason
	case !wave.Deadline.IsZero() && time.Now().Add(v.cfg.DeadlineMargin).After(wave.Deadline):
		cancelWhy = waveDeadlineCancel
	}
	if cancelWhy != "" && wave.Error != cancelWhy {
		if _, err := client.CancelBatch(ctx, wave.ProviderBatchID); err != nil && !errors.Is(err, llm.ErrBatchNotFound) {
			var pe *fixpoint.ProviderError
			if !errors.As(err, &pe) || !pe.Permanent() {
				return fmt.Errorf("cancel: %w", err)
			}
			// The provider refuses to cancel a batch that has ended
			// ("Cannot cancel a batch with status 'completed'"): it is
			// read below like any ended batch. Returning here retried
			// the cancel at every poll, and its replies were never read.
			log.InfoContext(ctx, "worker: provider batch not cancelled (it may have ended); reading it", slog.String("error", err.Error()))
		}
		log.InfoContext(ctx, "worker: provider batch cancel asked for", slog.String("why", cancelWhy))
		if err := v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Error: cancelWhy, Lease: v.cfg.Lease}); err != nil {
			return err
		}
		wave.Error = cancelWhy
	}
	st, err := client.RetrieveBatch(ctx, wave.ProviderBatchID)
	gone, since, lerr := v.missing(ctx, wave, err)
	if lerr != nil {
		return lerr
	}
	if gone {
		// Deleted, or of another key or organization: its replies cannot be
		// read, and polling it would hold every draining worker for ever.
		why := fmt.Sprintf("the provider has not known batch %s for %s (404: deleted, or created under another key or organization); its replies cannot be read, so its jobs run realtime",
			wave.ProviderBatchID, since.Round(time.Second))
		log.ErrorContext(ctx, "worker: provider batch not found; its jobs run realtime", slog.String("error", err.Error()),
			slog.Duration("not_found_for", since.Round(time.Second)))
		if err := v.toRealtime(ctx, wave, nil); err != nil {
			return err
		}
		return v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Status: store.WaveFailed, Error: textclip.Bytes(why, 500), NextPoll: time.Second})
	}
	if err != nil {
		return fmt.Errorf("retrieve: %w", err)
	}
	counts := waveCounts(st.Counts)
	if !st.Ended {
		return v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Counts: &counts, NextPoll: v.backoff(wave)})
	}
	if st.State == llm.BatchFailed {
		// The provider refused the batch as a whole (OpenAI: an input line
		// it could not read, or the organization's enqueued-token limit):
		// nothing ran and nothing was billed, so no attempt is recorded.
		// Its jobs finish realtime.
		why := "the provider failed the batch"
		if st.Err != nil {
			why += ": " + st.Err.Error()
		}
		log.ErrorContext(ctx, "worker: provider failed the wave; its jobs run realtime", slog.String("error", why))
		if err := v.toRealtime(ctx, wave, nil); err != nil {
			return err
		}
		return v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Status: store.WaveFailed, Counts: &counts,
			Error: textclip.Bytes(why, 500), NextPoll: time.Second})
	}
	if err := v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Status: store.WaveEnded, Counts: &counts,
		Lease: v.cfg.Lease}); err != nil {
		return err
	}
	wave.Status = store.WaveEnded
	// The provider's counts do not tell expired or cancelled requests
	// from errored ones (OpenAI counts them failed): its results do, and
	// are logged once recorded.
	log.InfoContext(ctx, "worker: wave ended", slog.String("state", string(st.State)), slog.Int("requests", st.Counts.Total))
	v.at("ended", wave.ID)
	return v.process(ctx, log, client, wave, &st)
}

func waveCounts(c llm.BatchCounts) [4]int {
	return [4]int{c.Succeeded, c.Errored, c.Expired, c.Cancelled}
}

// resultTally counts a wave's results as the ledger's wave counts do:
// succeeded, errored, expired, cancelled.
type resultTally [4]int

func (t *resultTally) add(err error) {
	var perr *fixpoint.ProviderError
	switch {
	case err == nil:
		t[0]++
	case errors.As(err, &perr) && perr.Class == fixpoint.ClassExpired:
		t[2]++
	case errors.As(err, &perr) && perr.Class == fixpoint.ClassCancelled:
		t[3]++
	default:
		t[1]++
	}
}

// waveJob is a job of a wave being processed: its repair step rebuilt
// from the ledger, up to the request the wave carried.
type waveJob struct {
	req  store.WaveRequest
	env  *queue.Envelope
	step *repair.Step
	// prev is how many attempts the ledger had before this wave's.
	prev int
}

// process records an ended wave's results and moves its jobs on: final,
// into the next wave, or back to the queue to finish realtime. st is the
// provider batch as retrieved (nil: retrieve it).
func (v *Driver) process(ctx context.Context, log *slog.Logger, client BatchClient, wave *store.Wave, st *llm.BatchStatus) error {
	if st == nil {
		s, err := client.RetrieveBatch(ctx, wave.ProviderBatchID)
		if err != nil {
			return fmt.Errorf("retrieve: %w", err)
		}
		st = &s
	}
	rs, err := v.startResults(ctx, log, wave)
	if err != nil {
		return err
	}
	v.at("download", wave.ID)
	if err := rs.download(ctx, client, *st); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := rs.unanswered(ctx, st.State); err != nil {
		return err
	}
	if err := rs.flush(ctx); err != nil {
		return err
	}
	// The provider's counts do not tell cancelled requests apart (OpenAI
	// counts them failed): the results do.
	counts := [4]int(rs.tally)
	if err := v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Counts: &counts, Lease: v.cfg.Lease}); err != nil {
		return err
	}
	log.InfoContext(ctx, "worker: wave results recorded", slog.Int("succeeded", counts[0]), slog.Int("errored", counts[1]),
		slog.Int("expired", counts[2]), slog.Int("cancelled", counts[3]))
	v.at("recorded_results", wave.ID)
	return v.next(ctx, log, client, wave, st)
}

// waveResults records the results of an ended wave as they are read, in
// chunks of waveOutcomesChunk outcomes.
type waveResults struct {
	v    *Driver
	log  *slog.Logger
	wave *store.Wave
	reqs []store.WaveRequest
	byID map[string]store.WaveRequest // by custom ID
	// prev holds the attempts the ledger has of the wave's jobs, by job.
	prev    map[string][]store.Attempt
	started time.Time
	seen    map[string]bool // custom IDs with an outcome
	tally   resultTally
	outs    []store.WaveOutcome // not yet recorded
}

// startResults reads what recording a wave's results needs from the
// ledger: its requests and the attempts of its jobs.
func (v *Driver) startResults(ctx context.Context, log *slog.Logger, wave *store.Wave) (*waveResults, error) {
	reqs, err := v.ledger.WaveRequests(ctx, wave.ID)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]store.WaveRequest, len(reqs))
	for _, r := range reqs {
		byID[r.CustomID] = r
	}
	prev, err := v.ledger.WaveAttempts(ctx, wave.ID)
	if err != nil {
		return nil, err
	}
	return &waveResults{v: v, log: log, wave: wave, reqs: reqs, byID: byID, prev: prev,
		started: cmp.Or(wave.SubmittedAt, wave.CreatedAt), seen: map[string]bool{}}, nil
}

// download reads the provider batch's results and records the outcome of
// each request of the wave.
func (rs *waveResults) download(ctx context.Context, client BatchClient, st llm.BatchStatus) error {
	return client.BatchResults(ctx, st, func(id string) (fixpoint.Request, bool) {
		r, ok := rs.byID[id]
		if !ok {
			return fixpoint.Request{}, false
		}
		var req fixpoint.Request
		if json.Unmarshal(r.Request, &req) != nil {
			return fixpoint.Request{}, false
		}
		return req, true
	}, func(br llm.BatchResult) error {
		r, ok := rs.byID[br.CustomID]
		if !ok || rs.seen[br.CustomID] {
			rs.log.WarnContext(ctx, "worker: wave result for a request the wave does not have", slog.String("custom_id", textclip.Bytes(br.CustomID, 80)))
			return nil
		}
		var callErr error
		if br.Err != nil {
			callErr = br.Err
		}
		rs.tally.add(callErr)
		return rs.outcome(ctx, r, br.Response, callErr)
	})
}

// unanswered records the requests with no result line as failed: they
// never ran. state is the provider batch's.
func (rs *waveResults) unanswered(ctx context.Context, state llm.BatchState) error {
	class, why := fixpoint.ClassExpired, "the provider batch ended without a result for this request"
	if state == llm.BatchCancelled {
		class = fixpoint.ClassCancelled
	}
	for _, r := range rs.reqs {
		if !rs.seen[r.CustomID] {
			missing := &fixpoint.ProviderError{Class: class, Code: "missing_result", Message: why}
			rs.tally.add(missing)
			if err := rs.outcome(ctx, r, nil, missing); err != nil {
				return err
			}
		}
	}
	return nil
}

// outcome feeds a request's reply (or failure) to its job's repair step
// and queues the attempt, and the result when the job is done, for the
// ledger.
func (rs *waveResults) outcome(ctx context.Context, r store.WaveRequest, resp *fixpoint.Response, callErr error) error {
	rs.seen[r.CustomID] = true
	if r.Recorded {
		return nil
	}
	j, err := rs.v.rebuild(ctx, r, rs.prev[r.JobID], fixpoint.PriceBasisBatch)
	if err != nil {
		rs.log.ErrorContext(ctx, "worker: wave result of a job that cannot be rebuilt", slog.String("job_id", r.JobID), slog.String("error", err.Error()))
		return nil // it stays placed; the next pass hands it to the queue
	}
	if j == nil {
		return nil // its attempt is recorded already
	}
	a, act := j.step.Feed(resp, callErr, rs.started)
	o := store.WaveOutcome{WaveID: rs.wave.ID, CustomID: r.CustomID, Attempt: ledgerrow.Attempt(a)}
	if act.Done() {
		res := ledgerrow.Result(j.step.Result(), j.env, 0)
		o.Result = &res
	} else {
		tot := ledgerrow.Result(j.step.Result(), j.env, 0)
		o.Totals = &tot
	}
	rs.outs = append(rs.outs, o)
	if len(rs.outs) >= waveOutcomesChunk {
		return rs.flush(ctx)
	}
	return nil
}

// flush records the outcomes queued and renews the wave's lease.
func (rs *waveResults) flush(ctx context.Context) error {
	if len(rs.outs) == 0 {
		return nil
	}
	v := rs.v
	_, err := v.ledger.RecordWaveOutcomes(context.WithoutCancel(ctx), rs.outs)
	if store.IsRefused(err) {
		var recorded []store.WaveOutcome
		recorded, err = rs.recordEach(context.WithoutCancel(ctx))
		v.w.Observe(recorded)
	} else if err == nil {
		v.w.Observe(rs.outs)
	}
	if err != nil {
		return err
	}
	rs.outs = rs.outs[:0]
	v.at("outcomes", rs.wave.ID)
	return v.ledger.UpdateWave(ctx, rs.wave.ID, v.cfg.Owner, store.WaveUpdate{Lease: v.cfg.Lease})
}

// recordEach records the outcomes queued one by one, after the ledger
// refused them together: one it refuses for its data is recorded as it
// can take it (store.WaveOutcome.Salvage), its attempt with its text,
// then with its counts only, its job failed naming the refusal. Its reply
// was paid for and must leave a row; and writing the same data again
// cannot succeed, so returning the refusal would process the wave again at
// every poll, none of the chunk's outcomes ever recorded. It returns the
// outcomes recorded, and the first refusal even the counts met (the others
// are recorded; the wave is processed again later) or the first error
// that is no refusal.
func (rs *waveResults) recordEach(ctx context.Context) ([]store.WaveOutcome, error) {
	var recorded []store.WaveOutcome
	var first error
	for i := range rs.outs {
		one := rs.outs[i : i+1]
		_, err := rs.v.ledger.RecordWaveOutcomes(ctx, one)
		if refusal := err; store.IsRefused(refusal) {
			rs.log.ErrorContext(ctx, "worker: ledger refused a wave outcome: recording its call without what it refused, the job failed",
				slog.String("job_id", rs.byID[one[0].CustomID].JobID), slog.String("custom_id", one[0].CustomID), slog.String("error", refusal.Error()))
			o := one[0]
			for _, bare := range []bool{false, true} {
				one[0] = o.Salvage(refusal, bare)
				if _, err = rs.v.ledger.RecordWaveOutcomes(ctx, one); !store.IsRefused(err) {
					break
				}
			}
		}
		switch {
		case err == nil:
			recorded = append(recorded, one[0])
		case !store.IsRefused(err):
			return recorded, err // the ledger is down: so it is for the rest
		default:
			rs.log.ErrorContext(ctx, "worker: ledger refused a wave outcome, even with its counts only", slog.String("custom_id", one[0].CustomID),
				slog.String("error", err.Error()))
			first = cmp.Or(first, err)
		}
	}
	return recorded, first
}

// rebuild starts the repair step of a wave request's job from the
// attempts the ledger has before it. nil, nil: the request's attempt is
// recorded already.
func (v *Driver) rebuild(ctx context.Context, r store.WaveRequest, rows []store.Attempt, basis fixpoint.PriceBasis) (*waveJob, error) {
	env, err := queue.DecodeEnvelope(r.Envelope)
	if err != nil {
		return nil, err
	}
	job, err := v.w.Job(ctx, env)
	if err != nil {
		return nil, err
	}
	var before []store.Attempt
	for _, a := range rows {
		if a.No < r.AttemptNo {
			before = append(before, a)
		} else {
			return nil, nil
		}
	}
	prev := ledgerrow.ResultFrom(r.JobID, before)
	step, err := repair.Start(job, prev, v.w.StepConfig(env.Provider, basis))
	if err != nil {
		return nil, err
	}
	if act := step.Next(); act.Request == nil {
		return nil, fmt.Errorf("job %s has no attempt %d to make", r.JobID, r.AttemptNo)
	}
	return &waveJob{req: r, env: env, step: step, prev: len(before)}, nil
}

// next moves on the jobs still placed in an ended wave: into the next
// wave, or to the queue to finish realtime; then the wave is done.
func (v *Driver) next(ctx context.Context, log *slog.Logger, client BatchClient, wave *store.Wave, st *llm.BatchStatus) error {
	placed, err := v.ledger.PlacedJobs(ctx, wave.ID)
	if err != nil {
		return err
	}
	var again []store.WaveRequest
	var realtime []store.WaveRequest
	if len(placed) > 0 {
		rows, err := v.ledger.WaveAttempts(ctx, wave.ID)
		if err != nil {
			return err
		}
		took := time.Since(cmp.Or(wave.SubmittedAt, wave.CreatedAt))
		if st != nil && !st.EndedAt.IsZero() && !wave.SubmittedAt.IsZero() {
			took = st.EndedAt.Sub(wave.SubmittedAt)
		}
		deadline := time.Time{}
		for _, p := range placed {
			r := p
			r.AttemptNo = len(rows[p.JobID]) + 1
			env, err := queue.DecodeEnvelope(p.Envelope)
			if err != nil {
				realtime = append(realtime, p)
				continue
			}
			deadline = env.DeadlineTime()
			j, err := v.rebuild(ctx, r, rows[p.JobID], fixpoint.PriceBasisBatch)
			if err != nil || j == nil {
				realtime = append(realtime, p)
				continue
			}
			noReply := 0
			for _, a := range rows[p.JobID] {
				if a.WaveID != 0 && a.Class == fixpoint.OutcomeProvider {
					noReply++
				}
			}
			if noReply >= waveNoReplyMax {
				realtime = append(realtime, p)
				continue
			}
			b, err := json.Marshal(j.step.Next().Request)
			if err != nil {
				realtime = append(realtime, p)
				continue
			}
			r.Request = b
			again = append(again, r)
		}
		// A wave that cannot end before the deadline is not started (one
		// more wave is taken to last twice as long as this one did), nor a
		// wave too small to be worth its wait.
		late := !deadline.IsZero() && time.Now().Add(2*took+v.cfg.DeadlineMargin).After(deadline)
		if late || wave.Error == waveDeadlineCancel || (v.cfg.RealtimeBelow > 0 && len(again) < v.cfg.RealtimeBelow) {
			realtime, again = append(realtime, again...), nil
		}
	}
	var nw *store.Wave
	var taken []store.WaveRequest
	stopNw, driven := func() {}, false
	if len(again) > 0 {
		var err error
		nw, taken, err = v.ledger.RecordWave(context.WithoutCancel(ctx), store.WaveParams{Batch: wave.Batch, Run: wave.Run,
			Provider: wave.Provider, Model: wave.Model, Deadline: wave.Deadline, Requests: again, From: wave.ID,
			Owner: v.cfg.Owner, Lease: v.cfg.Lease, Home: wave.Home})
		if err != nil {
			return err
		}
		if nw != nil {
			// Held from its record on, as a collected wave is.
			v.take(nw.ID)
			stopNw = v.keepLease(ctx, log, nw)
			defer func() {
				stopNw()
				if !driven {
					v.drop(nw.ID)
				}
			}()
			log.InfoContext(ctx, "worker: repair wave recorded", slog.Int64("next_wave", nw.ID), slog.Int("requests", len(taken)))
			v.at("repair_recorded", nw.ID)
		}
	}
	if len(realtime) > 0 {
		if err := v.toRealtime(ctx, wave, realtime); err != nil {
			return err
		}
		log.InfoContext(ctx, "worker: jobs of the wave go on realtime", slog.Int("jobs", len(realtime)))
	}
	if err := v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Status: store.WaveDone, NextPoll: time.Second}); err != nil {
		return err
	}
	v.w.WaveStep(wave.Provider, "done")
	if nw != nil {
		stopNw()
		driven = true
		v.drive(ctx, nw, taken)
	}
	return nil
}

// toRealtime hands jobs placed in the wave to the queue, to finish
// realtime from the attempts the ledger holds, then ends their place in
// the wave. placed nil means every job still placed there.
func (v *Driver) toRealtime(ctx context.Context, wave *store.Wave, placed []store.WaveRequest) error {
	if placed == nil {
		var err error
		if placed, err = v.ledger.PlacedJobs(ctx, wave.ID); err != nil {
			return err
		}
	}
	ids := make([]string, 0, len(placed))
	for _, p := range placed {
		env, err := queue.DecodeEnvelope(p.Envelope)
		if err != nil {
			return fmt.Errorf("job %s of wave %d: %w", p.JobID, wave.ID, err)
		}
		env.FromWave = wave.ID
		if err := queue.PublishFromWave(ctx, v.js, v.queue, env); err != nil {
			return err
		}
		ids = append(ids, p.JobID)
	}
	v.at("published", wave.ID)
	if len(ids) == 0 {
		return nil
	}
	return v.ledger.ReleaseWaveJobs(ctx, wave.ID, ids)
}

// Stop hands back the jobs collected for waves not yet recorded, and waits
// for the waves being recorded.
func (v *Driver) Stop(ctx context.Context) {
	v.mu.Lock()
	var cols []*collecting
	for _, col := range v.pending {
		col.flushed = true
		col.timer.Stop()
		cols = append(cols, col)
	}
	clear(v.pending)
	v.mu.Unlock()
	for _, col := range cols {
		for _, c := range col.items {
			c.stopBeat()
			v.w.Dispose(ctx, c.msg, c.env, queue.Disposition{Kind: queue.DispRelease})
		}
	}
	v.flushes.Wait()
}

// missing reports whether the wave's provider batch has answered 404 (err
// from RetrieveBatch) for NotFoundGrace, and for how long. The first 404 of
// a run of them is kept in the ledger, so a worker's restart does not
// begin the grace again; an answer clears it.
func (v *Driver) missing(ctx context.Context, wave *store.Wave, err error) (bool, time.Duration, error) {
	if !errors.Is(err, llm.ErrBatchNotFound) {
		if err == nil && !wave.MissingSince.IsZero() {
			wave.MissingSince = time.Time{}
			return false, 0, v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Missing: -1, Lease: v.cfg.Lease})
		}
		return false, 0, nil
	}
	if wave.MissingSince.IsZero() {
		wave.MissingSince = time.Now()
		return false, 0, v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, store.WaveUpdate{Missing: 1, Lease: v.cfg.Lease})
	}
	since := time.Since(wave.MissingSince)
	return since >= v.cfg.NotFoundGrace, since, nil
}

// Drives reports whether the driver drives waves: the worker has a
// provider with a batch API.
func (v *Driver) Drives() bool { return v != nil && len(v.clients) > 0 }

// Open reports whether waves are being collected or waves this worker can
// drive are open in the ledger (a draining worker waits for them; another
// provider's, or those of another queue or provider endpoint, are not its
// to wait for); a ledger error counts as open.
func (v *Driver) Open(ctx context.Context) bool {
	if v == nil || len(v.clients) == 0 {
		return false // it drives no waves
	}
	v.mu.Lock()
	n := len(v.pending)
	v.mu.Unlock()
	if n > 0 {
		return true
	}
	providers := make([]string, 0, len(v.clients))
	for p := range v.clients {
		providers = append(providers, p)
	}
	open, err := v.ledger.OpenWaves(ctx, providers, v.homeList())
	return err != nil || open > 0
}

// JobAttempts returns the attempts the ledger holds for a batch-delivery
// job's run (none without a wave ledger).
func (v *Driver) JobAttempts(ctx context.Context, env *queue.Envelope) ([]store.Attempt, error) {
	if v == nil {
		return nil, nil
	}
	return v.ledger.JobAttempts(ctx, env.JobID, env.RunOrFirst())
}
