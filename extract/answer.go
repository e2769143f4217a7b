package extract

// How a reply sets out its answer: the labels ("Answer:", "Corrected:"),
// fences and tags that mark a value as the one meant, the citations that
// are not answers, and what counts as the same answer. The schema check
// (package validate) uses them to choose among a reply's candidates and to
// tell an example from the answer.

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// citationCue ends the text before a citation: "as shown in [3]", "see
// [2]", "(source: [1])", "Smith et al. [3]", "per [2]", "[2][3]" (a
// bracket right after another; "[4, 7] [3]" is two answers). A bare "in"
// is no cue: "the one in [9]" may correct the answer.
var citationCue = regexp.MustCompile(`(?i)(?:\b(?:see|cf|ref|refs|reference|references|source|sources|(?:shown|cited|described|reported|given|stated|listed) in|according to|et al|per|from)\.?:?|\(|（|见|参见)[ \t]*$|\]$`)

// Citation reports whether candidate o reads as a citation in prose after
// the answer: one small integer in brackets, found in the reply's text
// (not fenced or tagged), right after a cue such as "see" or "shown in".
// "The answer is [1, 2] as shown in [3]" holds one answer; an array of
// several numbers is an answer of its own, whatever precedes it.
func Citation(reply string, o *Candidate) bool {
	if o.Source == fixpoint.SourceFence || o.Source == fixpoint.SourceTag {
		return false
	}
	items, ok := o.Value.([]any)
	if !ok || len(items) != 1 {
		return false
	}
	n, ok := items[0].(json.Number)
	if !ok || len(n) > 3 || strings.ContainsAny(string(n), ".eE-+") {
		return false
	}
	line := reply[:o.Start]
	line = line[strings.LastIndexByte(line, '\n')+1:]
	return citationCue.MatchString(line)
}

// answerLabel finds an answer label ending in a colon (a word of
// answerLabels), then the bracket opening what it labels.
var answerLabel = regexp.MustCompile(`(?i)\b(?:` + strings.Join(answerLabels, "|") + `)\w*\b[^\n:]{0,30}:[ \t]*\n?[ \t]*([{\[])`)

// UnreadAnswer returns the offset of a bracket after chosen candidate c
// (or, with before, ahead of it), of c's kind (an object's '{', an
// array's '['), that an answer label sets out and where no candidate
// starts: an answer extract could not read. -1 when there is none.
func UnreadAnswer(reply string, cands []Candidate, c *Candidate, value any, before bool) int {
	var open byte
	switch value.(type) {
	case map[string]any:
		open = '{'
	case []any:
		open = '['
	default:
		return -1
	}
	from := c.End
	if before {
		from = 0
	}
	if from >= len(reply) {
		return -1
	}
	for _, m := range answerLabel.FindAllStringSubmatchIndex(reply[from:], -1) {
		at := from + m[2]
		if reply[at] != open || c.Start <= at && at < c.End || !LabelledAt(reply, at) {
			continue
		}
		read := false
		for i := range cands {
			if cands[i].Start <= at && at < max(cands[i].End, cands[i].Start+1) {
				read = true
				break
			}
		}
		if !read {
			return at
		}
	}
	return -1
}

// SameAnswer reports whether b has the shape of answer a and says
// something else: both objects sharing a key, b not just repeating some of
// a's members; or both non-empty arrays whose first items are of one kind
// (objects sharing a key, or scalars of one JSON type).
func SameAnswer(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return false
		}
		shared, differs := false, false
		for k, v := range y {
			w, ok := x[k]
			shared = shared || ok
			differs = differs || !ok || !SameValue(v, w)
		}
		return shared && differs
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) == 0 || len(y) == 0 {
			return false
		}
		switch xi := x[0].(type) {
		case map[string]any:
			yi, ok := y[0].(map[string]any)
			if !ok {
				return false
			}
			for k := range yi {
				if _, ok := xi[k]; ok {
					return true
				}
			}
			return false
		default:
			return jsonType(x[0]) == jsonType(y[0])
		}
	}
	return false
}

// answerLabels are the words that, ending a line with a colon right
// before a value, set it out as an answer: "Answer:", "Corrected:",
// "Final output:", "Here is the JSON:".
var answerLabels = []string{"answer", "output", "result", "correct", "final", "json", "revised", "updated", "fixed", "response"}

// SetOut reports whether candidate o is set out as an answer: fenced or
// tagged, or right after a label ending in a colon (answerLabels).
func SetOut(reply string, o *Candidate) bool {
	return o.Source == fixpoint.SourceFence || o.Source == fixpoint.SourceTag || Labelled(reply, o)
}

// Labelled reports whether candidate o comes right after an answer label
// ending in a colon: "Answer: {...}", "**Final JSON:**", "Corrected:" and
// a fence after it (LabelledAt).
func Labelled(reply string, o *Candidate) bool {
	return LabelledAt(reply, o.Start)
}

// answerWord finds an answer word (answerLabels) in a label, as a word.
var answerWord = regexp.MustCompile(`\b(?:` + strings.Join(answerLabels, "|") + `)\w*\b`)

// hereLabel matches "Here it is", "Here you go": the answer follows.
var hereLabel = regexp.MustCompile(`^here(?:'s| is| are)? (?:it is|you go|you are)\b`)

// notAnswerWord names something else than the answer when it comes before
// the label's answer word ("Example output", "Input JSON", "Your previous
// response", "Wrong answer"); formatWord does when it comes right after
// it ("Output format", "JSON schema", "Answer template").
var (
	notAnswerWord = regexp.MustCompile(`\b(?:example|examples|e\.g|sample|input|previous|earlier|original|old|wrong|incorrect|invalid|bad|rejected|draft|instead|before)\b`)
	formatWord    = regexp.MustCompile(`^\s*(?:format|schema|template|example|examples|structure|shape|spec)\b`)
)

// answerLabelLine reports whether a label (lower case, its colon cut)
// names the answer: an answer word not preceded by a word naming
// something else, nor followed at once by "format" or the like.
func answerLabelLine(l string) bool {
	if hereLabel.MatchString(l) {
		return true
	}
	loc := answerWord.FindStringIndex(l)
	if loc == nil {
		return false
	}
	return !notAnswerWord.MatchString(l[:loc[0]]) && !formatWord.MatchString(l[loc[1]:])
}

// cjkAnswerLabel is an answer label in Chinese or Japanese.
var cjkAnswerLabel = regexp.MustCompile(`(?:答案|结果|回答|输出|出力|結果)$`)

// LabelledAt reports whether the text right before offset at ends with an
// answer label and its colon (or a fullwidth one), the label being the
// last sentence of its line: markdown emphasis and a fence opener between
// the label and the value are looked through.
func LabelledAt(reply string, at int) bool {
	before := strings.TrimRight(reply[:min(at, len(reply))], " \t\r\n")
	if i := strings.LastIndexByte(before, '\n'); strings.HasPrefix(strings.TrimSpace(before[i+1:]), "```") {
		before = strings.TrimRight(before[:i+1], " \t\r\n") // "Answer:\n```json\n{...}"
	}
	before = strings.TrimRight(before, "*_ \t")
	switch {
	case strings.HasSuffix(before, ":"):
		before = before[:len(before)-1]
	case strings.HasSuffix(before, "："):
		before = before[:len(before)-len("：")]
	default:
		return false
	}
	line := before[strings.LastIndexByte(before, '\n')+1:]
	// The last sentence: "Wait, that is wrong. Corrected:", "**A:** {...} **Example:**"
	// (a dot inside a word, "v1.2" or "2.b", ends none).
	for _, sep := range []string{". ", "! ", "? ", "} ", "] "} {
		if i := strings.LastIndex(line, sep); i >= 0 {
			line = line[i+len(sep):]
		}
	}
	line = strings.Trim(line, " \t*_#>-")
	if cjkAnswerLabel.MatchString(line) {
		return true
	}
	l := strings.ToLower(line)
	return len(l) <= 80 && answerLabelLine(l)
}

// SameValue reports whether a and b, decoded JSON values (numbers as
// json.Number), are the same JSON value: numbers compare by value (1.0,
// 1 and 1e0 are one number), objects by their members whatever the order.
func SameValue(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !SameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !SameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b // strings, booleans, null
}

// jsonType names the JSON type of a decoded value; every number is
// "number", whatever its Go type.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "number"
}
