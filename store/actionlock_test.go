package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// A batch's action lock is held by one action at a time: a second one,
// from another Store (another process), is told which action holds it and
// since when, and gets it once the first releases it; another batch is
// not held up.
func TestLockBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := storetest.NewDB(t)
	open := func() *store.Store {
		s, err := store.Open(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	a, b := open(), open()
	before := time.Now().Add(-time.Second)
	release, err := a.LockBatch(ctx, "b1", "requeue")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.LockBatch(ctx, "b1", "cancel")
	var busy *store.ActionInProgressError
	if !errors.As(err, &busy) || !errors.Is(err, store.ErrActionInProgress) {
		t.Fatalf("second lock of b1: %v; want ActionInProgressError", err)
	}
	if busy.Action != "requeue" || busy.Batch != "b1" || busy.Since.Before(before) || busy.Since.After(time.Now()) {
		t.Errorf("held by %+v; want requeue of b1 since the lock was taken", busy)
	}
	if !strings.Contains(err.Error(), "another requeue of batch b1 is in progress (started at ") {
		t.Errorf("error %q", err)
	}
	other, err := b.LockBatch(ctx, "b2", "requeue")
	if err != nil {
		t.Fatalf("lock of another batch: %v", err)
	}
	other()
	release()
	again, err := b.LockBatch(ctx, "b1", "cancel")
	if err != nil {
		t.Fatalf("lock of b1 once released: %v", err)
	}
	again()
}

// A released batch is free at once: an action right after another (a
// second click, a script) is not told the first is in progress.
func TestLockBatchFreeOnRelease(t *testing.T) {
	t.Parallel()
	s := storetest.NewStore(t)
	ctx := context.Background()
	for i := range 100 {
		release, err := s.LockBatch(ctx, "b", "requeue")
		if err != nil {
			t.Fatalf("lock %d, right after release %d: %v", i+1, i, err)
		}
		release()
	}
}
