package validate

import (
	"errors"
	"testing"

	"github.com/fixpoint-dev/fixpoint/internal/schematest"
	"github.com/fixpoint-dev/fixpoint/satisfy"
)

// Crashers found by these targets are kept under testdata/fuzz/.

func FuzzCompile(f *testing.F) {
	for _, tc := range compileErrorCases {
		f.Add([]byte(tc.schema))
	}
	for _, tc := range validateCases {
		f.Add([]byte(tc.schema))
	}
	for _, tc := range unsatisfiableCases {
		f.Add([]byte(tc.schema))
	}
	for _, tc := range satisfiableCases {
		f.Add([]byte(tc.schema))
	}
	f.Add([]byte(schematest.TypicalSchema))
	// Patterns the backtracking engine matches, and repeated ids.
	f.Add([]byte(`{"type":"string","pattern":"^(?!io\\.papermc\\.)[a-z.]+$"}`))
	f.Add([]byte(`{"patternProperties":{"(?<=a)b":{"type":"integer"}},"propertyNames":{"pattern":"^(.)\\1?$"}}`))
	f.Add([]byte(`{"$schema":"http://json-schema.org/draft-04/schema#","items":[{"id":"x.json","type":"string"},{"id":"x.json","type":"integer"}],"additionalItems":{"$ref":"x.json"}}`))
	f.Add([]byte(`{"$schema":"http://json-schema.org/draft-06/schema#","properties":{"a":{"$id":"#i","minimum":1},"b":{"$id":"#i"}},"not":{"$ref":"#i"}}`))
	values := []any{nil, true, map[string]any{}, []any{}, "x", mustDecode(f, `{"a":[1,"b",{"c":null}]}`),
		mustDecode(f, `0`), mustDecode(f, `1.5`), mustDecode(f, `[null]`), mustDecode(f, `{"a":{}}`)}
	f.Fuzz(func(t *testing.T, schema []byte) {
		s, err := Compile(schema)
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) || !errors.Is(err, ErrSchema) {
				t.Fatalf("Compile error %T %v is not a *SchemaError matching ErrSchema", err, err)
			}
			return
		}
		// Satisfiable is conservative: a value that validates proves it
		// wrong. Its error is a *SchemaError matching both sentinels.
		sat := s.Satisfiable()
		var se *SchemaError
		if sat != nil && (!errors.As(sat, &se) || !errors.Is(sat, ErrSchema) || !errors.Is(sat, satisfy.ErrUnsatisfiable)) {
			t.Fatalf("Satisfiable error %T %v is not a *SchemaError matching ErrSchema and satisfy.ErrUnsatisfiable", sat, sat)
		}
		for _, v := range values {
			errs := s.Validate(v)
			if err := checkErrors(errs); err != nil {
				t.Fatal(err)
			}
			if sat != nil && len(errs) == 0 {
				t.Fatalf("Satisfiable() = %v, but %v is valid", sat, v)
			}
		}
	})
}

func FuzzValidate(f *testing.F) {
	for _, tc := range validateCases {
		f.Add(tc.schema, tc.value)
	}
	f.Add(schematest.TypicalSchema, schematest.TypicalValue)
	for _, tc := range satisfiableCases {
		f.Add(tc.schema, tc.value)
	}
	for _, tc := range partialCases {
		f.Add(tc.schema, tc.value)
	}
	f.Fuzz(func(t *testing.T, schema, value string) {
		s, err := Compile([]byte(schema))
		if err != nil {
			return
		}
		v, err := decode([]byte(value))
		if err != nil {
			return
		}
		errs := s.Validate(v)
		if err := checkErrors(errs); err != nil {
			t.Fatal(err)
		}
		if len(numberErrors(v)) > 0 {
			// The library must not see these (it panics); Validate reports them.
			if len(errs) == 0 || errs[0].Keyword != "number" {
				t.Fatalf("out-of-range number: got %v, want number errors", errs)
			}
			return
		}
		if libValid := s.sch.Validate(v) == nil; libValid != (len(errs) == 0) {
			t.Fatalf("library valid = %v, but %d errors: %v", libValid, len(errs), errs)
		}
		if len(errs) == 0 {
			if err := s.Satisfiable(); err != nil {
				t.Fatalf("Satisfiable() = %v, but the value is valid", err)
			}
		}
		// The partial schema compiles whenever the schema does, reports
		// no missing property, and accepts what the schema accepts.
		p, err := s.Partial()
		if err != nil {
			t.Fatalf("Partial: %v", err)
		}
		perrs := p.Validate(v)
		if err := checkErrors(perrs); err != nil {
			t.Fatal(err)
		}
		for _, e := range perrs {
			if e.Keyword == "required" || e.Keyword == "dependentRequired" || e.Keyword == "dependencies" {
				t.Fatalf("the partial schema reports a missing property: %v", e)
			}
		}
		if len(errs) == 0 && len(perrs) > 0 {
			t.Fatalf("valid, but the partial schema reports %v", perrs)
		}
	})
}
