package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

func TestBatchVerdict(t *testing.T) {
	t.Parallel()
	recording := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		p       store.Progress
		maxFail float64
		fails   string // "" for no error
		note    string
	}{
		{"all valid", store.Progress{Total: 3, Valid: 3}, 0, "", ""},
		{"within the rate", store.Progress{Total: 4, Valid: 3, Invalid: 1}, 0.25, "", ""},
		{"over the rate", store.Progress{Total: 4, Valid: 2, Invalid: 2}, 0.25, "50% of batch b not valid, limit 25%", ""},
		// The limit keeps its digits: "0.1% not valid, limit 0.1%" read
		// as a pass that failed.
		{"just over a small rate", store.Progress{Total: 1000, Valid: 999, Invalid: 1}, 0.0005, "0.1% of batch b not valid, limit 0.05%", ""},
		{"a third", store.Progress{Total: 3, Valid: 2, Invalid: 1}, 0.25, "33.3333% of batch b not valid", ""},
		// Every job recorded is final, but the enqueue recording the
		// batch never finished: the rest of its dataset is missing.
		{"partly recorded", store.Progress{Total: 1000, Valid: 1000, Recording: &store.Recording{Since: recording}}, 1, "stopped before it had recorded them all", ""},
		{"still being recorded", store.Progress{Total: 1000, Valid: 1000, Recording: &store.Recording{Since: recording, Live: true}}, 1, "an enqueue is recording its rows now", ""},
		{"every job dead, any rate allowed", store.Progress{Total: 50, Dead: 50}, 1, "no job of batch b is valid", "enqueue requeue --batch b --status dead"},
		{"some dead", store.Progress{Total: 4, Valid: 3, Dead: 1}, 1, "", "1 jobs of batch b are dead"},
		{"all cancelled by the operator", store.Progress{Total: 4, Cancelled: 4}, 1, "", ""},
		{"cancelled and invalid", store.Progress{Total: 4, Cancelled: 3, Invalid: 1}, 1, "no job of batch b is valid", ""},
		{"no job at all", store.Progress{}, 1, "batch b holds no job", ""},
	} {
		line, notes, err := BatchVerdict("b", tc.p, tc.maxFail)
		if (tc.fails == "") != (err == nil) || err != nil && (!errors.Is(err, ErrBatchFailed) || !strings.Contains(err.Error(), tc.fails)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.fails)
		}
		if got := strings.Join(notes, "\n"); !strings.Contains(got, tc.note) || tc.note == "" && got != "" {
			t.Errorf("%s: notes %q, want %q", tc.name, got, tc.note)
		}
		wantPrefix := "batch b done:"
		if tc.p.Queued > 0 || tc.p.Recording != nil {
			wantPrefix = "batch b not done:" // queued jobs are no failures
		}
		if !strings.Contains(line, "cancelled ") || !strings.HasPrefix(line, wantPrefix) {
			t.Errorf("%s: line %q does not name every status", tc.name, line)
		}
	}
}
