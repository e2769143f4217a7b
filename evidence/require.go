package evidence

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
)

// RequireKeyword is the Keyword of the errors Require returns.
const RequireKeyword = "evidence"

// maxQuoted is how many characters of a string value an error quotes.
const maxQuoted = 80

// Require returns an error of class evidence for each leaf graded none, in
// the leaves' order, for a model to act on: `/vendor: "Globex" does not
// appear in the source; copy it as written, or leave it out`. value is the
// value the leaves were aligned from; it supplies the text quoted (a
// string of more than 80 characters is cut, with "…").
func Require(value any, leaves []fixpoint.Grounding) []fixpoint.ValidationError {
	var out []fixpoint.ValidationError
	for _, l := range leaves {
		if l.Grade != fixpoint.GradeNone {
			continue
		}
		at := l.Path
		if at == "" {
			at = "(root)"
		}
		msg := at + ": " + quote(lookup(value, l.Path)) + " does not appear in the source; copy it as written, or leave it out"
		if l.Reason != "" {
			msg = at + ": " + quote(lookup(value, l.Path)) + " " + l.Reason + "; copy the value written with the item, or leave it out"
		}
		out = append(out, fixpoint.ValidationError{
			Path:    l.Path,
			Keyword: RequireKeyword,
			Class:   fixpoint.ClassEvidence,
			Message: msg,
		})
	}
	return out
}

// lookup returns the value at ptr, nil when there is none.
func lookup(v any, ptr string) any {
	for _, tok := range splitPointer(ptr) {
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			i, ok := arrayIndex(tok)
			if !ok || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// quote writes a leaf as JSON, a long string cut short.
func quote(v any) string {
	if s, ok := v.(string); ok && utf8.RuneCountInString(s) > maxQuoted {
		r := []rune(s)
		v = string(r[:maxQuoted]) + "…"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "the value"
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
