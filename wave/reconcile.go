package wave

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
)

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
		if llm.WireOf(wave.Provider) == llm.WireOpenAIChat {
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
