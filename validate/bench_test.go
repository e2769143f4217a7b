package validate

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

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

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile([]byte(typicalSchema)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, typicalSchema)
	for _, bc := range []struct {
		name    string
		value   string
		wantErr bool
	}{
		{name: "valid", value: typicalValue},
		{name: "invalid", value: typicalInvalid, wantErr: true},
	} {
		v := mustDecode(b, bc.value)
		if got := len(s.Validate(v)) > 0; got != bc.wantErr {
			b.Fatalf("%s: invalid = %v", bc.name, got)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Validate(v)
			}
		})
	}
}

// BenchmarkValidate1MB validates a 1 MB array of line objects, all valid and
// with one error in every tenth.
func BenchmarkValidate1MB(b *testing.B) {
	s := mustCompile(b, `{"type":"array","items":`+lineSchema()+`}`)
	for _, bc := range []struct {
		name    string
		badEach int
	}{
		{name: "valid", badEach: 0},
		{name: "10pct-invalid", badEach: 10},
	} {
		text := bigArray(1<<20, bc.badEach)
		v := mustDecode(b, text)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				s.Validate(v)
			}
		})
	}
}

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

// bigArray builds a JSON array of about size bytes of line objects; every
// badEach-th has a wrong sku (0: none).
func bigArray(size, badEach int) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := 0; sb.Len() < size; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sku := fmt.Sprintf("ABC-%04d", i%10000)
		if badEach > 0 && i%badEach == 0 {
			sku = "bad"
		}
		fmt.Fprintf(&sb, `{"sku":%q,"qty":%d,"price":%d.25,"tags":["t%d","u"]}`, sku, i%100+1, i%50+1, i%7)
	}
	sb.WriteByte(']')
	return sb.String()
}

// BenchmarkCheck runs Check on a typical 2 KB reply: prose, then the value in
// a ```json fence.
func BenchmarkCheck(b *testing.B) {
	s := mustCompile(b, typicalSchema)
	reply := "Here is the invoice you asked for. I extracted every line item from the document, " +
		"normalised the SKUs and converted the prices to numbers.\n\n```json\n" + typicalValue + "\n```\n\n" +
		strings.Repeat("Let me know if anything needs to change; the totals were checked against the source. ", 12)
	if r := Check(s, reply); !r.Valid {
		b.Fatalf("typical reply is not valid: %+v", r.Errors)
	}
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	for b.Loop() {
		Check(s, reply)
	}
}

func TestBenchmarkInputs(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"array","items":`+lineSchema()+`}`)
	if errs := s.Validate(mustDecode(t, bigArray(1<<16, 0))); len(errs) != 0 {
		t.Fatalf("valid big array has errors: %v", errs[:1])
	}
	errs := s.Validate(mustDecode(t, bigArray(1<<16, 10)))
	if len(errs) == 0 || errs[0].Path != "/0/sku" || errs[0].Keyword != "pattern" {
		t.Fatalf("invalid big array: got %d errors, first %v", len(errs), errs)
	}
	if errs := mustCompile(t, typicalSchema).Validate(mustDecode(t, typicalInvalid)); ClassOf(errs) != fixpoint.ClassShape || len(errs) < 5 {
		t.Fatalf("typical invalid: got %v", errs)
	}
}

// BenchmarkCheckManyLossyRepairs checks a 400 KB reply of 50,000 numbers
// with no commas, read as 25,000 numbers split ("123 456"): one lossy
// repair each. The errors list 20 and count the rest, and each snippet
// looks at 64 bytes, not the rest of the reply (it took 9 s).
func BenchmarkCheckManyLossyRepairs(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 50000 {
		if i > 0 {
			sb.WriteString(" ")
		}
		sb.WriteString(strconv.Itoa(100 + i%900))
	}
	sb.WriteString("]")
	reply := sb.String()
	s, err := Compile([]byte(`{"type":"array"}`))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	for b.Loop() {
		if r := CheckWith(s, reply, CheckOptions{}); r.Valid {
			b.Fatal("valid")
		}
	}
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
