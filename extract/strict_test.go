package extract

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// strictDocs are valid JSON documents of every shape; the corpus adds its
// group:valid inputs.
var strictDocs = []string{
	`{}`, `[]`, `0`, `-1.5e+10`, `true`, `false`, `null`, `""`, `"a,b"`,
	`{"a":1,"b":2,"c":3}`,
	`[1, 2, 3, 4]`,
	`{"a": [1, {"b": [true, false, null]}, "x,y"], "c": {"d": {}}}`,
	"{\n  \"name\": \"Ada\",\n  \"tags\": [\"x\", \"y\"],\n  \"n\": 36\n}",
	`[{"sku":"ABC-1234","qty":3},{"sku":"DEF-5678","qty":1}]`,
	`{"url": "https://a//b", "c": "/* not a comment */", "d": "# nor this"}`,
	`{"q": "say \"hi\", then go", "e": "\\d+\u00e9\n"}`,
	`{"empty": "", "comma": ",", "colon": ":", "brackets": "[{]}"}`,
	`["a", "b", "c",
	  "d"]`,
	`{"nested": [[[[[]]]]], "n": 12345678901234567890}`,
	`"{\"a\": 1}"`,
	`{"code": "` + "```json\\n{}\\n```" + `"}`,
}

// TestStrictJSONNoRepairs checks that strict JSON comes back as one raw
// candidate, unchanged and with no repairs. A string that itself holds JSON
// text also yields the decoded inner value as a SourceString candidate.
func TestStrictJSONNoRepairs(t *testing.T) {
	t.Parallel()
	docs := slices.Clone(strictDocs)
	for _, c := range loadCorpus(t) {
		if c.group() == "valid" && json.Valid([]byte(c.Input)) {
			docs = append(docs, c.Input)
		}
	}
	if len(docs) < len(strictDocs)+100 {
		t.Fatalf("only %d strict documents", len(docs))
	}
	for _, doc := range docs {
		checkStrict(t, doc)
	}
}

// checkStrict asserts that strict JSON doc comes back as one raw candidate,
// compacted and with no repairs, from Extract and from RepairText.
func checkStrict(t *testing.T, doc string) {
	t.Helper()
	cands, err := Extract(doc)
	if err != nil {
		t.Errorf("Extract(%q): %v", clip(doc, 80), err)
		return
	}
	checkCandidates(t, doc, cands)
	var raw []Candidate
	for _, c := range cands {
		switch c.Source {
		case fixpoint.SourceRaw:
			raw = append(raw, c)
		case fixpoint.SourceString:
			if !strings.HasPrefix(strings.TrimSpace(doc), `"`) {
				t.Errorf("Extract(%q): string candidate from a non-string document", clip(doc, 80))
			}
		default:
			t.Errorf("Extract(%q): candidate with source %s", clip(doc, 80), c.Source)
		}
	}
	if len(raw) != 1 {
		t.Errorf("Extract(%q): %d raw candidates, want 1", clip(doc, 80), len(raw))
		return
	}
	if len(raw[0].Repairs) != 0 || raw[0].Truncated {
		t.Errorf("Extract(%q): repairs %v on strict JSON", clip(doc, 80), raw[0].Repairs)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw[0].JSON, want.Bytes()) {
		t.Errorf("Extract(%q) = %s, want %s", clip(doc, 80), raw[0].JSON, want.Bytes())
	}
	rt, err := RepairText(doc)
	if err != nil || len(rt.Repairs) != 0 || !bytes.Equal(rt.JSON, want.Bytes()) {
		t.Errorf("RepairText(%q) = %s %v, %v; want %s and no repairs", clip(doc, 80), rt.JSON, rt.Repairs, err, want.Bytes())
	}
}
