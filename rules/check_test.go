package rules

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// run checks the one-rule schema on value and says what the rule did:
// "holds", "fails", or "error: " and the error.
func run(t *testing.T, schema, value string) string {
	t.Helper()
	fs := check(t, mustCompile(t, schema), value)
	switch {
	case len(fs) == 0:
		return "holds"
	case len(fs) > 1:
		t.Fatalf("one rule gave %d findings: %q", len(fs), texts(fs))
	case fs[0].Err != nil:
		return "error: " + fs[0].Err.Error()
	}
	return "fails"
}

func TestNumbers(t *testing.T) {
	t.Parallel()
	const props = `{"n":{"type":"integer"},"m":{"type":"integer"},"x":{"type":"number"},"y":{"type":"number"},
		"u":{},"opt":{"type":["integer","null"]},"xs":{"type":"array","items":{"type":"number"}},
		"ns":{"type":"array","items":{"type":"integer"}}}`
	for _, tc := range []struct {
		rule, value string
		want        string
	}{
		// An integer is a CEL int, a number a double.
		{"self.n == 3", `{"n":3}`, "holds"},
		{"self.x == 2.5", `{"x":2.5}`, "holds"},
		{"self.x == 3.0", `{"x":3}`, "holds"},
		{"type(self.n) == int && type(self.x) == double", `{"n":3,"x":3}`, "holds"},
		// An integral number written with a fraction or an exponent is
		// still an integer.
		{"self.n == 3", `{"n":3.0}`, "holds"},
		{"self.n == 1000", `{"n":1e3}`, "holds"},
		{"type(self.n) == int", `{"n":3.0}`, "holds"},
		// int / int is integer division, as in CEL.
		{"self.n / self.m == 3", `{"n":7,"m":2}`, "holds"},
		{"double(self.n) / double(self.m) == 3.5", `{"n":7,"m":2}`, "holds"},
		// int with double in + - * / gives a double: the int is promoted.
		{"self.n * self.x == 7.5", `{"n":3,"x":2.5}`, "holds"},
		{"self.x * self.n == 7.5", `{"n":3,"x":2.5}`, "holds"},
		{"self.n + self.x == 5.5 && self.x - self.n == -0.5 && self.n / self.x == 1.2", `{"n":3,"x":2.5}`, "holds"},
		{"self.n * 0.5 == 1.5", `{"n":3}`, "holds"},
		{"self.ns.map(i, i * self.x).sum() == 7.5", `{"ns":[1,2],"x":2.5}`, "holds"},
		// <, <=, >, >= compare an int with a double by value.
		{"self.n < self.x", `{"n":2,"x":2.5}`, "holds"},
		{"self.n >= 2.0 && self.x > 2", `{"n":2,"x":2.5}`, "holds"},
		{"self.n > self.x", `{"n":2,"x":2.5}`, "fails"},
		// sum() of ints is an int, of doubles a double, of none 0.
		{"self.ns.sum() == 6", `{"ns":[1,2,3]}`, "holds"},
		{"self.xs.sum() == 0.75", `{"xs":[0.5,0.25]}`, "holds"},
		{"self.xs.sum() == 0.0 && self.ns.sum() == 0", `{"xs":[],"ns":[]}`, "holds"},
		{"self.ns.sum() > 0", `{"ns":[9223372036854775807,1]}`, "error: integer overflow"},
		{"self.n + 1 > 0", `{"n":9223372036854775807}`, "error: integer overflow"},
		// A number where the schema says nothing is a double; == compares
		// it with an int by value at run time.
		{"self.u == 1", `{"u":1}`, "holds"},
		{"self.u == 1.0", `{"u":1}`, "holds"},
		{"type(self.u) == double", `{"u":1}`, "holds"},
		{"self.u * 2.0 == 3.0", `{"u":1.5}`, "holds"},
		{"self.u * 2 == 3", `{"u":1.5}`, "error: no such overload"},
		// An integer past int64 is a double.
		{"type(self.n) == double", `{"n":9223372036854775808}`, "holds"},
		// A nullable integer is an int or null.
		{"self.opt == null || self.opt > 2", `{"opt":null}`, "holds"},
		{"self.opt == null || self.opt > 2", `{"opt":3}`, "holds"},
		{"self.opt == null || self.opt > 2", `{"opt":1}`, "fails"},
	} {
		t.Run(tc.rule+" on "+tc.value, func(t *testing.T) {
			t.Parallel()
			if got := run(t, objectWith(props, tc.rule), tc.value); !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestNumbersFromGo: values decoded without UseNumber (float64) or built
// in Go (int) are read the same way.
func TestNumbersFromGo(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, objectWith(`{"n":{"type":"integer"},"x":{"type":"number"}}`,
		"type(self.n) == int && self.n == 3 && type(self.x) == double && self.x == 2.0"))
	for _, v := range []map[string]any{{"n": 3.0, "x": 2.0}, {"n": 3, "x": 2}, {"n": int64(3), "x": float32(2)}} {
		if fs, err := s.Check(t.Context(), v); err != nil || len(fs) > 0 {
			t.Errorf("%#v: %q, %v", v, texts(fs), err)
		}
	}
}

func TestOptionalFields(t *testing.T) {
	t.Parallel()
	const props = `{"start":{"type":"string"},"end":{"type":"string"},"note":{"type":["string","null"]},
		"addr":{"type":"object","properties":{"zip":{"type":"string","x-fixpoint-rules":[{"rule":"self.size() == 5","message":"zip"}]}}}}`
	for _, tc := range []struct {
		rule, value, want string
	}{
		// has() says whether the field is there.
		{"has(self.end)", `{"start":"a"}`, "fails"},
		{"!has(self.end) || self.end >= self.start", `{"start":"b"}`, "holds"},
		{"!has(self.end) || self.end >= self.start", `{"start":"b","end":"a"}`, "fails"},
		// A null field is there.
		{"has(self.note) && self.note == null", `{"note":null}`, "holds"},
		// Reading an absent field is an error of the rule.
		{"self.end >= self.start", `{"start":"b"}`, "error: no such key: end"},
		{"self.addr.zip == '12345'", `{"addr":{}}`, "error: no such key: zip"},
		// A rule on an absent field's own schema does not run.
		{"true", `{"addr":{}}`, "holds"},
		{"true", `{"addr":{"zip":"1"}}`, "fails"},
	} {
		t.Run(tc.rule+" on "+tc.value, func(t *testing.T) {
			t.Parallel()
			got := run(t, objectWith(props, tc.rule), tc.value)
			if tc.want == "fails" && tc.rule == "true" {
				// The zip's own rule, not the root's.
				fs := check(t, mustCompile(t, objectWith(props, tc.rule)), tc.value)
				if len(fs) != 1 || fs[0].Path != "/addr/zip" {
					t.Fatalf("findings %q, want the zip's rule at /addr/zip", texts(fs))
				}
				return
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestTypes: the types the schema gives the places a rule reads.
func TestTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		props, rule, value, want string
	}{
		// An object with only additionalProperties is a map.
		{`{"m":{"type":"object","additionalProperties":{"type":"integer"}}}`,
			"has(self.m.a) && !has(self.m.b) && self.m.all(k, self.m[k] > 0) && type(self.m.a) == int", `{"m":{"a":1}}`, "holds"},
		// An anyOf of a type and null is that type, or null.
		{`{"a":{"anyOf":[{"type":"integer"},{"type":"null"}]}}`, "self.a == null || self.a > 2", `{"a":1}`, "fails"},
		{`{"a":{"anyOf":[{"type":"integer"},{"type":"null"}]}}`, "type(self.a) == int", `{"a":1}`, "holds"},
		{`{"a":{"anyOf":[{"$ref":"#/properties/b"},{"type":"null"}]},"b":{"type":"object","properties":{"n":{"type":"integer"}}}}`,
			"self.a == null || self.a.n > 0", `{"a":{"n":0}}`, "fails"},
		// allOf: integer with number is integer.
		{`{"n":{"allOf":[{"type":"number"},{"type":"integer"}]}}`, "type(self.n) == int", `{"n":2}`, "holds"},
		// Without "type", properties make an object.
		{`{"p":{"properties":{"n":{"type":"integer"}}}}`, "self.p.n == 2", `{"p":{"n":2}}`, "holds"},
		// A member that is no identifier, in backticks.
		{`{"first-name":{"type":"string"},"in":{"type":"integer"}}`, "self.`first-name` == 'Ada' && self.`in` == 1",
			`{"first-name":"Ada","in":1}`, "holds"},
		// Dates as strings, and as timestamps.
		{`{"day":{"type":"string"}}`, `self.day < "2027-01-01" && timestamp(self.day + "T00:00:00Z") < timestamp("2027-01-01T00:00:00Z")`,
			`{"day":"2026-12-31"}`, "holds"},
		{`{"day":{"type":"string"}}`, `timestamp(self.day) < timestamp("2027-01-01T00:00:00Z")`, `{"day":"31.12.2026"}`,
			"error: invalid RFC 3339 timestamp"},
		// lists.range is bounded.
		{`{}`, "lists.range(20000).size() > 0", `{}`, "error: lists.range: size 20000 exceeds maximum allowed (10000)"},
	} {
		t.Run(tc.rule+" on "+tc.value, func(t *testing.T) {
			t.Parallel()
			if got := run(t, objectWith(tc.props, tc.rule), tc.value); !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestNull: a rule does not run on null, whatever its schema allows.
func TestNull(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","properties":{"p":{"type":["object","null"],"properties":{"a":{"type":"integer"}},
		"x-fixpoint-rules":[{"rule":"self.a > 0","message":"a"}]}}}`)
	if fs := check(t, s, `{"p":null}`); len(fs) != 0 {
		t.Errorf("a rule ran on null: %q", texts(fs))
	}
	if fs := check(t, s, `{"p":{"a":0}}`); len(fs) != 1 || fs[0].Path != "/p" || fs[0].Err != nil {
		t.Errorf("on an object: %q, want the rule failing at /p", texts(fs))
	}
}

func TestPlaces(t *testing.T) {
	t.Parallel()
	pos := func(path string) string {
		return `"x-fixpoint-rules":[{"rule":"self.n > 0","message":"positive","path":"` + path + `"}]`
	}
	item := `{"type":"object","properties":{"n":{"type":"integer"}},` + pos("/n") + `}`
	for _, tc := range []struct {
		name, schema, value string
		want                []string // the Path of each finding
	}{
		{name: "items, indexes in order", schema: `{"type":"array","items":` + item + `}`,
			value: `[{"n":1},{"n":0},{"n":2},{"n":-1},{"n":1},{"n":1},{"n":1},{"n":1},{"n":1},{"n":1},{"n":0}]`,
			want:  []string{"/1/n", "/3/n", "/10/n"}},
		{name: "nested arrays", schema: `{"type":"object","properties":{"rows":{"type":"array","items":{"type":"array","items":` + item + `}}}}`,
			value: `{"rows":[[{"n":1}],[{"n":1},{"n":0}]]}`, want: []string{"/rows/1/1/n"}},
		{name: "prefixItems then items", schema: `{"type":"array","prefixItems":[{"type":"object","properties":{"n":{"type":"integer"}},` +
			`"x-fixpoint-rules":[{"rule":"self.n > 100"}]}],"items":` + item + `}`,
			value: `[{"n":5},{"n":0},{"n":5}]`, want: []string{"/0", "/1/n"}},
		{name: "draft-07 items array and additionalItems", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array",` +
			`"items":[{"type":"object","properties":{"n":{"type":"integer"}},"x-fixpoint-rules":[{"rule":"self.n > 100"}]}],"additionalItems":` + item + `}`,
			value: `[{"n":5},{"n":0}]`, want: []string{"/0", "/1/n"}},
		{name: "additionalProperties, keys escaped", schema: `{"type":"object","properties":{"skip":{"type":"object"}},"additionalProperties":` + item + `}`,
			value: `{"skip":{"n":0},"a/b":{"n":0},"c~d":{"n":1},"e":{"n":0}}`, want: []string{"/a~1b/n", "/e/n"}},
		{name: "patternProperties, and additionalProperties for the rest", schema: `{"type":"object","patternProperties":{"^p_":` + item +
			`},"additionalProperties":{"type":"object","properties":{"n":{"type":"integer"}},` + pos("") + `}}`,
			value: `{"p_a":{"n":0},"q":{"n":0},"p_b":{"n":1}}`, want: []string{"/p_a/n", "/q"}},
		{name: "$ref to $defs, recursively", schema: `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"n":{"type":"integer"},` +
			`"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},` + pos("/n") + `}}}`,
			value: `{"n":1,"kids":[{"n":0,"kids":[]},{"n":2,"kids":[{"n":-3}]}]}`, want: []string{"/kids/0/n", "/kids/1/kids/0/n"}},
		{name: "an array of such arrays", schema: `{"type":"array","items":{"$ref":"#"},"x-fixpoint-rules":[{"rule":"self.size() < 3"}]}`,
			value: `[[],[[],[],[]],[[[],[],[]]]]`, want: []string{"", "/1", "/2/0"}},
		{name: "$anchor", schema: `{"type":"object","properties":{"a":{"$ref":"#it"}},"$defs":{"x":{"$anchor":"it","type":"object",` +
			`"properties":{"n":{"type":"integer"}},` + pos("/n") + `}}}`,
			value: `{"a":{"n":0}}`, want: []string{"/a/n"}},
		{name: "allOf", schema: `{"type":"object","properties":{"a":{"allOf":[` + item + `,{"required":["n"]}]}}}`,
			value: `{"a":{"n":0}}`, want: []string{"/a/n"}},
		{name: "anyOf object or null: the object branch on objects only", schema: `{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/i"},{"type":"null"}]},` +
			`"$defs":{"i":` + item + `}}`,
			value: `[null,{"n":0},null,{"n":1}]`, want: []string{"/1/n"}},
		{name: "oneOf string or object", schema: `{"type":"object","properties":{"v":{"oneOf":[{"type":"string","x-fixpoint-rules":[` +
			`{"rule":"self.size() > 1"}]},` + item + `]}}}`,
			value: `{"v":"x"}`, want: []string{"/v"}},
		{name: "oneOf string or object, the object", schema: `{"type":"object","properties":{"v":{"oneOf":[{"type":"string","x-fixpoint-rules":[` +
			`{"rule":"self.size() > 1"}]},` + item + `]}}}`,
			value: `{"v":{"n":0}}`, want: []string{"/v/n"}},
		{name: "the same rule reached twice runs once", schema: `{"type":"object","properties":{"a":{"allOf":[{"$ref":"#/$defs/i"},{"$ref":"#/$defs/i"}]}},` +
			`"$defs":{"i":` + item + `}}`,
			value: `{"a":{"n":0}}`, want: []string{"/a/n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, f := range check(t, mustCompile(t, tc.schema), tc.value) {
				if f.Err != nil {
					t.Errorf("%s: %v", f.Text(), f.Err)
				}
				got = append(got, f.Path)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings at %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWrongShape: on a value its schema refuses, a rule that cannot read
// what it needs is an error of the rule, never a pass.
func TestWrongShape(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, invoiceSchema)
	for _, v := range []string{`"an invoice"`, `{"start":"a","end":"b","total":"12","lines":[]}`, `{"start":"a","end":["b"],"total":0,"lines":[]}`} {
		fs := check(t, s, v)
		if len(Errors(fs)) == 0 {
			t.Errorf("%s passed the rules: %q", v, texts(fs))
		}
	}
}

func TestCostLimit(t *testing.T) {
	t.Parallel()
	ints := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]" }
	xs := `{"xs":{"type":"array","items":{"type":"integer"}}}`
	for _, tc := range []struct{ name, rule string }{
		{"nested comprehension", "self.xs.all(a, self.xs.all(b, a <= b))"},
		{"map over map", "self.xs.map(a, self.xs.map(b, a * b)).size() > 0"},
		// sum() counts its list's length: inside a loop over the same
		// list it costs what it does.
		{"sum in a loop", "self.xs.all(a, self.xs.sum() > 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := check(t, mustCompile(t, objectWith(xs, tc.rule)), `{"xs":`+ints(3000)+`}`)
			if len(fs) != 1 || !errors.Is(fs[0].Err, ErrCostLimit) {
				t.Fatalf("findings %q, want one over the cost limit", texts(fs))
			}
			if want := fmt.Sprintf("cost limit exceeded: the rule costs more than %d", CostLimit); !strings.Contains(fs[0].Text(), want) {
				t.Errorf("%q does not say %q", fs[0].Text(), want)
			}
			if fs[0].Severity != SeverityError || len(Errors(fs)) != 1 {
				t.Errorf("a rule over the limit is not an error of the value")
			}
		})
	}
	// The same rule on a short list is well under the limit.
	if fs := check(t, mustCompile(t, objectWith(xs, "self.xs.all(a, self.xs.all(b, a <= b))")), `{"xs":`+ints(100)+`}`); len(fs) != 0 {
		t.Errorf("on 100 items: %q", texts(fs))
	}
}

// TestCheckCostLimit: rules each under CostLimit, run on so many places
// that together they pass CheckCostLimit, stop there with one finding of
// severity error, whatever the rule's own.
func TestCheckCostLimit(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"array","items":{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"}}},
		"x-fixpoint-rules":[{"rule":"self.xs.all(a, self.xs.all(b, a <= b)) && self.xs.size() > 1000","message":"long","severity":"warn"}]}}`)
	row := `{"xs":[` + strings.TrimSuffix(strings.Repeat("1,", 300), ",") + `]}`
	const rows = 100
	fs := check(t, s, "["+strings.TrimSuffix(strings.Repeat(row+",", rows), ",")+"]")
	if len(fs) < 2 || len(fs) > rows {
		t.Fatalf("%d findings, want the rows checked before the limit, then the limit", len(fs))
	}
	var over []Finding
	for _, f := range fs {
		if errors.Is(f.Err, ErrCostLimit) {
			over = append(over, f)
		} else if f.Severity != SeverityWarn || f.Err != nil {
			t.Errorf("a row's own finding: %q", f.Text())
		}
	}
	if len(over) != 1 || over[0].Severity != SeverityError ||
		!strings.Contains(over[0].Text(), fmt.Sprintf("the rules of this value cost more than %d together; the rest were not run", CheckCostLimit)) {
		t.Fatalf("findings over the limit: %q, want one of severity error", texts(over))
	}
	if len(fs) == rows+1 {
		t.Errorf("every row was checked after the limit")
	}
}

// TestMaxEvaluations: a cheap rule on so many items that its runs pass
// MaxEvaluations stops there, with one finding of severity error.
func TestMaxEvaluations(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"array","items":{"type":"integer","x-fixpoint-rules":[{"rule":"self > 0","severity":"warn"}]}}`)
	// Exactly MaxEvaluations runs are allowed.
	if fs := check(t, s, "["+strings.Repeat("1,", MaxEvaluations-1)+"0]"); len(fs) != 1 || fs[0].Err != nil {
		t.Fatalf("%d items: findings %q, want the last item's", MaxEvaluations, texts(fs))
	}
	fs := check(t, s, "["+strings.Repeat("1,", MaxEvaluations+10)+"0]")
	if len(fs) != 1 || !errors.Is(fs[0].Err, ErrCostLimit) || fs[0].Severity != SeverityError ||
		fs[0].Path != fmt.Sprintf("/%d", MaxEvaluations) ||
		!strings.Contains(fs[0].Text(), fmt.Sprintf("the rules of this value ran %d times; this one and the rest were not run", MaxEvaluations)) {
		t.Fatalf("findings %q, want one at the first item not run", texts(fs))
	}
}

// TestContext: a check whose context ends returns the context's error,
// and no findings.
func TestContext(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, invoiceSchema)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	fs, err := s.Check(ctx, decode(t, `{"start":"b","end":"a","total":1,"lines":[]}`))
	if !errors.Is(err, context.Canceled) || fs != nil {
		t.Errorf("Check = %q, %v; want no findings and context.Canceled", texts(fs), err)
	}
}

// endingCtx is a context that is live when first asked, and ended from
// then on: it ends during the rule's evaluation.
type endingCtx struct {
	context.Context
	asked atomic.Int32
	done  chan struct{}
}

func (c *endingCtx) Done() <-chan struct{} { return c.done }
func (c *endingCtx) Err() error {
	if c.asked.Add(1) == 1 {
		return nil
	}
	return context.Canceled
}

// TestInterrupt: a context that ends while a rule runs stops it (cel-go's
// interrupt check in comprehensions) and the check returns its error.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, objectWith(`{"xs":{"type":"array","items":{"type":"integer"}}}`, "self.xs.all(a, a > 0)"))
	ctx := &endingCtx{Context: t.Context(), done: make(chan struct{})}
	close(ctx.done)
	// The rule holds: only the interrupt can make it end in an error.
	fs, err := s.Check(ctx, decode(t, `{"xs":[`+strings.TrimSuffix(strings.Repeat("1,", 10*interruptEvery), ",")+`]}`))
	if !errors.Is(err, context.Canceled) || fs != nil {
		t.Errorf("Check = %q, %v; want the evaluation interrupted", texts(fs), err)
	}
}

// TestConcurrentChecks: a Set is used by many checks at once (run under
// -race).
func TestConcurrentChecks(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, invoiceSchema)
	value := `{"start":"2027-01-15","end":"2027-01-14","total":16.5,
		"lines":[{"qty":2,"price":2.5,"total":5},{"qty":1,"price":2.5,"total":2.5},{"qty":4,"price":2.5,"total":9}]}`
	want := texts(check(t, s, value))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				fs, err := s.Check(context.Background(), decode(t, value))
				if err != nil || !slices.Equal(texts(fs), want) {
					t.Errorf("concurrent Check = %q, %v; want %q", texts(fs), err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
