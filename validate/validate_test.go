package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/render"
)

// validateCases are schema/value pairs with the exact errors expected. They
// also seed FuzzValidate.
var validateCases = []struct {
	name   string
	schema string
	value  string
	want   []fixpoint.ValidationError
}{
	{
		name:   "valid",
		schema: `{"type":"object","required":["a"],"properties":{"a":{"type":"integer","minimum":1}}}`,
		value:  `{"a":3}`,
		want:   nil,
	},
	{
		name:   "pattern deep",
		schema: `{"properties":{"invoice":{"properties":{"lines":{"items":{"properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"}}}}}}}}`,
		value:  `{"invoice":{"lines":[{"sku":"ABC-1234"},{"sku":"abc-1"}]}}`,
		want:   []fixpoint.ValidationError{{Path: "/invoice/lines/1/sku", Keyword: "pattern", Class: fixpoint.ClassSemantic, Message: `/invoice/lines/1/sku: "abc-1" does not match ^[A-Z]{3}-[0-9]{4}$`}},
	},
	{
		name:   "required names each missing property at its own pointer",
		schema: `{"properties":{"customer":{"type":"object","required":["email","name","id"]}}}`,
		value:  `{"customer":{"id":1}}`,
		want: []fixpoint.ValidationError{
			{Path: "/customer/email", Keyword: "required", Class: fixpoint.ClassShape, Message: `/customer/email: missing required property "email"`},
			{Path: "/customer/name", Keyword: "required", Class: fixpoint.ClassShape, Message: `/customer/name: missing required property "name"`},
		},
	},
	{
		name:   "required at root",
		schema: `{"required":["a"]}`,
		value:  `{}`,
		want:   []fixpoint.ValidationError{{Path: "/a", Keyword: "required", Class: fixpoint.ClassShape, Message: `/a: missing required property "a"`}},
	},
	{
		name:   "required in array items, one error per missing property",
		schema: `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","required":["name","qty"]}}}}`,
		value:  `{"items":[{"qty":1},{}]}`,
		want: []fixpoint.ValidationError{
			{Path: "/items/0/name", Keyword: "required", Class: fixpoint.ClassShape, Message: `/items/0/name: missing required property "name"`},
			{Path: "/items/1/name", Keyword: "required", Class: fixpoint.ClassShape, Message: `/items/1/name: missing required property "name"`},
			{Path: "/items/1/qty", Keyword: "required", Class: fixpoint.ClassShape, Message: `/items/1/qty: missing required property "qty"`},
		},
	},
	{
		name:   "required names are escaped in the pointer",
		schema: `{"required":["a/b","c~d",""]}`,
		value:  `{}`,
		want: []fixpoint.ValidationError{
			{Path: "/", Keyword: "required", Class: fixpoint.ClassShape, Message: `/: missing required property ""`},
			{Path: "/a~1b", Keyword: "required", Class: fixpoint.ClassShape, Message: `/a~1b: missing required property "a/b"`},
			{Path: "/c~0d", Keyword: "required", Class: fixpoint.ClassShape, Message: `/c~0d: missing required property "c~d"`},
		},
	},
	{
		name:   "type",
		schema: `{"properties":{"age":{"type":"integer"}}}`,
		value:  `{"age":"42"}`,
		want:   []fixpoint.ValidationError{{Path: "/age", Keyword: "type", Class: fixpoint.ClassShape, Message: `/age: expected integer, got string "42"`}},
	},
	{
		name:   "type several",
		schema: `{"type":["string","null"]}`,
		value:  `[1]`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "type", Class: fixpoint.ClassShape, Message: `(root): expected null or string, got array [1]`}},
	},
	{
		name:   "integer rejects fraction",
		schema: `{"type":"integer"}`,
		value:  `1.5`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "type", Class: fixpoint.ClassShape, Message: `(root): expected integer, got number 1.5`}},
	},
	{
		name:   "enum",
		schema: `{"properties":{"priority":{"enum":["low","medium","high"]}}}`,
		value:  `{"priority":"urgent"}`,
		want:   []fixpoint.ValidationError{{Path: "/priority", Keyword: "enum", Class: fixpoint.ClassSemantic, Message: `/priority: "urgent" is not one of ["low","medium","high"]`}},
	},
	{
		name:   "const",
		schema: `{"properties":{"v":{"const":2}}}`,
		value:  `{"v":3}`,
		want:   []fixpoint.ValidationError{{Path: "/v", Keyword: "const", Class: fixpoint.ClassSemantic, Message: `/v: expected 2, got 3`}},
	},
	{
		name:   "maximum",
		schema: `{"properties":{"score":{"maximum":100}}}`,
		value:  `{"score":120}`,
		want:   []fixpoint.ValidationError{{Path: "/score", Keyword: "maximum", Class: fixpoint.ClassSemantic, Message: `/score: 120 is greater than the maximum 100`}},
	},
	{
		name:   "minimum keeps the number as written",
		schema: `{"minimum":0.5}`,
		value:  `0.25`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "minimum", Class: fixpoint.ClassSemantic, Message: `(root): 0.25 is less than the minimum 0.5`}},
	},
	{
		name:   "exclusive bounds",
		schema: `{"prefixItems":[{"exclusiveMinimum":0},{"exclusiveMaximum":10}]}`,
		value:  `[0,10]`,
		want: []fixpoint.ValidationError{
			{Path: "/0", Keyword: "exclusiveMinimum", Class: fixpoint.ClassSemantic, Message: `/0: 0 must be greater than 0`},
			{Path: "/1", Keyword: "exclusiveMaximum", Class: fixpoint.ClassSemantic, Message: `/1: 10 must be less than 10`},
		},
	},
	{
		name:   "multipleOf",
		schema: `{"multipleOf":0.5}`,
		value:  `0.3`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "multipleOf", Class: fixpoint.ClassSemantic, Message: `(root): 0.3 is not a multiple of 0.5`}},
	},
	{
		name:   "string lengths",
		schema: `{"properties":{"a":{"minLength":3},"b":{"maxLength":2}}}`,
		value:  `{"a":"ab","b":"héé"}`,
		want: []fixpoint.ValidationError{
			{Path: "/a", Keyword: "minLength", Class: fixpoint.ClassSemantic, Message: `/a: "ab" is shorter than the minimum length 3 (it has 2 characters)`},
			{Path: "/b", Keyword: "maxLength", Class: fixpoint.ClassSemantic, Message: `/b: "héé" is longer than the maximum length 2 (it has 3 characters)`},
		},
	},
	{
		name:   "format is asserted",
		schema: `{"properties":{"email":{"format":"email"},"at":{"format":"date"}}}`,
		value:  `{"email":"nope","at":"2024-02-30"}`,
		want: []fixpoint.ValidationError{
			{Path: "/at", Keyword: "format", Class: fixpoint.ClassSemantic, Message: `/at: "2024-02-30" is not a valid date: parsing time "2024-02-30": day out of range`},
			{Path: "/email", Keyword: "format", Class: fixpoint.ClassSemantic, Message: `/email: "nope" is not a valid email: missing @`},
		},
	},
	{
		name:   "uniqueItems",
		schema: `{"uniqueItems":true}`,
		value:  `[1,2,1]`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "uniqueItems", Class: fixpoint.ClassSemantic, Message: `(root): items 0 and 2 are equal; all items must be unique`}},
	},
	{
		name:   "contains names the closest item",
		schema: `{"contains":{"type":"integer","minimum":5}}`,
		value:  `["a",1]`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "contains", Class: fixpoint.ClassSemantic, Message: `(root): no item matches the "contains" schema (closest: /1: 1 is less than the minimum 5)`}},
	},
	{
		name:   "minContains and maxContains",
		schema: `{"properties":{"a":{"contains":{"const":1},"minContains":2},"b":{"contains":{"const":1},"maxContains":1}}}`,
		value:  `{"a":[1,2],"b":[1,1]}`,
		want: []fixpoint.ValidationError{
			{Path: "/a", Keyword: "minContains", Class: fixpoint.ClassSemantic, Message: `/a: 1 item matches the "contains" schema, at least 2 required (closest: /a/1: expected 1, got 2)`},
			{Path: "/b", Keyword: "maxContains", Class: fixpoint.ClassSemantic, Message: `/b: 2 items match the "contains" schema, at most 1 allowed`},
		},
	},
	{
		name:   "size bounds are shape",
		schema: `{"properties":{"a":{"minItems":2},"b":{"maxItems":1},"c":{"minProperties":1},"d":{"maxProperties":1}}}`,
		value:  `{"a":[1],"b":[1,2],"c":{},"d":{"x":1,"y":2}}`,
		want: []fixpoint.ValidationError{
			{Path: "/a", Keyword: "minItems", Class: fixpoint.ClassShape, Message: `/a: array has 1 item, fewer than the minimum 2`},
			{Path: "/b", Keyword: "maxItems", Class: fixpoint.ClassShape, Message: `/b: array has 2 items, more than the maximum 1`},
			{Path: "/c", Keyword: "minProperties", Class: fixpoint.ClassShape, Message: `/c: object has 0 properties, fewer than the minimum 1`},
			{Path: "/d", Keyword: "maxProperties", Class: fixpoint.ClassShape, Message: `/d: object has 2 properties, more than the maximum 1`},
		},
	},
	{
		name:   "additionalProperties one error per property at its pointer",
		schema: `{"properties":{"a":{}},"additionalProperties":false}`,
		value:  `{"a":1,"z":2,"b/c":3}`,
		want: []fixpoint.ValidationError{
			{Path: "/b~1c", Keyword: "additionalProperties", Class: fixpoint.ClassShape, Message: `/b~1c: property "b/c" is not allowed`},
			{Path: "/z", Keyword: "additionalProperties", Class: fixpoint.ClassShape, Message: `/z: property "z" is not allowed`},
		},
	},
	{
		name:   "unevaluatedProperties",
		schema: `{"allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}`,
		value:  `{"a":1,"b":2}`,
		want:   []fixpoint.ValidationError{{Path: "/b", Keyword: "unevaluatedProperties", Class: fixpoint.ClassShape, Message: `/b: property "b" is not allowed`}},
	},
	{
		name:   "unevaluatedItems",
		schema: `{"prefixItems":[{}],"unevaluatedItems":false}`,
		value:  `[1,2]`,
		want:   []fixpoint.ValidationError{{Path: "/1", Keyword: "unevaluatedItems", Class: fixpoint.ClassShape, Message: `/1: item 1 is not allowed: the array has too many items`}},
	},
	{
		name:   "properties false schema",
		schema: `{"properties":{"secret":false}}`,
		value:  `{"secret":1}`,
		want:   []fixpoint.ValidationError{{Path: "/secret", Keyword: "properties", Class: fixpoint.ClassShape, Message: `/secret: property "secret" is not allowed`}},
	},
	{
		name:   "items false after prefixItems",
		schema: `{"prefixItems":[{"type":"string"}],"items":false}`,
		value:  `["a",2]`,
		want:   []fixpoint.ValidationError{{Path: "/1", Keyword: "items", Class: fixpoint.ClassShape, Message: `/1: item 1 is not allowed: the array has too many items`}},
	},
	{
		name:   "prefixItems false",
		schema: `{"prefixItems":[true,false]}`,
		value:  `[1,2]`,
		want:   []fixpoint.ValidationError{{Path: "/1", Keyword: "prefixItems", Class: fixpoint.ClassShape, Message: `/1: item 1 is not allowed`}},
	},
	{
		name:   "false root",
		schema: `false`,
		value:  `1`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "false", Class: fixpoint.ClassShape, Message: `(root): no value is allowed here, got number 1`}},
	},
	{
		name:   "dependentRequired",
		schema: `{"dependentRequired":{"card":["cvv"]}}`,
		value:  `{"card":"x"}`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "dependentRequired", Class: fixpoint.ClassShape, Message: `(root): missing property "cvv", required when "card" is present`}},
	},
	{
		name:   "dependentSchemas flattens",
		schema: `{"dependentSchemas":{"card":{"required":["cvv"]}}}`,
		value:  `{"card":"x"}`,
		want:   []fixpoint.ValidationError{{Path: "/cvv", Keyword: "required", Class: fixpoint.ClassShape, Message: `/cvv: missing required property "cvv"`}},
	},
	{
		name:   "propertyNames",
		schema: `{"propertyNames":{"pattern":"^[a-z]+$"}}`,
		value:  `{"Bad":1,"ok":2}`,
		want:   []fixpoint.ValidationError{{Path: "/Bad", Keyword: "propertyNames", Class: fixpoint.ClassShape, Message: `/Bad: property name "Bad" is not allowed: "Bad" does not match ^[a-z]+$`}},
	},
	{
		name:   "if then",
		schema: `{"if":{"properties":{"t":{"const":"x"}}},"then":{"required":["y"]},"else":{"required":["z"]}}`,
		value:  `{"t":"x"}`,
		want:   []fixpoint.ValidationError{{Path: "/y", Keyword: "required", Class: fixpoint.ClassShape, Message: `/y: missing required property "y"`}},
	},
	{
		name:   "if else",
		schema: `{"if":{"properties":{"t":{"const":"x"}}},"then":{"required":["y"]},"else":{"required":["z"]}}`,
		value:  `{"t":"w"}`,
		want:   []fixpoint.ValidationError{{Path: "/z", Keyword: "required", Class: fixpoint.ClassShape, Message: `/z: missing required property "z"`}},
	},
	{
		name:   "allOf flattens every branch",
		schema: `{"allOf":[{"required":["a"]},{"properties":{"b":{"type":"string"}}}]}`,
		value:  `{"b":1}`,
		want: []fixpoint.ValidationError{
			{Path: "/a", Keyword: "required", Class: fixpoint.ClassShape, Message: `/a: missing required property "a"`},
			{Path: "/b", Keyword: "type", Class: fixpoint.ClassShape, Message: `/b: expected string, got number 1`},
		},
	},
	{
		name:   "ref chain",
		schema: `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}}},"n":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`,
		value:  `{"x":{"n":"1"}}`,
		want:   []fixpoint.ValidationError{{Path: "/x/n", Keyword: "type", Class: fixpoint.ClassShape, Message: `/x/n: expected integer, got string "1"`}},
	},
	{
		name:   "recursive ref",
		schema: `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}}}},"$ref":"#/$defs/node"}`,
		value:  `{"v":1,"next":{"v":2,"next":{"v":"3"}}}`,
		want:   []fixpoint.ValidationError{{Path: "/next/next/v", Keyword: "type", Class: fixpoint.ClassShape, Message: `/next/next/v: expected integer, got string "3"`}},
	},
	{
		name:   "not",
		schema: `{"not":{"type":"null"}}`,
		value:  `null`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "not", Class: fixpoint.ClassSemantic, Message: `(root): null must not match the "not" schema`}},
	},
	{
		name:   "pointer escaping and numeric order",
		schema: `{"additionalProperties":{"items":{"type":"string"}}}`,
		value:  `{"a/b":[1],"m~n":["x",2,3,4,5,6,7,8,9,10,11]}`,
		want: []fixpoint.ValidationError{
			{Path: "/a~1b/0", Keyword: "type", Class: fixpoint.ClassShape, Message: `/a~1b/0: expected string, got number 1`},
			{Path: "/m~0n/1", Keyword: "type", Class: fixpoint.ClassShape, Message: `/m~0n/1: expected string, got number 2`},
			{Path: "/m~0n/2", Keyword: "type", Class: fixpoint.ClassShape, Message: `/m~0n/2: expected string, got number 3`},
			{Path: "/m~0n/3", Keyword: "type", Class: fixpoint.ClassShape, Message: `/m~0n/3: expected string, got number 4`},
			{Path: "/m~0n/4", Keyword: "type", Class: fixpoint.ClassShape, Message: `/m~0n/4: expected string, got number 5`},
			{Path: "/m~0n/5", Keyword: "type", Class: fixpoint.ClassShape, Message: `/m~0n/5: expected string, got number 6`},
			{Path: "/m~0n/6", Keyword: "type", Class: fixpoint.ClassShape, Message: `/m~0n/6: expected string, got number 7`},
			{Path: "/m~0n/7", Keyword: "type", Class: fixpoint.ClassShape, Message: `/m~0n/7: expected string, got number 8`},
			{Path: "/m~0n/8", Keyword: "type", Class: fixpoint.ClassShape, Message: `/m~0n/8: expected string, got number 9`},
			{Path: "/m~0n/9", Keyword: "type", Class: fixpoint.ClassShape, Message: `/m~0n/9: expected string, got number 10`},
			{Path: "/m~0n/10", Keyword: "type", Class: fixpoint.ClassShape, Message: `/m~0n/10: expected string, got number 11`},
		},
	},
	{
		name:   "empty property name",
		schema: `{"properties":{"":{"type":"string"}}}`,
		value:  `{"":1}`,
		want:   []fixpoint.ValidationError{{Path: "/", Keyword: "type", Class: fixpoint.ClassShape, Message: `/: expected string, got number 1`}},
	},
	{
		name:   "long found value is shortened",
		schema: `{"type":"string"}`,
		value:  `{"text":"` + strings.Repeat("x", 200) + `"}`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "type", Class: fixpoint.ClassShape, Message: `(root): expected string, got object {"text":"` + strings.Repeat("x", render.MaxFound-3-len(`{"text":"`)) + `...`}},
	},
	{
		name:   "draft-07 tuple items and additionalItems",
		schema: `{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}],"additionalItems":false}`,
		value:  `[1,2,3]`,
		want: []fixpoint.ValidationError{
			{Path: "/0", Keyword: "type", Class: fixpoint.ClassShape, Message: `/0: expected string, got number 1`},
			{Path: "/1", Keyword: "additionalItems", Class: fixpoint.ClassShape, Message: `/1: item 1 is not allowed: the array may have at most 1 item`},
			{Path: "/2", Keyword: "additionalItems", Class: fixpoint.ClassShape, Message: `/2: item 2 is not allowed: the array may have at most 1 item`},
		},
	},
	{
		name:   "draft-07 dependencies",
		schema: `{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"a":["b"]}}`,
		value:  `{"a":1}`,
		want:   []fixpoint.ValidationError{{Path: "", Keyword: "dependencies", Class: fixpoint.ClassShape, Message: `(root): missing property "b", required when "a" is present`}},
	},
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range validateCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tc.schema)
			got := s.Validate(mustDecode(t, tc.value))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got\n%s\nwant\n%s", dump(got), dump(tc.want))
			}
			if err := checkErrors(got); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestValidateAlternatives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		value  string
		want   []fixpoint.ValidationError
	}{
		{
			name:   "types merge into one error",
			schema: `{"oneOf":[{"type":"string"},{"type":"integer"}]}`,
			value:  `true`,
			want:   []fixpoint.ValidationError{{Path: "", Keyword: "type", Class: fixpoint.ClassShape, Message: `(root): expected integer or string, got boolean true`}},
		},
		{
			name:   "consts and enums merge",
			schema: `{"properties":{"p":{"anyOf":[{"const":"a"},{"enum":["b","c"]}]}}}`,
			value:  `{"p":"d"}`,
			want:   []fixpoint.ValidationError{{Path: "/p", Keyword: "enum", Class: fixpoint.ClassSemantic, Message: `/p: "d" is not one of ["a","b","c"]`}},
		},
		{
			name:   "branch whose type matches wins",
			schema: `{"anyOf":[{"type":"string","maxLength":2},{"type":"object","required":["a","b"]}]}`,
			value:  `{"a":1}`,
			want:   []fixpoint.ValidationError{{Path: "/b", Keyword: "required", Class: fixpoint.ClassShape, Message: `/b: missing required property "b"`}},
		},
		{
			name:   "discriminator picks the branch",
			schema: `{"oneOf":[{"properties":{"kind":{"const":"a"},"x":{"type":"string"}}},{"properties":{"kind":{"const":"b"},"x":{"type":"integer"}}}]}`,
			value:  `{"kind":"b","x":"s"}`,
			want:   []fixpoint.ValidationError{{Path: "/x", Keyword: "type", Class: fixpoint.ClassShape, Message: `/x: expected integer, got string "s"`}},
		},
		{
			name:   "fewest errors wins",
			schema: `{"anyOf":[{"required":["a","c","e"]},{"required":["a","d"]}]}`,
			value:  `{"a":1,"b":2}`,
			want:   []fixpoint.ValidationError{{Path: "/d", Keyword: "required", Class: fixpoint.ClassShape, Message: `/d: missing required property "d"`}},
		},
		{
			// A missing property counts as an error at the object that lacks
			// it, though its path is the property's: the branch whose error is
			// deeper in the value is still the closest.
			name:   "missing property ranks at its parent",
			schema: `{"anyOf":[{"type":"object","required":["a"]},{"properties":{"x":{"type":"string"}}}]}`,
			value:  `{"x":1}`,
			want:   []fixpoint.ValidationError{{Path: "/x", Keyword: "type", Class: fixpoint.ClassShape, Message: `/x: expected string, got number 1`}},
		},
		{
			name:   "earliest on ties",
			schema: `{"anyOf":[{"required":["x"]},{"required":["y"]}]}`,
			value:  `{}`,
			want:   []fixpoint.ValidationError{{Path: "/x", Keyword: "required", Class: fixpoint.ClassShape, Message: `/x: missing required property "x"`}},
		},
		{
			name:   "closest branch through refs",
			schema: `{"$defs":{"cat":{"type":"object","properties":{"meow":{"type":"boolean"}},"required":["meow"]},"dog":{"type":"object","properties":{"bark":{"type":"boolean"}},"required":["bark"]}},"properties":{"pet":{"oneOf":[{"$ref":"#/$defs/cat"},{"$ref":"#/$defs/dog"}]}}}`,
			value:  `{"pet":{"bark":"yes"}}`,
			want:   []fixpoint.ValidationError{{Path: "/pet/bark", Keyword: "type", Class: fixpoint.ClassShape, Message: `/pet/bark: expected boolean, got string "yes"`}},
		},
		{
			name:   "oneOf matching twice",
			schema: `{"oneOf":[{"type":"integer"},{"minimum":0}]}`,
			value:  `5`,
			want:   []fixpoint.ValidationError{{Path: "", Keyword: "oneOf", Class: fixpoint.ClassSemantic, Message: `(root): 5 matches more than one oneOf alternative (0 and 1); it must match exactly one`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := mustCompile(t, tc.schema).Validate(mustDecode(t, tc.value))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got\n%s\nwant\n%s", dump(got), dump(tc.want))
			}
		})
	}
}

// compileErrorCases are schemas that must not compile. They also seed
// FuzzCompile.
var compileErrorCases = []struct {
	name         string
	schema       string
	wantKeyword  string
	wantLocation string
	wantContains string
}{
	{name: "YAML", schema: "type: object\nproperties: {}\n", wantContains: "a schema is JSON; YAML must be converted first"},
	{name: "empty", schema: " \n", wantContains: "the schema is empty"},
	// Last wins in a JSON reader: the integer declaration was lost unsaid.
	{name: "duplicate key", schema: `{"type":"object","properties":{"n":{"type":"integer"},"n":{"type":"string"}}}`, wantLocation: "/properties/n", wantContains: `key "n" appears twice in one object`},
	{name: "duplicate keyword", schema: `{"type":"integer","type":"string"}`, wantLocation: "/type", wantContains: `key "type" appears twice`},
	// Compiling took minutes at a few thousand levels (the library's
	// meta-validation is cubic in the depth).
	{name: "too deep", schema: strings.Repeat(`{"type":"object","properties":{"a":`, 70) + `{}` + strings.Repeat(`}}`, 70), wantContains: "nests more than 128 levels deep"},
	// Lookarounds are accepted (the backtracking engine matches them);
	// one that is not ECMA-262 is refused in ECMA-262's terms.
	{name: "repeated lookbehind", schema: `{"type":"string","pattern":"(?<=x)*y"}`, wantKeyword: "pattern", wantLocation: "/pattern",
		wantContains: "cannot be repeated"},
	{name: "backreference to no group", schema: `{"properties":{"a":{"pattern":"a(?!b)\\2"}}}`, wantKeyword: "pattern", wantLocation: "/properties/a/pattern",
		wantContains: "a backreference to group 2, and the pattern has 0 capturing groups"},
	{name: "unknown $schema", schema: `{"$schema":"http://example.com/my-draft","type":"object"}`, wantKeyword: "$schema", wantLocation: "/$schema",
		wantContains: `"http://example.com/my-draft" is not a JSON Schema draft this validator knows`},
	{name: "type not a string", schema: `{"type": 12}`, wantKeyword: "type", wantLocation: "/type", wantContains: "12 is not one of"},
	{name: "unknown type", schema: `{"allOf":[{"type":"strin"}]}`, wantKeyword: "type", wantLocation: "/allOf/0/type", wantContains: `"strin"`},
	{name: "negative minLength", schema: `{"minLength": -1}`, wantKeyword: "minLength", wantLocation: "/minLength", wantContains: "less than the minimum 0"},
	{name: "bad pattern", schema: `{"pattern": "("}`, wantKeyword: "pattern", wantLocation: "/pattern", wantContains: "regex"},
	{name: "bad nested pattern", schema: `{"properties":{"a b":{"pattern":"(["}}}`, wantKeyword: "pattern", wantLocation: "/properties/a b/pattern", wantContains: "regex"},
	{name: "required not strings", schema: `{"required":[1]}`, wantKeyword: "required", wantLocation: "/required/0", wantContains: "expected string"},
	{name: "subschema not a schema", schema: `{"properties":{"a":5}}`, wantKeyword: "properties", wantLocation: "/properties/a", wantContains: "got number 5"},
	{name: "tuple items in 2020-12", schema: `{"items":[{"type":"string"}]}`, wantKeyword: "items", wantLocation: "/items", wantContains: "got array"},
	{name: "external http ref", schema: `{"$ref":"http://example.com/x.json"}`, wantKeyword: "$ref", wantLocation: "/$ref", wantContains: `"http://example.com/x.json"`},
	{name: "relative ref to another document", schema: `{"properties":{"a":{"$ref":"other.json#/x"}}}`, wantKeyword: "$ref", wantLocation: "/properties/a/$ref", wantContains: `"other.json#/x"`},
	{name: "file ref", schema: `{"$defs":{"d":{"$ref":"file:///etc/passwd"}}}`, wantKeyword: "$ref", wantLocation: "/$defs/d/$ref", wantContains: "not allowed"},
	{name: "external dynamicRef", schema: `{"$dynamicRef":"http://x.example/y#a"}`, wantKeyword: "$dynamicRef", wantLocation: "/$dynamicRef", wantContains: "not allowed"},
	{name: "unknown metaschema", schema: `{"$schema":"http://example.com/meta"}`, wantKeyword: "$schema", wantLocation: "/$schema", wantContains: `"http://example.com/meta"`},
	{name: "missing local ref", schema: `{"$ref":"#/$defs/missing"}`, wantKeyword: "$ref", wantLocation: "/$ref", wantContains: "not found"},
	{name: "not JSON", schema: `{"type":`, wantKeyword: "", wantLocation: "", wantContains: "decode schema"},
	{name: "trailing text", schema: `{} {}`, wantKeyword: "", wantLocation: "", wantContains: "decode schema"},
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range compileErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Compile([]byte(tc.schema))
			if err == nil {
				t.Fatalf("Compile(%s) = %v, want error", tc.schema, s)
			}
			if !errors.Is(err, ErrSchema) {
				t.Fatalf("errors.Is(%v, ErrSchema) = false", err)
			}
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *SchemaError", err)
			}
			if se.Keyword != tc.wantKeyword || se.Location != tc.wantLocation {
				t.Fatalf("keyword, location = %q, %q, want %q, %q (%v)", se.Keyword, se.Location, tc.wantKeyword, tc.wantLocation, err)
			}
			if !strings.Contains(err.Error(), tc.wantContains) {
				t.Fatalf("error %q does not contain %q", err, tc.wantContains)
			}
			if se.Keyword != "" && !strings.Contains(err.Error(), `keyword "`+se.Keyword+`"`) {
				t.Fatalf("error %q does not name keyword %q", err, se.Keyword)
			}
		})
	}
}

func TestCompileExternalRefIsErrExternalRef(t *testing.T) {
	t.Parallel()
	_, err := Compile([]byte(`{"$ref":"https://example.com/s.json"}`))
	if !errors.Is(err, errExternalRef) || !errors.Is(err, ErrSchema) {
		t.Fatalf("got %v, want errExternalRef and ErrSchema", err)
	}
}

// TestCompileNamesTheRefThatFails: of two references written alike, one
// to a resource of the document and one outside it, the error names the
// one that resolves to the URL refused, under its own $id.
func TestCompileNamesTheRefThatFails(t *testing.T) {
	t.Parallel()
	schema := `{"$id": "https://example.com/a/root.json",
		"properties": {"x": {"$ref": "other.json"},
		  "y": {"$id": "https://example.com/b/sub.json", "properties": {"z": {"$ref": "other.json"}}}},
		"$defs": {"o": {"$id": "other.json"}}}`
	_, err := Compile([]byte(schema))
	var se *SchemaError
	if !errors.As(err, &se) {
		t.Fatalf("Compile = %v, want a *SchemaError", err)
	}
	if se.Keyword != "$ref" || se.Location != "/properties/y/properties/z/$ref" {
		t.Errorf("error names %q at %q, want $ref at /properties/y/properties/z/$ref: %v", se.Keyword, se.Location, err)
	}
	if !strings.Contains(err.Error(), "https://example.com/b/other.json") {
		t.Errorf("error does not name the URL refused: %v", err)
	}
}

func TestCompileDrafts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		schema    string
		value     string
		wantValid bool
	}{
		// Tuple items: draft-07 checks item 0; 2020-12 does not compile it
		// (TestCompileErrors), so prefixItems is used there.
		{name: "draft-07 by $schema", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}]}`, value: `[1]`, wantValid: false},
		{name: "draft-07 without fragment", schema: `{"$schema":"http://json-schema.org/draft-07/schema","items":[{"type":"string"}]}`, value: `["a",1]`, wantValid: true},
		{name: "2020-12 default ignores additionalItems", schema: `{"prefixItems":[{}],"additionalItems":false}`, value: `[1,2]`, wantValid: true},
		{name: "draft-07 honours additionalItems", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","items":[{}],"additionalItems":false}`, value: `[1,2]`, wantValid: false},
		{name: "2020-12 explicit", schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"string"}]}`, value: `[1]`, wantValid: false},
		{name: "draft-07 ref overrides siblings", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{}},"$ref":"#/definitions/a","type":"string"}`, value: `1`, wantValid: true},
		{name: "2020-12 ref with siblings", schema: `{"$defs":{"a":{}},"$ref":"#/$defs/a","type":"string"}`, value: `1`, wantValid: false},
		{name: "2019-09 accepted", schema: `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"string"}`, value: `1`, wantValid: false},
		{name: "metaschema ref is built in", schema: `{"$ref":"https://json-schema.org/draft/2020-12/schema"}`, value: `{"type":12}`, wantValid: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := mustCompile(t, tc.schema).Validate(mustDecode(t, tc.value))
			if got := len(errs) == 0; got != tc.wantValid {
				t.Fatalf("valid = %v, want %v (%v)", got, tc.wantValid, errs)
			}
		})
	}
}

func TestSchemaRaw(t *testing.T) {
	t.Parallel()
	raw := []byte(`{ "type" : "string" }`)
	s := mustCompile(t, string(raw))
	raw[3] = 'X' // the caller's buffer may be reused
	if got := string(s.Raw()); got != `{ "type" : "string" }` {
		t.Fatalf("Raw() = %q", got)
	}
	var nilSchema *Schema
	if nilSchema.Raw() != nil || nilSchema.Validate(1) != nil {
		t.Fatal("nil schema: want nil Raw and no errors")
	}
}

func TestValidateGoValues(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"properties":{"n":{"type":"integer","maximum":3}}}`)
	got := s.Validate(map[string]any{"n": 4.0})
	want := []fixpoint.ValidationError{{Path: "/n", Keyword: "maximum", Class: fixpoint.ClassSemantic, Message: "/n: 4 is greater than the maximum 3"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := s.Validate(map[string]any{"n": struct{}{}}); len(got) != 1 || got[0].Keyword != "type" {
		t.Fatalf("non-JSON value: got %v, want one type error", got)
	}
}

func TestValidateConcurrent(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","required":["a"],"properties":{"a":{"enum":[1,2]},"b":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`)
	v := mustDecode(t, `{"a":3,"b":true}`)
	want := s.Validate(v)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got := s.Validate(v); !slices.Equal(got, want) {
					t.Errorf("concurrent Validate: got %v, want %v", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestKeywordClass(t *testing.T) {
	t.Parallel()
	tests := []struct {
		keyword string
		want    fixpoint.Class
	}{
		{"syntax", fixpoint.ClassSyntax}, {"truncated", fixpoint.ClassSyntax},
		{"type", fixpoint.ClassShape}, {"required", fixpoint.ClassShape}, {"additionalProperties", fixpoint.ClassShape},
		{"unevaluatedProperties", fixpoint.ClassShape}, {"unevaluatedItems", fixpoint.ClassShape}, {"properties", fixpoint.ClassShape},
		{"prefixItems", fixpoint.ClassShape}, {"items", fixpoint.ClassShape}, {"minItems", fixpoint.ClassShape}, {"maxItems", fixpoint.ClassShape},
		{"minProperties", fixpoint.ClassShape}, {"maxProperties", fixpoint.ClassShape}, {"dependentRequired", fixpoint.ClassShape},
		{"dependencies", fixpoint.ClassShape}, {"propertyNames", fixpoint.ClassShape}, {"additionalItems", fixpoint.ClassShape}, {"false", fixpoint.ClassShape},
		{"enum", fixpoint.ClassSemantic}, {"const", fixpoint.ClassSemantic}, {"minimum", fixpoint.ClassSemantic}, {"maximum", fixpoint.ClassSemantic},
		{"exclusiveMinimum", fixpoint.ClassSemantic}, {"exclusiveMaximum", fixpoint.ClassSemantic}, {"multipleOf", fixpoint.ClassSemantic},
		{"minLength", fixpoint.ClassSemantic}, {"maxLength", fixpoint.ClassSemantic}, {"pattern", fixpoint.ClassSemantic}, {"format", fixpoint.ClassSemantic},
		{"uniqueItems", fixpoint.ClassSemantic}, {"contains", fixpoint.ClassSemantic}, {"minContains", fixpoint.ClassSemantic}, {"maxContains", fixpoint.ClassSemantic},
		{"not", fixpoint.ClassSemantic}, {"oneOf", fixpoint.ClassSemantic}, {"x-custom", fixpoint.ClassSemantic},
	}
	for _, tc := range tests {
		if got := KeywordClass(tc.keyword); got != tc.want {
			t.Errorf("KeywordClass(%q) = %q, want %q", tc.keyword, got, tc.want)
		}
	}
}

func TestClassOf(t *testing.T) {
	t.Parallel()
	syn := fixpoint.ValidationError{Keyword: "truncated", Class: fixpoint.ClassSyntax}
	shp := fixpoint.ValidationError{Keyword: "type", Class: fixpoint.ClassShape}
	sem := fixpoint.ValidationError{Keyword: "enum", Class: fixpoint.ClassSemantic}
	tests := []struct {
		name string
		errs []fixpoint.ValidationError
		want fixpoint.Class
	}{
		{name: "none", errs: nil, want: fixpoint.ClassNone},
		{name: "semantic", errs: []fixpoint.ValidationError{sem}, want: fixpoint.ClassSemantic},
		{name: "shape before semantic", errs: []fixpoint.ValidationError{sem, shp}, want: fixpoint.ClassShape},
		{name: "syntax first", errs: []fixpoint.ValidationError{sem, shp, syn}, want: fixpoint.ClassSyntax},
		{name: "class from keyword when empty", errs: []fixpoint.ValidationError{sem, {Keyword: "required"}}, want: fixpoint.ClassShape},
	}
	for _, tc := range tests {
		if got := ClassOf(tc.errs); got != tc.want {
			t.Errorf("%s: ClassOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestComparePointers(t *testing.T) {
	t.Parallel()
	in := []string{"/b", "/a/10", "", "/a/2", "/a", "/a/2/x", "/", "/10", "/9"}
	want := []string{"", "/", "/9", "/10", "/a", "/a/2", "/a/2/x", "/a/10", "/b"}
	slices.SortFunc(in, comparePointers)
	if !slices.Equal(in, want) {
		t.Fatalf("got %q, want %q", in, want)
	}
}

func mustCompile(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return s
}

func mustDecode(t testing.TB, value string) any {
	t.Helper()
	v, err := decode([]byte(value))
	if err != nil {
		t.Fatalf("decode %s: %v", value, err)
	}
	return v
}

func dump(errs []fixpoint.ValidationError) string {
	b, _ := json.MarshalIndent(errs, "", "  ")
	return string(b)
}

// A schema whose references loop names both ends of the loop, the root as
// "(root)".
func TestValidateRefCycleMessage(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"$ref":"#"}`)
	errs := s.Validate(map[string]any{"a": json.Number("1")})
	if len(errs) != 1 || errs[0].Keyword != "$ref" || !strings.HasSuffix(errs[0].Message, "/$ref and (root)") && !strings.HasSuffix(errs[0].Message, "(root) and /$ref") {
		t.Fatalf("errors %+v, want one $ref error naming /$ref and (root)", errs)
	}
}

// A schema whose references multiply its branches level by level is
// refused at compile: checking one wrong reply against 22 such levels took
// 34 s and 4.4 GB. Shared definitions referenced from many places are
// fine: they add up, they do not multiply.
func TestCompileRefusesSchemasThatUnfoldTooFar(t *testing.T) {
	t.Parallel()
	chain := func(levels int) []byte {
		defs := map[string]any{}
		for i := range levels {
			next := map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)}
			defs[fmt.Sprintf("d%d", i)] = map[string]any{"anyOf": []any{next, next}}
		}
		defs[fmt.Sprintf("d%d", levels)] = map[string]any{"type": "integer"}
		b, _ := json.Marshal(map[string]any{"$defs": defs, "$ref": "#/$defs/d0"})
		return b
	}
	if _, err := Compile(chain(8)); err != nil {
		t.Errorf("8 levels (768 subschemas): %v", err)
	}
	for _, levels := range []int{16, 200} {
		_, err := Compile(chain(levels))
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "against over 100000 subschemas along one path") {
			t.Errorf("%d levels: %v; want refused for how far it unfolds", levels, err)
		}
	}
	// 300 properties, each an address referencing shared street and
	// country definitions, and a recursive tree: compiled.
	props := map[string]any{}
	for i := range 300 {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"$ref": "#/$defs/address"}
	}
	wide, _ := json.Marshal(map[string]any{
		"type": "object", "properties": props,
		"$defs": map[string]any{
			"address": map[string]any{"type": "object", "properties": map[string]any{
				"street": map[string]any{"$ref": "#/$defs/street"}, "country": map[string]any{"$ref": "#/$defs/country"},
				"parent": map[string]any{"$ref": "#/$defs/address"}}},
			"street":  map[string]any{"type": "string", "minLength": 1},
			"country": map[string]any{"enum": []any{"DE", "FR", "US"}},
		}})
	if _, err := Compile(wide); err != nil {
		t.Errorf("wide schema with shared definitions: %v", err)
	}
	// 3,000 properties, each a line item of about 55 subschemas: wide,
	// 165,000 subschemas in all, but checked in well under a second.
	lineProps := map[string]any{}
	for _, k := range []string{"sku", "price", "tax", "discount", "vendor", "buyer"} {
		lineProps[k] = map[string]any{"$ref": "#/$defs/party"}
	}
	party := map[string]any{"type": "object", "properties": map[string]any{}}
	for i := range 8 {
		party["properties"].(map[string]any)[fmt.Sprintf("f%d", i)] = map[string]any{"type": "string"}
	}
	lines := map[string]any{}
	for i := range 3000 {
		lines[fmt.Sprintf("l%d", i)] = map[string]any{"$ref": "#/$defs/line"}
	}
	invoice, _ := json.Marshal(map[string]any{"type": "object", "properties": lines,
		"$defs": map[string]any{"line": map[string]any{"type": "object", "properties": lineProps}, "party": party}})
	if _, err := Compile(invoice); err != nil {
		t.Errorf("3,000 line items: %v", err)
	}
	// The doubling may cross places in the value: anyOf [o, o], o's
	// property x the next level.
	cross := map[string]any{}
	for i := range 20 {
		o := map[string]any{"$ref": fmt.Sprintf("#/$defs/o%d", i)}
		cross[fmt.Sprintf("l%d", i)] = map[string]any{"anyOf": []any{o, o}}
		cross[fmt.Sprintf("o%d", i)] = map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"$ref": fmt.Sprintf("#/$defs/l%d", i+1)}}}
	}
	cross["l20"] = map[string]any{"type": "integer"}
	crossDoc, _ := json.Marshal(map[string]any{"$defs": cross, "$ref": "#/$defs/l0"})
	if _, err := Compile(crossDoc); !errors.Is(err, ErrSchema) {
		t.Errorf("20 levels doubling through a property: %v, want refused", err)
	}
}
