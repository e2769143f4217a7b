package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sourcegraph/conc/panics"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/internal/ledgerrow"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/rules"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// outageHoldsMax is how often a job waits out a provider failure (still
// failing after the transport retries) inside one delivery before it is
// handed back: the waits double from NakDelayMin up to NakDelayMax, about
// eight and a half minutes in all with the defaults, and pulling pauses
// with them. Handing the job back at once would spend a delivery for each
// wait, and an outage of a minute or two burned every job in flight and
// every job pulled after it to dead.
const outageHoldsMax = 8

func paidAttempts(res *fixpoint.Result) bool {
	for i := range res.Attempts {
		if res.Attempts[i].TokensIn+res.Attempts[i].TokensOut > 0 {
			return true
		}
	}
	return false
}

// handleSafely runs one message; a panic is recovered, recorded as the job's
// failure and the message terminated, and the pool carries on.
func (w *Worker) handleSafely(ctx context.Context, msg jetstream.Msg) {
	var env *queue.Envelope
	recovered := panics.Try(func() { w.handle(ctx, msg, &env) })
	if recovered == nil {
		return
	}
	err := recovered.AsError()
	w.log.ErrorContext(ctx, "worker: job panicked", slog.String("job_id", jobIDOf(msg, env)), slog.String("error", err.Error()))
	res := &fixpoint.Result{JobID: jobIDOf(msg, env), Status: fixpoint.StatusFailed, Class: fixpoint.OutcomePanic, Error: fmt.Sprintf("panic: %v", recovered.Value), StartedAt: time.Now()}
	// Recording the failure may panic too (the same hook, a broken ledger
	// driver): then hand the message back instead of letting the panic reach
	// the pool, which would re-panic at Wait and take the process down. A
	// redelivery of a job already final is acked without a call.
	if again := panics.Try(func() { w.finish(ctx, msg, env, res) }); again != nil {
		w.log.ErrorContext(ctx, "worker: recording a panicked job panicked", slog.String("job_id", res.JobID), slog.String("error", again.AsError().Error()))
		w.dispose(ctx, msg, env, queue.Disposition{Kind: queue.DispRetry, Delay: w.cfg.NakDelayMin, Cause: again.AsError()})
	}
}

func jobIDOf(msg jetstream.Msg, env *queue.Envelope) string {
	if env != nil && env.JobID != "" {
		return env.JobID
	}
	if id, ok := queue.JobIDFromMsgID(msg.Headers().Get(jetstream.MsgIDHeader)); ok && id != "" {
		return id
	}
	if meta, err := msg.Metadata(); err == nil {
		return fmt.Sprintf("seq-%d", meta.Sequence.Stream)
	}
	return "unknown"
}

// handle takes one delivery of a job message through its life: decode
// it, read what the ledger knows of the job, build the job, run its
// repair loop (waiting out provider outages), and hand it back or finish
// it. Each step that ends the delivery early disposes of the message
// itself and reports false.
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg, envOut **queue.Envelope) {
	// Progress is reported from the first moment to the ack: ledger reads,
	// the loop and the (batched) write all count against AckWait, and a
	// slow database must not get a job redelivered to another worker while
	// this one is still writing it.
	stopBeat := w.heartbeat(msg)
	defer stopBeat()
	env, decodeErr := queue.DecodeEnvelope(msg.Data())
	*envOut = env
	if env == nil || env.JobID == "" {
		// Not a job message at all: record it with its reason.
		w.dispose(ctx, msg, env, queue.Disposition{Kind: queue.DispReject, Cause: decodeErr})
		return
	}
	if w.lanes.isProbe(env) {
		// Whatever ends this delivery before an answer, the lane is
		// probed again after its interval (a no-op once it resumed or
		// stopped again).
		defer w.lanes.probeEnded(env)
	}
	d := &delivery{msg: msg, env: env, delivered: deliveredOf(msg)}
	ctx, span := w.startJobSpan(ctx, env, d.delivered)
	defer span.End()
	d.log = w.log.With(slog.String("job_id", env.JobID), slog.String("batch", env.Batch), slog.Int("delivery", d.delivered))
	state, ok := w.readState(ctx, d, decodeErr)
	if !ok {
		return
	}
	job, ok := w.prepareJob(ctx, d)
	if !ok {
		return
	}
	if w.cfg.beforeJob != nil {
		w.cfg.beforeJob(env)
	}
	prev, ok := w.resumeFrom(ctx, d, state, job)
	if !ok {
		return
	}
	if w.parkIfStopped(ctx, d) {
		return // its lane's model is missing: no call
	}
	spendCap, ok := w.spendCap(ctx, d)
	if !ok || w.keyMissing(ctx, d) {
		return
	}
	res, handedBack, err := w.runLoop(ctx, d, job, prev, spendCap)
	if !handedBack {
		if w.lanes.isProbe(env) {
			// The provider answered for the model (a model still missing
			// hands the job back and stops the lane again).
			w.resumeLane(ctx, env)
		}
		w.conclude(ctx, d, res, err)
	}
}

// delivery is one delivery of a job message, as handle's steps share it.
type delivery struct {
	msg       jetstream.Msg
	env       *queue.Envelope
	delivered int
	log       *slog.Logger
	// recorded is how many of the job's attempts the ledger has already
	// (a batch-delivery job's waves' attempts): the result's first ones.
	recorded int
}

// retryLater hands the delivery's message back as decide says for cause.
func (w *Worker) retryLater(ctx context.Context, d *delivery, cause error) {
	w.dispose(ctx, d.msg, d.env, w.decide(ctx, d.delivered, cause))
}

// readState reads what the ledger knows of the job. A job it never
// recorded was enqueued into another ledger: leave it for a worker on that
// one. A redelivery of a job already final (a crash between commit and
// ack) is acked without calling the provider.
func (w *Worker) readState(ctx context.Context, d *delivery, decodeErr error) (jobState, bool) {
	var state jobState
	err := w.retryLedger(ctx, d.log, func() error {
		var err error
		state, err = w.reader.state(ctx, d.env.JobID)
		return err
	})
	if err != nil {
		w.retryLater(ctx, d, fmt.Errorf("%w: read ledger: %w", fixpoint.ErrTransient, err))
		return state, false
	}
	if !state.known {
		w.foreign(ctx, d.msg, d.env, d.delivered)
		return state, false
	}
	w.probing.Store(false)
	w.ownAt.Store(time.Now().UnixNano())
	if decodeErr != nil {
		w.dispose(ctx, d.msg, d.env, queue.Disposition{Kind: queue.DispReject, Cause: decodeErr})
		return state, false
	}
	if state.run != d.env.RunOrFirst() {
		// A message of another run than the job's: the job was requeued
		// since (its new run has its own message), so this one is done.
		d.log.InfoContext(ctx, "worker: message of an earlier run, acked unrun", slog.Int("message_run", d.env.RunOrFirst()),
			slog.Int("job_run", state.run))
		w.dispose(ctx, d.msg, d.env, queue.Disposition{Kind: queue.DispSkip})
		return state, false
	}
	if state.final {
		w.dispose(ctx, d.msg, d.env, queue.Disposition{Kind: queue.DispSkip})
		return state, false
	}
	return state, true
}

// prepareJob builds the repair loop's job from the envelope and its
// schema; a job that cannot run as sent is rejected.
func (w *Worker) prepareJob(ctx context.Context, d *delivery) (*repair.Job, bool) {
	var job *repair.Job
	err := w.retryLedger(ctx, d.log, func() error {
		var err error
		job, err = w.buildJob(ctx, d.env)
		if errors.Is(err, fixpoint.ErrBadJob) {
			return permanent(err) // a bad job is not a ledger outage
		}
		return err
	})
	switch {
	case errors.Is(err, fixpoint.ErrBadJob):
		w.dispose(ctx, d.msg, d.env, queue.Disposition{Kind: queue.DispReject, Cause: err})
	case err != nil:
		w.retryLater(ctx, d, err)
	}
	return job, err == nil
}

// resumeFrom is where the job's loop starts: from nothing for a realtime
// job, or from the attempts its waves recorded for a batch-delivery job.
//
// Batch delivery: the job goes into a wave, unless a wave holds it already
// (the ledger owns it: this is a redelivery after its wave was recorded),
// or it comes from a wave to finish realtime, or no wave can serve it (a
// provider without a batch API here, its deadline near): then it runs
// realtime, going on from the attempts its waves recorded.
func (w *Worker) resumeFrom(ctx context.Context, d *delivery, state jobState, job *repair.Job) (*fixpoint.Result, bool) {
	env := d.env
	if !env.BatchDelivery() {
		return nil, true
	}
	switch {
	case state.wave != 0 && state.wave != env.FromWave:
		w.dispose(ctx, d.msg, env, queue.Disposition{Kind: queue.DispSkip})
		return nil, false
	case env.FromWave == 0 && state.attempts == 0 && w.waves.CanCollect(env):
		// A job a wave already handed on (its attempts are recorded) goes
		// on realtime from them even when its message lost the wave's mark
		// (republished by enqueue --resume after the stream was lost):
		// collected again, its next request took attempt number 1 a second
		// time, and the wave could never be recorded.
		//
		// The driver acks the message once its wave is recorded, after
		// this delivery's span has ended: the span says so now (a job that
		// cannot go into a wave says otherwise below; a wave that cannot
		// be recorded hands its jobs back, to deliveries of their own).
		traceDisposition(ctx, queue.Disposition{Kind: queue.DispWave})
		w.waves.Collect(ctx, d.msg, env, job, d.delivered)
		return nil, false
	}
	var rows []store.Attempt
	err := w.retryLedger(ctx, d.log, func() error {
		var err error
		rows, err = w.waves.JobAttempts(ctx, env)
		return err
	})
	if err != nil {
		w.retryLater(ctx, d, fmt.Errorf("%w: read the job's wave attempts: %w", fixpoint.ErrTransient, err))
		return nil, false
	}
	prev := ledgerrow.ResultFrom(env.JobID, rows)
	if prev != nil {
		d.recorded = len(prev.Attempts)
	}
	return prev, true
}

// spendCap reads the batch's spend cap, which gates each of the job's
// calls.
func (w *Worker) spendCap(ctx context.Context, d *delivery) (capEntry, bool) {
	var spendCap capEntry
	err := w.retryLedger(ctx, d.log, func() error {
		var err error
		spendCap, err = w.capped(ctx, d.env.Batch)
		return err
	})
	if err != nil {
		w.retryLater(ctx, d, fmt.Errorf("%w: read the batch's spend cap: %w", fixpoint.ErrTransient, err))
		return spendCap, false
	}
	return spendCap, true
}

// keyMissing stops the worker, handing the job back, when its provider's
// client has no API key: every call would be refused (or, without a
// network, look like an outage the job waits out).
func (w *Worker) keyMissing(ctx context.Context, d *delivery) bool {
	provider := d.env.Provider
	mk, ok := w.cfg.Providers[provider].(interface{ MissingKey() bool })
	if !ok || !mk.MissingKey() {
		return false
	}
	row, _ := llm.ProviderNamed(provider)
	w.abort(fmt.Errorf("no API key for %s, whose public API refuses every call without one: set %s (or point the worker at another server) and start it again",
		provider, row.KeyEnv))
	w.handBack(ctx, d.msg, d.env, d.delivered, nil, fmt.Errorf("%w: no API key for %s", fixpoint.ErrTransient, provider))
	return true
}

// loopHooks are the repair loop's hooks for the delivery: the budget and
// ownership gate, and the reply journal. Each call is on disk from when it
// goes out, and its paid reply until this delivery ends (dispose): a kill
// -9 loses neither.
func (w *Worker) loopHooks(d *delivery, spendCap capEntry, own *ownership) LoopHooks {
	env, delivered := d.env, d.delivered
	key := journalKey(env.JobID, delivered)
	return LoopHooks{
		GateFunc: w.gate(d, spendCap, own),
		SentFunc: func(a *fixpoint.Attempt) {
			w.journal.sent(key, store.Interruption{JobID: env.JobID, Run: env.RunOrFirst(), Delivery: delivered,
				Attempts: []store.Attempt{ledgerrow.Attempt(a)}})
		},
		AttemptFunc: func(a *fixpoint.Attempt) {
			w.noteAnomaly(d, a)
			in := store.Interruption{JobID: env.JobID, Run: env.RunOrFirst(), Delivery: delivered}
			row := ledgerrow.Attempt(a)
			if unpaidFailure(a) {
				w.journal.ended(key, callOf(store.Interruption{Attempts: []store.Attempt{row}}), in)
				return
			}
			in.Attempts = []store.Attempt{row}
			w.journal.add(key, in)
		},
	}
}

// runLoop runs the job's repair loop from prev. A provider failure the
// transport retries did not get past is waited out (waitOutage) and the
// loop resumed, keeping the message; handedBack reports that the delivery
// was handed back meanwhile.
func (w *Worker) runLoop(ctx context.Context, d *delivery, job *repair.Job, prev *fixpoint.Result, spendCap capEntry) (res *fixpoint.Result, handedBack bool, err error) {
	own := &ownership{w: w, env: d.env, log: d.log, checked: time.Now()} // the state was read above
	hooks := w.loopHooks(d, spendCap, own)
	loop := w.loops[d.env.Provider]
	// A call failing while the job is cancelled or requeued stops its
	// transport retries at the next one instead of sending them all.
	callCtx := llm.WithRetryCheck(ctx, own.check)
	res, err = loop.Resume(callCtx, job, prev, hooks)
	waits := 0 // the waits of this delivery, of either kind
	for holds := 0; errors.Is(err, fixpoint.ErrTransient); {
		// A job no longer this delivery's gets no outage wait: the next
		// call's gate ends it, and its unpaid calls are kept with its
		// other calls as the cancel's or requeue's.
		if own.check(ctx) == nil {
			switch w.waitOutage(ctx, d, own, res, err, &holds) {
			case outageHandedBack:
				return res, true, err
			case outageGiveUp:
				return res, false, err // handed back by conclude
			}
			waits++
			// The calls that failed before the wait got no reply and were
			// not paid for: they are kept as the outage's, not as the
			// job's attempts, so a job valid after an outage reads valid
			// on its second attempt, not its ninth, and its next call
			// takes their number.
			if failed := takeOutageCalls(res, d.recorded); len(failed) > 0 {
				w.saveInterrupted(ctx, d.env, d.delivered, failed, store.InterruptOutage, waits, nil)
			}
		}
		res, err = loop.Resume(callCtx, job, res, hooks)
	}
	return res, false, err
}

// outageOutcome is what waitOutage made of a provider failure.
type outageOutcome int

const (
	outageWaited     outageOutcome = iota // waited: resume the loop
	outageGiveUp                          // no wait: hand the job back with the error
	outageHandedBack                      // the job is handed back already
)

// waitOutage waits out a provider failure the transport retries did not
// get past, keeping the message (the heartbeat reports progress) and
// pausing pulls, so no delivery is spent and no more jobs are taken into
// the outage. holds counts this delivery's outage waits.
func (w *Worker) waitOutage(ctx context.Context, d *delivery, own *ownership, res *fixpoint.Result, err error, holds *int) outageOutcome {
	env := d.env
	hint := serverWait(err)
	var wait time.Duration
	switch {
	case errors.Is(err, fixpoint.ErrProviderAuth):
		// Every job of the provider would fail alike: stop this worker
		// (its command exits non-zero, saying why) and hand the job back
		// for a worker with a good key.
		w.abort(fmt.Errorf("%s refused the API key: fix the key and start the worker again: %w", env.Provider, err))
		w.handBack(ctx, d.msg, env, d.delivered, unrecorded(res, d.recorded), err)
		return outageHandedBack
	case errors.Is(err, fixpoint.ErrModelNotFound):
		// A set-up error of the lane: every job of the model would fail
		// alike. Stop the lane (the others go on), keep the calls, and
		// hold the job without a call, still queued.
		hold := w.lanes.probeNo(env) // a probe's call kept apart from the first
		w.stopLane(ctx, env, laneCause(env, err))
		if u := unrecorded(res, d.recorded); u != nil && len(u.Attempts) > 0 {
			w.saveInterrupted(ctx, env, d.delivered, u.Attempts, store.InterruptHandedBack, hold, w.holds.of(journalKey(env.JobID, d.delivered)))
		}
		w.park(ctx, d)
		return outageHandedBack
	case errors.Is(err, fixpoint.ErrQuotaExhausted):
		// Permanent for the lane until someone raises the limit (or for as
		// long as the lane says): pause pulling, and keep this message to
		// try again after the pause. A nak would count a delivery, and an
		// outage longer than MaxDeliver pauses would burn every job in
		// flight to dead.
		wait = cmp.Or(hint, w.cfg.QuotaPause)
		w.pauseFor(wait)
		w.cfg.Metrics.QuotaExhausted.WithLabelValues(env.Provider).Set(1)
		d.log.WarnContext(ctx, "worker: provider quota exhausted, pausing pulls", slog.String("provider", env.Provider),
			slog.Duration("pause", wait), slog.String("error", err.Error()))
	default:
		// The provider is still failing after the transport retries, or
		// asked for a wait longer than a worker holds a job. For such a
		// wait, or after outageHoldsMax waits, hand the job back after the
		// wait it asked for. Else resume the job after the wait: its paid
		// attempts, if any, stay in its result.
		if *holds >= outageHoldsMax || hint > w.cfg.NakDelayMax || overCap(err) || ctx.Err() != nil || w.stoppingNow() {
			return outageGiveUp // a stop cuts calls off: not an outage
		}
		wait = max(min(w.cfg.NakDelayMin<<*holds, w.cfg.NakDelayMax), hint)
		*holds++
		w.pauseFor(wait)
		d.log.WarnContext(ctx, "worker: provider unavailable, resuming the job after a pause",
			slog.Duration("pause", wait), slog.Bool("paid_attempts", paidAttempts(res)), slog.String("error", err.Error()))
	}
	if !w.holdOwned(ctx, wait, own) {
		w.handBack(ctx, d.msg, env, d.delivered, unrecorded(res, d.recorded), err)
		return outageHandedBack
	}
	return outageWaited
}

// conclude ends the delivery with the loop's outcome: a final result goes
// to the writer, a bad job is rejected, and any other failure hands the
// job back.
func (w *Worker) conclude(ctx context.Context, d *delivery, res *fixpoint.Result, err error) {
	switch {
	case errors.Is(err, fixpoint.ErrBadJob):
		w.dispose(ctx, d.msg, d.env, queue.Disposition{Kind: queue.DispReject, Cause: err})
	case err != nil:
		d.log.WarnContext(ctx, "worker: job will be retried", slog.String("error", err.Error()))
		w.handBack(ctx, d.msg, d.env, d.delivered, unrecorded(res, d.recorded), err)
	default:
		w.cfg.Metrics.QuotaExhausted.WithLabelValues(d.env.Provider).Set(0)
		traceResult(ctx, res)
		w.finishFrom(ctx, d.msg, d.env, res, d.recorded)
	}
}

// controlTTL is how long a batch's cap, or a job's state, is trusted
// before it is read again: a cap set, a cancel or a requeue made while the
// batch runs takes effect within it.
const controlTTL = 2 * time.Second

// ownership tells whether a delivery still owns its job: the ledger's row
// is still queued, in the delivery's run. enqueue cancel ends the job,
// enqueue requeue moves it to a new run, a duplicate delivery may finish
// it: then this delivery makes no further call (it kept calling to its
// last attempt, and sat out its outage waits, its result lost either way).
type ownership struct {
	w       *Worker
	env     *queue.Envelope
	log     *slog.Logger
	mu      sync.Mutex
	checked time.Time // when the job's state was last read
	lost    error     // why the delivery lost the job, once it has
}

// check reads the job's state when the last read is older than
// controlTTL, and returns why the delivery no longer owns the job, or nil.
// A failed read lets the delivery go on: the ledger's outage is the result
// writer's to wait out.
func (o *ownership) check(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lost != nil || time.Since(o.checked) < controlTTL {
		return o.lost
	}
	st, err := o.w.reader.state(ctx, o.env.JobID)
	o.checked = time.Now()
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopping: the delivery ends anyway (a warning per job handed
		// back said otherwise).
	case err != nil:
		o.log.WarnContext(ctx, "worker: read the job's state (the delivery goes on)", slog.String("error", err.Error()))
	case st.known && st.run != o.env.RunOrFirst():
		o.lost = lostJob(fmt.Sprintf("the job was requeued as run %d while this delivery ran", st.run))
	case st.cancelled:
		o.lost = lostJob(store.CancelledReason)
	case st.final:
		o.lost = lostJob("another delivery finished the job first")
	}
	return o.lost
}

// lostJob ends a delivery that no longer owns its job; it is an
// ErrCancelled, and its result loses to the ledger's row.
type lostJob string

func (e lostJob) Error() string { return string(e) }

func (lostJob) Is(target error) bool { return target == fixpoint.ErrCancelled }

// holdOwned is holdFor for a delivery waiting out an outage: it ends
// early, reporting true, once the delivery no longer owns its job (the
// job then ends at its next call's gate instead of sitting out the wait).
func (w *Worker) holdOwned(ctx context.Context, d time.Duration, own *ownership) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 || own.check(ctx) != nil {
			return true
		}
		if !w.holdFor(ctx, min(left, controlTTL)) {
			return false
		}
	}
}

// serverWait is how long the provider asked to wait before the job's next
// call (a retry hint, or the time a quota-exhausted lane refuses calls); 0
// when it named none.
func serverWait(err error) time.Duration {
	var perr *fixpoint.ProviderError
	if errors.As(err, &perr) {
		return perr.RetryAfter
	}
	return 0
}

// overCap reports that the provider asked for a wait longer than the
// client sleeps (llm.LaneConfig.MaxHintWait).
func overCap(err error) bool {
	var perr *fixpoint.ProviderError
	return errors.As(err, &perr) && perr.HintOverCap
}

// prices is the price table the loops use.
func (w *Worker) prices() repair.Prices {
	for _, l := range w.loops {
		return l.cfg.Prices
	}
	return repair.DefaultPrices()
}

func (w *Worker) buildJob(ctx context.Context, env *queue.Envelope) (*repair.Job, error) {
	if len(env.Prompt)+len(env.System) > w.cfg.MaxPromptBytes {
		return nil, fmt.Errorf("%w: prompt is %d bytes, over the limit of %d", fixpoint.ErrBadJob, len(env.Prompt)+len(env.System), w.cfg.MaxPromptBytes)
	}
	if _, ok := w.cfg.Providers[env.Provider]; !ok {
		return nil, fmt.Errorf("%w: provider %q is not configured on this worker", fixpoint.ErrBadJob, env.Provider)
	}
	se, err := w.schema(ctx, env.SchemaHash)
	if err != nil {
		return nil, err
	}
	// Every request carries the schema in its system prompt.
	if n := len(env.Prompt) + len(env.System) + len(se.raw); n > w.cfg.MaxPromptBytes {
		return nil, fmt.Errorf("%w: prompt is %d bytes with the system prompt and the %d-byte schema, over the limit of %d", fixpoint.ErrBadJob, n, len(se.raw), w.cfg.MaxPromptBytes)
	}
	job := &repair.Job{
		ID: env.JobID, Run: env.RunOrFirst(), System: env.System, Prompt: env.Prompt, Schema: se.schema, SchemaRaw: se.raw,
		Model: env.Model, Mode: env.Mode, Temperature: env.Temp, MaxTokens: env.MaxTokens, Limits: env.Limits,
		CacheKey: env.CacheKey, ServiceTier: env.ServiceTier(), Rules: se.rules, Evidence: env.Evidence, Messages: env.Messages,
	}
	if env.Document != "" {
		if job.Document, err = w.documents.get(ctx, env.Document); err != nil {
			return nil, err
		}
	}
	if env.Evidence != "" && env.Evidence != fixpoint.EvidenceOff {
		source := env.Source
		if env.EvidenceSource == fixpoint.EvidenceSourceDocument {
			if env.Document == "" {
				return nil, fmt.Errorf("%w: evidence source document, and the job has no document", fixpoint.ErrBadJob)
			}
			source = job.Document
		}
		job.Source, job.Exempt = evidence.New(source), se.exempt
	}
	return job, nil
}

// schemaEntry is a schema as the worker keeps it, read and compiled once:
// its text, the compiled schema, its rules and the locations it exempts
// from the evidence stage; err for a schema that cannot run.
type schemaEntry struct {
	schema *validate.Schema
	raw    []byte
	rules  *rules.Set
	exempt func(ptr string) bool
	err    error
}

func (w *Worker) schema(ctx context.Context, hash string) (*schemaEntry, error) {
	if e, ok := w.schemas.Load(hash); ok {
		se := e.(*schemaEntry)
		return se, se.err
	}
	// The first caller's context serves all: canceling it must not fail
	// the others (the store bounds the read with its own timeout).
	v, err, _ := w.schemaLoads.Do(hash, func() (any, error) {
		if e, ok := w.schemas.Load(hash); ok {
			return e, nil // stored while this call waited for its turn
		}
		raw, err := w.ledger.Schema(context.WithoutCancel(ctx), hash)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: unknown schema %s", fixpoint.ErrBadJob, hash)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: read schema %s: %w", fixpoint.ErrTransient, hash, err)
		}
		w.schemas.Store(hash, compileSchema(hash, raw))
		e, _ := w.schemas.Load(hash)
		return e, nil
	})
	if err != nil {
		return nil, err
	}
	se := v.(*schemaEntry)
	return se, se.err
}

// compileSchema compiles a schema read from the ledger, with its rules
// and its exempt locations.
func compileSchema(hash string, raw []byte) *schemaEntry {
	se := &schemaEntry{raw: raw}
	var err error
	if se.schema, err = validate.Compile(raw); err != nil {
		se.err = fmt.Errorf("%w: schema %s does not compile: %w", fixpoint.ErrBadJob, hash, err)
		return se
	}
	if se.rules, err = rules.Compile(raw); err != nil {
		se.err = fmt.Errorf("%w: the rules of schema %s do not compile: %w", fixpoint.ErrBadJob, hash, err)
		return se
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err == nil {
		se.exempt = evidence.Exempt(doc)
	}
	return se
}

// heartbeat reports progress while a job runs longer than a third of the
// ack wait, so the server does not hand it to another worker.
func (w *Worker) heartbeat(msg jetstream.Msg) (stop func()) { return w.beats.add(msg) }

// unrecorded is res without its first n attempts, which the ledger has:
// what a job handed back records as interrupted.
// anomalyWarnEvery is how often a worker says that providers reported
// usage that cannot be true: a provider that always does would otherwise
// say so once a call.
const anomalyWarnEvery = time.Minute

// noteAnomaly warns, at most once an anomalyWarnEvery with the count since,
// of attempts whose usage the provider reported as it cannot be: charged
// by estimate, the reported counts kept in the attempt's provider_error
// (which starts "usage anomaly:", or has it after the error of a reply
// that could not be read).
func (w *Worker) noteAnomaly(d *delivery, a *fixpoint.Attempt) {
	if !strings.Contains(a.ProviderError, "usage anomaly:") {
		return
	}
	n := w.anomalies.Add(1)
	if now, last := time.Now().UnixNano(), w.anomalyWarned.Load(); now-last >= int64(anomalyWarnEvery) && w.anomalyWarned.CompareAndSwap(last, now) {
		w.anomalies.Add(-n)
		d.log.Warn("worker: the provider reported usage a call cannot have had: charged by estimate, the reported counts kept in the attempt's provider_error (said once a minute)",
			slog.Int64("attempts", n), slog.String("provider", d.env.Provider), slog.String("model", d.env.Model))
	}
}

// takeOutageCalls removes from res the calls after its first recorded
// attempts that failed without a reply and unpaid since its last reply,
// and returns them. The result's call and transport retry counts drop with
// them.
func takeOutageCalls(res *fixpoint.Result, recorded int) []fixpoint.Attempt {
	if res == nil {
		return nil
	}
	k := len(res.Attempts)
	for k > recorded && unpaidFailure(&res.Attempts[k-1]) {
		k--
	}
	if k == len(res.Attempts) {
		return nil
	}
	out := slices.Clone(res.Attempts[k:])
	res.Attempts = slices.Delete(res.Attempts, k, len(res.Attempts))
	for i := range out {
		res.Calls--
		res.TransportRetries -= len(out[i].Retries)
	}
	return out
}

// unpaidFailure reports whether a was a call that got no reply and cost
// nothing (a reply over the size cap was billed: its head is kept in Raw).
func unpaidFailure(a *fixpoint.Attempt) bool {
	return a.Class == fixpoint.OutcomeProvider && a.Raw == "" && a.TokensIn+a.TokensOut+a.TokensCached+a.TokensCacheWrite == 0 && a.CostUSD == 0
}

func unrecorded(res *fixpoint.Result, n int) *fixpoint.Result {
	if res == nil || n == 0 {
		return res
	}
	c := *res
	c.Attempts = c.Attempts[min(n, len(c.Attempts)):]
	return &c
}
