package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
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
		{"some dead", store.Progress{Total: 4, Valid: 3, Dead: 1}, 1, "", "1 job of batch b is dead"},
		{"all cancelled by the operator", store.Progress{Total: 4, Cancelled: 4}, 1, "", ""},
		{"cancelled and invalid", store.Progress{Total: 4, Cancelled: 3, Invalid: 1}, 1, "no job of batch b is valid", ""},
		{"no job at all", store.Progress{}, 1, "batch b holds no job", ""},
	} {
		line, notes, err := BatchVerdict("b", tc.p, nil, tc.maxFail)
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

// A batch the spend cap stopped says so where a cron mail shows it, in the
// error: how many jobs it stopped, the cap and the spend, and how to go
// on (issue 36, finding 6: the error said only "78.25% not valid, limit
// 5%"). Within the rate it is a note.
func TestBatchVerdictNamesTheCap(t *testing.T) {
	t.Parallel()
	usd, tokens := 5.0, int64(90000)
	capped := &store.Spend{Cap: store.Cap{MaxCostUSD: &usd}, CostUSD: 5.000312, Tokens: 81234}
	p := store.Progress{Total: 4000, Valid: 870, Invalid: 0, OverBudget: 3130}
	_, notes, err := BatchVerdict("b", p, capped, 0.05)
	for _, want := range []string{"78.25% of batch b not valid, limit 5%",
		"3130 jobs of batch b ended over_budget: the batch's spend cap stopped them ($5.000312 spent of its $5 cost cap)",
		"To run them: enqueue cap --batch b --max-cost-usd N, a cap above $5, then", "then enqueue requeue --batch b --status over_budget"} {
		if err == nil || !errors.Is(err, ErrBatchFailed) || !strings.Contains(err.Error(), want) {
			t.Errorf("capped batch over the rate: error %v, want it to say %q", err, want)
		}
	}
	if len(notes) != 0 {
		t.Errorf("capped batch over the rate: notes %q, want the cap in the error only", notes)
	}

	// A token cap, and every job stopped before any was valid.
	tokenCapped := &store.Spend{Cap: store.Cap{MaxTotalTokens: &tokens}, Tokens: 90500}
	_, _, err = BatchVerdict("b", store.Progress{Total: 1, OverBudget: 1}, tokenCapped, 1)
	for _, want := range []string{"no job of batch b is valid", "1 job of batch b ended over_budget",
		"90500 tokens spent of its 90000 token cap", "--max-total-tokens T, a cap above 90000 tokens"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("token-capped batch: error %v, want it to say %q", err, want)
		}
	}

	// Within the rate: a note, the same words.
	_, notes, err = BatchVerdict("b", store.Progress{Total: 100, Valid: 98, OverBudget: 2}, capped, 0.05)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "2 jobs of batch b ended over_budget") ||
		!strings.Contains(notes[0], "enqueue requeue --batch b --status over_budget") {
		t.Errorf("capped batch within the rate: %v, notes %q; want a note naming the cap", err, notes)
	}
	// The spend unread: the jobs and the way on, without figures.
	_, notes, _ = BatchVerdict("b", store.Progress{Total: 100, Valid: 98, OverBudget: 2}, nil, 0.05)
	if len(notes) != 1 || !strings.Contains(notes[0], "spend cap stopped them. To run them: enqueue cap --batch b --max-cost-usd N, a cap above what it spent") {
		t.Errorf("spend unread: notes %q", notes)
	}
}

// Counts of one are singular in the batch's line and a job's verdict
// (issue 36, finding 7: "1 jobs", "1 calls").
func TestCountsOfOne(t *testing.T) {
	t.Parallel()
	line, _, _ := BatchVerdict("b", store.Progress{Total: 1, Valid: 1}, nil, 0)
	if !strings.HasPrefix(line, "batch b done: 1 job, 0.0% not valid") {
		t.Errorf("line %q", line)
	}
	res := &fixpoint.Result{Status: fixpoint.StatusValid, Calls: 1, TokensIn: 1, FirstAttemptValid: true,
		Attempts: []fixpoint.Attempt{{No: 1, Valid: true}}}
	if got := Verdict(res); !strings.HasPrefix(got, "VALID on first attempt: 1 call, 1 token,") {
		t.Errorf("verdict %q", got)
	}
	res = &fixpoint.Result{Status: fixpoint.StatusInvalid, Class: "shape", Error: "x", TokensIn: 1, Attempts: []fixpoint.Attempt{{No: 1}}}
	if got := Verdict(res); !strings.HasPrefix(got, "INVALID after 1 attempt (shape): x; 1 token,") {
		t.Errorf("verdict %q", got)
	}
}
