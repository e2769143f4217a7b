package wave

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint/internal/textclip"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Run polls the open waves until ctx ends: it claims one that is due,
// moves it on, and claims the next.
func (v *Driver) Run(ctx context.Context) {
	var strayChecked time.Time
	for ctx.Err() == nil {
		if v.driveDue(ctx) {
			continue
		}
		if now := v.clock.Now(); now.Sub(strayChecked) >= strayWaveEvery {
			strayChecked = now
			v.warnStray(ctx)
		}
		select {
		case <-ctx.Done():
		case <-v.clock.After(v.cfg.Idle):
		}
	}
}

// driveDue claims one wave that is due and moves it one step on; false
// when none was due (or the ledger could not be asked).
func (v *Driver) driveDue(ctx context.Context) bool {
	wave, err := v.ledger.ClaimWave(ctx, v.cfg.Owner, v.cfg.Lease, v.homeList())
	if err != nil && ctx.Err() == nil {
		v.log.WarnContext(ctx, "worker: claim a wave", slog.String("error", err.Error()))
	}
	if wave == nil {
		return false
	}
	if !v.take(wave.ID) {
		// Another goroutine of this worker still acts on it (its lease
		// lapsed on a loaded machine): its step goes on, and the claim
		// only renewed the lease.
		return true
	}
	v.drive(ctx, wave, nil)
	return true
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
		err = v.step(ctx, SpanCancel, wave, func(ctx context.Context) error { return v.cancelUnsubmitted(ctx, log, wave) })
	case wave.Status == store.WaveEnded:
		err = v.step(ctx, SpanCollect, wave, func(ctx context.Context) error { return v.process(ctx, log, client, wave, nil) })
	case wave.ProviderBatchID == "":
		err = v.step(ctx, SpanSubmit, wave, func(ctx context.Context) error { return v.submit(ctx, log, client, wave, reqs) })
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
		every := max(v.cfg.Lease/3, time.Millisecond)
		for {
			select {
			case <-done:
				return
			case <-v.clock.After(every):
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
