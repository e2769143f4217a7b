package validate

import (
	"slices"
	"testing"

	"github.com/fixpoint-dev/fixpoint/subschema"
)

// TestReaderAt: what the schema wants at a location, through conjunctions,
// alternatives and conditionals.
func TestReaderAt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, value, ptr string
		types                    subschema.Types
		strs                     []string // nil: strings open (unless types has no string)
		required                 []string
	}{
		{name: "type", schema: `{"type":["integer","null"]}`, value: `1`, types: subschema.TypeInteger | subschema.TypeNull, strs: []string{}},
		{name: "enum kinds", schema: `{"enum":["a",1.5,null]}`, value: `1`, types: subschema.TypeString | subschema.TypeFraction | subschema.TypeNull, strs: []string{"a"}},
		{name: "allOf intersects", schema: `{"allOf":[{"enum":["a","b","c"]},{"enum":["b","c","d"]}]}`, value: `1`, types: subschema.TypeString, strs: []string{"b", "c"}},
		{name: "anyOf unites", schema: `{"anyOf":[{"const":"a"},{"const":"b"},{"type":"integer"}]}`, value: `1`, types: subschema.TypeString | subschema.TypeInteger, strs: []string{"a", "b"}},
		{name: "anyOf with an open string", schema: `{"anyOf":[{"const":"a"},{"type":"string"}]}`, value: `1`, types: subschema.TypeString},
		{name: "property through ref", schema: `{"$defs":{"n":{"type":"number"}},"properties":{"a":{"$ref":"#/$defs/n"}}}`, value: `{"a":1}`, ptr: "/a", types: subschema.TypeNumber, strs: []string{}},
		{name: "false additional", schema: `{"additionalProperties":false}`, value: `{"a":1}`, ptr: "/a", types: 0, strs: []string{}},
		{name: "draft-07 items tuple", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}],"additionalItems":{"type":"boolean"}}`,
			value: `["x",true]`, ptr: "/1", types: subschema.TypeBoolean, strs: []string{}},
		{name: "draft-07 ref ignores siblings", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s","type":"integer"}}}`,
			value: `{"a":1}`, ptr: "/a", types: subschema.TypeString},
		{name: "required in all places", schema: `{"required":["a"],"allOf":[{"required":["b"]}],"anyOf":[{"required":["c"]},{}],"if":{"required":["z"]},"then":{"required":["d"]},"dependentSchemas":{"a":{"required":["e"]}}}`,
			value: `{}`, types: subschema.TypeAny, required: []string{"a", "b", "c", "d", "e"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tc.schema)
			c, release := s.Begin()
			defer release()
			got := c.Reader(mustDecode(t, tc.value)).At(SplitPointer(tc.ptr))
			if got.Unknown || got.Types != tc.types {
				t.Fatalf("types = %v (unknown %v), want %v", got.Types, got.Unknown, tc.types)
			}
			if (tc.strs != nil) != got.StringsClosed || tc.strs != nil && !slices.Equal(slices.Sorted(slices.Values(got.Strings)), tc.strs) {
				t.Fatalf("strings closed %v %q, want %q", got.StringsClosed, got.Strings, tc.strs)
			}
			if r := slices.Sorted(slices.Values(got.Required)); !slices.Equal(r, tc.required) {
				t.Fatalf("required = %q, want %q", r, tc.required)
			}
		})
	}
}
