package validate

import (
	"errors"
	"testing"
)

// Crashers found by these targets are kept under testdata/fuzz/.

func FuzzCompile(f *testing.F) {
	for _, tc := range compileErrorCases {
		f.Add([]byte(tc.schema))
	}
	for _, tc := range validateCases {
		f.Add([]byte(tc.schema))
	}
	f.Add([]byte(typicalSchema))
	values := []any{nil, true, map[string]any{}, []any{}, "x", mustDecode(f, `{"a":[1,"b",{"c":null}]}`)}
	f.Fuzz(func(t *testing.T, schema []byte) {
		s, err := Compile(schema)
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) || !errors.Is(err, ErrSchema) {
				t.Fatalf("Compile error %T %v is not a *SchemaError matching ErrSchema", err, err)
			}
			return
		}
		for _, v := range values {
			if err := checkErrors(s.Validate(v)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzValidate(f *testing.F) {
	for _, tc := range validateCases {
		f.Add(tc.schema, tc.value)
	}
	f.Add(typicalSchema, typicalValue)
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
	})
}
