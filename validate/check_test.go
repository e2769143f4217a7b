package validate

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"

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
			got := choose(sch, "", cands, nil)
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
	got := choose(nil, "", nil, cause)
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
			in:   choose(s, "", []extract.Candidate{c}, nil),
			want: `{"valid":false,"value":{"b":"<x>","a":"1"},"class":"shape","errors":[{"path":"/a","keyword":"type","class":"shape","message":"/a: expected integer, got string \"1\""}],"repairs":[{"kind":"trailing_comma","offset":17}],"source":"fence","truncated":false}`,
		},
		{
			name: "valid has empty arrays",
			in:   choose(nil, "", []extract.Candidate{{Value: mustDecode(t, `[1,2]`), Source: fixpoint.SourceRaw}}, nil),
			want: `{"valid":true,"value":[1,2],"class":"","errors":[],"repairs":[],"source":"raw","truncated":false}`,
		},
		{
			name: "nothing extracted",
			in:   choose(s, "", nil, errors.New("no JSON value found")),
			want: `{"valid":false,"value":null,"class":"syntax","errors":[{"path":"","keyword":"syntax","class":"syntax","message":"no JSON value found"}],"repairs":[],"source":"","truncated":false}`,
		},
		{
			name: "truncated",
			in:   choose(nil, "", []extract.Candidate{{Value: mustDecode(t, `{"a":1}`), JSON: []byte(`{"a":1}`), Source: fixpoint.SourceRaw, Truncated: true, Repairs: []fixpoint.Repair{{Kind: "truncated", Offset: 6}}}}, nil),
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

// A repair that dropped or guessed part of the value never makes it valid,
// whatever the coercion mode: "1 500" read as 1 changed the number, "Bob"
// Smith lost the surname, [1, 2, ...] said the list was incomplete. The
// error names what and where; a repair that only changes how the value is
// written stays valid.
func TestCheckRefusesLossyRepairs(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"},"b":{"type":"boolean"},
		"v":{"type":"array","items":{"type":"integer"}},"p":{"type":"number"}},"additionalProperties":false}`)
	lossy := []struct{ reply, kind, snippet string }{
		{`{"n": 1 000}`, extract.KindNumberSplit, `"000}"`},
		{`{"n": 1 500 000, "s": "x"}`, extract.KindNumberSplit, `"500 000, \"s\": \"x\"}"`},
		{`{"b": true false}`, extract.KindExtraText, `"false}"`},
		{`{"s": "Bob" Smith}`, extract.KindExtraText, `"Smith}"`},
		{`{"n": -}`, extract.KindNumberIncomplete, `"-}"`},
		{`{"n": 1e}`, extract.KindNumberIncomplete, `"1e}"`},
		{`{"v": [1 000]}`, extract.KindNumberSplit, `"000]}"`},
		{`{"v": [1, 2, ...]}`, extract.KindEllipsis, `"...]}"`},
		{`{"p": 12.50 USD}`, extract.KindExtraText, `"USD}"`},
		{`{"s": "a", "n": }`, extract.KindMissingValue, `"}"`},
		{`{"v": [1, 2, ..]}`, extract.KindEllipsis, `"..]}"`},
		{`{"v": [1, 2, …]}`, extract.KindEllipsis, `"…]}"`},
		{`{"p": NaN}`, extract.KindNonFinite, `"NaN}"`},
		{`{"v": [1,,2]}`, extract.KindEmptyElement, `",2]}"`},
		{`{"v": [,2]}`, extract.KindEmptyElement, `",2]}"`},
		{`{"s": "say "hi"}`, extract.KindQuoteUnbalanced, `"\"say \"hi\"}"`},
		{`{"s": "key="value"}`, extract.KindQuoteUnbalanced, `"\"key=\"value\"}"`},
		{`{"s": "He said "no", "n": 1}`, extract.KindQuoteUnbalanced, `"\"He said \"no\", \"n\": 1}"`},
		{`{"n": abs(-5)}`, extract.KindFunctionResult, `"abs(-5)}"`},
		{`{"p": round(2.5)}`, extract.KindFunctionResult, `"round(2.5)}"`},
		{`{"s": len("abcd")}`, extract.KindFunctionResult, `"len(\"abcd\")}"`},
	}
	for _, mode := range []fixpoint.CoerceMode{fixpoint.CoerceNone, fixpoint.CoerceSafe, fixpoint.CoerceAll} {
		for _, tc := range lossy {
			got := CheckWith(s, tc.reply, CheckOptions{Coerce: mode})
			var found *fixpoint.ValidationError
			for i := range got.Errors {
				if got.Errors[i].Keyword == "lossy_repair" && found == nil {
					found = &got.Errors[i] // the first says where it went wrong
				}
			}
			if got.Valid || got.Class != fixpoint.ClassSyntax || found == nil {
				t.Errorf("%s %s: valid %v, class %s, errors %v; want a lossy_repair syntax error", mode, tc.reply, got.Valid, got.Class, got.Errors)
				continue
			}
			if !strings.Contains(found.Message, lossyWhat[tc.kind]) || !strings.Contains(found.Message, tc.snippet) {
				t.Errorf("%s %s: message %q; want it to say %q at %s", mode, tc.reply, found.Message, lossyWhat[tc.kind], tc.snippet)
			}
		}
	}
	for _, reply := range []string{
		"```json\n{\"n\": 1, \"s\": 'x',}\n```", // fence, quotes, trailing comma
		`{"n": 1 "s": "x"}`,                     // a comma missing between members
		`{"p": .5, "v": [1, 2]}`,                // .5 is 0.5
		`{"p": 1_000}`,                          // Python's digit separator
		`{"b": True, "s": None}`[:12] + `}`,     // Python literal
		"{\"v\": [1\n2\n3]}",                    // numbers on their own lines
		`{"v": [1 2 3], "p": 1.5}`,              // single digits: not a thousands group
		`{"v": [10 20]}`,                        // nor two
		`{"s": "He said "hi" to me"}`,           // quotes that pair up are text
		`{"s": "The TV is 72""}`,                // an inch mark before the end quote
		`{'s': 'it's fine'}`,                    // an apostrophe
		`{"s": ObjectId("5f1d")}`,               // a data wrapper: the value is its argument
		`{"n": NumberLong("42")}`,
		`callback({"n": 1});`, // JSONP around the whole reply
	} {
		if got := CheckWith(s, reply, CheckOptions{Coerce: fixpoint.CoerceSafe}); !got.Valid {
			t.Errorf("%s: %v; want valid (a lossless repair)", reply, got.Errors)
		}
	}
}

// A NUL in a string or a key is an error at its pointer: the ledger cannot
// store it, and storing a replacement would keep another value than the
// one validated (a pattern checked against "a\u0000b", stored "a\ufffdb").
func TestCheckRefusesNUL(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","properties":{"s":{"type":"string","pattern":"^[\\x00-\\x7f]*$"},"v":{"type":"array"}}}`)
	for _, mode := range []fixpoint.CoerceMode{fixpoint.CoerceNone, fixpoint.CoerceSafe, fixpoint.CoerceAll} {
		got := CheckWith(s, `{"s": "a\u0000b", "v": [{"k\u0000": 1}]}`, CheckOptions{Coerce: mode})
		var paths []string
		for _, e := range got.Errors {
			if e.Keyword == "nul_character" && e.Class == fixpoint.ClassSemantic {
				paths = append(paths, e.Path)
			}
		}
		if got.Valid || !slices.Equal(paths, []string{"/s", "/v/0"}) {
			t.Errorf("%s: valid %v, errors %v; want NUL errors at /s and /v/0", mode, got.Valid, got.Errors)
		}
	}
	if got := Check(s, `{"s": "a\u0001b"}`); !got.Valid {
		t.Errorf("another control character: %v; want valid", got.Errors)
	}
}

// A reply that writes a key twice in one object is never valid, in any
// coercion mode and whatever the schema: a decoder keeps one of the two
// values unseen (here "billing", which the enum allows). The error points
// at the member, so the model is told where.
func TestCheckRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","properties":{"c":{"enum":["bug","billing"]},"items":{"type":"array"}}}`)
	for _, mode := range []fixpoint.CoerceMode{fixpoint.CoerceNone, fixpoint.CoerceSafe, fixpoint.CoerceAll} {
		for reply, at := range map[string]string{
			`{"c": "bug", "c": "billing"}`:                     "/c",
			"```json\n{'items': [{}, {'x': 1, 'x': 1,}]}\n```": "/items/1/x",
			`{"c": "bug", "items": [{"c": 1, "\u0063": 2}]}`:   "/items/0/c",
		} {
			got := CheckWith(s, reply, CheckOptions{Coerce: mode})
			if got.Valid || got.Class != fixpoint.ClassSyntax || len(got.Errors) != 1 || got.Errors[0].Keyword != "duplicate_key" || got.Errors[0].Path != at {
				t.Errorf("%s %s: valid %v, class %s, errors %v; want one duplicate_key syntax error at %s", mode, reply, got.Valid, got.Class, got.Errors, at)
			}
		}
	}
	if got := CheckWith(s, `{"c": "bug", "items": [{"c": 1}, {"c": 2}]}`, CheckOptions{}); !got.Valid {
		t.Errorf("the same key in sibling objects: %v; want valid", got.Errors)
	}
}

// Replies holding two different values that fit the schema are not valid,
// in every coercion mode: the first was stored ("1 500" as 1, an example
// before the answer, a draft before its correction). The same value twice
// (raw and fenced) is one answer.
func TestCheckRefusesAmbiguousReplies(t *testing.T) {
	t.Parallel()
	obj := mustCompile(t, `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}`)
	num := mustCompile(t, `{"type":"integer"}`)
	arr := mustCompile(t, `{"type":"array","items":{"type":"integer"}}`)
	enum := mustCompile(t, `{"type":"object","properties":{"c":{"enum":["bug","billing"]},"p":{"type":"integer"}},"required":["c","p"]}`)
	strs := mustCompile(t, `{"type":"array","items":{"type":"string"}}`)
	for _, mode := range []fixpoint.CoerceMode{fixpoint.CoerceSafe, fixpoint.CoerceAll} {
		// Values that fit only after a local fix count too: each of
		// "1, 2, 3" wrapped alone, a correction whose enum case is fixed.
		for _, tc := range []struct {
			s     *Schema
			reply string
		}{
			{arr, "1, 2, 3"}, {strs, `"a", "b", "c"`},
			{enum, "Draft: {\"c\": \"bug\", \"p\": 2}\nCorrected: {\"c\": \"Billing\", \"p\": 3}"},
			{enum, "Draft: {\"c\": \"Bug\", \"p\": \"2\"}\nCorrected: {\"c\": \"Billing\", \"p\": \"3\"}"},
		} {
			got := CheckWith(tc.s, tc.reply, CheckOptions{Coerce: mode})
			if got.Valid || len(got.Errors) != 1 || got.Errors[0].Keyword != "ambiguous" {
				t.Errorf("%s %q: valid %v (%v), errors %v; want ambiguous", mode, tc.reply, got.Valid, got.Value, got.Errors)
			}
		}
	}
	for _, mode := range []fixpoint.CoerceMode{fixpoint.CoerceNone, fixpoint.CoerceSafe, fixpoint.CoerceAll} {
		for _, tc := range []struct {
			s     *Schema
			reply string
		}{
			{num, "1 500"}, {num, "42\n43"}, {num, "3, 4"}, {num, "```json\n1 500\n```"}, {num, "<answer>1 500</answer>"}, {num, "```\n42\n43\n```"},
			{obj, `{"name":"a","age":1} {"name":"b","age":2}`},
			{obj, "Example input: {\"name\":\"example\",\"age\":0}\nOutput:\n{\"name\":\"Alice\",\"age\":31}"},
			{obj, "{\"name\":\"Draft\",\"age\":1}\nWait, correction:\n{\"name\":\"Alice\",\"age\":31}"},
			{arr, "Step 1: think. Step [2] compute. Answer: [3,4]"},
			// The value after the one that fits does not fit, or is cut off.
			{obj, "For example, the format is {\"name\": \"x\", \"age\": 0}. The answer: {\"name\": \"Alice\", \"age\": \"unknown\"}"},
			{obj, "```json\n{\"name\": \"a\", \"age\": 1}\n```\nWait, that is wrong. Corrected:\n```json\n{\"name\": \"a\", \"age\": \"two\"}\n```"},
			{obj, "Format example: {\"name\": \"x\", \"age\": 0}\n\nAnswer: {\"name\": \"Alice\", \"age\": 3"},
			// The answer after the example cannot be read at all (a
			// fragment extract drops): the example is not the answer.
			{obj, "Example: {\"name\": \"x\", \"age\": 0}\nAnswer: {\"name\": \"Alice\", \"age\": 1 500}"},
			{obj, "Example: {\"name\": \"x\", \"age\": 0}\nFinal answer:\n{name: Alice Smith, age: }"},
			// The labelled answer comes first and does not fit (or cannot
			// be read); an unlabelled value after it fits: it is not what
			// the model set out as its answer.
			{obj, "Answer: {\"name\": \"Alice\", \"age\": \"unknown\"}. Example of the format: {\"name\": \"x\", \"age\": 0}"},
			{obj, "Corrected: {\"name\": \"Alice\", \"age\": 1 500}\nPrevious: {\"name\": \"Alice\", \"age\": 3}"},
			// A bare answer, then a fenced value that fits and says
			// otherwise (a format example): the fence was taken alone.
			{obj, "{\"name\": \"Alice\", \"age\": 31}\n```json\n{\"name\": \"x\", \"age\": 0}\n```"},
		} {
			got := CheckWith(tc.s, tc.reply, CheckOptions{Coerce: mode})
			if got.Valid || len(got.Errors) != 1 || got.Errors[0].Keyword != "ambiguous" || got.Class != fixpoint.ClassSyntax {
				t.Errorf("%s %q: valid %v, errors %v; want one ambiguous syntax error", mode, tc.reply, got.Valid, got.Errors)
			}
		}
		for _, reply := range []string{
			"{\"name\":\"a\",\"age\":1}\n```json\n{\"name\": \"a\", \"age\": 1}\n```",
			"Input was {\"text\": \"hi\"}. Answer: {\"name\":\"a\",\"age\":1}",                                       // the other value does not fit
			"{\"name\":\"a\",\"age\":1}\n(input: {\"text\": \"hi\", \"id\": 7})",                                     // nor is it an answer's shape
			"Draft: {\"name\":\"a\",\"age\":\"x\"}\nFixed: {\"name\":\"a\",\"age\":1}",                               // a wrong draft, then its correction
			"Answer: {\"name\":\"a\",\"age\":\"x\"}\nCorrected answer: {\"name\":\"a\",\"age\":1}",                   // a labelled correction of a labelled answer
			"```json\n{\"name\": \"a\", \"age\": 1.0}\n```\nSummary:\n```json\n{\"age\": 1e0, \"name\": \"a\"}\n```", // one value, written two ways
			// Fragments in the explanation after the answer, not set out as
			// answers: a member repeated, a what-if, a schema echo, the
			// input quoted, an earlier answer quoted.
			"{\"name\": \"a\", \"age\": 1}\n\nThe key part is {\"age\": 1}.",
			"{\"name\": \"a\", \"age\": 1}\n\nExplanation: I set {\"age\": 1} because the text says so.",
			"{\"name\": \"a\", \"age\": 1}\n\nNote: if the age were unknown, the output would be {\"name\": \"a\", \"age\": null}.",
			"{\"name\": \"a\", \"age\": 1}\n\nThis matches the schema {\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"integer\"}}.",
			"{\"name\": \"a\", \"age\": 1}\n\n(Previously I wrote {\"name\": \"a\", \"age\": \"1\"}, which had age as a string.)",
			"{\"name\": \"a\", \"age\": 1}\n\nFor reference, the input row was {\"name\": \"a smith\", \"age\": \"1 year\"}.",
			// Reasoning closed by a tag it did not open: its drafts are not answers.
			"Okay, maybe {\"name\": \"b\", \"age\": 2}? No.\n</think>\n\n{\"name\": \"a\", \"age\": 1}",
		} {
			if got := CheckWith(obj, reply, CheckOptions{Coerce: mode}); !got.Valid {
				t.Errorf("%s %q: %v; want valid", mode, reply, got.Errors)
			}
		}
		// A bare answer repeated in a fence, the repeat needing a safe fix
		// ("1" for 1): the same answer (it was ambiguous once the bare
		// value became a candidate).
		if mode != fixpoint.CoerceNone {
			if got := CheckWith(obj, "{\"name\":\"a\",\"age\":1}\n```json\n{\"name\": \"a\", \"age\": \"1\"}\n```", CheckOptions{Coerce: mode}); !got.Valid {
				t.Errorf("%s: a fenced repeat needing a safe fix: %v; want valid", mode, got.Errors)
			}
		}
		// A citation opening the reply before a fenced or tagged array
		// answer is no answer of its own.
		for _, reply := range []string{
			"[1] is the most relevant document, followed by [3].\n\nAnswer:\n```json\n[1, 3]\n```",
			"[2] discusses refunds.\n<answer>[2, 3]</answer>",
		} {
			if got := CheckWith(arr, reply, CheckOptions{Coerce: mode}); !got.Valid {
				t.Errorf("%s %q: %v; want valid", mode, reply, got.Errors)
			}
		}
		// Citations and numbers in the explanation after an array answer.
		for _, reply := range []string{
			"[\"apple\", \"banana\"]\n\nReferences: [1] USDA, [2] FAO",
			"[\"apple\", \"banana\"]\n\nThe RGB of red is [255, 0, 0], at indices [0, 1, 2].",
		} {
			if got := CheckWith(strs, reply, CheckOptions{Coerce: mode}); !got.Valid {
				t.Errorf("%s %q: %v; want valid", mode, reply, got.Errors)
			}
		}
		// A citation after an answer that is itself an array of integers:
		// it fits the schema, but it is not a second answer (a re-ask was
		// paid for it). "maybe [3]" is.
		for _, reply := range []string{
			"The answer is [1, 2] as shown in [3].",
			"[1, 2]\nNote: this follows the rule, see [2].",
			"[1, 2] (source: [4])",
		} {
			if got := CheckWith(arr, reply, CheckOptions{Coerce: mode}); !got.Valid {
				t.Errorf("%s %q: %v; want valid", mode, reply, got.Errors)
			}
		}
		if got := CheckWith(arr, "[1, 2] or maybe [3]", CheckOptions{Coerce: mode}); got.Valid {
			t.Errorf("%s: [1, 2] or maybe [3] is valid; want ambiguous", mode)
		}
		// A number opening a line of words in a fence or tag is not a
		// second value.
		for _, reply := range []string{"<answer>7\n2 issues found: tone and length.</answer>", "```\n7\n\n3 minor typos\n```", "<answer>\n7\n\n1. counted rows\n</answer>"} {
			if got := CheckWith(num, reply, CheckOptions{Coerce: mode}); !got.Valid || !extract.SameValue(got.Value, json.Number("7")) {
				t.Errorf("%s %q: %v %v; want 7, valid", mode, reply, got.Value, got.Errors)
			}
		}
	}
}

// Half a surrogate pair is no character: decoders read it as U+FFFD (so
// "\udc00" and "\udc01" were one key, and "\ud800" was stored as "�" with
// no repair). Such a reply is not valid, and the error says where.
func TestCheckRefusesLoneSurrogates(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","minProperties":1,"additionalProperties":{"type":"string"}}`)
	for reply, at := range map[string]string{
		`{"name":"\ud800"}`:           "/name",
		`{"\udc00":"a","\udc01":"b"}`: "",
		"{'n': 'x\\udc00y'}":          "/n",
	} {
		got := CheckWith(s, reply, CheckOptions{Coerce: fixpoint.CoerceSafe})
		if got.Valid || len(got.Errors) == 0 || got.Errors[0].Keyword != "lone_surrogate" || got.Errors[0].Path != at {
			t.Errorf("%s: valid %v, errors %v; want a lone_surrogate error at %q", reply, got.Valid, got.Errors, at)
		}
	}
	if got := CheckWith(s, `{"e":"\ud83d\ude00"}`, CheckOptions{}); !got.Valid {
		t.Errorf("a whole pair: %v; want valid", got.Errors)
	}
	// worker check's object stays JSON when the reply is not UTF-8.
	out, err := json.Marshal(CheckWith(nil, "{\"n\":\"a\xffb\"}", CheckOptions{}))
	if err != nil || !json.Valid(out) || !utf8.Valid(out) {
		t.Errorf("check object of a reply that is not UTF-8: %s %v; want valid UTF-8 JSON", out, err)
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
		got := CheckWith(mustCompile(t, tc.schema), tc.reply, CheckOptions{Coerce: fixpoint.CoerceNone})
		if got.Valid != tc.valid || !tc.valid && (len(got.Errors) != 1 || got.Errors[0].Keyword != "ambiguous") {
			t.Errorf("case %d %q: valid %v %v, errors %v; want valid %v (else ambiguous)", i, tc.reply, got.Valid, got.Value, got.Errors, tc.valid)
		}
	}
}
