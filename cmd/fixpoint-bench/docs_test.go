package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/sim"
)

// docsBenchStrategies are the strategies the small run covers.
var docsBenchStrategies = []string{"single", "parallel", "sequential", "agent"}

func TestDocsBenchPrintsOneRowAStrategy(t *testing.T) {
	t.Parallel()
	var out, progress bytes.Buffer
	args := []string{"docs", "--docs", "3", "--tokens", "12500", "--concurrency", "2", "--chunk-tokens", "1500",
		"--strategies", strings.Join(docsBenchStrategies, ",")}
	if code := run(context.Background(), args, &out, &progress); code != exitOK {
		t.Fatalf("fixpoint-bench %q: exit %d\n%s\n%s", args, code, out.String(), progress.String())
	}
	text := out.String()
	for _, want := range []string{
		`(?m)^documents: 3 of [0-9]+ tokens and [0-9]+ characters on average \(chunk.Tokens\), languages en,de,fr,ja, written in `,
		`(?m)^simulator: messy preset; model gpt-4o-mini at list prices; evidence check over the document$`,
		`(?m)^concurrency: 2 documents in flight, at most 64 calls in flight; chunks of 1500 tokens, 200 of overlap, up to 3 list passes a chunk$`,
		`(?m)^command: go run ./cmd/fixpoint-bench docs --docs 3 --tokens 12500 --preset messy --strategies ` + strings.Join(docsBenchStrategies, ",") + ` --concurrency 2 --chunk-tokens 1500 `,
		`(?m)^\| strategy \| valid \| scalar recall \| item recall \| duplicate items \| wrong values graded grounded \| calls a document \| tokens in / out a valid document \| cost a valid document \| vs single \| wall \|$`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("output lacks %s:\n%s", want, text)
		}
	}
	n, p := `[0-9][0-9,.]*`, `[0-9.]+%`
	for _, s := range docsBenchStrategies {
		row := `(?m)^\| ` + s + ` \| ` + p + ` \([0-3] of 3\) \| ` + p + ` \([0-9]+ of [0-9]+\) \| ` + p + ` \([0-9]+ of [0-9]+\) \| ` + p +
			` \([0-9]+ of [0-9]+\) \| [0-9]+ of [0-9]+ \| ` + n + ` \| (` + n + ` / ` + n + ` \| \$[0-9.]+|- \| -) \| ([0-9.]+x|-) \| [0-9][0-9.hmµs]*s \|$`
		if !regexp.MustCompile(row).MatchString(text) {
			t.Errorf("no figures row for %s:\n%s\nprogress:\n%s", s, text, progress.String())
		}
	}
	if !strings.Contains(progress.String(), "bench docs: single: 3 documents, 2 in flight, messy preset") {
		t.Errorf("progress on stderr lacks the strategy's start:\n%s", progress.String())
	}
}

func TestDocsBenchJSON(t *testing.T) {
	t.Parallel()
	var out, progress bytes.Buffer
	args := []string{"docs", "--docs", "2", "--tokens", "12500", "--strategies", "single", "--json"}
	if code := run(context.Background(), args, &out, &progress); code != exitOK {
		t.Fatalf("exit %d\n%s", code, progress.String())
	}
	var rep docsReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("--json output is not a report: %v\n%s", err, out.String())
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Strategy != "single" || rep.Rows[0].Docs != 2 {
		t.Fatalf("rows = %+v, want one of single over 2 documents", rep.Rows)
	}
	r := rep.Rows[0]
	// Every valid document plants 7 scalars and 500 items: the recall's
	// denominators come from the truths, not from what the values hold.
	if r.Scalars != 7*r.Valid || r.Items != sim.DocumentItems*r.Valid {
		t.Errorf("scalars %d, items %d over %d valid documents: want 7 and %d each", r.Scalars, r.Items, r.Valid, sim.DocumentItems)
	}
	if r.CostVsSingle != 1 || r.CostPerValid <= 0 {
		t.Errorf("cost per valid %v, vs single %v: want priced, and 1x the single call", r.CostPerValid, r.CostVsSingle)
	}
}

func TestDocsBenchUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"docs", "--help"}, exitOK, "Usage: fixpoint-bench docs [flags]"},
		{[]string{"docs", "--docs", "0"}, exitUsage, "--docs must be at least 1, got 0"},
		{[]string{"docs", "--strategies", "single,patch"}, exitUsage, `--strategies: "patch" is not one of single, parallel, sequential, agent`},
		{[]string{"docs", "--strategies", "single,parallel+merge"}, exitUsage, "--strategies parallel+merge needs --merge-model M"},
		{[]string{"docs", "--strategies", "single", "--merge-model", "gpt-4o"}, exitUsage, "--merge-model is for the parallel strategy"},
		{[]string{"docs", "--strategies", "parallel", "--merge-model", "nobody-1"}, exitUsage, "--merge-model nobody-1 has no list price"},
		{[]string{"docs", "--preset", "nope"}, exitUsage, "--preset:"},
		{[]string{"docs", "--chunk-tokens", "100", "--chunk-overlap", "100"}, exitUsage, "--chunk-overlap 100 must be from 0 to below --chunk-tokens 100"},
		{[]string{"docs", "--model", "sim-bench"}, exitUsage, "--model sim-bench has no list price"},
		{[]string{"docs", "--langs", "en,xx"}, exitUsage, `--langs: "xx" is not one of en, de, fr, ja`},
		{[]string{"docs", "--evidence", "off"}, exitUsage, "--evidence off"},
		{[]string{"docs", "extra"}, exitUsage, "extra"},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &out); code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Errorf("fixpoint-bench %q: exit %d, want %d, output lacking %q:\n%s", tc.args, code, tc.code, tc.want, out.String())
		}
	}
}

// TestScoreValueCountsOnlyTheTruth: a value recalls a field or an item
// only as the document's truth has it; what differs is wrong, and wrong
// and graded grounded is an invented value accepted.
func TestScoreValueCountsOnlyTheTruth(t *testing.T) {
	t.Parallel()
	truth := sim.DocumentTruth{
		Provider: "Acme GmbH", Customer: "Blue Ltd", EffectiveDate: "2026-03-01", GoverningLaw: "the laws of England",
		TerminationNoticeDays: 90, TotalAmount: 12500000, Currency: "EUR",
		Subsidiaries: []sim.Subsidiary{
			{Name: "North Oy", Country: "Finland", OwnershipPercent: 100},
			{Name: "South SA", Country: "Spain", OwnershipPercent: 51.5},
			{Name: "East AB", Country: "Sweden", OwnershipPercent: 75},
		},
	}
	value := `{"provider": "Acme GmbH", "customer": "Blue Ltd", "effective_date": "2026-03-01",
		"governing_law": "the laws of Scotland", "termination_notice_days": 90.0, "total_amount": 12500000,
		"subsidiaries": [
			{"name": "North Oy", "country": "Finland", "ownership_percent": 100},
			{"name": "south  SA", "country": "Portugal", "ownership_percent": 51.5},
			{"name": "NORTH OY", "country": "Finland", "ownership_percent": 100},
			{"name": "West Ltd", "country": "Spain", "ownership_percent": 51.5}
		]}`
	grades := map[string]fixpoint.Grade{
		"/governing_law":          fixpoint.GradeFuzzy, // wrong, and graded grounded
		"/subsidiaries/1/country": fixpoint.GradeNone,  // wrong, caught
		"/subsidiaries/3/name":    fixpoint.GradeNone,  // not listed in the document
	}
	got, err := scoreValue(json.RawMessage(value), truth, grades)
	if err != nil {
		t.Fatal(err)
	}
	want := docScore{
		scalars: 7, scalarsHit: 5, // governing_law wrong, currency missing; 90.0 is 90
		items: 3, itemsHit: 1, // South SA's country is wrong, East AB missing
		listed: 4, duplicates: 1, // NORTH OY repeats North Oy
		wrong: 3, grounded: 1, ungraded: 0,
	}
	if at := got.groundedAt; len(at) != 1 || at[0] != "/governing_law the laws of Scotland (fuzzy)" {
		t.Errorf("wrong values graded grounded at %q, want the governing law", at)
	}
	got.groundedAt = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("score = %+v, want %+v", got, want)
	}
}
