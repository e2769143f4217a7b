package repair

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/validate"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The fixtures of the schema-guided repair tests (moved with them from
// package validate).

func mustCompile(t testing.TB, schema string) *validate.Schema {
	t.Helper()
	s, err := validate.Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return s
}

func mustDecode(t testing.TB, value string) any {
	t.Helper()
	v, err := decode([]byte(value))
	if err != nil {
		t.Fatalf("decode %s: %v", value, err)
	}
	return v
}

// decode decodes as the schema library does (numbers as json.Number).
func decode(b []byte) (any, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, errors.Join(errors.New("decode"), err)
	}
	return v, nil
}

func mustEncode(t testing.TB, v any) string {
	t.Helper()
	b, err := encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lookup returns the value at the tokens in doc, nil if there is none.
func lookup(doc any, toks []string) any {
	v, _ := lookupOK(doc, toks)
	return v
}

// checkWith is validate.CheckWith with the coercer of mode.
func checkWith(s *validate.Schema, reply string, mode fixpoint.CoerceMode) validate.CheckResult {
	return validate.CheckWith(s, reply, validate.CheckOptions{Coerce: Coercer(mode)})
}

// lossyWhat is what validate says a lossy repair of kind would have
// dropped or guessed.
func lossyWhat(kind string) string {
	d := validate.DescribeLossy("", fixpoint.Repair{Kind: kind})
	return d[:strings.Index(d, " at offset ")]
}

// wantsAt is what s wants of the value at toks in root.
func wantsAt(s *validate.Schema, root any, toks []string) validate.Wants {
	c, release := s.Begin()
	defer release()
	return c.Reader(root).At(toks)
}

// budgetOf is coerceBudget of v, and checksOf the checks validating it
// makes (0: not known).
func budgetOf(s *validate.Schema, v any) int {
	c, release := s.Begin()
	defer release()
	return coerceBudget(c, v)
}

func checksOf(s *validate.Schema, v any) int {
	c, release := s.Begin()
	defer release()
	return c.Checks(v)
}

// typicalSchema is the kind of schema a job carries: an object with nested
// objects and arrays, enums, patterns, formats and bounds.
const typicalSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["id", "customer", "lines", "status", "created"],
  "additionalProperties": false,
  "properties": {
    "id": {"type": "string", "pattern": "^INV-[0-9]{6}$"},
    "status": {"enum": ["draft", "sent", "paid", "void"]},
    "created": {"type": "string", "format": "date-time"},
    "customer": {
      "type": "object",
      "required": ["name", "email"],
      "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "email": {"type": "string", "format": "email"},
        "tier": {"oneOf": [{"const": "basic"}, {"const": "pro"}, {"type": "null"}]}
      }
    },
    "lines": {
      "type": "array",
      "minItems": 1,
      "items": {"$ref": "#/$defs/line"}
    },
    "notes": {"type": "string", "maxLength": 2000}
  },
  "$defs": {
    "line": {
      "type": "object",
      "required": ["sku", "qty", "price"],
      "additionalProperties": false,
      "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "qty": {"type": "integer", "minimum": 1, "maximum": 10000},
        "price": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
      }
    }
  }
}`

// typicalValue is valid against typicalSchema.
const typicalValue = `{
  "id": "INV-004217",
  "status": "sent",
  "created": "2025-03-01T10:15:00Z",
  "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "tier": "pro"},
  "lines": [
    {"sku": "ABC-1234", "qty": 2, "price": 19.99, "tags": ["blue", "large"]},
    {"sku": "XYZ-0001", "qty": 1, "price": 5.5},
    {"sku": "QRS-4242", "qty": 12, "price": 0.25, "tags": ["bulk"]}
  ],
  "notes": "Deliver to the side door."
}`

// typicalInvalid breaks typicalValue in five places.
const typicalInvalid = `{
  "id": "INV-42",
  "status": "overdue",
  "created": "yesterday",
  "customer": {"name": "Ada Lovelace", "tier": "gold"},
  "lines": [
    {"sku": "abc-1", "qty": "2", "price": 19.99}
  ]
}`

// lineSchema is the schema of one line item of typicalSchema.
func lineSchema() string {
	i := strings.Index(typicalSchema, `"line": `)
	rest := typicalSchema[i+len(`"line": `):]
	// The line schema ends at the closing brace that balances its opening one.
	depth := 0
	for j, r := range rest {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return rest[:j+1]
			}
		}
	}
	panic("unbalanced line schema")
}

// manyErrorsReply is an array of n line items that each fail three ways:
// a sku off its pattern, a qty under its minimum, no price.
func manyErrorsReply(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"bad-%d","qty":0}`, i%1000)
	}
	b.WriteByte(']')
	return b.String()
}

// heapOf runs f and returns the most heap it had allocated over what was
// in use before, sampled every millisecond, and what it still held after
// a collection.
func heapOf(f func()) (peak, held uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var top uint64
		var m runtime.MemStats
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			top = max(top, m.HeapAlloc)
			select {
			case <-stop:
				done <- top
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	top := <-done
	runtime.GC()
	runtime.ReadMemStats(&m)
	return top - min(top, base), m.HeapAlloc - min(m.HeapAlloc, base)
}
