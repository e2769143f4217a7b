package validate

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
)

// cand builds a candidate from JSON text.
func cand(t *testing.T, text string, truncated bool) extract.Candidate {
	t.Helper()
	return extract.Candidate{Value: mustDecode(t, text), JSON: []byte(text), Source: fixpoint.SourceScan, Truncated: truncated}
}

func TestChoose(t *testing.T) {
	t.Parallel()
	// Valid: {"n": 1..3}. {"n":"x"} has 1 error; {"n":"x","extra":1} has 2.
	const schema = `{"type":"object","required":["n"],"properties":{"n":{"type":"integer","maximum":3}},"additionalProperties":false}`
	type c struct {
		text      string
		truncated bool
		fenced    bool // in a fence: set out as an answer
	}
	tests := []struct {
		name       string
		nilSchema  bool
		cands      []c
		wantIndex  int
		wantValid  bool
		wantClass  fixpoint.Class
		wantErrors int
	}{
		{name: "first valid", cands: []c{{`{"n":"x"}`, false, false}, {`{"n":2}`, false, false}, {`{"n": 2}`, false, false}}, wantIndex: 1, wantValid: true, wantClass: fixpoint.ClassNone},
		// Two values that fit, and differ: which one was meant is not
		// for the checker to guess (it took the first).
		{name: "two valid values: ambiguous", cands: []c{{`{"n":"x"}`, false, false}, {`{"n":2}`, false, false}, {`{"n":1}`, false, false}}, wantIndex: 1, wantValid: false, wantClass: fixpoint.ClassSyntax, wantErrors: 1},
		{name: "valid after fewer-error invalid", cands: []c{{`{"n":9}`, false, false}, {`{"n":3}`, false, false}}, wantIndex: 1, wantValid: true, wantClass: fixpoint.ClassNone},
		{name: "fewest errors", cands: []c{{`{"n":"x","extra":1}`, false, false}, {`{"n":9}`, false, false}, {`{}`, false, false}}, wantIndex: 1, wantValid: false, wantClass: fixpoint.ClassSemantic, wantErrors: 1},
		{name: "earliest on ties", cands: []c{{`{"n":"x","extra":1}`, false, false}, {`{"n":"y"}`, false, false}, {`{"n":9}`, false, false}}, wantIndex: 1, wantValid: false, wantClass: fixpoint.ClassShape, wantErrors: 1},
		{name: "truncated never valid", cands: []c{{`{"n":1}`, true, false}}, wantIndex: 0, wantValid: false, wantClass: fixpoint.ClassSyntax, wantErrors: 1},
		{name: "complete valid beats truncated valid", cands: []c{{`{"n":1}`, true, false}, {`{"n":2}`, false, false}}, wantIndex: 1, wantValid: true, wantClass: fixpoint.ClassNone},
		// A value after the valid one, of its shape, that does not fit or
		// was cut off: an example before a wrong answer, or a wrong
		// correction. Which was meant is not for the checker to guess.
		{name: "an invalid later answer of the same shape is ambiguous", cands: []c{{`{"n":2}`, false, false}, {`{"n":9}`, false, true}}, wantIndex: 0, wantValid: false, wantClass: fixpoint.ClassSyntax, wantErrors: 1},
		{name: "a cut-off later answer of the same shape is ambiguous", cands: []c{{`{"n":2}`, false, false}, {`{"n":1}`, true, true}}, wantIndex: 0, wantValid: false, wantClass: fixpoint.ClassSyntax, wantErrors: 1},
		{name: "a later value of another shape is not", cands: []c{{`{"n":2}`, false, false}, {`{"text":9}`, false, true}, {`[1]`, false, true}}, wantIndex: 0, wantValid: true, wantClass: fixpoint.ClassNone},
		{name: "a later value not set out as an answer is not", cands: []c{{`{"n":2}`, false, false}, {`{"n":9}`, false, false}}, wantIndex: 0, wantValid: true, wantClass: fixpoint.ClassNone},
		{name: "truncated counts as an error", cands: []c{{`{"n":"x","extra":1}`, false, false}, {`{"n":1}`, true, false}}, wantIndex: 1, wantValid: false, wantClass: fixpoint.ClassSyntax, wantErrors: 1},
		{name: "truncated with schema errors", cands: []c{{`{"n":"x"}`, true, false}}, wantIndex: 0, wantValid: false, wantClass: fixpoint.ClassSyntax, wantErrors: 2},
		{name: "nil schema any value", nilSchema: true, cands: []c{{`"anything"`, false, false}}, wantIndex: 0, wantValid: true, wantClass: fixpoint.ClassNone},
		{name: "nil schema skips truncated", nilSchema: true, cands: []c{{`[1]`, true, false}, {`[2]`, false, false}}, wantIndex: 1, wantValid: true, wantClass: fixpoint.ClassNone},
	}
	s := mustCompile(t, schema)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var cands []extract.Candidate
			for i, x := range tc.cands {
				c := cand(t, x.text, x.truncated)
				c.Start, c.End = 100*i, 100*i+len(x.text) // in reply order, apart
				if x.fenced {
					c.Source = fixpoint.SourceFence
				}
				cands = append(cands, c)
			}
			sch := s
			if tc.nilSchema {
				sch = nil
			}
			got := choose(&Session{s: sch}, "", cands, nil)
			if got.Candidate != &cands[tc.wantIndex] {
				t.Fatalf("chose %+v, want candidate %d", got.Candidate, tc.wantIndex)
			}
			if got.Valid != tc.wantValid || got.Class != tc.wantClass || len(got.Errors) != tc.wantErrors {
				t.Fatalf("valid, class, errors = %v, %q, %v; want %v, %q, %d errors", got.Valid, got.Class, got.Errors, tc.wantValid, tc.wantClass, tc.wantErrors)
			}
			if got.Candidates != len(cands) || got.Truncated != cands[tc.wantIndex].Truncated || got.Source != fixpoint.SourceScan {
				t.Fatalf("candidates, truncated, source = %d, %v, %q", got.Candidates, got.Truncated, got.Source)
			}
			if got.Truncated && (got.Errors[0].Keyword != "truncated" || got.Errors[0].Class != fixpoint.ClassSyntax || got.Errors[0].Path != "") {
				t.Fatalf("truncated: first error %+v, want keyword truncated, class syntax, root path", got.Errors[0])
			}
		})
	}
}

func TestChooseNothingExtracted(t *testing.T) {
	t.Parallel()
	cause := errors.New("no JSON value found: the reply is a refusal")
	got := choose(&Session{}, "", nil, cause)
	want := []fixpoint.ValidationError{{Path: "", Keyword: "syntax", Class: fixpoint.ClassSyntax, Message: cause.Error()}}
	if got.Valid || got.Class != fixpoint.ClassSyntax || !slices.Equal(got.Errors, want) || got.Value != nil || got.Candidate != nil || got.Source != "" {
		t.Fatalf("got %+v, want invalid syntax result with %v", got, want)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}`)
	tests := []struct {
		name       string
		reply      string
		wantValid  bool
		wantClass  fixpoint.Class
		wantSource fixpoint.Source
		wantValue  string
	}{
		{name: "bare valid", reply: `{"name":"Ada"}`, wantValid: true, wantSource: fixpoint.SourceRaw, wantValue: `{"name":"Ada"}`},
		{name: "bare invalid", reply: ` {"name": 7} `, wantValid: false, wantClass: fixpoint.ClassShape, wantSource: fixpoint.SourceRaw, wantValue: `{"name":7}`},
		{name: "fenced", reply: "Sure:\n```json\n{\"name\": \"Ada\"}\n```\n", wantValid: true, wantSource: fixpoint.SourceFence, wantValue: `{"name":"Ada"}`},
		{name: "empty reply", reply: "", wantValid: false, wantClass: fixpoint.ClassSyntax, wantSource: "", wantValue: `null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Check(s, tc.reply)
			if got.Valid != tc.wantValid || got.Class != tc.wantClass || got.Source != tc.wantSource {
				t.Fatalf("valid, class, source = %v, %q, %q; want %v, %q, %q (%v)", got.Valid, got.Class, got.Source, tc.wantValid, tc.wantClass, tc.wantSource, got.Errors)
			}
			if v := marshalValue(t, got.Value); v != tc.wantValue {
				t.Fatalf("value = %s, want %s", v, tc.wantValue)
			}
			if tc.wantSource == "" {
				_, err := extract.Extract(tc.reply)
				if err == nil || len(got.Errors) != 1 || got.Errors[0].Message != err.Error() || got.Errors[0].Keyword != "syntax" {
					t.Fatalf("errors = %v, want the one extract error %v", got.Errors, err)
				}
			}
		})
	}
}

func marshalValue(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCheckRequiredPath: a missing property is reported at its own pointer in
// the JSON the ledger and `worker check` store, so error_paths counts each
// forgotten field apart.
func TestCheckRequiredPath(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","required":["customer"],"properties":{"customer":{"type":"object","required":["email","name"]}}}`)
	for _, tc := range []struct {
		name, reply, want string
	}{
		{"root", `{}`, `[{"path":"/customer","keyword":"required","class":"shape","message":"/customer: missing required property \"customer\""}]`},
		{"nested", `{"customer":{"name":"Ada"}}`, `[{"path":"/customer/email","keyword":"required","class":"shape","message":"/customer/email: missing required property \"email\""}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(Check(s, tc.reply).Errors)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("errors = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCheckResultMarshalJSON(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"properties":{"a":{"type":"integer"}}}`)
	c := extract.Candidate{
		Value:   mustDecode(t, `{"b":"<x>","a":"1"}`),
		JSON:    []byte(`{"b":"<x>","a":"1"}`),
		Source:  fixpoint.SourceFence,
		Repairs: []fixpoint.Repair{{Kind: "trailing_comma", Offset: 17}},
	}
	tests := []struct {
		name string
		in   CheckResult
		want string
	}{
		{
			name: "invalid keeps key order and does not escape HTML",
			in:   choose(&Session{s: s}, "", []extract.Candidate{c}, nil),
			want: `{"valid":false,"value":{"b":"<x>","a":"1"},"class":"shape","errors":[{"path":"/a","keyword":"type","class":"shape","message":"/a: expected integer, got string \"1\""}],"repairs":[{"kind":"trailing_comma","offset":17}],"source":"fence","truncated":false}`,
		},
		{
			name: "valid has empty arrays",
			in:   choose(&Session{}, "", []extract.Candidate{{Value: mustDecode(t, `[1,2]`), Source: fixpoint.SourceRaw}}, nil),
			want: `{"valid":true,"value":[1,2],"class":"","errors":[],"repairs":[],"source":"raw","truncated":false}`,
		},
		{
			name: "nothing extracted",
			in:   choose(&Session{s: s}, "", nil, errors.New("no JSON value found")),
			want: `{"valid":false,"value":null,"class":"syntax","errors":[{"path":"","keyword":"syntax","class":"syntax","message":"no JSON value found"}],"repairs":[],"source":"","truncated":false}`,
		},
		{
			name: "truncated",
			in:   choose(&Session{}, "", []extract.Candidate{{Value: mustDecode(t, `{"a":1}`), JSON: []byte(`{"a":1}`), Source: fixpoint.SourceRaw, Truncated: true, Repairs: []fixpoint.Repair{{Kind: "truncated", Offset: 6}}}}, nil),
			want: `{"valid":false,"value":{"a":1},"class":"syntax","errors":[{"path":"","keyword":"truncated","class":"syntax","message":"` + truncatedMessage + `"}],"repairs":[{"kind":"truncated","offset":6}],"source":"raw","truncated":true}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := tc.in.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", b, tc.want)
			}
			// Through json.Marshal the same object comes out (HTML escaped).
			var viaMarshal, direct any
			b2, err := json.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b2, &viaMarshal); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &direct); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(viaMarshal, direct) {
				t.Fatalf("json.Marshal: got %s, want %s", b2, b)
			}
		})
	}
}

// Words the parser would turn into a member or an element of their own
// are text after a value, not JSON: a key with neither quotes nor a colon
// ({"height": "5" 6", ...} gave a key "6" with the value ""), a bare word
// after an array element with no comma (["a", "Bob" Smith] gave "Bob" and
// "Smith"). Quoted elements or keys with a comma or colon missing are still
// read.
func TestCheckRefusesInventedMembers(t *testing.T) {
	t.Parallel()
	for _, reply := range []string{
		`{"height": "5" 6", "name": "Bob"}`,
		`{"name":"a","tags":["a", "Bob" Smith]}`,
		`{"tags": [true love, null]}`,
		`{"a":1, b 2}`,
	} {
		got := CheckWith(nil, reply, CheckOptions{})
		if got.Valid || len(got.Errors) == 0 || got.Errors[0].Keyword != "lossy_repair" || !strings.Contains(got.Errors[0].Message, lossyWhat[extract.KindExtraText]) {
			t.Errorf("%s: valid %v, errors %v; want a lossy_repair for text after a value", reply, got.Valid, got.Errors)
		}
	}
	for _, reply := range []string{`{"tags": ["a" "b"]}`, `{"a": 1 b: 2}`, `{"a" 1}`, `[1 2 3]`, `{"status": active}`} {
		if got := CheckWith(nil, reply, CheckOptions{}); !got.Valid {
			t.Errorf("%s: %v; want valid", reply, got.Errors)
		}
	}
}

// Lossy repairs past maxLossyErrors are counted in one error, not listed:
// 200,000 of them made 56 MB of errors and took a minute (each snippet
// scanned the rest of the reply for a line end).
func TestLossyErrorsAreBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("[")
	for i := range 100 {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString("123 456,")
	}
	b.WriteString("1]")
	got := CheckWith(mustCompile(t, `{"type":"array"}`), b.String(), CheckOptions{})
	lossy := 0
	for _, e := range got.Errors {
		if e.Keyword == "lossy_repair" {
			lossy++
		}
	}
	if lossy != maxLossyErrors+1 || !strings.Contains(got.Errors[len(got.Errors)-1].Message, "and 80 more such places") {
		t.Errorf("%d lossy_repair errors, the last %q; want %d listed and one counting the other 80", lossy, got.Errors[len(got.Errors)-1].Message, maxLossyErrors)
	}
}

// Replies a second adversarial pass found (today's label and citation
// rules judged them by a few characters): a labelled answer before an
// example, fenced, in bold or after a fullwidth colon, and a correction
// after "in" are ambiguous; an echo of the input or of the previous reply,
// a restated format, "Incorrect:" and chained or "et al." citations are
// not (each cost a re-ask).
func TestCheckLabelsAndCitations(t *testing.T) {
	t.Parallel()
	// Labels in many words: an answer word, not after a word naming
	// something else nor right before "format".
	sent := `{"type":"object","properties":{"sentiment":{"enum":["positive","negative","neutral"]},"score":{"type":"number","minimum":0,"maximum":1}},"required":["sentiment","score"],"additionalProperties":false}`
	bad, good := `{"sentiment": "positive", "score": 1.4}`, `{"sentiment": "neutral", "score": 0.5}`
	for _, label := range []string{"Here's the JSON:", "So the final answer is:", "Structured output:", "Answer based on the input:",
		"Here is the output in the requested format:", "Answer to question 2.b:", "Final answer for v1.2:", "Answer [final]:"} {
		if got := CheckWith(mustCompile(t, sent), label+" "+bad+"\n\nExample: "+good, CheckOptions{}); got.Valid {
			t.Errorf("%q before a wrong answer, then an example: valid %v; want ambiguous", label, got.Value)
		}
	}
	for _, label := range []string{"Example output:", "Input JSON:", "Your previous response:", "Output format:", "Wrong answer:", "Earlier draft answer:"} {
		if got := CheckWith(mustCompile(t, sent), good+"\n\n"+label+" "+bad, CheckOptions{}); !got.Valid {
			t.Errorf("an answer, then %q and another value: %v; want valid", label, got.Errors)
		}
	}
	ids := mustCompile(t, `{"type":"array","items":{"type":"integer"}}`)
	for reply, valid := range map[string]bool{"The IDs are [4, 7], per [2].": true, "The IDs are [4, 7] (from [2]).": true, "The IDs are [4, 7] [3].": false} {
		if got := CheckWith(ids, reply, CheckOptions{}); got.Valid != valid {
			t.Errorf("%q: valid %v (%v); want %v", reply, got.Valid, got.Errors, valid)
		}
	}
	for i, tc := range []struct {
		schema, reply string
		valid         bool
	}{
		{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "According to [2], the defective batches are the ones listed in [4, 7].", false},
		{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "The matching rows are [2, 5]. Wait, actually I misread row 5; the matching rows are the ones in [2, 9].", false},
		{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "Selected IDs: [12, 15] ([12, 15, 18] if the boundary is inclusive).", false},
		{"{\"type\":\"object\",\"properties\":{\"sentiment\":{\"enum\":[\"positive\",\"negative\",\"neutral\"]},\"score\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},\"required\":[\"sentiment\",\"score\"],\"additionalProperties\":false}", "Answer: {\"sentiment\": \"positive\", \"score\": 1.4}\n\nExample output: {\"sentiment\": \"neutral\", \"score\": 0.5}", false},
		{"{\"type\":\"object\",\"properties\":{\"sentiment\":{\"enum\":[\"positive\",\"negative\",\"neutral\"]},\"score\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},\"required\":[\"sentiment\",\"score\"],\"additionalProperties\":false}", "Answer:\n```json\n{\"sentiment\": \"positive\", \"score\": 1.4}\n```\n\nExample of the expected format:\n```json\n{\"sentiment\": \"neutral\", \"score\": 0.5}\n```", false},
		{"{\"type\":\"object\",\"properties\":{\"sentiment\":{\"enum\":[\"positive\",\"negative\",\"neutral\"]},\"score\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},\"required\":[\"sentiment\",\"score\"],\"additionalProperties\":false}", "**Answer:** {\"sentiment\": \"positive\", \"score\": 1.4}\n\n**Example of the format:** {\"sentiment\": \"neutral\", \"score\": 0.5}", false},
		{"{\"type\":\"object\",\"properties\":{\"sentiment\":{\"enum\":[\"positive\",\"negative\",\"neutral\"]},\"score\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},\"required\":[\"sentiment\",\"score\"],\"additionalProperties\":false}", "答案：{\"sentiment\": \"positive\", \"score\": 1.4}\n\n格式示例：{\"sentiment\": \"neutral\", \"score\": 0.5}", false},
		{"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}", "Input JSON: {\"name\": \"Bob\", \"age\": \"thirty-one\", \"nickname\": \"Bobby\"}\n\nNormalized to the schema (age as an integer, extra fields removed):\n{\"name\": \"Bob\", \"age\": 31}", true},
		{"{\"type\":\"object\",\"properties\":{\"sentiment\":{\"enum\":[\"positive\",\"negative\",\"neutral\"]},\"score\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},\"required\":[\"sentiment\",\"score\"],\"additionalProperties\":false}", "Your previous response:\n{\"sentiment\": \"positive\", \"score\": \"0.9\"}\n\nHere is a version that matches the schema:\n{\"sentiment\": \"positive\", \"score\": 0.9}", true},
		{"{\"type\":\"object\",\"properties\":{\"sentiment\":{\"enum\":[\"positive\",\"negative\",\"neutral\"]},\"score\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},\"required\":[\"sentiment\",\"score\"],\"additionalProperties\":false}", "Incorrect (score out of range): {\"sentiment\": \"negative\", \"score\": 8}\nFixed version below, score scaled to 0-1.\n\n{\"sentiment\": \"negative\", \"score\": 0.8}", true},
		{"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}", "Output format: { \"name\": string, \"age\": integer }\n\nHere it is:\n{\"name\": \"Bob\", \"age\": 31}", true},
		{"{\"type\":\"object\",\"properties\":{\"sentiment\":{\"enum\":[\"positive\",\"negative\",\"neutral\"]},\"score\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},\"required\":[\"sentiment\",\"score\"],\"additionalProperties\":false}", "{\"sentiment\": \"negative\", \"score\": 0.8}\n\nDo not use a label outside the list; this is incorrect: {\"sentiment\": \"bad\", \"score\": 0.8}", true},
		{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "The relevant IDs are [4, 7] (see [2][3]).", true},
		{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "The IDs are [4, 7], as reported by Smith et al. [3].", true},
		{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "缺陷批次为 [4, 7]（见 [2]）。", true},
	} {
		got := CheckWith(mustCompile(t, tc.schema), tc.reply, CheckOptions{})
		if got.Valid != tc.valid || !tc.valid && (len(got.Errors) != 1 || got.Errors[0].Keyword != "ambiguous") {
			t.Errorf("case %d %q: valid %v %v, errors %v; want valid %v (else ambiguous)", i, tc.reply, got.Valid, got.Value, got.Errors, tc.valid)
		}
	}
}

// TestRepairJSONUnchanged: a syntax repair's JSON has no new field.
func TestRepairJSONUnchanged(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(fixpoint.Repair{Kind: "trailing_comma", Offset: 7})
	if err != nil || string(b) != `{"kind":"trailing_comma","offset":7}` {
		t.Fatalf("got %s, %v", b, err)
	}
}
