package validate

import (
	"slices"
	"strings"
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

// TestReaderKey: the item key an array's schema names, through a $ref
// and the alternative the value is meant for, and whether it is a tuple.
func TestReaderKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, value, ptr string
		key                      []string
		tuple                    bool
	}{
		{name: "a name", schema: `{"properties":{"subs":{"type":"array","x-fixpoint-key":"name"}}}`, value: `{"subs":[]}`, ptr: "/subs", key: []string{"name"}},
		{name: "a list through a $ref", schema: `{"$defs":{"lines":{"type":"array","x-fixpoint-key":["sku","lot"]}},"properties":{"a":{"properties":{"lines":{"$ref":"#/$defs/lines"}}}}}`,
			value: `{"a":{"lines":[]}}`, ptr: "/a/lines", key: []string{"sku", "lot"}},
		{name: "the alternative of the discriminator", schema: `{"oneOf":[{"properties":{"k":{"const":"a"},"xs":{"x-fixpoint-key":"id"}}},{"properties":{"k":{"const":"b"},"xs":{"x-fixpoint-key":"code"}}}]}`,
			value: `{"k":"b","xs":[]}`, ptr: "/xs", key: []string{"code"}},
		{name: "none", schema: `{"properties":{"subs":{"type":"array"}}}`, value: `{"subs":[]}`, ptr: "/subs"},
		{name: "named wrongly", schema: `{"properties":{"subs":{"x-fixpoint-key":7}}}`, value: `{"subs":[]}`, ptr: "/subs"},
		{name: "under const is no keyword", schema: `{"properties":{"subs":{"const":{"x-fixpoint-key":"a"}}}}`, value: `{"subs":{"x-fixpoint-key":"a"}}`, ptr: "/subs"},
		{name: "prefixItems", schema: `{"properties":{"at":{"prefixItems":[{"type":"number"},{"type":"number"}]}}}`, value: `{"at":[1,2]}`, ptr: "/at", tuple: true},
		{name: "draft-07 items list", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"at":{"items":[{"type":"number"}]}}}`, value: `{"at":[1]}`, ptr: "/at", tuple: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tc.schema)
			c, release := s.Begin()
			defer release()
			got := c.Reader(mustDecode(t, tc.value)).At(SplitPointer(tc.ptr))
			if !slices.Equal(got.Key, tc.key) || got.Tuple != tc.tuple {
				t.Fatalf("key %q tuple %v, want %q %v", got.Key, got.Tuple, tc.key, tc.tuple)
			}
		})
	}
}

func TestItemKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    string
		want []string
		err  string
	}{
		{`"name"`, []string{"name"}, ""},
		{`["a","b"]`, []string{"a", "b"}, ""},
		{`[]`, nil, "an empty list"},
		{`[""]`, nil, "an empty field name"},
		{`["a","a"]`, nil, `names "a" twice`},
		{`["a",1]`, nil, "lists number 1"},
		{`true`, nil, "is boolean true"},
	} {
		got, err := ItemKey(mustDecode(t, tc.v))
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) || tc.err == "" && (err != nil || !slices.Equal(got, tc.want)) {
			t.Errorf("ItemKey(%s) = %q, %v; want %q, error with %q", tc.v, got, err, tc.want, tc.err)
		}
	}
}
