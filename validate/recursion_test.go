package validate

import (
	"strings"
	"testing"
)

// A schema whose recursion branches (two applicators at one place that each
// go on to the same definition for a child) checks a value nested d levels
// against k^d copies; its values are checked to the depth MaxCopies allows.
// Recursion that does not branch (a tree, a list, any JSON value) has no
// such limit.
func TestRecursionLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, schema string
		want         int
	}{
		{"flat", `{"type":"object","properties":{"a":{"type":"string"}}}`, 0},
		{"linked list", `{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#"}}}`, 0},
		{"binary tree", `{"type":"object","properties":{"left":{"$ref":"#"},"right":{"$ref":"#"}}}`, 0},
		{"any JSON value", `{"$defs":{"v":{"anyOf":[{"type":"string"},{"type":"number"},{"type":"object","additionalProperties":{"$ref":"#/$defs/v"}},{"type":"array","items":{"$ref":"#/$defs/v"}}]}},"$ref":"#/$defs/v"}`, 0},
		{"tree of children", `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`, 0},
		{"property and pattern", `{"type":"object","properties":{"a":{"$ref":"#"}},"patternProperties":{"^a$":{"$ref":"#"},"a":{"$ref":"#"}}}`, 6},
		{"anyOf of two shapes", `{"$defs":{"n":{"anyOf":[{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},"required":["x"]},{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},"required":["y"]}]}},"$ref":"#/$defs/n"}`, 10},
		{"oneOf of node kinds", `{"$defs":{"node":{"oneOf":[{"properties":{"kind":{"const":"a"},"kids":{"items":{"$ref":"#/$defs/node"}}}},{"properties":{"kind":{"const":"b"},"kids":{"items":{"$ref":"#/$defs/node"}}}}]}},"$ref":"#/$defs/node"}`, 21}, // a node level is two value levels
	} {
		s, err := Compile([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := s.MaxDepth(); got != tc.want {
			t.Errorf("%s: MaxDepth %d, want %d", tc.name, got, tc.want)
		}
	}
}

// A value nested deeper than the schema checks is refused at its deepest
// place, quickly: checked, a 100-byte reply nested 20 levels took 44 s and
// ran out of memory at 6 GB.
func TestValidateRefusesTooDeepForTheSchema(t *testing.T) {
	t.Parallel()
	s, err := Compile([]byte(`{"$defs":{"n":{"anyOf":[{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},"required":["x"]},{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},"required":["y"]}]}},"$ref":"#/$defs/n"}`))
	if err != nil {
		t.Fatal(err)
	}
	nested := func(d int) any {
		var v any = map[string]any{"x": 1}
		for range d {
			v = map[string]any{"a": v, "x": 1}
		}
		return v
	}
	if errs := s.Validate(nested(s.MaxDepth() - 1)); len(errs) != 0 {
		t.Errorf("a value within the limit: %v", errs)
	}
	errs := s.Validate(nested(40))
	if len(errs) != 1 || errs[0].Keyword != "maxDepth" || errs[0].Class != ClassShape ||
		errs[0].Path != strings.Repeat("/a", s.MaxDepth()+1) || !strings.Contains(errs[0].Message, "more than 10 levels deep") {
		t.Fatalf("errors %+v; want one maxDepth error at the first place too deep", errs)
	}
}

// BenchmarkCompileRecursiveWide measures the recursion analysis on a
// recursive schema of 200 properties, each a $ref to the root, and an
// anyOf of two shapes that recurse too.
func BenchmarkCompileRecursiveWide(b *testing.B) {
	var props []string
	for i := range 200 {
		props = append(props, `"p`+strings.Repeat("x", i%7)+string(rune('a'+i%26))+`_`+itoa(i)+`":{"$ref":"#"}`)
	}
	schema := []byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"anyOf":[{"properties":{"k":{"$ref":"#"}}},{"properties":{"k":{"items":{"$ref":"#"}}}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		s, err := Compile(schema)
		if err != nil || s.MaxDepth() != 0 {
			b.Fatal(s.MaxDepth(), err)
		}
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
