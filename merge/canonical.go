package merge

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint/validate"
)

// canonical returns the canonical JSON of v, found at the JSON pointer at:
// members sorted by name, numbers by their value (1, 1.0 and 1e0 are
// "1"), strings as Go quotes them. Its error names the place of what is no
// JSON value.
func canonical(v any, at string) (string, error) {
	var sb strings.Builder
	if err := writeCanonical(&sb, v, at); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// mustCanonical is canonical of a value canonical accepted.
func mustCanonical(v any) string {
	s, err := canonical(v, "")
	if err != nil {
		panic(err)
	}
	return s
}

func writeCanonical(sb *strings.Builder, v any, at string) error {
	switch x := v.(type) {
	case nil:
		sb.WriteString("null")
	case bool:
		sb.WriteString(strconv.FormatBool(x))
	case string:
		sb.WriteString(strconv.Quote(x))
	case json.Number:
		if p := validate.NumberTextProblem(string(x)); p != "" {
			return fmt.Errorf("%s: number %q: %s", where(at), string(x), p)
		}
		sb.WriteString(number(string(x)))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%s: %v is no JSON number", where(at), x)
		}
		sb.WriteString(number(strconv.FormatFloat(x, 'g', -1, 64)))
	case int:
		sb.WriteString(strconv.Itoa(x))
	case int64:
		sb.WriteString(strconv.FormatInt(x, 10))
	case map[string]any:
		sb.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(strconv.Quote(k))
			sb.WriteByte(':')
			if err := writeCanonical(sb, x[k], at+"/"+validate.Pointer([]string{k})[1:]); err != nil {
				return err
			}
		}
		sb.WriteByte('}')
	case []any:
		sb.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				sb.WriteByte(',')
			}
			if err := writeCanonical(sb, e, at+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		sb.WriteByte(']')
	default:
		return fmt.Errorf("%s: a Go %T is not a JSON value", where(at), v)
	}
	return nil
}

// number returns the canonical text of a JSON number's text s, which
// NumberTextProblem accepts (its exponent within ±1000): its exact value
// as a fraction in lowest terms ("1", "5/2").
func number(s string) string {
	if plainInteger(s) {
		return s
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	return r.RatString()
}

// plainInteger reports whether s is an integer written the one way its
// value is: digits, no leading zero, a "-" before any but 0.
func plainInteger(s string) bool {
	d := strings.TrimPrefix(s, "-")
	if d == "" || d[0] == '0' && (len(d) > 1 || len(s) > 1) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

func where(at string) string {
	if at == "" {
		return "(root)"
	}
	return at
}
