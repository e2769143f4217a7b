package evidence

import (
	"github.com/fixpoint-dev/fixpoint"

	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzAlign: no source and value make Align panic, every span lies within
// the source with start <= end, and an exact string's span is the value
// (when the value is UTF-8, as a decoded JSON string is).
func FuzzAlign(f *testing.F) {
	f.Add("Invoice from Acme Corp, 1.249,99 € due 15.01.2027", "ACME corp", "1249.99")
	f.Add("Zoë 🎉 naïve — 東京: Acme|3 450,00|March 3rd, 2027", "2027-03-03", "3450")
	f.Add("2026年12月1日 ｶﾞｽ料金 \u00ad\ufb01 USD18,500", "Jonathan Livingston-Smith", "-1e3")
	f.Add("Contact: Jonathan Livingstone-Smith\x00\xff", "$1,249.99", "0.000")
	f.Fuzz(func(t *testing.T, src, val, num string) {
		v := map[string]any{"s": val, "a": []any{val + " x", strings.ToUpper(val)}}
		if json.Valid([]byte(num)) {
			var n json.Number
			if json.Unmarshal([]byte(num), &n) == nil {
				v["n"] = n
			}
		}
		for _, s := range []*Source{New(src), NewSegments(segmentsOf(src))} {
			r := s.Align(v, nil)
			runes := []rune(s.Text())
			if s.Len() != len(runes) {
				t.Fatalf("Len %d, text has %d code points", s.Len(), len(runes))
			}
			for _, l := range r.Leaves {
				if l.Start < 0 || l.Start > l.End || l.End > len(runes) {
					t.Fatalf("%s: span [%d,%d) outside the source's %d code points", l.Path, l.Start, l.End, len(runes))
				}
				switch l.Grade {
				case fixpoint.GradeExact:
					if l.Path == "/s" && utf8.ValidString(val) && string(runes[l.Start:l.End]) != val {
						t.Fatalf("exact span %q of %q", string(runes[l.Start:l.End]), val)
					}
				case fixpoint.GradeNormalized, fixpoint.GradeFuzzy:
				case fixpoint.GradeNone:
					if l.Start != 0 || l.End != 0 {
						t.Fatalf("%s: none with span [%d,%d)", l.Path, l.Start, l.End)
					}
				default:
					t.Fatalf("%s: grade %q", l.Path, l.Grade)
				}
			}
		}
	})
}

// segmentsOf splits a text at "|" into segments.
func segmentsOf(src string) []Segment {
	var segs []Segment
	for i, part := range strings.Split(src, "|") {
		segs = append(segs, Segment{Name: string(rune('a' + i%26)), Text: part})
	}
	return segs
}
