package repair

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/schematest"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// repairableValue is schematest.TypicalValue as models often break it: a quantity and
// a price as strings, a status in capitals, a null optional property.
const repairableValue = `{
  "id": "INV-004217",
  "status": "Sent",
  "created": "2025-03-01T10:15:00Z",
  "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "tier": "PRO"},
  "lines": [
    {"sku": "ABC-1234", "qty": "2", "price": 19.99, "tags": ["blue", "large"]},
    {"sku": "XYZ-0001", "qty": 1, "price": "5.5"},
    {"sku": "QRS-4242", "qty": 12, "price": 0.25, "tags": ["bulk"]}
  ],
  "notes": null
}`

// renamedValue is schematest.TypicalValue with three properties misspelt: two of the
// root's ("Status", "Created") and one of a line item's ("SKU").
const renamedValue = `{
  "id": "INV-004217",
  "Status": "sent",
  "Created": "2025-03-01T10:15:00Z",
  "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "tier": "pro"},
  "lines": [
    {"sku": "ABC-1234", "qty": 2, "price": 19.99, "tags": ["blue", "large"]},
    {"SKU": "XYZ-0001", "qty": 1, "price": 5.5},
    {"sku": "QRS-4242", "qty": 12, "price": 0.25, "tags": ["bulk"]}
  ],
  "notes": "Deliver to the side door."
}`

// typicalReply wraps a value as a model does: prose, a ```json fence, more
// prose; about 2 KB.
func typicalReply(value string) string {
	return "Here is the invoice you asked for. I extracted every line item from the document, " +
		"normalised the SKUs and converted the prices to numbers.\n\n```json\n" + value + "\n```\n\n" +
		strings.Repeat("Let me know if anything needs to change; the totals were checked against the source. ", 12)
}

// BenchmarkCheckWith compares Check with CheckWith in safe mode on a typical
// 2 KB reply: valid (coercion costs nothing), repairable (five repairs make
// it valid), renamed (three properties moved to their names) and invalid
// beyond repair.
func BenchmarkCheckWith(b *testing.B) {
	s := mustCompile(b, schematest.TypicalSchema)
	for _, bc := range []struct {
		name    string
		value   string
		coerced int
	}{
		{name: "valid", value: schematest.TypicalValue},
		{name: "repairable", value: repairableValue, coerced: 5},
		{name: "renamed", value: renamedValue, coerced: 3},
		{name: "invalid", value: schematest.TypicalInvalid, coerced: 1},
	} {
		reply := typicalReply(bc.value)
		r := checkWith(s, reply, fixpoint.CoerceSafe)
		if r.Coerced != bc.coerced || (bc.name != "invalid") != r.Valid {
			b.Fatalf("%s: coerced %d, valid %v: %v %v", bc.name, r.Coerced, r.Valid, r.Repairs, r.Errors)
		}
		b.Run(bc.name+"/check", func(b *testing.B) {
			b.SetBytes(int64(len(reply)))
			b.ReportAllocs()
			for b.Loop() {
				validate.Check(s, reply)
			}
		})
		b.Run(bc.name+"/safe", func(b *testing.B) {
			b.SetBytes(int64(len(reply)))
			b.ReportAllocs()
			for b.Loop() {
				checkWith(s, reply, fixpoint.CoerceSafe)
			}
		})
	}
}

// wideRenamed is a schema of n required integer properties field_0 ...
// and a value holding each under a misspelling (Field0 ...), half of them
// as strings: n renames and n/2 number fixes make it valid.
func wideRenamed(n int) (schema, value string) {
	var props, req, vals []string
	for i := range n {
		props = append(props, fmt.Sprintf(`"field_%d":{"type":"integer"}`, i))
		req = append(req, fmt.Sprintf(`"field_%d"`, i))
		v := fmt.Sprint(i)
		if i%2 == 1 {
			v = `"` + v + `"`
		}
		vals = append(vals, fmt.Sprintf(`"Field%d":%s`, i, v))
	}
	schema = `{"type":"object","additionalProperties":false,"properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `]}`
	return schema, "{" + strings.Join(vals, ",") + "}"
}

// BenchmarkCoerceWideObject coerces an object of 10,000 misspelt
// properties, half of them numbers in strings: the renames of one object
// are found once a round, not once an error (a first version took over
// half an hour).
func BenchmarkCoerceWideObject(b *testing.B) {
	src, value := wideRenamed(10000)
	s := mustCompile(b, src)
	v := mustDecode(b, value)
	b.ReportAllocs()
	for b.Loop() {
		if _, fixes, errs := Coerce(s, v, fixpoint.CoerceSafe); len(errs) != 0 || len(fixes) != 15000 {
			b.Fatalf("%d fixes, errors %v", len(fixes), errs[:min(3, len(errs))])
		}
	}
}

// BenchmarkCheckHugeReply checks a 1.5 MB reply of 60,000 wrong line
// items, 180,000 errors, as worker check does (coerce safe). B/op counts
// every allocation, garbage too; peak-MB is the most heap one check had
// allocated over what was in use before (sampled every millisecond), held-MB
// what its result holds, errors the errors it keeps.
func BenchmarkCheckHugeReply(b *testing.B) {
	s := mustCompile(b, `{"type":"array","items":`+schematest.LineSchema()+`}`)
	reply := schematest.ManyErrorsReply(60000)
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	var peak, held uint64
	var kept int
	for b.Loop() {
		var r validate.CheckResult
		p, h := schematest.HeapOf(func() { r = checkWith(s, reply, fixpoint.CoerceSafe) })
		peak, held, kept = max(peak, p), max(held, h), len(r.Errors)
		runtime.KeepAlive(r)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
	b.ReportMetric(float64(held)/(1<<20), "held-MB")
	b.ReportMetric(float64(kept), "errors")
}
