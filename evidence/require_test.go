package evidence

import (
	"slices"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

func TestRequire(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 85)
	v := decode(t, `{"vendor": "Globex", "total": 320, "city": "Paris", "lines": [{"note": "<b>\"x\"</b>"}], "long": "`+long+`"}`)
	r := Align("Invoice from Acme, Paris, total 230.", v, nil)
	got := Require(v, r.Leaves)
	want := []fixpoint.ValidationError{
		{Path: "/lines/0/note", Keyword: "evidence", Class: fixpoint.ClassEvidence,
			Message: `/lines/0/note: "<b>\"x\"</b>" does not appear in the source; copy it as written, or leave it out`},
		{Path: "/long", Keyword: "evidence", Class: fixpoint.ClassEvidence,
			Message: `/long: "` + strings.Repeat("é", 80) + `…" does not appear in the source; copy it as written, or leave it out`},
		{Path: "/total", Keyword: "evidence", Class: fixpoint.ClassEvidence,
			Message: `/total: 320 does not appear in the source; copy it as written, or leave it out`},
		{Path: "/vendor", Keyword: "evidence", Class: fixpoint.ClassEvidence,
			Message: `/vendor: "Globex" does not appear in the source; copy it as written, or leave it out`},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Require\n got %+v\nwant %+v", got, want)
	}
}

func TestRequireRoot(t *testing.T) {
	t.Parallel()
	v := decode(t, `"Globex"`)
	got := Require(v, Align("Acme", v, nil).Leaves)
	if len(got) != 1 || got[0].Path != "" || got[0].Message != `(root): "Globex" does not appear in the source; copy it as written, or leave it out` {
		t.Fatalf("got %+v", got)
	}
	if errs := Require(v, Align("from Globex", v, nil).Leaves); errs != nil {
		t.Fatalf("a grounded value gave %+v", errs)
	}
}
