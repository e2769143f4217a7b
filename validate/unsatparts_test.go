package validate

import (
	"errors"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/satisfy"
)

// A declared property no value satisfies leaves the schema satisfiable
// (the property is optional) but fails every reply that gives it: it is
// listed, with where and why; a property forbidden with false is not.
func TestUnsatisfiableParts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, schema string
		want         []string // locations listed, in order
		why          string
	}{
		{"optional self-loop", `{"type":"object","properties":{"x":{"type":"object","required":["a"],"properties":{"a":{"$ref":"#/properties/x"}}}}}`,
			[]string{"/properties/x"}, "only an infinitely deep value"},
		{"deep in $defs", `{"$defs":{"n":{"type":"object","required":["next"],"properties":{"next":{"$ref":"#/$defs/n"}}}},"type":"object","properties":{"ok":{"type":"string"},"list":{"type":"array","items":{"type":"object","properties":{"head":{"$ref":"#/$defs/n"}}}}}}`,
			[]string{"/properties/list/items/properties/head"}, "refers back to /$defs/n"},
		{"no type in common", `{"type":"object","properties":{"n":{"allOf":[{"type":"string"},{"type":"integer"}]}}}`,
			[]string{"/properties/n"}, ""},
		{"items", `{"type":"array","items":{"type":"object","required":["a"],"properties":{"a":{"$ref":"#/items"}}}}`,
			[]string{"/items"}, "only an infinitely deep value"},
		{"forbidden with false", `{"type":"object","properties":{"x":false}}`, nil, ""},
		{"satisfiable", `{"type":"object","properties":{"x":{"type":"object","properties":{"a":{"$ref":"#/properties/x"}}}}}`, nil, ""},
		{"unsatisfiable root is Satisfiable's", `{"type":"object","required":["a"],"properties":{"a":{"$ref":"#"}}}`, nil, ""},
	} {
		sch, err := Compile([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := sch.UnsatisfiableParts()
		var locs []string
		for _, e := range got {
			var se *SchemaError
			if !errors.As(e, &se) || !errors.Is(e, satisfy.ErrUnsatisfiablePart) || !errors.Is(e, ErrSchema) {
				t.Errorf("%s: %v is not a SchemaError matching satisfy.ErrUnsatisfiablePart and ErrSchema", tc.name, e)
				continue
			}
			locs = append(locs, se.Location)
			if tc.why != "" && !strings.Contains(e.Error(), tc.why) {
				t.Errorf("%s: %v does not say %q", tc.name, e, tc.why)
			}
		}
		if strings.Join(locs, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: listed %q, want %q (%v)", tc.name, locs, tc.want, got)
		}
	}
}
