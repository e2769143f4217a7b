package validate

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/render"
)

// The library compares numbers exactly, as big.Rat. A number with a huge
// exponent (1e999999) takes long to expand, and one beyond its limit
// (1e9999999) or not a number at all makes it panic. Numbers are therefore
// bounded before they reach it, in schemas and in values alike.
const (
	// maxNumberLen is the longest number text accepted, in bytes.
	maxNumberLen = 1000
	// maxNumberExp is the largest decimal exponent magnitude accepted.
	maxNumberExp = 1000
)

// numberProblem returns why a number cannot be validated, or "".
func numberProblem(v any) string {
	switch n := v.(type) {
	case json.Number:
		return numberTextProblem(string(n))
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return fmt.Sprintf("%v is not a JSON number", n)
		}
	case float32:
		if math.IsNaN(float64(n)) || math.IsInf(float64(n), 0) {
			return fmt.Sprintf("%v is not a JSON number", n)
		}
	}
	return ""
}

// numberTextProblem checks a number's text against the JSON grammar and the
// bounds.
func numberTextProblem(s string) string {
	if len(s) > maxNumberLen {
		return fmt.Sprintf("number %s has more than %d characters", render.Shorten(s, render.MaxFound), maxNumberLen)
	}
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	bad := strconv.Quote(s) + " is not a JSON number"
	switch n := digits(); {
	case n == 0:
		return bad
	case n > 1 && s[i-n] == '0':
		return bad
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return bad
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		if digits() == 0 {
			return bad
		}
		exp, err := strconv.Atoi(s[start:i])
		if err != nil || exp > maxNumberExp {
			return fmt.Sprintf("number %s is out of range: the exponent must be within ±%d", render.Shorten(s, render.MaxFound), maxNumberExp)
		}
	}
	if i != len(s) {
		return bad
	}
	return ""
}

// numberErrors returns an error for every number in v that cannot be
// validated, at its path. It allocates only for the numbers it reports.
func numberErrors(v any) []fixpoint.ValidationError {
	type tok struct {
		key string
		idx int // -1 for an object key
	}
	var out []fixpoint.ValidationError
	var stack []tok
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				stack = append(stack, tok{k, -1})
				walk(e)
				stack = stack[:len(stack)-1]
			}
		case []any:
			for i, e := range x {
				stack = append(stack, tok{"", i})
				walk(e)
				stack = stack[:len(stack)-1]
			}
		case string, bool, nil:
		default:
			if p := numberProblem(x); p != "" {
				toks := make([]string, len(stack))
				for i, t := range stack {
					toks[i] = t.key
					if t.idx >= 0 {
						toks[i] = strconv.Itoa(t.idx)
					}
				}
				out = append(out, newError(pointer(toks), "number", p))
			}
		}
	}
	walk(v)
	return out
}
