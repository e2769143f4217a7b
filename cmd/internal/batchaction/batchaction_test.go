package batchaction

import (
	"strings"
	"testing"

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
