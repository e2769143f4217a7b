package batchaction

import (
	"context"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/store"
)

// The caps as typed: a number sets one, none removes it, empty leaves it;
// a bad value is an error naming what was typed where.
func TestNewCap(t *testing.T) {
	t.Parallel()
	five, ten := 5.0, int64(10)
	cur := store.Cap{MaxCostUSD: &five, MaxTotalTokens: &ten}
	names := CapNames{Cost: "max cost (USD)", Tokens: "max total tokens"}
	for _, c := range []struct {
		cost, tokens, want string
	}{
		{"", "", "$5 and 10 tokens"},
		{"25", "", "$25 and 10 tokens"},
		{"none", "", "10 tokens"},
		{"", "none", "$5"},
		{"none", "none", "none"},
		{"0.5", "2000", "$0.5 and 2000 tokens"},
	} {
		next, err := NewCap(cur, c.cost, c.tokens, names)
		if got := CapText(next); err != nil || got != c.want {
			t.Errorf("NewCap(%q, %q) = %s, %v; want %s", c.cost, c.tokens, got, err, c.want)
		}
	}
	for _, c := range []struct{ cost, tokens, want string }{
		{"NaN", "", `max cost (USD) "NaN": want a number of dollars`},
		{"-1", "", `max cost (USD) "-1"`},
		{"1e10", "", `max cost (USD) "1e10"`},
		{"", "1.5", `max total tokens "1.5": want a non-negative number of tokens, or none`},
	} {
		if _, err := NewCap(cur, c.cost, c.tokens, names); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewCap(%q, %q): %v; want an error with %q", c.cost, c.tokens, err, c.want)
		}
	}
	if *cur.MaxCostUSD != 5 || *cur.MaxTotalTokens != 10 {
		t.Error("NewCap changed the current cap")
	}
}

func TestParseStatuses(t *testing.T) {
	t.Parallel()
	got, err := ParseStatuses("--status", " invalid, over_budget ,")
	if err != nil || JoinStatuses(got) != "invalid,over_budget" {
		t.Errorf("ParseStatuses: %v, %v", got, err)
	}
	for list, want := range map[string]string{"": `--status "" names no status`, "queued": `--status "queued": want final statuses`} {
		if _, err := ParseStatuses("--status", list); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseStatuses(%q): %v; want %q", list, err, want)
		}
	}
}

// A count of one is singular in what the actions print (issue 36,
// finding 7: "requeued 1 jobs"), and every other count plural.
func TestActionCountsAgree(t *testing.T) {
	t.Parallel()
	one, many := int64(1), int64(2000)
	requeued := func(n int, attempts int, published int) string {
		var b strings.Builder
		var rep enqueue.RequeueReport
		rep.Jobs = map[string]int{"invalid": n}
		rep.Run, rep.Published = 2, published
		rep.Settings.Provider, rep.Settings.Model = "openai", "m"
		rep.Settings.Limits.MaxAttempts, rep.Settings.Limits.Strategy = attempts, fixpoint.StrategyConversation
		WriteRequeued(&b, enqueue.RequeueConfig{Batch: "b"}, rep)
		return b.String()
	}
	spend := func(tokens int64) string {
		var b strings.Builder
		WriteSpend(&b, "b", store.Spend{Cap: store.Cap{MaxTotalTokens: &one}, Tokens: tokens, HeldTokens: tokens})
		return b.String()
	}
	for _, c := range []struct{ got, want string }{
		{requeued(1, 1, 1), "batch b: requeued 1 job (1 invalid) as run 2: openai/m, 1 attempt, conversation strategy; 1 published"},
		{requeued(3, 3, 3), "batch b: requeued 3 jobs (3 invalid) as run 2: openai/m, 3 attempts, conversation strategy; 3 published"},
		{spend(1), "batch b: cap 1 token; spent 1 token, $0.000000; 1 token, $0.000000 held by calls in flight"},
		{spend(2), "spent 2 tokens"},
		{CapText(store.Cap{MaxTotalTokens: &many}), "2000 tokens"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	var b strings.Builder
	WriteCancelled(context.Background(), &b, nil, nil, "b", 1)
	if got := b.String(); got != "batch b: cancelled 1 job not yet final\n" {
		t.Errorf("cancel of one job: %q", got)
	}
	b.Reset()
	var rep enqueue.RequeueReport
	rep.Jobs, rep.Published = map[string]int{}, 1
	WriteRequeued(&b, enqueue.RequeueConfig{Batch: "b", Statuses: []fixpoint.Status{"invalid"}}, rep)
	if !strings.Contains(b.String(), "published 1 job an earlier requeue had left unpublished") {
		t.Errorf("requeue publishing one left behind: %q", b.String())
	}
}
