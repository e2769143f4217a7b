package repair

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// validate.CheckWith's rules for the reply as a whole (lossy repairs, NUL
// characters, keys written twice, two answers, half surrogate pairs) hold
// in every coercion mode, with the coercers of this package.

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
			got := checkWith(s, tc.reply, mode)
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
			if !strings.Contains(found.Message, lossyWhat(tc.kind)) || !strings.Contains(found.Message, tc.snippet) {
				t.Errorf("%s %s: message %q; want it to say %q at %s", mode, tc.reply, found.Message, lossyWhat(tc.kind), tc.snippet)
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
		if got := checkWith(s, reply, fixpoint.CoerceSafe); !got.Valid {
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
		got := checkWith(s, `{"s": "a\u0000b", "v": [{"k\u0000": 1}]}`, mode)
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
	if got := validate.Check(s, `{"s": "a\u0001b"}`); !got.Valid {
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
			got := checkWith(s, reply, mode)
			if got.Valid || got.Class != fixpoint.ClassSyntax || len(got.Errors) != 1 || got.Errors[0].Keyword != "duplicate_key" || got.Errors[0].Path != at {
				t.Errorf("%s %s: valid %v, class %s, errors %v; want one duplicate_key syntax error at %s", mode, reply, got.Valid, got.Class, got.Errors, at)
			}
		}
	}
	if got := validate.CheckWith(s, `{"c": "bug", "items": [{"c": 1}, {"c": 2}]}`, validate.CheckOptions{}); !got.Valid {
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
			s     *validate.Schema
			reply string
		}{
			{arr, "1, 2, 3"}, {strs, `"a", "b", "c"`},
			{enum, "Draft: {\"c\": \"bug\", \"p\": 2}\nCorrected: {\"c\": \"Billing\", \"p\": 3}"},
			{enum, "Draft: {\"c\": \"Bug\", \"p\": \"2\"}\nCorrected: {\"c\": \"Billing\", \"p\": \"3\"}"},
		} {
			got := checkWith(tc.s, tc.reply, mode)
			if got.Valid || len(got.Errors) != 1 || got.Errors[0].Keyword != "ambiguous" {
				t.Errorf("%s %q: valid %v (%v), errors %v; want ambiguous", mode, tc.reply, got.Valid, got.Value, got.Errors)
			}
		}
	}
	for _, mode := range []fixpoint.CoerceMode{fixpoint.CoerceNone, fixpoint.CoerceSafe, fixpoint.CoerceAll} {
		for _, tc := range []struct {
			s     *validate.Schema
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
			got := checkWith(tc.s, tc.reply, mode)
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
			if got := checkWith(obj, reply, mode); !got.Valid {
				t.Errorf("%s %q: %v; want valid", mode, reply, got.Errors)
			}
		}
		// A bare answer repeated in a fence, the repeat needing a safe fix
		// ("1" for 1): the same answer (it was ambiguous once the bare
		// value became a candidate).
		if mode != fixpoint.CoerceNone {
			if got := checkWith(obj, "{\"name\":\"a\",\"age\":1}\n```json\n{\"name\": \"a\", \"age\": \"1\"}\n```", mode); !got.Valid {
				t.Errorf("%s: a fenced repeat needing a safe fix: %v; want valid", mode, got.Errors)
			}
		}
		// A citation opening the reply before a fenced or tagged array
		// answer is no answer of its own.
		for _, reply := range []string{
			"[1] is the most relevant document, followed by [3].\n\nAnswer:\n```json\n[1, 3]\n```",
			"[2] discusses refunds.\n<answer>[2, 3]</answer>",
		} {
			if got := checkWith(arr, reply, mode); !got.Valid {
				t.Errorf("%s %q: %v; want valid", mode, reply, got.Errors)
			}
		}
		// Citations and numbers in the explanation after an array answer.
		for _, reply := range []string{
			"[\"apple\", \"banana\"]\n\nReferences: [1] USDA, [2] FAO",
			"[\"apple\", \"banana\"]\n\nThe RGB of red is [255, 0, 0], at indices [0, 1, 2].",
		} {
			if got := checkWith(strs, reply, mode); !got.Valid {
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
			if got := checkWith(arr, reply, mode); !got.Valid {
				t.Errorf("%s %q: %v; want valid", mode, reply, got.Errors)
			}
		}
		if got := checkWith(arr, "[1, 2] or maybe [3]", mode); got.Valid {
			t.Errorf("%s: [1, 2] or maybe [3] is valid; want ambiguous", mode)
		}
		// A number opening a line of words in a fence or tag is not a
		// second value.
		for _, reply := range []string{"<answer>7\n2 issues found: tone and length.</answer>", "```\n7\n\n3 minor typos\n```", "<answer>\n7\n\n1. counted rows\n</answer>"} {
			if got := checkWith(num, reply, mode); !got.Valid || !extract.SameValue(got.Value, json.Number("7")) {
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
		got := checkWith(s, reply, fixpoint.CoerceSafe)
		if got.Valid || len(got.Errors) == 0 || got.Errors[0].Keyword != "lone_surrogate" || got.Errors[0].Path != at {
			t.Errorf("%s: valid %v, errors %v; want a lone_surrogate error at %q", reply, got.Valid, got.Errors, at)
		}
	}
	if got := validate.CheckWith(s, `{"e":"\ud83d\ude00"}`, validate.CheckOptions{}); !got.Valid {
		t.Errorf("a whole pair: %v; want valid", got.Errors)
	}
	// worker check's object stays JSON when the reply is not UTF-8.
	out, err := json.Marshal(validate.CheckWith(nil, "{\"n\":\"a\xffb\"}", validate.CheckOptions{}))
	if err != nil || !json.Valid(out) || !utf8.Valid(out) {
		t.Errorf("check object of a reply that is not UTF-8: %s %v; want valid UTF-8 JSON", out, err)
	}
}
