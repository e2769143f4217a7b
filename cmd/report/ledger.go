package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/cli"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// openLedger opens the ledger at url. report reads; it does not migrate: a
// ledger behind this version is an error saying so (it failed with
// "relation batch_summary does not exist" or a column missing).
func openLedger(ctx context.Context, url string) (*store.Store, error) {
	st, err := store.Open(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	if applied, known, err := st.SchemaVersion(ctx); err != nil {
		st.Close()
		return nil, err
	} else if applied < known {
		st.Close()
		return nil, fmt.Errorf("the ledger at DATABASE_URL is at migration %d of the %d this report knows: run worker migrate (a worker migrates at start too)", applied, known)
	}
	return st, nil
}

// batchLedger is what needBatch reads. *store.Store satisfies it.
type batchLedger interface {
	Batch(ctx context.Context, name string) (*store.Batch, error)
}

// rowsLedger is what missingRows reads. *store.Store satisfies it.
type rowsLedger interface {
	batchLedger
	BadRows(ctx context.Context, batch string) (int64, error)
}

var _ rowsLedger = (*store.Store)(nil)

// needBatch returns an error naming batch when the ledger has no such batch,
// so that a mistyped name fails instead of printing an empty report.
func needBatch(ctx context.Context, st batchLedger, batch string) error {
	_, err := st.Batch(ctx, batch)
	if errors.Is(err, store.ErrNotFound) {
		if nerr := enqueue.CheckBatchName(batch); nerr != nil {
			// Not a name enqueue would take: a typo (exit 2), not a
			// batch missing from this ledger.
			return usageError{Err: errors.New(strings.TrimPrefix(nerr.Error(), enqueue.ErrBadConfig.Error()+": "))}
		}
		return fmt.Errorf("no batch %q in the ledger", batch)
	}
	return err
}

// missingRows says how batch is short of the rows of its datasets: an
// enqueue that has not finished recording them (killed, or still going),
// and bad rows enqueue left out because --max-bad-rows let them pass.
// Neither shows in the batch's jobs, so its summary and export looked
// complete.
func missingRows(ctx context.Context, st rowsLedger, batch string) ([]string, error) {
	b, err := st.Batch(ctx, batch)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // the jobs of no batch (summary's "" row)
	}
	if err != nil {
		return nil, err
	}
	var notes []string
	if b.Recording != nil {
		notes = append(notes, strings.TrimPrefix(cli.NotFullyEnqueued(batch, b.Recording).Error(), cli.ErrBatchFailed.Error()+": ")+
			": its summary and export hold only the rows recorded so far")
	}
	bad, err := st.BadRows(ctx, batch)
	if err != nil {
		return nil, err
	}
	if bad > 0 {
		notes = append(notes, fmt.Sprintf("batch %s is short of %s its datasets had: enqueue found them bad and left them out (--max-bad-rows let them pass; it listed them with their line numbers)",
			batch, cli.Plural(int(bad), "row")))
	}
	return notes, nil
}
