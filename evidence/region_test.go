package evidence

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
)

// filler is prose of n code points that grounds none of the tests' values.
func filler(n int) string {
	const s = "The parties agree to the terms set out in this section. "
	return strings.Repeat(s, n/len(s)+1)[:n]
}

// cp returns the code point offset of the first occurrence of sub in text
// at or after the code point offset from.
func cp(t *testing.T, text, sub string, from int) int {
	t.Helper()
	b := len(string([]rune(text)[:from]))
	i := strings.Index(text[b:], sub)
	if i < 0 {
		t.Fatalf("%q not in the text after %d", sub, from)
	}
	return utf8.RuneCountInString(text[:b+i])
}

func leafAt(t *testing.T, r Result, path string) fixpoint.Grounding {
	t.Helper()
	for _, l := range r.Leaves {
		if l.Path == path {
			return l
		}
	}
	t.Fatalf("no leaf %s in %+v", path, r.Leaves)
	return fixpoint.Grounding{}
}

// subsidiaries is a long document listing two subsidiaries far apart.
func subsidiaries() string {
	return filler(1500) + "\n\n| Acme GmbH | Germany | 60% |\n\n" + filler(3000) +
		"\n\n| Beta Ltd | France | 25% |\n\n" + filler(1500)
}

func item(name, country string, pct string) map[string]any {
	return map[string]any{"subsidiaries": []any{map[string]any{
		"name": name, "country": country, "ownership_percent": json.Number(pct),
	}}}
}

func TestEvidenceItemFieldFarFromItemIsNone(t *testing.T) {
	src := subsidiaries()
	v := item("Acme GmbH", "Germany", "25")
	r := Align(src, v, nil)
	pct := leafAt(t, r, "/subsidiaries/0/ownership_percent")
	if pct.Grade != fixpoint.GradeNone {
		t.Fatalf("percent written only beside another item: %+v, want none", pct)
	}
	far, name := cp(t, src, "25%", 0), cp(t, src, "Acme GmbH", 0)
	for _, want := range []string{"far from the item's name", `"Acme GmbH"`, itoa(far), itoa(name)} {
		if !strings.Contains(pct.Reason, want) {
			t.Errorf("reason %q does not name %s", pct.Reason, want)
		}
	}
	if g := leafAt(t, r, "/subsidiaries/0/country"); g.Grade != fixpoint.GradeExact {
		t.Errorf("country beside the name: %+v, want exact", g)
	}
	errs := Require(v, r.Leaves)
	if len(errs) != 1 || errs[0].Path != "/subsidiaries/0/ownership_percent" ||
		!strings.Contains(errs[0].Message, "25 is written only at offset "+itoa(far)) {
		t.Fatalf("Require: %+v", errs)
	}
	if r.Summary != (Summary{Exact: 2, None: 1}) {
		t.Errorf("summary %+v", r.Summary)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestEvidenceItemFieldBesideItemIsExact(t *testing.T) {
	src := subsidiaries()
	r := Align(src, item("Acme GmbH", "Germany", "60"), nil)
	at := cp(t, src, "60%", 0)
	want := map[string][2]int{
		"/subsidiaries/0/name":              {cp(t, src, "Acme GmbH", 0), cp(t, src, "Acme GmbH", 0) + 9},
		"/subsidiaries/0/country":           {cp(t, src, "Germany", 0), cp(t, src, "Germany", 0) + 7},
		"/subsidiaries/0/ownership_percent": {at, at + 2},
	}
	for p, w := range want {
		l := leafAt(t, r, p)
		if l.Grade != fixpoint.GradeExact || l.Start != w[0] || l.End != w[1] || l.Reason != "" {
			t.Errorf("%s: %+v, want exact %v", p, l, w)
		}
	}
}

// The leaf's mention nearest the anchor grounds it, not its first; and the
// anchor is placed where the item's fields are, not at its first mention.
func TestEvidenceItemNearestMention(t *testing.T) {
	src := "Acme GmbH is named first here. " + filler(2500) + "\n\n| Beta Ltd | France | 25% |\n\n" +
		filler(2500) + "\n\n| Acme GmbH | France | 25% |\n\n" + filler(500)
	r := Align(src, item("Acme GmbH", "France", "25"), nil)
	table := cp(t, src, "| Acme GmbH", 0) + 2
	if l := leafAt(t, r, "/subsidiaries/0/name"); l.Start != table {
		t.Errorf("name placed at %d, want the table row at %d", l.Start, table)
	}
	pct := cp(t, src, "25%", table)
	if l := leafAt(t, r, "/subsidiaries/0/ownership_percent"); l.Grade != fixpoint.GradeExact || l.Start != pct {
		t.Errorf("percent %+v, want exact at %d", l, pct)
	}
	if l := leafAt(t, r, "/subsidiaries/0/country"); l.Start != cp(t, src, "France", table) {
		t.Errorf("country %+v, want beside the row at %d", l, table)
	}
}

func TestEvidenceItemJapanese(t *testing.T) {
	fill := strings.Repeat("本契約の当事者は本条に定める条件に合意する。", 120)
	src := fill + "\n\n・山田商事株式会社（日本）出資比率60％\n\n" + fill + "\n\n・鈴木工業株式会社（韓国）出資比率２５％\n\n" + fill
	v := map[string]any{"subsidiaries": []any{
		map[string]any{"name": "山田商事株式会社", "country": "日本", "ownership_percent": json.Number("25")},
		map[string]any{"name": "鈴木工業株式会社", "country": "韓国", "ownership_percent": json.Number("25")},
	}}
	r := Align(src, v, nil)
	if l := leafAt(t, r, "/subsidiaries/0/ownership_percent"); l.Grade != fixpoint.GradeNone || !strings.Contains(l.Reason, `"山田商事株式会社"`) {
		t.Errorf("first item's percent, written only beside the second: %+v", l)
	}
	at := cp(t, src, "２５％", 0)
	if l := leafAt(t, r, "/subsidiaries/1/ownership_percent"); l.Grade != fixpoint.GradeNormalized || l.Start != at || l.End != at+2 {
		t.Errorf("second item's percent: %+v, want normalized at %d", l, at)
	}
	if l := leafAt(t, r, "/subsidiaries/0/country"); l.Grade != fixpoint.GradeExact || l.Start != cp(t, src, "日本", 0) {
		t.Errorf("first item's country: %+v", l)
	}
}

// Top-level fields, lists of scalars and short sources are graded leaf by
// leaf, at their first best mention, as before.
func TestEvidenceItemScalarsUnchanged(t *testing.T) {
	src := subsidiaries()
	v := map[string]any{"percent": json.Number("25"), "name": "Acme GmbH", "tags": []any{"France", json.Number("60")}}
	r := Align(src, v, nil)
	for _, l := range r.Leaves {
		if l.Grade != fixpoint.GradeExact || l.Reason != "" {
			t.Errorf("%+v, want exact", l)
		}
	}
	if l := leafAt(t, r, "/percent"); l.Start != cp(t, src, "25%", 0) {
		t.Errorf("percent %+v", l)
	}
	short := "| Acme GmbH | Germany | 60% |\n\n" + filler(300) + "\n\n| Beta Ltd | France | 25% |"
	r = Align(short, item("Acme GmbH", "Germany", "25"), nil)
	if l := leafAt(t, r, "/subsidiaries/0/ownership_percent"); l.Grade != fixpoint.GradeExact || l.Reason != "" {
		t.Errorf("a short source grades leaf by leaf: %+v", l)
	}
	seg := NewSegments([]Segment{{Name: "a", Text: subsidiaries()}}).Align(item("Acme GmbH", "Germany", "25"), nil)
	if l := leafAt(t, seg, "/subsidiaries/0/ownership_percent"); l.Grade != fixpoint.GradeExact {
		t.Errorf("a source of segments grades leaf by leaf: %+v", l)
	}
}

// An exempt field of an item is counted, not graded, and anchors nothing.
func TestEvidenceItemExempt(t *testing.T) {
	src := subsidiaries()
	r := Align(src, item("Acme GmbH", "Germany", "60"), func(p string) bool { return p == "/subsidiaries/0/name" })
	if r.Summary != (Summary{Exact: 2, Exempt: 1}) || len(r.Leaves) != 2 {
		t.Errorf("summary %+v, leaves %+v", r.Summary, r.Leaves)
	}
}

// BenchmarkAlignItems1MB: align 500 list items (name, country, percent),
// written as table rows spread through a 1 MB source, 50 of them with
// another item's percent; the source is indexed once.
func BenchmarkAlignItems1MB(b *testing.B) {
	countries := []string{"Germany", "France", "Japan", "Brazil", "Canada"}
	var src strings.Builder
	list := make([]any, 500)
	for i := range list {
		src.WriteString(benchSource(2000))
		fmt.Fprintf(&src, "\n| Subsidiary %03d Holdings | %s | %d.%d%% |\n", i, countries[i%5], i%100, i%10)
		pct := fmt.Sprintf("%d.%d", i%100, i%10)
		if i%10 == 0 {
			pct = fmt.Sprintf("%d.%d", (i+7)%100, (i+7)%10)
		}
		list[i] = map[string]any{"name": fmt.Sprintf("Subsidiary %03d Holdings", i), "country": countries[i%5], "ownership_percent": json.Number(pct)}
	}
	v := map[string]any{"subsidiaries": list}
	s := New(src.String())
	if r := s.Align(v, nil); r.Summary.None < 50 || testing.Verbose() {
		b.Fatalf("summary %+v", r.Summary)
	}
	b.ResetTimer()
	for b.Loop() {
		s.Align(v, nil)
	}
}

// A field written as is far off and another way beside the item is
// grounded by the mention beside it.
func TestEvidenceItemDateWrittenAnotherWayNearby(t *testing.T) {
	src := "Signed 2027-01-15. " + filler(3000) + "\n\n- Acme GmbH, acquired on 15 January 2027.\n\n" + filler(1000)
	v := map[string]any{"list": []any{map[string]any{"name": "Acme GmbH", "acquired": "2027-01-15"}}}
	r := Align(src, v, nil)
	at := cp(t, src, "15 January 2027", 0)
	if l := leafAt(t, r, "/list/0/acquired"); l.Grade != fixpoint.GradeNormalized || l.Start != at || l.End != at+15 {
		t.Errorf("date: %+v, want normalized at %d", l, at)
	}
}
