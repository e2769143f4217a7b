package web_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
	"github.com/fixpoint-dev/fixpoint/web"
)

// The dashboard's CSV export escapes a cell a spreadsheet would run as a
// formula, as report export does: a ' in front of =, +, -, @, tab, CR.
func TestExportCSVEscapesFormulas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.NewDB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	ids := putJobs(t, st, "formulas", 4, func(i int) string { return `{"i":1}` })
	errs := []string{`=HYPERLINK("http://x","y")`, "+1+1", "@SUM(A1)", "-2+cmd"}
	var rs []store.Result
	for i, id := range ids {
		rs = append(rs, store.Result{JobID: id, Status: fixpoint.StatusInvalid, FinalClass: "syntax", Attempts: 1, Calls: 1,
			Error: errs[i], Value: json.RawMessage(`"=1+1"`)})
	}
	if _, err := st.SaveResults(ctx, rs); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.NewHandler(st, web.Config{}))
	t.Cleanup(srv.Close)
	_, body := get(t, srv, "/batches/formulas/jobs.csv")
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) != 5 {
		t.Fatalf("%d rows (%v):\n%s", len(rows), err, body)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	got := map[string]bool{}
	for _, r := range rows[1:] {
		got[r[col["error"]]] = true
		for _, cell := range r {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("row %s: cell %q would run as a formula", r[0], cell)
			}
		}
	}
	for _, e := range errs {
		if !got["'"+e] {
			t.Errorf("error %q is not exported as '%s: %v", e, e, got)
		}
	}
}
