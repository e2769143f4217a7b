package wave

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/textclip"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
)

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
			return v.setWave(ctx, wave, store.WaveUpdate{Status: store.WaveSubmitted,
				ProviderBatchID: st.ID, NextPoll: v.cfg.PollMin})
		} else if pending {
			// Created before this worker came? Not known until the
			// batches that could be it end.
			log.InfoContext(ctx, "worker: wave waits for a provider batch of its size to end: it may be the wave's, created but not recorded")
			return v.setWave(ctx, wave, store.WaveUpdate{NextPoll: v.backoff(wave)})
		}
		if wave.Status == store.WaveRecorded && llm.WireOf(wave.Provider) == llm.WireOpenAIChat {
			log.WarnContext(ctx, "worker: uploading a wave again: an earlier upload may have left an unused input file (OpenAI deletes it after 30 days)")
		}
	}
	items, err := v.items(ctx, wave, reqs)
	if err != nil {
		return err
	}
	fileID := wave.InputFileID
	if llm.WireOf(wave.Provider) == llm.WireOpenAIChat && fileID == "" {
		v.at("upload", wave.ID)
		if fileID, err = client.UploadBatchFile(ctx, items); err != nil {
			return v.submitFailed(ctx, log, wave, err)
		}
		v.at("upload_done", wave.ID)
		if err := v.setWave(ctx, wave, store.WaveUpdate{Status: store.WaveUploaded,
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
	if err := v.setWave(ctx, wave, store.WaveUpdate{Status: store.WaveSubmitted,
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
	traceFailure(ctx, err)
	log.ErrorContext(ctx, "worker: provider refused the wave; its jobs run realtime", slog.String("error", err.Error()))
	if err := v.toRealtime(ctx, wave, nil); err != nil {
		return err
	}
	return v.setWave(ctx, wave, store.WaveUpdate{Status: store.WaveFailed,
		Error: textclip.Bytes("submit: "+err.Error(), 500), NextPoll: time.Second})
}

// refusedKey reports a provider's 401: the API key is wrong for every call
// of that provider (a 403 may concern one model or one call only).
func refusedKey(err error) bool {
	var perr *fixpoint.ProviderError
	return errors.As(err, &perr) && perr.Class == fixpoint.ClassAuth && perr.Status == 401
}

// cancelUnsubmitted ends a wave cancelled before it reached the provider.
func (v *Driver) cancelUnsubmitted(ctx context.Context, log *slog.Logger, wave *store.Wave) error {
	// A submit may have been made: the wave was claimed again after its
	// first try, or its input file was uploaded (OpenAI: a create whose
	// answer was lost, or a worker that died after the upload). Its batch
	// may have been created after all, and would run, billed, unread.
	if client := v.clients[wave.Provider]; client != nil && (wave.Polls > 1 || wave.InputFileID != "") {
		st, ok, pending, err := v.reconcile(ctx, client, wave)
		if err == nil && ok {
			return v.setWave(ctx, wave, store.WaveUpdate{ProviderBatchID: st.ID, NextPoll: time.Millisecond})
		}
		if err == nil && pending {
			// It may be running: cancelled once it is found, or known
			// not to exist.
			return v.setWave(ctx, wave, store.WaveUpdate{NextPoll: v.backoff(wave)})
		}
	}
	if err := v.toRealtime(ctx, wave, nil); err != nil {
		return err
	}
	log.InfoContext(ctx, "worker: wave cancelled before it was submitted")
	return v.setWave(ctx, wave, store.WaveUpdate{Status: store.WaveFailed,
		Error: "cancelled before it was submitted", NextPoll: time.Second})
}
