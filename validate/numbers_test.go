package validate

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

func TestNumberTextProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		wantOK bool
	}{
		{"0", true}, {"-0", true}, {"12", true}, {"1.5", true}, {"-1.5e10", true}, {"1E+3", true}, {"2e-1000", true}, {"1e1000", true},
		{"", false}, {"-", false}, {"01", false}, {"1.", false}, {".5", false}, {"1e", false}, {"1e+", false}, {"NaN", false},
		{"Infinity", false}, {"1x", false}, {"0x10", false}, {"1e1001", false}, {"1e-4999999", false}, {"1e99999999999999999999", false},
	}
	for _, tc := range tests {
		if got := numberTextProblem(tc.in) == ""; got != tc.wantOK {
			t.Errorf("numberTextProblem(%q) ok = %v, want %v (%s)", tc.in, got, tc.wantOK, numberTextProblem(tc.in))
		}
	}
}

func TestValidateHugeNumbers(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true,"items":{"minimum":0}}},"required":["zzz"]}`)
	tests := []struct {
		name string
		v    any
		want []fixpoint.ValidationError
	}{
		{
			// These used to panic inside the library (big.Rat SetString fails).
			name: "exponent too large",
			v:    map[string]any{"a": []any{json.Number("1"), json.Number("1e4999999")}},
			want: []fixpoint.ValidationError{{Path: "/a/1", Keyword: "number", Class: fixpoint.ClassSemantic, Message: "/a/1: number 1e4999999 is out of range: the exponent must be within ±1000"}},
		},
		{
			name: "not a number",
			v:    map[string]any{"a": []any{json.Number("NaN"), math.Inf(1)}},
			want: []fixpoint.ValidationError{
				{Path: "/a/0", Keyword: "number", Class: fixpoint.ClassSemantic, Message: `/a/0: "NaN" is not a JSON number`},
				{Path: "/a/1", Keyword: "number", Class: fixpoint.ClassSemantic, Message: `/a/1: +Inf is not a JSON number`},
			},
		},
		{
			name: "within range validates normally",
			v:    map[string]any{"a": []any{json.Number("-1e1000")}},
			want: []fixpoint.ValidationError{
				{Path: "/a/0", Keyword: "minimum", Class: fixpoint.ClassSemantic, Message: `/a/0: -1e1000 is less than the minimum 0`},
				{Path: "/zzz", Keyword: "required", Class: fixpoint.ClassShape, Message: `/zzz: missing required property "zzz"`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := s.Validate(tc.v); !slices.Equal(got, tc.want) {
				t.Fatalf("got\n%s\nwant\n%s", dump(got), dump(tc.want))
			}
		})
	}
}

func TestCompileHugeNumbers(t *testing.T) {
	t.Parallel()
	_, err := Compile([]byte(`{"properties":{"a":{"maximum":1e4999999}}}`))
	var se *SchemaError
	if !errors.As(err, &se) || se.Keyword != "maximum" || se.Location != "/properties/a/maximum" {
		t.Fatalf("got %v, want a SchemaError at /properties/a/maximum", err)
	}
}
