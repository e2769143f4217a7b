package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
)

func TestBatchVerdict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		p       store.Progress
		maxFail float64
		fails   string // "" for no error
		note    string
	}{
		{"all valid", store.Progress{Total: 3, Valid: 3}, 0, "", ""},
		{"within the rate", store.Progress{Total: 4, Valid: 3, Invalid: 1}, 0.25, "", ""},
		{"over the rate", store.Progress{Total: 4, Valid: 2, Invalid: 2}, 0.25, "50.0% of batch b not valid", ""},
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
		if !strings.Contains(line, "cancelled ") || !strings.HasPrefix(line, "batch b done:") {
			t.Errorf("%s: line %q does not name every status", tc.name, line)
		}
	}
}
