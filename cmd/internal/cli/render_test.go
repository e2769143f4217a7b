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
		FirstAttemptValid: 1, Repaired: 1, ValidRate: 2.0 / 3, FirstAttemptValidRate: 1.0 / 3, RepairRate: 0.5, MeanAttempts: 1.5}}, nil)
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "BATCH") || !strings.HasPrefix(lines[1], "b1 ") {
		t.Fatalf("table header and row not first:\n%s", buf.String())
	}
	// After BATCH, seven counts and the three action columns.
	if f := strings.Fields(lines[1]); f[11] != "66.7" || f[12] != "33.3" || f[13] != "50.0" {
		t.Errorf("VALID%% 1ST-TRY%% REPAIRED%% = %v, want 66.7 33.3 50.0", f[11:14])
	}
	legend := lines[2:]
	var rates []string
	for _, h := range strings.Fields(lines[0]) {
		if strings.HasSuffix(h, "%") || h == "ATTEMPTS" || strings.HasSuffix(h, "/VALID") {
			rates = append(rates, h)
		}
	}
	if len(rates) != 6 {
		t.Errorf("derived columns %v, want VALID%%, 1ST-TRY%%, REPAIRED%%, ATTEMPTS, TOKENS/VALID, COST/VALID", rates)
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
		"valid jobs that needed another answered attempt, another run or a local repair, as a share of valid jobs",
		"as a share of finished jobs",
	} {
		if !strings.Contains(strings.Join(legend, "\n"), want) {
			t.Errorf("legend lacks %q:\n%s", want, buf.String())
		}
	}
	if len(legend) > len(rates)+2 {
		t.Errorf("legend is %d lines, want a blank line, one line per derived column and the one for -:\n%s", len(legend), buf.String())
	}
}

// A figure of no jobs is "-", not 0: a batch that spent money and made
// nothing valid showed COST/VALID $0.000000, as if it were free.
func TestWriteSummaryNothingToDivideBy(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	WriteSummary(&buf, []store.BatchSummary{
		{Batch: "none-valid", Jobs: 20, Invalid: 20, Finished: 20, MeanAttempts: 3, TokensIn: 18000, CostUSD: 0.0029, P50WallMS: 141, P95WallMS: 170, HasWall: true},
		{Batch: "all-queued", Jobs: 5, Queued: 5},
		{Batch: "cancelled-unrun", Jobs: 5, Cancelled: 5, Finished: 5},
	}, nil)
	lines := strings.Split(buf.String(), "\n")
	for i, want := range [][]string{
		{"0.0", "0.0", "-", "3.00", "-", "-", "141", "170"},
		{"-", "-", "-", "-", "-", "-", "-", "-"},
		{"0.0", "0.0", "-", "-", "-", "-", "-", "-"},
	} {
		f := strings.Fields(lines[1+i])
		if got := f[len(f)-8:]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: VALID%%..P95 = %v, want %v:\n%s", f[0], got, want, buf.String())
		}
	}
}

// Every batch has the same columns, the batch actions' too: a script
// reading the summary of one batch reads them all (CANCELLED, OVER BUDGET
// and RUNS came only with a cancel, a cap or a requeue).
func TestWriteSummarySameColumnsForEveryBatch(t *testing.T) {
	t.Parallel()
	var plain, acted bytes.Buffer
	WriteSummary(&plain, []store.BatchSummary{{Batch: "a", Jobs: 2, Valid: 2, Runs: 1}}, nil)
	WriteSummary(&acted, []store.BatchSummary{{Batch: "a", Jobs: 3, Valid: 1, Cancelled: 1, OverBudget: 1, Runs: 2}}, nil)
	head := strings.SplitN(plain.String(), "\n", 2)[0]
	if other := strings.SplitN(acted.String(), "\n", 2)[0]; head != other {
		t.Errorf("headers differ:\n%s\n%s", head, other)
	}
	if !strings.Contains(head, "CANCELLED") || !strings.Contains(head, "OVER BUDGET") || !strings.Contains(head, "RUNS") {
		t.Errorf("action columns missing from a plain batch's header: %s", head)
	}
	for _, tc := range []struct {
		out  string
		want [3]string
	}{{plain.String(), [3]string{"0", "0", "1"}}, {acted.String(), [3]string{"1", "1", "2"}}} {
		row := strings.Fields(strings.SplitN(tc.out, "\n", 3)[1])
		if len(row) < 11 || [3]string{row[8], row[9], row[10]} != tc.want {
			t.Errorf("CANCELLED, OVER BUDGET, RUNS = %v, want %v:\n%s", row, tc.want, tc.out)
		}
	}
}
