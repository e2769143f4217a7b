package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// A batch whose attempts had no price shows its COST/VALID marked, with a
// legend line saying the $0 is unknown, and cost_unpriced in --format
// json (issue 36, finding 7: the table showed $0.000000 as if free; the
// note on it was lines below). A batch without such attempts has neither.
func TestSummaryMarksUnpricedCost(t *testing.T) {
	t.Parallel()
	dsn := seed(t) // b1's attempts are on model m, which has no price
	summary := func(batch string, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append([]string{"summary", batch, "--database-url", dsn}, args...), &out, &errOut); code != 0 {
			t.Fatalf("summary %s %v: exit %d, %s", batch, args, code, errOut.String())
		}
		return out.String()
	}
	costValid := func(text string) string {
		t.Helper()
		lines := strings.Split(text, "\n")
		col := strings.Index(lines[0], "COST/VALID")
		if col < 0 || len(lines) < 2 {
			t.Fatalf("no COST/VALID column:\n%s", text)
		}
		return strings.Fields(lines[1][col:])[0]
	}
	text := summary("b1")
	if got := costValid(text); got != "$0.000000*" {
		t.Errorf("b1 COST/VALID %q, want $0.000000* (its attempts had no price):\n%s", got, text)
	}
	legend := false
	for _, l := range strings.Split(text, "\n") {
		legend = legend || strings.HasPrefix(l, "* ") && strings.HasSuffix(l, "the cost counts attempts on a model with no price $0: it is unknown, not free (see \"cost unknown\" below)")
	}
	if !legend {
		t.Errorf("no legend line for the mark:\n%s", text)
	}

	var sum struct {
		Batches []struct {
			Batch        string
			CostUnpriced *bool `json:"cost_unpriced"`
		}
	}
	for batch, want := range map[string]bool{"b1": true, "c1": false} {
		if err := json.Unmarshal([]byte(summary(batch, "--format", "json")), &sum); err != nil || len(sum.Batches) != 1 {
			t.Fatalf("summary %s --format json: %v %+v", batch, err, sum)
		}
		if got := sum.Batches[0].CostUnpriced; got == nil || *got != want {
			t.Errorf("summary %s: cost_unpriced %v, want %v", batch, got, want)
		}
	}
	// c1 has no unpriced attempt (and no valid job): no mark, no legend line.
	if text := summary("c1"); strings.Contains(text, "*") {
		t.Errorf("c1 summary has the unpriced mark:\n%s", text)
	}
}
