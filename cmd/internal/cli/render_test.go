package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
)

// TestWriteSummaryLegend: every rate column of the summary table is defined
// in one line under it, so REPAIRED% and the others are defined where they
// are printed.
func TestWriteSummaryLegend(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	WriteSummary(&buf, []store.BatchSummary{{Batch: "b1", Jobs: 4, Valid: 2, Invalid: 1, Queued: 1, Finished: 3,
		FirstAttemptValid: 1, Repaired: 1, ValidRate: 2.0 / 3, FirstAttemptValidRate: 1.0 / 3, RepairRate: 0.5, MeanAttempts: 1.5}})
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "BATCH") || !strings.HasPrefix(lines[1], "b1 ") {
		t.Fatalf("table header and row not first:\n%s", buf.String())
	}
	if f := strings.Fields(lines[1]); f[8] != "66.7" || f[9] != "33.3" || f[10] != "50.0" {
		t.Errorf("VALID%% 1ST-TRY%% REPAIRED%% = %v, want 66.7 33.3 50.0", f[8:11])
	}
	legend := lines[2:]
	var rates []string
	for _, h := range strings.Fields(lines[0]) {
		if strings.HasSuffix(h, "%") {
			rates = append(rates, h)
		}
	}
	if len(rates) != 3 {
		t.Errorf("rate columns %v, want VALID%%, 1ST-TRY%%, REPAIRED%%", rates)
	}
	for _, r := range rates {
		n := 0
		for _, l := range legend {
			if strings.HasPrefix(l, r+" ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s is defined in %d legend lines, want 1:\n%s", r, n, buf.String())
		}
	}
	for _, want := range []string{
		"REPAIRED%  valid jobs that needed more than one attempt or a local repair, as a share of valid jobs",
		"as a share of finished jobs",
	} {
		if !strings.Contains(strings.Join(legend, "\n"), want) {
			t.Errorf("legend lacks %q:\n%s", want, buf.String())
		}
	}
	if len(legend) > len(rates)+1 {
		t.Errorf("legend is %d lines, want a blank line and one line per rate column:\n%s", len(legend), buf.String())
	}
}

// The columns of the batch actions appear when a batch has cancelled or
// over-budget jobs or more than one run, and only then.
func TestWriteSummaryActionColumns(t *testing.T) {
	t.Parallel()
	var plain, acted bytes.Buffer
	WriteSummary(&plain, []store.BatchSummary{{Batch: "a", Jobs: 2, Valid: 2, Runs: 1}})
	WriteSummary(&acted, []store.BatchSummary{{Batch: "a", Jobs: 3, Valid: 1, Cancelled: 1, OverBudget: 1, Runs: 2}})
	if strings.Contains(plain.String(), "OVER BUDGET") {
		t.Errorf("action columns without actions:\n%s", plain.String())
	}
	head := strings.SplitN(acted.String(), "\n", 2)[0]
	row := strings.Fields(strings.SplitN(acted.String(), "\n", 3)[1])
	if !strings.Contains(head, "CANCELLED") || !strings.Contains(head, "OVER BUDGET") || len(row) < 11 || row[8] != "1" || row[9] != "1" || row[10] != "2" {
		t.Errorf("action columns missing or wrong:\n%s", acted.String())
	}
}
