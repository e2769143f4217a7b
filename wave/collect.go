package wave

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

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
	// requests counts the requests of items: a document job has several.
	requests int
	bytes    int64
	// stopTimer stops the timer that flushes it after Config.Collect.
	stopTimer func() bool
	flushed   bool
}

// collected is a job waiting for its wave to be recorded, its message
// unacked (its heartbeat keeps it).
type collected struct {
	msg       jetstream.Msg
	env       *queue.Envelope
	delivered int
	// reqs are the job's requests: one, or a document job's several.
	reqs     []store.WaveRequest
	stopBeat func()
}

// CanCollect reports whether the job can go into a wave: the worker drives
// waves for its provider, and its deadline leaves time for one.
func (v *Driver) CanCollect(env *queue.Envelope) bool {
	if v == nil || v.clients[env.Provider] == nil {
		return false
	}
	d := env.DeadlineTime()
	return d.IsZero() || v.clock.Now().Add(v.cfg.DeadlineMargin).Before(d)
}

// Collect starts the job's repair step, or its document Machine, and adds
// its first requests (a parallel job's chunk calls, together) to the wave
// being filled for its batch and model. The message stays unacked (its
// heartbeat runs) until the wave is recorded.
func (v *Driver) Collect(ctx context.Context, msg jetstream.Msg, env *queue.Envelope, job *repair.Job, delivered int) {
	asks, final, err := firstAsks(job, v.w.StepConfig(env.Provider, fixpoint.PriceBasisBatch), v.clock.Now())
	switch {
	case errors.Is(err, fixpoint.ErrTransient):
		v.w.HandBack(ctx, msg, env, delivered, err)
		return
	case err != nil:
		v.w.Dispose(ctx, msg, env, queue.Disposition{Kind: queue.DispReject, Cause: err})
		return
	case final != nil:
		// Final before any call (a token budget too small for one).
		v.w.Finish(ctx, msg, env, final)
		return
	}
	envJSON, err := queue.EncodeEnvelope(env)
	if err != nil {
		v.w.Dispose(ctx, msg, env, queue.Disposition{Kind: queue.DispReject, Cause: err})
		return
	}
	client := v.clients[env.Provider]
	c := collected{msg: msg, env: env, delivered: delivered}
	var size int64
	for _, a := range asks {
		r, n, err := waveRequest(client, env, a, envJSON)
		if err != nil {
			v.w.Dispose(ctx, msg, env, queue.Disposition{Kind: queue.DispReject, Cause: err})
			return
		}
		r.Delivered = delivered
		c.reqs = append(c.reqs, r)
		size += n
	}
	c.stopBeat = v.w.Heartbeat(msg)
	key := waveKey{batch: env.Batch, run: env.RunOrFirst(), provider: env.Provider, model: env.Model}
	maxReq, maxBytes := client.BatchLimits()
	maxReq = min(maxReq, v.cfg.MaxRequests)

	v.mu.Lock()
	col := v.pending[key]
	// A job's requests go into one wave: a wave they would overflow goes
	// first (one job's alone may pass MaxRequests).
	if col != nil && (col.requests+len(c.reqs) > maxReq || col.bytes+size > maxBytes) {
		v.flushLocked(ctx, col)
		col = nil
	}
	if col == nil {
		col = &collecting{key: key, deadline: env.DeadlineTime()}
		v.pending[key] = col
		col.stopTimer = v.clock.AfterFunc(v.cfg.Collect, func() {
			v.mu.Lock()
			defer v.mu.Unlock()
			v.flushLocked(ctx, col)
		})
	}
	col.items = append(col.items, c)
	col.bytes += size
	col.requests += len(c.reqs)
	if col.requests >= maxReq {
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
	col.stopTimer()
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
	var reqs []store.WaveRequest
	for _, c := range col.items {
		reqs = append(reqs, c.reqs...)
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
