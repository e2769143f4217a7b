// Package schematest holds the fixtures the schema and repair tests share:
// a typical job schema with a valid and an invalid value, and a heap probe.
// Only tests import it.
package schematest

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// TypicalSchema is the kind of schema a job carries: an object with nested
// objects and arrays, enums, patterns, formats and bounds.
const TypicalSchema = `{
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

// TypicalValue is valid against TypicalSchema.
const TypicalValue = `{
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

// TypicalInvalid breaks TypicalValue in five places.
const TypicalInvalid = `{
  "id": "INV-42",
  "status": "overdue",
  "created": "yesterday",
  "customer": {"name": "Ada Lovelace", "tier": "gold"},
  "lines": [
    {"sku": "abc-1", "qty": "2", "price": 19.99}
  ]
}`

// LineSchema is the schema of one line item of TypicalSchema.
func LineSchema() string {
	i := strings.Index(TypicalSchema, `"line": `)
	rest := TypicalSchema[i+len(`"line": `):]
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

// ManyErrorsReply is an array of n line items that each fail three ways:
// a sku off its pattern, a qty under its minimum, no price.
func ManyErrorsReply(n int) string {
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

// HeapOf runs f and returns the most heap it had allocated over what was
// in use before, sampled every millisecond, and what it still held after
// a collection.
func HeapOf(f func()) (peak, held uint64) {
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
