package wave

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/textclip"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
)

// poll asks the provider about a submitted wave: cancelling it if asked
// to or if its deadline is near, and processing its results once it ended.
// Each is a step of its own (a span each).
func (v *Driver) poll(ctx context.Context, log *slog.Logger, client BatchClient, wave *store.Wave) error {
	if why := v.cancelReason(wave); why != "" && wave.Error != why {
		if err := v.step(ctx, SpanCancel, wave, func(ctx context.Context) error { return v.cancel(ctx, log, client, wave, why) }); err != nil {
			return err
		}
	}
	var ended *llm.BatchStatus
	if err := v.step(ctx, SpanPoll, wave, func(ctx context.Context) error {
		var err error
		ended, err = v.retrieve(ctx, log, client, wave)
		return err
	}); err != nil || ended == nil {
		return err
	}
	return v.step(ctx, SpanCollect, wave, func(ctx context.Context) error { return v.process(ctx, log, client, wave, ended) })
}

// retrieve asks the provider about a submitted wave and records what it
// answered: the provider batch once it has ended and its results are to
// be read, else nil.
func (v *Driver) retrieve(ctx context.Context, log *slog.Logger, client BatchClient, wave *store.Wave) (*llm.BatchStatus, error) {
	st, err := client.RetrieveBatch(ctx, wave.ProviderBatchID)
	gone, since, lerr := v.missing(ctx, wave, err)
	if lerr != nil {
		return nil, lerr
	}
	if gone {
		return nil, v.gone(ctx, log, wave, since, err)
	}
	if err != nil {
		return nil, fmt.Errorf("retrieve: %w", err)
	}
	counts := waveCounts(st.Counts)
	if !st.Ended {
		return nil, v.setWave(ctx, wave, store.WaveUpdate{Counts: &counts, NextPoll: v.backoff(wave)})
	}
	if st.State == llm.BatchFailed {
		// The provider refused the batch as a whole (OpenAI: an input line
		// it could not read, or the organization's enqueued-token limit):
		// nothing ran and nothing was billed, so no attempt is recorded.
		// Its jobs finish realtime.
		why := "the provider failed the batch"
		if st.Err != nil {
			why += ": " + st.Err.Error()
			traceFailure(ctx, st.Err)
		} else {
			traceFailure(ctx, errors.New(why))
		}
		log.ErrorContext(ctx, "worker: provider failed the wave; its jobs run realtime", slog.String("error", why))
		if err := v.toRealtime(ctx, wave, nil); err != nil {
			return nil, err
		}
		return nil, v.setWave(ctx, wave, store.WaveUpdate{Status: store.WaveFailed, Counts: &counts,
			Error: textclip.Bytes(why, 500), NextPoll: time.Second})
	}
	if err := v.setWave(ctx, wave, store.WaveUpdate{Status: store.WaveEnded, Counts: &counts,
		Lease: v.cfg.Lease}); err != nil {
		return nil, err
	}
	wave.Status = store.WaveEnded
	// The provider's counts do not tell expired or cancelled requests
	// from errored ones (OpenAI counts them failed): its results do, and
	// are logged once recorded.
	log.InfoContext(ctx, "worker: wave ended", slog.String("state", string(st.State)), slog.Int("requests", st.Counts.Total))
	v.at("ended", wave.ID)
	return &st, nil
}

// cancelReason is why a submitted wave is to be cancelled: enqueue cancel
// asked for it, or its deadline is near; "" when it is not.
func (v *Driver) cancelReason(wave *store.Wave) string {
	switch {
	case wave.Status == store.WaveCancelling:
		return store.CancelledReason
	case !wave.Deadline.IsZero() && v.clock.Now().Add(v.cfg.DeadlineMargin).After(wave.Deadline):
		return waveDeadlineCancel
	}
	return ""
}

// cancel cancels a submitted wave's provider batch, to be cancelled for
// why and not yet cancelled, and records why as the wave's error.
func (v *Driver) cancel(ctx context.Context, log *slog.Logger, client BatchClient, wave *store.Wave, why string) error {
	_, err := client.CancelBatch(ctx, wave.ProviderBatchID)
	if err != nil {
		// Refused or not found, the call failed, whatever comes of it.
		traceFailure(ctx, err)
	}
	if err != nil && !errors.Is(err, llm.ErrBatchNotFound) {
		var pe *fixpoint.ProviderError
		if !errors.As(err, &pe) || !pe.Permanent() {
			return fmt.Errorf("cancel: %w", err)
		}
		// The provider refuses to cancel a batch that has ended
		// ("Cannot cancel a batch with status 'completed'"): the poll
		// that follows reads it like any ended batch. Returning here
		// retried the cancel at every poll, and its replies were never
		// read.
		log.InfoContext(ctx, "worker: provider batch not cancelled (it may have ended); reading it", slog.String("error", err.Error()))
	}
	log.InfoContext(ctx, "worker: provider batch cancel asked for", slog.String("why", why))
	if err := v.setWave(ctx, wave, store.WaveUpdate{Error: why, Lease: v.cfg.Lease}); err != nil {
		return err
	}
	wave.Error = why
	return nil
}

// gone fails a wave whose provider batch has answered 404 for
// NotFoundGrace (since; err is the last 404): deleted, or of another key
// or organization, its replies cannot be read, and polling it would hold
// every draining worker for ever. Its jobs run realtime.
func (v *Driver) gone(ctx context.Context, log *slog.Logger, wave *store.Wave, since time.Duration, err error) error {
	why := fmt.Sprintf("the provider has not known batch %s for %s (404: deleted, or created under another key or organization); its replies cannot be read, so its jobs run realtime",
		wave.ProviderBatchID, since.Round(time.Second))
	traceFailure(ctx, err)
	log.ErrorContext(ctx, "worker: provider batch not found; its jobs run realtime", slog.String("error", err.Error()),
		slog.Duration("not_found_for", since.Round(time.Second)))
	if err := v.toRealtime(ctx, wave, nil); err != nil {
		return err
	}
	return v.setWave(ctx, wave, store.WaveUpdate{Status: store.WaveFailed, Error: textclip.Bytes(why, 500), NextPoll: time.Second})
}

func waveCounts(c llm.BatchCounts) [4]int {
	return [4]int{c.Succeeded, c.Errored, c.Expired, c.Cancelled}
}

// missing reports whether the wave's provider batch has answered 404 (err
// from RetrieveBatch) for NotFoundGrace, and for how long. The first 404 of
// a run of them is kept in the ledger, so a worker's restart does not
// begin the grace again; an answer clears it.
func (v *Driver) missing(ctx context.Context, wave *store.Wave, err error) (bool, time.Duration, error) {
	if !errors.Is(err, llm.ErrBatchNotFound) {
		if err == nil && !wave.MissingSince.IsZero() {
			wave.MissingSince = time.Time{}
			return false, 0, v.setWave(ctx, wave, store.WaveUpdate{Missing: -1, Lease: v.cfg.Lease})
		}
		return false, 0, nil
	}
	if wave.MissingSince.IsZero() {
		wave.MissingSince = v.clock.Now()
		return false, 0, v.setWave(ctx, wave, store.WaveUpdate{Missing: 1, Lease: v.cfg.Lease})
	}
	since := v.clock.Now().Sub(wave.MissingSince)
	return since >= v.cfg.NotFoundGrace, since, nil
}
