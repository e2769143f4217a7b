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
