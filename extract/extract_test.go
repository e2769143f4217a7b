package extract

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

type extractCase struct {
	name      string
	reply     string
	want      string          // compact JSON of the first candidate
	source    fixpoint.Source // source of the first candidate
	kinds     []string        // repair kinds the first candidate must record
	truncated bool
	count     int // number of candidates, when not 0
	wantErr   string
}

// extractCases covers every source, every repair kind, the skip rules and
// the refusals. The fuzz targets are seeded from it.
var extractCases = []extractCase{
	// Sources.
	{name: "raw object", reply: ` {"a": 1} `, want: `{"a":1}`, source: fixpoint.SourceRaw},
	{name: "raw array", reply: `[1, 2.50, "x"]`, want: `[1,2.50,"x"]`, source: fixpoint.SourceRaw},
	{name: "raw string", reply: `"hi"`, want: `"hi"`, source: fixpoint.SourceRaw},
	{name: "raw number", reply: `42`, want: `42`, source: fixpoint.SourceRaw},
	{name: "fence json", reply: "Here:\n```json\n{\"a\": 1}\n```\nDone.", want: `{"a":1}`, source: fixpoint.SourceFence},
	{name: "fence bare", reply: "```\n[1]\n```", want: `[1]`, source: fixpoint.SourceFence},
	{name: "fence tilde", reply: "~~~\n{\"a\": true}\n~~~", want: `{"a":true}`, source: fixpoint.SourceFence},
	{name: "fence other tag and case", reply: "Result:\n```JSON5\n{a: 1}\n```", want: `{"a":1}`, source: fixpoint.SourceFence, kinds: []string{KindUnquotedKey}},
	{name: "fence inline on one line", reply: "output: ```json {'a': 'b'} ```", want: `{"a":"b"}`, source: fixpoint.SourceFence, kinds: []string{KindSingleQuotes}},
	{name: "fence holding backticks in a string", reply: "```json\n{\"foo\": \"```bar```\"}\n```", want: "{\"foo\":\"```bar```\"}", source: fixpoint.SourceFence},
	{name: "tag json", reply: `<json>{"a": 1}</json>`, want: `{"a":1}`, source: fixpoint.SourceTag},
	{name: "tag output", reply: "Sure.\n<output>\n[1, 2]\n</output>", want: `[1,2]`, source: fixpoint.SourceTag},
	{name: "tag answer", reply: `<Answer>{"ok": true}</Answer> hope that helps`, want: `{"ok":true}`, source: fixpoint.SourceTag},
	{name: "inline code", reply: "Use `{\"a\": 1}` as the body.", want: `{"a":1}`, source: fixpoint.SourceInline},
	{name: "object in prose", reply: `The output is: {"hi": ["a", "b"]} as asked.`, want: `{"hi":["a","b"]}`, source: fixpoint.SourceScan},
	{name: "array in prose", reply: `Scores: [1, 2, 3].`, want: `[1,2,3]`, source: fixpoint.SourceScan},
	{name: "json in a string", reply: `"{\"a\": 1}"`, want: `{"a":1}`, source: fixpoint.SourceString, count: 2, kinds: []string{KindEscapedJSON}},
	{name: "escaped json", reply: `{\"key\": \"value\"}`, want: `{"key":"value"}`, source: fixpoint.SourceString, kinds: []string{KindEscapedJSON}},
	{name: "several values", reply: "{\"a\":1}\n{\"b\":2}", want: `{"a":1}`, source: fixpoint.SourceRaw, count: 2},
	// A bare value that opens the reply is a candidate beside a fence
	// after it (the fence alone was taken: a format example's values).
	{name: "bare value then a fence", reply: "{\"price\": 5}\n```json\n{\"price\": 0}\n```\n", want: `{"price":5}`, source: fixpoint.SourceRaw, count: 2},
	{name: "fence inside braces", reply: "{```json\n{\"a\":\"b\"}\n```}", want: `{"a":"b"}`, source: fixpoint.SourceFence, count: 1},
	{name: "two fences", reply: "```json\n{\"a\":1}\n```\nand\n```json\n{\"b\":2}\n```", want: `{"a":1}`, source: fixpoint.SourceFence, count: 2},

	// Skip rules.
	{name: "think block skipped", reply: "<think>maybe {\"draft\": 1}</think>\n{\"final\": 2}", want: `{"final":2}`, source: fixpoint.SourceRaw, count: 1},
	// A tag inside a string of the value is text: masking up to it took
	// {"price": 6} out of the object below, and called the third prose.
	{name: "closing tag in a string", reply: `{"price": 5, "name": "</think>", "alt": {"price": 6}}`, want: `{"price":5,"name":"</think>","alt":{"price":6}}`, source: fixpoint.SourceRaw, count: 1},
	{name: "closing tag in a string, repaired", reply: `{"note": "see </reasoning> tag", "price": 5,}`, want: `{"note":"see </reasoning> tag","price":5}`, source: fixpoint.SourceRaw, count: 1, kinds: []string{KindTrailingComma}},
	{name: "tags in a string", reply: `{"a": "<think>x</think>", "b": 1}`, want: `{"a":"<think>x</think>","b":1}`, source: fixpoint.SourceRaw, count: 1},
	{name: "thinking block skipped", reply: "<thinking>{\"x\": 0}</thinking>Answer: {\"y\": 1}", want: `{"y":1}`, source: fixpoint.SourceScan, count: 1},
	{name: "placeholder skipped", reply: `Fill in {name} then send {"name": "Ada"}`, want: `{"name":"Ada"}`, source: fixpoint.SourceScan, count: 1},
	{name: "sentence fragment skipped", reply: `Set {x: 1} first. Result: {"x": 2}`, want: `{"x":2}`, source: fixpoint.SourceScan, count: 1},
	{name: "code fence that is not json", reply: "```python\nprint({'a': 1})\n```\n{\"a\": 2}", want: `{"a":2}`, source: fixpoint.SourceScan},
	{name: "empty before real value", reply: `[] then {"k": "v"}`, want: `{"k":"v"}`, count: 1},

	// Repairs.
	{name: "trailing comma", reply: `{"a": 1,}`, want: `{"a":1}`, kinds: []string{KindTrailingComma}},
	{name: "leading comma", reply: `{,"a": 1}`, want: `{"a":1}`, kinds: []string{KindLeadingComma}},
	// In an array a comma with nothing before it is an element left out.
	{name: "empty first element", reply: `[,1]`, want: `[1]`, kinds: []string{KindEmptyElement}},
	{name: "empty element", reply: `["a",,"b"]`, want: `["a","b"]`, kinds: []string{KindEmptyElement}},
	{name: "doubled comma between members", reply: `{"a": 1,, "b": 2}`, want: `{"a":1,"b":2}`, kinds: []string{KindTrailingComma}},
	{name: "line comment", reply: "{\"a\": 1 // one\n}", want: `{"a":1}`, kinds: []string{KindComment}},
	{name: "block comment", reply: `{/* c */"a": 1}`, want: `{"a":1}`, kinds: []string{KindComment}},
	{name: "slashes in a string stay", reply: `{"u": "https://a//b"}`, want: `{"u":"https://a//b"}`, kinds: []string{}},
	{name: "single quotes", reply: `{'a': 'b'}`, want: `{"a":"b"}`, kinds: []string{KindSingleQuotes}},
	{name: "smart quotes", reply: `{“a”: “b”}`, want: `{"a":"b"}`, kinds: []string{KindSmartQuotes}},
	{name: "unquoted key", reply: `{a: 1}`, want: `{"a":1}`, kinds: []string{KindUnquotedKey}},
	{name: "unquoted value", reply: `{"a": hello world}`, want: `{"a":"hello world"}`, kinds: []string{KindUnquotedString}},
	{name: "python literals", reply: `{"a": True, "b": False, "c": None}`, want: `{"a":true,"b":false,"c":null}`, kinds: []string{KindPythonLiteral}},
	{name: "js literals", reply: `[undefined, NaN]`, want: `[null,null]`, kinds: []string{KindJSLiteral}},
	// -Infinity was the unquoted string "-Infinity": valid where a string is.
	{name: "negative infinity is non-finite", reply: `{"a": -Infinity, "b": -NaN, "c": -Infinityx}`, want: `{"a":null,"b":null,"c":"-Infinityx"}`, kinds: []string{KindNonFinite, KindUnquotedString}},
	{name: "python's non-finite spellings", reply: `{"a": nan, "b": inf, "c": -inf, "d": infinity, "e": nano, "f": Inf, "g": -Inf, "h": NAN}`, want: `{"a":null,"b":null,"c":null,"d":null,"e":"nano","f":null,"g":null,"h":null}`, kinds: []string{KindNonFinite, KindUnquotedString}},
	{name: "missing comma", reply: "{\"a\": 1\n\"b\": 2}", want: `{"a":1,"b":2}`, kinds: []string{KindMissingComma}},
	{name: "missing colon", reply: `{"a" 1}`, want: `{"a":1}`, kinds: []string{KindMissingColon}},
	{name: "missing value", reply: `{"a": , "b": 2}`, want: `{"a":null,"b":2}`, kinds: []string{KindMissingValue}},
	{name: "raw newline in string", reply: "{\"a\": \"x\ny\"}", want: `{"a":"x\ny"}`, kinds: []string{KindControlChar}},
	{name: "raw tab in string", reply: "{\"a\": \"x\ty\"}", want: `{"a":"x\ty"}`, kinds: []string{KindControlChar}},
	{name: "unescaped quote", reply: `{"a": "say "hi" now"}`, want: `{"a":"say \"hi\" now"}`, kinds: []string{KindUnescapedQuote}},
	{name: "invalid escape kept", reply: `{"re": "\d+"}`, want: `{"re":"\\d+"}`, kinds: []string{KindInvalidEscape}},
	{name: "truncated", reply: `{"a": [1, 2`, want: `{"a":[1,2]}`, kinds: []string{KindTruncated}, truncated: true},
	{name: "truncated in string", reply: `{"a": "hel`, want: `{"a":"hel"}`, kinds: []string{KindTruncated}, truncated: true},
	{name: "truncated member dropped", reply: `{"a": 1, "b":`, want: `{"a":1}`, kinds: []string{KindTruncated}, truncated: true},
	{name: "unclosed before fence end", reply: "```json\n{\"a\": 1\n```", want: `{"a":1}`, kinds: []string{KindUnclosed}},
	{name: "extra bracket", reply: `{"a": 1}}`, want: `{"a":1}`, kinds: []string{KindExtraBracket}},
	{name: "mismatched bracket", reply: `[{"a": 1]`, want: `[{"a":1}]`, kinds: []string{KindMismatched}},
	{name: "number format", reply: `[.5, 1., 0789]`, want: `[0.5,1,"0789"]`, kinds: []string{KindNumberFormat}},
	{name: "ellipsis", reply: `[1, 2, ...]`, want: `[1,2]`, kinds: []string{KindEllipsis}},
	{name: "string concat", reply: `"a" + "b"`, want: `"ab"`, kinds: []string{KindConcat}},
	{name: "jsonp", reply: `callback({"a": 1});`, want: `{"a":1}`, kinds: []string{KindFunctionCall}},
	{name: "tuple", reply: `(1, 2)`, want: `[1,2]`, kinds: []string{KindTuple}},
	{name: "triple quoted", reply: "{\"code\": \"\"\"\n  x = 1\n\"\"\"}", want: `{"code":"x = 1"}`, kinds: []string{KindTripleQuoted}},
	{name: "special whitespace", reply: "{\"a\":\u00a0\"b\"}", want: `{"a":"b"}`, kinds: []string{KindWhitespace}},
	{name: "object quoted inside a string", reply: `{"x": "a, {"k": {"n": 1}}, "y": 2}`, want: `{"x":"a, {\"k\": {\"n\": 1}}","y":2}`, kinds: []string{KindUnescapedQuote, KindMissingQuote}},
	{name: "quote before a closer that closes nothing", reply: `"the list [1, 2"] more"`, want: `"the list [1, 2\"] more"`, kinds: []string{KindUnescapedQuote}},
	{name: "doubled quotes around a value", reply: `{"key": ""value""}`, want: `{"key":"value"}`, source: fixpoint.SourceRaw, kinds: []string{KindUnescapedQuote}},
	{name: "doubled quotes CSV style", reply: `{""a"":[{""t"":''x y'',""n"":""5""}]}`, want: `{"a":[{"t":"x y","n":"5"}]}`, kinds: []string{KindUnescapedQuote, KindSingleQuotes}},
	{name: "doubled opening quote only", reply: `{"key": ""value"}`, want: `{"key":"value"}`, kinds: []string{KindUnescapedQuote}},
	{name: "doubled opening quote that pairs a quote inside", reply: `{"a": ""Hello" she said"}`, want: `{"a":"\"Hello\" she said"}`, kinds: []string{KindUnescapedQuote}},
	{name: "doubled opening quote and an inch mark", reply: `{"q": ""He is 6'2" tall"}`, want: `{"q":"He is 6'2\" tall"}`, kinds: []string{KindUnescapedQuote}},
	{name: "curly quote doubled at the end is text", reply: `{"a": “hi””}`, want: `{"a":"hi”"}`, kinds: []string{KindSmartQuotes, KindUnescapedQuote}},
	{name: "curly quotes inside a curly-quoted string stay curly", reply: `{“a”: “it’s “fine””}`, want: `{"a":"it’s “fine”"}`, kinds: []string{KindSmartQuotes, KindUnescapedQuote}},
	{name: "empty string then a value is not doubled", reply: `["", "x"]`, want: `["","x"]`, source: fixpoint.SourceRaw},
	{name: "inch mark before the end quote", reply: `{"tv": "72"", "n": 1}`, want: `{"tv":"72\"","n":1}`, kinds: []string{KindUnescapedQuote}},
	{name: "number cut off after its sign", reply: `[1, -`, want: `[1,-0]`, truncated: true, kinds: []string{KindTruncated}},
	{name: "regex class in a string", reply: `{"r": [{"re": "a['"]b"}]}`, want: `{"r":[{"re":"a['\"]b"}]}`, kinds: []string{KindUnescapedQuote}},
	{name: "wrong closer still repaired", reply: `{"k": ["a", "b"}, "n": 1}`, want: `{"k":["a","b"],"n":1}`, kinds: []string{KindMismatched}},
	{name: "lone quote line in a block string", reply: "{\"a\": \"\n```{}```\n\"\n\",\n\"b\": 1}", want: `{"a":"\n` + "```{}```" + `\n\"","b":1}`, kinds: []string{KindUnescapedQuote}},
	{name: "comma then words in a value", reply: `{"a": "lorem "ipsum", sic." }`, want: `{"a":"lorem \"ipsum\", sic."}`, kinds: []string{KindUnescapedQuote}},
	{name: "missing end quote before a comma and words", reply: `{"a": "sic tamet, quick brown fox. }`, want: `{"a":"sic tamet, quick brown fox."}`, kinds: []string{KindMissingQuote}},
	{name: "missing end quote before the next key", reply: `{"a": "b, "c": 1}`, want: `{"a":"b","c":1}`, kinds: []string{KindMissingQuote}},
	{name: "key missing its end quote before the colon", reply: `{"key:"value"}`, want: `{"key":"value"}`, kinds: []string{KindMissingQuote}},
	{name: "quoted words after a comma in a value", reply: `{"c": "lorem, "ipsum" sic "tamet". To improve"}`, want: `{"c":"lorem, \"ipsum\" sic \"tamet\". To improve"}`, kinds: []string{KindUnescapedQuote}},
	{name: "stray word", reply: `{"a": 1, COMMENT "b": 2}`, want: `{"a":1,"b":2}`, kinds: []string{KindExtraText}},

	// Refusals.
	{name: "empty", reply: "", wantErr: "no JSON value: reply is empty"},
	{name: "blank", reply: " \n\t", wantErr: "no JSON value: reply is empty"},
	{name: "refusal", reply: "I'm sorry, I can't help with that request.", wantErr: `no JSON value: prose only ("I'm sorry, I can't help with that reques...")`},
	{name: "yaml", reply: "name: Ada\nage: 36\n", wantErr: "no JSON value: prose only"},
	{name: "placeholders only", reply: "Hello {name}, your code is {code}.", wantErr: `fragment "{name}" is not JSON at offset 6`},
	{name: "double placeholder", reply: "Hello {{name}}!", wantErr: "no JSON value"},
	{name: "bare words", reply: "hello world", wantErr: "prose only"},
	{name: "reasoning only", reply: "<think>{\"a\": 1}</think>", wantErr: "reasoning only"},
	{name: "missing colon before bracket", reply: `{"a" ]`, wantErr: "expected ':' after the key at offset 1"},
	{name: "invalid unicode escape", reply: `"\uZ000"`, wantErr: `invalid unicode escape`},
	{name: "control character", reply: "\"abc\x00\"", wantErr: "invalid control character"},
	{name: "truncated empty in prose", reply: "foo [", wantErr: "no JSON value"},
	{name: "too deep", reply: strings.Repeat("[", MaxDepth+1), wantErr: "nesting deeper than 512"},
}

func TestExtract(t *testing.T) {
	t.Parallel()
	for _, tc := range extractCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Extract(tc.reply)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Extract(%q) = %s, want error %q", tc.reply, got[0].JSON, tc.wantErr)
				}
				if !errors.Is(err, ErrNoJSON) {
					t.Errorf("error %v does not wrap ErrNoJSON", err)
				}
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Errorf("error %T is not a *SyntaxError", err)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Extract(%q): %v", tc.reply, err)
			}
			c := got[0]
			if string(c.JSON) != tc.want {
				t.Errorf("JSON = %s, want %s", c.JSON, tc.want)
			}
			if tc.source != "" && c.Source != tc.source {
				t.Errorf("Source = %s, want %s", c.Source, tc.source)
			}
			if tc.count != 0 && len(got) != tc.count {
				t.Errorf("%d candidates, want %d", len(got), tc.count)
			}
			if c.Truncated != tc.truncated {
				t.Errorf("Truncated = %v, want %v", c.Truncated, tc.truncated)
			}
			for _, k := range tc.kinds {
				if !slices.ContainsFunc(c.Repairs, func(r fixpoint.Repair) bool { return r.Kind == k }) {
					t.Errorf("repairs %v lack %q", c.Repairs, k)
				}
			}
			if tc.kinds != nil && len(tc.kinds) == 0 && len(c.Repairs) != 0 {
				t.Errorf("repairs %v, want none", c.Repairs)
			}
			checkCandidates(t, tc.reply, got)
		})
	}
}

// checkCandidates asserts the invariants every candidate holds.
// stdDecode is decode as encoding/json does it.
func stdDecode(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	return v, true
}

func checkCandidates(t *testing.T, reply string, cands []Candidate) {
	t.Helper()
	for i, c := range cands {
		if !json.Valid(c.JSON) {
			t.Fatalf("candidate %d JSON is invalid: %q", i, c.JSON)
		}
		v, ok := decode(c.JSON)
		if !ok {
			t.Fatalf("candidate %d JSON does not decode: %q", i, c.JSON)
		}
		a, _ := json.Marshal(v)
		b, _ := json.Marshal(c.Value)
		if string(a) != string(b) {
			t.Fatalf("candidate %d Value %s does not match JSON %s", i, b, c.JSON)
		}
		// decode uses segmentio/encoding/json; encoding/json is the
		// reference it must agree with, value for value.
		if want, ok := stdDecode(c.JSON); !ok || !reflect.DeepEqual(c.Value, want) {
			t.Fatalf("candidate %d Value %#v, encoding/json decodes %q as %#v (ok=%v)", i, c.Value, c.JSON, want, ok)
		}
		if c.Start < 0 || c.End < c.Start || c.End > len(reply) {
			t.Fatalf("candidate %d range [%d,%d) outside reply of %d bytes", i, c.Start, c.End, len(reply))
		}
		for _, r := range c.Repairs {
			if r.Offset < 0 || r.Offset > len(reply) {
				t.Fatalf("candidate %d repair %v offset outside reply", i, r)
			}
		}
		if c.Truncated != slices.ContainsFunc(c.Repairs, func(r fixpoint.Repair) bool { return r.Kind == KindTruncated }) {
			t.Fatalf("candidate %d Truncated=%v but repairs %v", i, c.Truncated, c.Repairs)
		}
	}
}

func TestRepairOffsets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply string
		want  []fixpoint.Repair
	}{
		{name: "trailing comma", reply: `{"a": 1,}`, want: []fixpoint.Repair{{Kind: KindTrailingComma, Offset: 7}}},
		{name: "comment and quotes", reply: `{'a': 1 /* c */}`, want: []fixpoint.Repair{{Kind: KindSingleQuotes, Offset: 1}, {Kind: KindComment, Offset: 8}}},
		{name: "offset into reply past prose", reply: `Result: {a: True}`, want: []fixpoint.Repair{{Kind: KindUnquotedKey, Offset: 9}, {Kind: KindPythonLiteral, Offset: 12}}},
		{name: "truncated at end", reply: `[1, 2`, want: []fixpoint.Repair{{Kind: KindTruncated, Offset: 5}}},
		{name: "fence offset", reply: "x\n```json\n{\"a\": 1,}\n```", want: []fixpoint.Repair{{Kind: KindTrailingComma, Offset: 17}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Extract(tc.reply)
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if !reflect.DeepEqual(got[0].Repairs, tc.want) {
				t.Errorf("repairs = %v, want %v", got[0].Repairs, tc.want)
			}
		})
	}
}

func TestRepairText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		text    string
		want    string
		wantErr string
	}{
		{name: "strict", text: `{"a":[1,2]}`, want: `{"a":[1,2]}`},
		{name: "lenient", text: `{a: 'b', c: [1,2,],}`, want: `{"a":"b","c":[1,2]}`},
		{name: "truncated", text: `["x", {"y": "z`, want: `["x",{"y":"z"}]`},
		{name: "trailing bracket", text: `{"a": 1}}`, want: `{"a":1}`},
		{name: "no search", text: `Result: {"a": 1}`, wantErr: "unexpected 'R'"},
		{name: "text after value", text: `{"a": 1} and more`, wantErr: "after the value at offset 9"},
		{name: "empty", text: "  ", wantErr: "text is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := RepairText(tc.text)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrNoJSON) {
					t.Fatalf("RepairText(%q) error = %v, want %q", tc.text, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("RepairText(%q): %v", tc.text, err)
			}
			if string(got.JSON) != tc.want {
				t.Errorf("JSON = %s, want %s", got.JSON, tc.want)
			}
		})
	}
}

func TestNumbersKeepPrecision(t *testing.T) {
	t.Parallel()
	got, err := Extract(`{"n": 12345678901234567890, "f": 0.1000}`)
	if err != nil {
		t.Fatal(err)
	}
	m := got[0].Value.(map[string]any)
	if n, ok := m["n"].(json.Number); !ok || n.String() != "12345678901234567890" {
		t.Errorf("n = %#v, want json.Number 12345678901234567890", m["n"])
	}
	if f, ok := m["f"].(json.Number); !ok || f.String() != "0.1000" {
		t.Errorf("f = %#v, want json.Number 0.1000", m["f"])
	}
}

// adversarial returns the 1 MB hostile replies the benchmarks also use.
func adversarial() map[string]string {
	const mb = 1 << 20
	return map[string]string{
		"open_braces":       strings.Repeat("{", mb/2),
		"unterminated":      `{"a": "` + strings.Repeat("x", mb),
		"many_unterminated": strings.Repeat(`["a, "`, mb/6),
		"deep_nesting":      strings.Repeat(`{"a":[`, mb/6),
		"quotes_commas":     strings.Repeat(`"a,`, mb/3),
		"prose_braces":      strings.Repeat("x { y ", mb/6),
		"open_comments":     strings.Repeat(`["/*"`, mb/5),
		"many_tags":         strings.Repeat(`<json>[`, mb/7),
	}
}

// TestAdversarial checks hostile replies finish with a result or a clear
// error; the benchmarks show how fast.
func TestAdversarial(t *testing.T) {
	t.Parallel()
	for name, reply := range adversarial() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cands, err := Extract(reply)
			if err != nil {
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("error %T %v is not a *SyntaxError", err, err)
				}
				return
			}
			checkCandidates(t, reply, cands)
		})
	}
}

// A reply with millions of repairs lists the first MaxListedRepairs and
// then one entry of each kind with its count: every repair is accounted
// for, in a list of bounded size.
func TestCompactRepairs(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("[1")
	for range MaxListedRepairs + 500 {
		b.WriteString(" 1")
	}
	b.WriteString(", 'x',]")
	cands, err := Extract(b.String())
	if err != nil || len(cands) != 1 {
		t.Fatalf("Extract: %d candidates, %v", len(cands), err)
	}
	got := CompactRepairs(cands[0].Repairs)
	if len(got) != MaxListedRepairs+3 {
		t.Fatalf("%d entries after compacting %d repairs, want %d listed and 3 kinds after them", len(got), len(cands[0].Repairs), MaxListedRepairs)
	}
	total := 0
	for _, r := range got {
		total += max(r.Count, 1)
	}
	if total != len(cands[0].Repairs) {
		t.Errorf("the compacted list stands for %d repairs, the reply had %d", total, len(cands[0].Repairs))
	}
	if last := got[len(got)-3:]; last[0].Kind != KindMissingComma || last[0].Count != 500 || last[1].Kind != KindSingleQuotes || last[2].Kind != KindTrailingComma {
		t.Errorf("the entries past the limit: %+v, want missing_comma ×500, single_quotes, trailing_comma", last)
	}
	if short := cands[0].Repairs[:10]; len(CompactRepairs(short)) != 10 {
		t.Errorf("a short list was compacted")
	}
}

// A value that needs more than MaxRepairs repairs is not read: each was a
// recorded repair, and a 4 MB reply of commas took 1.4 GB and 5 s. One
// just under the limit is read.
func TestTooManyRepairs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, reply string
		ok          bool
	}{
		{"commas over the limit", `{"a":[` + strings.Repeat(",", MaxRepairs+10) + `]}`, false},
		{"quotes over the limit", `{'a':'` + strings.Repeat("'", MaxRepairs+10) + `}`, false},
		{"numbers under the limit", `[` + strings.Repeat("1 ", MaxRepairs/2) + `]`, true},
	} {
		cands, err := Extract(tc.reply)
		if tc.ok {
			if err != nil || len(cands) == 0 {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "needs over 100000 repairs") {
			t.Errorf("%s: %d candidates, %v; want refused for its repairs", tc.name, len(cands), err)
		}
	}
}
