// Package render writes JSON values, pointers and numbers into the
// messages a model and an operator read: values as compact JSON, cut to a
// length, the root named. The validator's errors and the satisfiability
// check's refusals show them alike.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Root stands for the root value at the start of a message. "/" would be
// ambiguous: it is the pointer of the property named "".
const Root = "(root)"

// MaxFound is the longest rendering of a found value in a message, in
// bytes.
const MaxFound = 80

// Path is the JSON pointer path as a message names it: Root for the root.
func Path(path string) string {
	if path == "" {
		return Root
	}
	return path
}

// Quote renders the string s, shortened to MaxFound bytes.
func Quote(s string) string { return Value(s, MaxFound) }

// Value renders v as compact JSON, shortened to about limit bytes.
func Value(v any, limit int) string {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = marshal(x)
	case []any:
		// An enum of 10,000 values: marshal only what the limit shows,
		// not the whole list for every error (2,000 wrong items took
		// 2 s to describe).
		var b strings.Builder
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(marshal(e))
			if b.Len() > limit {
				break
			}
		}
		b.WriteByte(']')
		s = b.String()
	default:
		s = marshal(x)
	}
	return Shorten(s, limit)
}

func marshal(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// Shorten cuts s to at most limit bytes (on a rune boundary), marking the
// cut.
func Shorten(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Rat renders a number of the schema library ("?" for none).
func Rat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	if f, exact := r.Float64(); exact || !r.IsInt() {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return r.RatString()
}
