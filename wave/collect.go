package wave

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
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
	req       store.WaveRequest
	stopBeat  func()
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
		col.stopTimer = v.clock.AfterFunc(v.cfg.Collect, func() {
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
