package sim

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// encOpts selects the formatting faults the encoder writes into JSON text.
type encOpts struct {
	indent        bool
	trailingComma bool   // a comma after the root's last member
	singleQuotes  bool   // 'strings' and 'keys'
	python        bool   // True, False, None
	comment       string // a // line at the top of the root container
}

// encode writes v as JSON text (object keys sorted), with the requested faults.
func encode(v any, o encOpts) []byte {
	if o.comment != "" {
		o.indent = true
	}
	e := encoder{o: o, buf: make([]byte, 0, 256)}
	e.value(v, 0)
	return e.buf
}

type encoder struct {
	o   encOpts
	buf []byte
}

func (e *encoder) nl(depth int) {
	if !e.o.indent {
		return
	}
	e.buf = append(e.buf, '\n')
	for range depth {
		e.buf = append(e.buf, ' ', ' ')
	}
}

func (e *encoder) value(v any, depth int) {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, e.lit("null", "None")...)
	case bool:
		if x {
			e.buf = append(e.buf, e.lit("true", "True")...)
		} else {
			e.buf = append(e.buf, e.lit("false", "False")...)
		}
	case json.Number:
		e.buf = append(e.buf, x...)
	case float64:
		e.buf = strconv.AppendFloat(e.buf, x, 'f', -1, 64)
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	case string:
		e.str(x)
	case []any:
		e.buf = append(e.buf, '[')
		e.header(depth)
		for i, el := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.nl(depth + 1)
			e.value(el, depth+1)
		}
		e.footer(depth, len(x))
		e.buf = append(e.buf, ']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		e.buf = append(e.buf, '{')
		e.header(depth)
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.nl(depth + 1)
			e.str(k)
			e.buf = append(e.buf, ':')
			if e.o.indent {
				e.buf = append(e.buf, ' ')
			}
			e.value(x[k], depth+1)
		}
		e.footer(depth, len(x))
		e.buf = append(e.buf, '}')
	default:
		e.buf = append(e.buf, mustJSON(x)...)
	}
}

func (e *encoder) header(depth int) {
	if depth == 0 && e.o.comment != "" {
		e.nl(1)
		e.buf = append(e.buf, "// "...)
		e.buf = append(e.buf, e.o.comment...)
	}
}

func (e *encoder) footer(depth, n int) {
	if n == 0 {
		return
	}
	if depth == 0 && e.o.trailingComma {
		e.buf = append(e.buf, ',')
	}
	e.nl(depth)
}

func (e *encoder) lit(js, py string) string {
	if e.o.python {
		return py
	}
	return js
}

const hexDigits = "0123456789abcdef"

func (e *encoder) str(s string) {
	q := byte('"')
	if e.o.singleQuotes {
		q = '\''
	}
	e.buf = append(e.buf, q)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == q || c == '\\':
				e.buf = append(e.buf, '\\', c)
			case c == '\n':
				e.buf = append(e.buf, '\\', 'n')
			case c == '\t':
				e.buf = append(e.buf, '\\', 't')
			case c == '\r':
				e.buf = append(e.buf, '\\', 'r')
			case c < 0x20:
				e.buf = append(e.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				e.buf = append(e.buf, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			e.buf = append(e.buf, `\ufffd`...)
		} else {
			e.buf = append(e.buf, s[i:i+size]...)
		}
		i += size
	}
	e.buf = append(e.buf, q)
}

// hasLiteral reports whether v holds a boolean or null (so that a Python
// literals fault is visible).
func hasLiteral(v any) bool {
	switch x := v.(type) {
	case nil, bool:
		return true
	case []any:
		return slices.ContainsFunc(x, hasLiteral)
	case map[string]any:
		for _, e := range x {
			if hasLiteral(e) {
				return true
			}
		}
	}
	return false
}

// hasString reports whether v holds a string or an object key.
func hasString(v any) bool {
	switch x := v.(type) {
	case string:
		return true
	case []any:
		return slices.ContainsFunc(x, hasString)
	case map[string]any:
		return len(x) > 0
	}
	return false
}

// nonEmptyContainer reports whether v is an object or array with members.
func nonEmptyContainer(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return false
}
