package validate

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/schematest"
)

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile([]byte(schematest.TypicalSchema)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, schematest.TypicalSchema)
	for _, bc := range []struct {
		name    string
		value   string
		wantErr bool
	}{
		{name: "valid", value: schematest.TypicalValue},
		{name: "invalid", value: schematest.TypicalInvalid, wantErr: true},
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
	s := mustCompile(b, `{"type":"array","items":`+schematest.LineSchema()+`}`)
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
	s := mustCompile(b, schematest.TypicalSchema)
	reply := "Here is the invoice you asked for. I extracted every line item from the document, " +
		"normalised the SKUs and converted the prices to numbers.\n\n```json\n" + schematest.TypicalValue + "\n```\n\n" +
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
	s := mustCompile(t, `{"type":"array","items":`+schematest.LineSchema()+`}`)
	if errs := s.Validate(mustDecode(t, bigArray(1<<16, 0))); len(errs) != 0 {
		t.Fatalf("valid big array has errors: %v", errs[:1])
	}
	errs := s.Validate(mustDecode(t, bigArray(1<<16, 10)))
	if len(errs) == 0 || errs[0].Path != "/0/sku" || errs[0].Keyword != "pattern" {
		t.Fatalf("invalid big array: got %d errors, first %v", len(errs), errs)
	}
	if errs := mustCompile(t, schematest.TypicalSchema).Validate(mustDecode(t, schematest.TypicalInvalid)); ClassOf(errs) != fixpoint.ClassShape || len(errs) < 5 {
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
