package rules

import (
	"slices"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// The two examples of Kubernetes' x-kubernetes-validations the issue
// names, on a schema as a team would write it: qty an integer, the
// prices numbers.
const invoiceSchema = `{
  "type": "object",
  "required": ["start", "end", "lines", "total"],
  "properties": {
    "start": {"type": "string", "format": "date"},
    "end": {"type": "string", "format": "date"},
    "total": {"type": "number"},
    "lines": {"type": "array", "items": {
      "type": "object",
      "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}, "price": {"type": "number"}, "total": {"type": "number"}},
      "x-fixpoint-rules": [
        {"rule": "self.total == self.qty * self.price", "message": "a line's total is qty times price", "path": "/total"}
      ]
    }}
  },
  "x-fixpoint-rules": [
    {"rule": "self.end >= self.start", "message": "end must not be before start", "path": "/end"},
    {"rule": "self.lines.map(l, l.qty * l.price).sum() == self.total", "message": "the lines must add up to the total", "path": "/total"},
    {"rule": "self.lines.size() <= 3", "message": "more than three lines is unusual", "severity": "warn", "path": "/lines"}
  ]
}`

func TestKubernetesExamples(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, invoiceSchema)
	for _, tc := range []struct {
		name, value string
		want        []string
	}{
		{name: "valid", value: `{"start":"2027-01-15","end":"2027-02-01","total":12.5,
			"lines":[{"qty":2,"price":2.5,"total":5},{"qty":3,"price":2.5,"total":7.5}]}`},
		{name: "end before start", value: `{"start":"2027-01-15","end":"2027-01-14","total":5,"lines":[{"qty":2,"price":2.5,"total":5}]}`,
			want: []string{"/end: end must not be before start (rule: self.end >= self.start)"}},
		{name: "lines do not add up", value: `{"start":"2027-01-15","end":"2027-01-15","total":6,"lines":[{"qty":2,"price":2.5,"total":5}]}`,
			want: []string{"/total: the lines must add up to the total (rule: self.lines.map(l, l.qty * l.price).sum() == self.total)"}},
		{name: "a line's own total, named by its element", value: `{"start":"2027-01-15","end":"2027-01-15","total":16.5,
			"lines":[{"qty":2,"price":2.5,"total":5},{"qty":1,"price":2.5,"total":2.5},{"qty":4,"price":2.5,"total":9}]}`,
			want: []string{
				"/lines/2/total: a line's total is qty times price (rule: self.total == self.qty * self.price)",
				"/total: the lines must add up to the total (rule: self.lines.map(l, l.qty * l.price).sum() == self.total)",
			}},
		{name: "warn", value: `{"start":"2027-01-15","end":"2027-01-15","total":4,
			"lines":[{"qty":1,"price":1,"total":1},{"qty":1,"price":1,"total":1},{"qty":1,"price":1,"total":1},{"qty":1,"price":1,"total":1}]}`,
			want: []string{"/lines: more than three lines is unusual (rule: self.lines.size() <= 3)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := texts(check(t, s, tc.value)); !slices.Equal(got, tc.want) {
				t.Errorf("findings:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestSeverity(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"x-fixpoint-rules":[
		{"rule":"self.a > 10","message":"a is small","path":"/a","severity":"warn"},
		{"rule":"self.a > 0","message":"a must be positive","path":"/a"},
		{"rule":"self.a != 0","message":"no zero","severity":"error"},
		{"rule":"self.b > 0","message":"b should be positive","severity":"warn"},
		{"rule":"self.a < 100","message":"holds"}]}`)
	fs := check(t, s, `{"a":0}`)
	var got []string
	for _, f := range fs {
		got = append(got, string(f.Severity)+" "+f.SchemaPath)
	}
	want := []string{"error /x-fixpoint-rules/2", "warn /x-fixpoint-rules/3", "warn /x-fixpoint-rules/0", "error /x-fixpoint-rules/1"}
	if !slices.Equal(got, want) {
		t.Fatalf("findings %q, want %q", got, want)
	}
	// A rule that cannot be evaluated (b is absent) keeps its severity.
	if f := fs[1]; f.Err == nil || !strings.Contains(f.Err.Error(), "no such key: b") ||
		f.Text() != "(root): b should be positive (rule: self.b > 0; it could not be evaluated: no such key: b)" {
		t.Errorf("the warn rule on the absent b: %q (Err %v)", f.Text(), f.Err)
	}
	errs := Errors(fs)
	if len(errs) != 2 {
		t.Fatalf("Errors returned %d errors, want the 2 of severity error: %+v", len(errs), errs)
	}
	if errs[0] != (fixpoint.ValidationError{Path: "", Keyword: "x-fixpoint-rules", Class: fixpoint.ClassSemantic,
		Message: "(root): no zero (rule: self.a != 0)", Rule: "self.a != 0"}) {
		t.Errorf("first error %+v", errs[0])
	}
	if errs[1] != (fixpoint.ValidationError{Path: "/a", Keyword: "x-fixpoint-rules", Class: fixpoint.ClassSemantic,
		Message: "/a: a must be positive (rule: self.a > 0)", Rule: "self.a > 0"}) {
		t.Errorf("second error %+v", errs[1])
	}
	if Errors(check(t, s, `{"a":50,"b":1}`)) != nil {
		t.Errorf("a value every rule holds for gave errors")
	}
}
