package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Crashers found by this target are kept under testdata/fuzz/.

// FuzzRules compiles random rule text in a schema, and random schemas,
// and checks random values with what compiles: no panic, errors of the
// documented types, findings that name their place.
func FuzzRules(f *testing.F) {
	for _, r := range []string{
		"self.end >= self.start", "self.lines.map(l, l.qty * l.price).sum() == self.total",
		"has(self.end) && self.lines.all(l, l.qty > 0)", "self.lines.exists_one(l, l.sku == 'a')",
		"self.total * 2 > self.lines.size()", "self.lines.map(a, self.lines.map(b, a.qty * b.qty)).size() > 0",
		"timestamp(self.start) < timestamp(self.end)", "self.start.matches('^[0-9]+$')", "lists.range(5).sum() == 10",
		"self.lines[0].price / 0.0 > 1.0", "self.lines[0].qty / 0 > 1", "math.greatest(self.lines.map(l, l.price)) < 10.0",
		"self.u.v.w == 1", "self.start +", "dyn(self.total) == 3", "self.lines.sortBy(l, l.price)[0].qty == 1",
	} {
		f.Add(r, []byte(`{"start":"2027-01-01","end":"2027-01-02","total":5,"lines":[{"sku":"a","qty":2,"price":2.5}]}`), []byte(nil))
	}
	f.Add("true", []byte(`[1,{"a":null},"x",1e400,-0.0]`), []byte(invoiceSchema))
	f.Add("true", []byte(`{"p":{"n":0},"q":[{"n":1}]}`), []byte(`{"type":"object","additionalProperties":{"anyOf":[{"type":"object",`+
		`"properties":{"n":{"type":"integer"}},"x-fixpoint-rules":[{"rule":"self.n > 0"}]},{"type":"array","items":{"$ref":"#/additionalProperties/anyOf/0"}}]}}`))
	f.Add("true", []byte(`[[],[[1]]]`), []byte(`{"type":"array","items":{"$ref":"#"},"x-fixpoint-rules":[{"rule":"self.size() < 3"}]}`))
	f.Fuzz(func(t *testing.T, rule string, value, schema []byte) {
		var v any
		dec := json.NewDecoder(bytes.NewReader(value))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			v = string(value)
		}
		r, _ := json.Marshal(rule)
		fuzzOne(t, []byte(strings.Replace(fuzzSchema, `"RULE"`, string(r), 1)), v)
		if len(schema) > 0 {
			fuzzOne(t, schema, v)
		}
	})
}

// fuzzSchema is the schema FuzzRules puts its rule text in, at the root
// and on each line.
const fuzzSchema = `{"type":"object","properties":{"start":{"type":"string"},"end":{"type":"string"},"total":{"type":"number"},
	"u":{},"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"},
	"price":{"type":"number"}},"x-fixpoint-rules":[{"rule":"self.qty >= 0","path":"/qty"}]}}},
	"x-fixpoint-rules":[{"rule":"RULE","message":"m","severity":"warn"}]}`

func fuzzOne(t *testing.T, schema []byte, v any) {
	s, err := Compile(schema)
	if err != nil {
		var ce *CompileError
		if !errors.As(err, &ce) {
			t.Fatalf("Compile error %T %v is no *CompileError", err, err)
		}
		return
	}
	fs, err := s.Check(context.Background(), v)
	if err != nil {
		t.Fatalf("Check with a live context: %v", err)
	}
	for _, f := range fs {
		if f.Path != "" && !strings.HasPrefix(f.Path, "/") || !strings.HasPrefix(f.Path, f.At) ||
			!strings.Contains(f.SchemaPath, "/"+Keyword+"/") || f.Severity != SeverityError && f.Severity != SeverityWarn {
			t.Fatalf("finding %+v", f)
		}
		want := f.Path + ": "
		if f.Path == "" {
			want = "(root): "
		}
		if !strings.HasPrefix(f.Text(), want) {
			t.Fatalf("finding text %q does not start with its path", f.Text())
		}
	}
}
