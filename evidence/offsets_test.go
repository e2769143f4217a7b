package evidence

import (
	"github.com/fixpoint-dev/fixpoint"

	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestSpansAreCodePoints: spans count code points, as a Python str slice
// does, whatever the bytes: the offsets below are Python's
// len(s[:s.index(...)]) and were not derived from this package.
func TestSpansAreCodePoints(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		src, val   string
		start, end int
	}{
		// Z o ë ␠ 🎉 ␠ n a ï v e ␠ — ␠ 東 京 : ␠ = 18 code points, 31 bytes
		{"emoji and multi-byte before an exact match", "Zoë 🎉 naïve — 東京: Acme", `"Acme"`, 18, 22},
		// C a f e U+0301 ␠ 👩 U+200D 💻 ␠ = 10 code points: a combining
		// accent and a joiner are code points of their own
		{"decomposed accent and a joined emoji before a normalised match", "Cafe\u0301 👩\u200d💻 ＡＣＭＥ Corp", `"acme corp"`, 10, 19},
		// 💶 ␠ = 2; the number's span is the digits, not the symbol
		{"number after an emoji", "💶 €1.249,99", `1249.99`, 3, 11},
		// 日 付 : = 3
		{"date after CJK", "日付：2027年1月15日", `"2027-01-15"`, 3, 13},
		{"fuzzy after an emoji", "🎉🎉 Jonathan Livingstone-Smith", `"Jonathan Livingston-Smith"`, 3, 29},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Align(c.src, decode(t, c.val), nil)
			if len(r.Leaves) != 1 || r.Leaves[0].Start != c.start || r.Leaves[0].End != c.end {
				t.Fatalf("Align(%q, %s) = %+v, want span [%d,%d)", c.src, c.val, r.Leaves, c.start, c.end)
			}
		})
	}
}

// TestSpansAcrossCheckpoints: offsets stay right far into a long text of
// characters of every width (the byte-to-code-point table keeps a mark
// every 256 bytes).
func TestSpansAcrossCheckpoints(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for b.Len() < 10000 {
		b.WriteString("aé東🎉 ")
	}
	prefix := b.String()
	src := prefix + "Globex Ltd paid 1.249,99 on 3 mars 2027"
	want := len([]rune(prefix))
	r := Align(src, decode(t, `{"a":"globex ltd","b":1249.99,"c":"2027-03-03"}`), nil)
	got := []int{}
	for _, l := range r.Leaves {
		got = append(got, l.Start-want, l.End-want)
	}
	if !slices.Equal(got, []int{0, 10, 16, 24, 28, 39}) {
		t.Fatalf("spans past a %d-code-point prefix: %+v (relative %v)", want, r.Leaves, got)
	}
}

// TestInvalidUTF8: a byte that is no UTF-8 counts as one code point, as
// Go's range reads it.
func TestInvalidUTF8(t *testing.T) {
	t.Parallel()
	r := Align("\xff\xfeAcme", decode(t, `"Acme"`), nil)
	if r.Leaves[0].Start != 2 || r.Leaves[0].End != 6 {
		t.Fatalf("got %+v, want [2,6)", r.Leaves)
	}
}

func TestSegments(t *testing.T) {
	t.Parallel()
	s := NewSegments([]Segment{{"vendor", "Acme"}, {"note", "Corp 12"}, {"total", "345 due"}, {"city", "東京"}})
	if s.Text() != "Acme\nCorp 12\n345 due\n東京" || s.Len() != 23 {
		t.Fatalf("Text %q, Len %d", s.Text(), s.Len())
	}
	r := s.Align(decode(t, `{"a":"Acme","b":"Acme Corp","c":"Acme\nCorp","d":12,"e":12345,"f":"12 345","g":"東京","h":"due 東京"}`), nil)
	want := []fixpoint.Grounding{
		{Path: "/a", Grade: fixpoint.GradeExact, Start: 0, End: 4},
		{Path: "/b", Grade: fixpoint.GradeNone, Start: 0, End: 0},
		{Path: "/c", Grade: fixpoint.GradeNone, Start: 0, End: 0},
		{Path: "/d", Grade: fixpoint.GradeExact, Start: 10, End: 12},
		{Path: "/e", Grade: fixpoint.GradeNone, Start: 0, End: 0},
		{Path: "/f", Grade: fixpoint.GradeNone, Start: 0, End: 0},
		{Path: "/g", Grade: fixpoint.GradeExact, Start: 21, End: 23},
		{Path: "/h", Grade: fixpoint.GradeNone, Start: 0, End: 0},
	}
	if !slices.Equal(r.Leaves, want) {
		t.Fatalf("leaves\n got %+v\nwant %+v", r.Leaves, want)
	}
	for _, c := range []struct {
		cp     int
		name   string
		offset int
	}{{0, "vendor", 0}, {2, "vendor", 2}, {5, "note", 0}, {10, "note", 5}, {13, "total", 0}, {21, "city", 0}, {22, "city", 1}} {
		if name, off := s.Segment(c.cp); name != c.name || off != c.offset {
			t.Errorf("Segment(%d) = %q, %d; want %q, %d", c.cp, name, off, c.name, c.offset)
		}
	}
}

func TestSummaryAndSkippedLeaves(t *testing.T) {
	t.Parallel()
	v := decode(t, `{"z":"Acme","a":[true,null,"","  ",{"x~y/z":"ACME"}],"n":7,"m":"Globex","f":"Acme Corporatio"}`)
	r := Align("Acme Corporation, 7 units", v, nil)
	want := []fixpoint.Grounding{
		{Path: "/a/4/x~0y~1z", Grade: fixpoint.GradeNormalized, Start: 0, End: 4},
		{Path: "/f", Grade: fixpoint.GradeFuzzy, Start: 0, End: 16},
		{Path: "/m", Grade: fixpoint.GradeNone, Start: 0, End: 0},
		{Path: "/n", Grade: fixpoint.GradeExact, Start: 18, End: 19},
		{Path: "/z", Grade: fixpoint.GradeExact, Start: 0, End: 4},
	}
	if !slices.Equal(r.Leaves, want) {
		t.Fatalf("leaves\n got %+v\nwant %+v", r.Leaves, want)
	}
	if r.Summary != (Summary{Exact: 2, Normalized: 1, Fuzzy: 1, None: 1}) {
		t.Fatalf("summary %+v", r.Summary)
	}
	out, err := json.Marshal(r.Leaves[1])
	if err != nil || string(out) != `{"path":"/f","grade":"fuzzy","start":0,"end":16}` {
		t.Fatalf("JSON %s, %v", out, err)
	}
}

// TestGoNumbers: a value decoded without UseNumber (float64) or built in
// Go is graded the same.
func TestGoNumbers(t *testing.T) {
	t.Parallel()
	r := Align("Total 1,249.99 for 3 items", map[string]any{"a": 1249.99, "b": 3, "c": int64(3), "d": float32(3)}, nil)
	for _, l := range r.Leaves {
		if l.Grade == fixpoint.GradeNone {
			t.Errorf("%s: none", l.Path)
		}
	}
	if len(r.Leaves) != 4 {
		t.Fatalf("%+v", r.Leaves)
	}
}

// TestValueNotUTF8: a value's byte that is no UTF-8 does not match inside
// a character of the source (found by FuzzAlign: "\xaf" matched the second
// byte of "ï" as exact, with an empty span).
func TestValueNotUTF8(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"\xaf", "\xc3", "a\xaf"} {
		r := Align("ïaï", map[string]any{"v": v}, nil)
		if len(r.Leaves) != 1 || r.Leaves[0].Grade != fixpoint.GradeNone {
			t.Errorf("value %q in \"ïaï\": %+v, want none", v, r.Leaves)
		}
	}
}
