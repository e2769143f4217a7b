package repair

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/internal/schematest"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// coerceCase is one Coerce case. want is the compact JSON of the value
// returned (object keys sorted); repairs the JSON of the repairs; errs the
// "path keyword" of each remaining error. A refusal has want == value (as
// JSON), no repairs, and the value's own errors.
type coerceCase struct {
	name    string
	schema  string
	value   string
	mode    fixpoint.CoerceMode // "": fixpoint.CoerceSafe
	want    string
	repairs string
	errs    []string
}

const (
	intSchema  = `{"type":"integer"}`
	numSchema  = `{"type":"number"}`
	boolSchema = `{"type":"boolean"}`
	// objSchema has a required and an optional property and no others.
	objSchema = `{"type":"object","required":["id"],"additionalProperties":false,
		"properties":{"id":{"type":"integer"},"note":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}}`
	// petSchema is a discriminated union.
	petSchema = `{"oneOf":[
		{"type":"object","required":["kind"],"properties":{"kind":{"const":"cat"},"lives":{"type":"integer"}}},
		{"type":"object","required":["kind"],"properties":{"kind":{"const":"dog"},"good":{"type":"boolean"}}}]}`
	// renameSchema has two required properties, one of them snake_case.
	renameSchema = `{"type":"object","required":["customer_name","total"],"additionalProperties":false,
		"properties":{"customer_name":{"type":"string"},"total":{"type":"integer","minimum":0}}}`
	// listSchema is a tree of nodes that refers to itself.
	listSchema = `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}}}}}`
)

var coerceCases = []coerceCase{
	// 1. a string holding a JSON number or boolean.
	{name: "integer from string", schema: intSchema, value: `"42"`, want: `42`,
		repairs: `[{"kind":"coerce_number","offset":0,"before":"42","after":42}]`},
	{name: "number keeps its text", schema: numSchema, value: `"19.990"`, want: `19.990`,
		repairs: `[{"kind":"coerce_number","offset":0,"before":"19.990","after":19.990}]`},
	{name: "negative exponent", schema: numSchema, value: `"-1.5E-3"`, want: `-1.5E-3`,
		repairs: `[{"kind":"coerce_number","offset":0,"before":"-1.5E-3","after":-1.5E-3}]`},
	{name: "integral decimal is an integer", schema: intSchema, value: `"4.0"`, want: `4.0`,
		repairs: `[{"kind":"coerce_number","offset":0,"before":"4.0","after":4.0}]`},
	{name: "big integer exact", schema: intSchema, value: `"123456789012345678901234567890"`, want: `123456789012345678901234567890`,
		repairs: `[{"kind":"coerce_number","offset":0,"before":"123456789012345678901234567890","after":123456789012345678901234567890}]`},
	{name: "JSON whitespace around", schema: intSchema, value: `" 42\n\t"`, want: `42`,
		repairs: `[{"kind":"coerce_number","offset":0,"before":" 42\n\t","after":42}]`},
	{name: "boolean", schema: boolSchema, value: `"false"`, want: `false`,
		repairs: `[{"kind":"coerce_boolean","offset":0,"before":"false","after":false}]`},
	{name: "const number", schema: `{"const":3}`, value: `"3"`, want: `3`,
		repairs: `[{"kind":"coerce_number","offset":0,"before":"3","after":3}]`},
	{name: "enum of numbers", schema: `{"enum":[1,2,3]}`, value: `"2"`, want: `2`,
		repairs: `[{"kind":"coerce_number","offset":0,"before":"2","after":2}]`},
	{name: "optional integer as anyOf with null", schema: `{"anyOf":[{"type":"integer"},{"type":"null"}]}`, value: `"7"`, want: `7`,
		repairs: `[{"kind":"coerce_number","offset":0,"before":"7","after":7}]`},
	{name: "reveals a maximum", schema: `{"type":"integer","maximum":100}`, value: `"150"`, want: `150`,
		repairs: `[{"kind":"coerce_number","offset":0,"before":"150","after":150}]`, errs: []string{" maximum"}},
	{name: "a revealing fix is kept apart", schema: `{"properties":{"a":{"type":"integer","maximum":100},"b":{"type":"boolean"}}}`,
		value: `{"a":"150","b":"true"}`, want: `{"a":150,"b":true}`,
		repairs: `[{"kind":"coerce_boolean","offset":0,"pointer":"/b","before":"true","after":true},{"kind":"coerce_number","offset":0,"pointer":"/a","before":"150","after":150}]`,
		errs:    []string{"/a maximum"}},
	{name: "a revealing fix elsewhere", schema: `{"type":"array","uniqueItems":true,"items":{"type":"integer"}}`,
		value: `["1",1,"x"]`, want: `[1,1,"x"]`,
		repairs: `[{"kind":"coerce_number","offset":0,"pointer":"/0","before":"1","after":1}]`,
		errs:    []string{" uniqueItems", "/2 type"}},
	{name: "nested path", schema: `{"properties":{"o":{"properties":{"n/m":{"type":"integer"}}}}}`, value: `{"o":{"n/m":"5"}}`, want: `{"o":{"n/m":5}}`,
		repairs: `[{"kind":"coerce_number","offset":0,"pointer":"/o/n~1m","before":"5","after":5}]`},
	{name: "array of objects", schema: `{"type":"array","items":{"type":"object","properties":{"q":{"type":"integer"},"ok":{"type":"boolean"}}}}`,
		value: `[{"q":"1"},{"q":2,"ok":"true"},{"q":"3"}]`, want: `[{"q":1},{"ok":true,"q":2},{"q":3}]`,
		repairs: `[{"kind":"coerce_number","offset":0,"pointer":"/0/q","before":"1","after":1},{"kind":"coerce_boolean","offset":0,"pointer":"/1/ok","before":"true","after":true},{"kind":"coerce_number","offset":0,"pointer":"/2/q","before":"3","after":3}]`},
	{name: "prefixItems position", schema: `{"prefixItems":[{"type":"string"},{"type":"number"}]}`, value: `["a","2.5"]`, want: `["a",2.5]`,
		repairs: `[{"kind":"coerce_number","offset":0,"pointer":"/1","before":"2.5","after":2.5}]`},
	{name: "recursive ref", schema: listSchema, value: `{"v":1,"next":{"v":2,"next":{"v":"3"}}}`, want: `{"next":{"next":{"v":3},"v":2},"v":1}`,
		repairs: `[{"kind":"coerce_number","offset":0,"pointer":"/next/next/v","before":"3","after":3}]`},
	{name: "draft-07 definitions", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"type":"integer"}},"properties":{"a":{"$ref":"#/definitions/n"}}}`,
		value: `{"a":"8"}`, want: `{"a":8}`, repairs: `[{"kind":"coerce_number","offset":0,"pointer":"/a","before":"8","after":8}]`},
	{name: "patternProperties", schema: `{"patternProperties":{"^n_":{"type":"integer"}}}`, value: `{"n_a":"1","s":"2"}`, want: `{"n_a":1,"s":"2"}`,
		repairs: `[{"kind":"coerce_number","offset":0,"pointer":"/n_a","before":"1","after":1}]`},

	// 1. refused.
	{name: "refused: about 40", schema: intSchema, value: `"about 40"`, errs: []string{" type"}},
	{name: "refused: unit", schema: intSchema, value: `"40 kg"`, errs: []string{" type"}},
	{name: "refused: letter O", schema: intSchema, value: `"4O"`, errs: []string{" type"}},
	{name: "refused: empty", schema: intSchema, value: `""`, errs: []string{" type"}},
	{name: "refused: only whitespace", schema: intSchema, value: `"  "`, errs: []string{" type"}},
	{name: "refused: hex", schema: intSchema, value: `"0x10"`, errs: []string{" type"}},
	{name: "refused: plus sign", schema: intSchema, value: `"+1"`, errs: []string{" type"}},
	{name: "refused: leading zero", schema: intSchema, value: `"01"`, errs: []string{" type"}},
	{name: "refused: bare fraction", schema: numSchema, value: `".5"`, errs: []string{" type"}},
	{name: "refused: thousands separator", schema: intSchema, value: `"1,000"`, errs: []string{" type"}},
	{name: "refused: NaN", schema: numSchema, value: `"NaN"`, errs: []string{" type"}},
	{name: "refused: Infinity", schema: numSchema, value: `"Infinity"`, errs: []string{" type"}},
	{name: "refused: overflows float64", schema: numSchema, value: `"1e400"`, errs: []string{" type"}},
	{name: "refused: underflows float64", schema: numSchema, value: `"1e-400"`, errs: []string{" type"}},
	{name: "refused: exponent beyond the bound", schema: numSchema, value: `"1e99999"`, errs: []string{" type"}},
	{name: "refused: non-JSON space", schema: intSchema, value: `"\u00a042"`, errs: []string{" type"}},
	{name: "refused: fraction for integer", schema: intSchema, value: `"4.5"`, errs: []string{" type"}},
	{name: "refused: True", schema: boolSchema, value: `"True"`, errs: []string{" type"}},
	{name: "refused: yes", schema: boolSchema, value: `"yes"`, errs: []string{" type"}},
	{name: "refused: 1 for boolean", schema: boolSchema, value: `"1"`, errs: []string{" type"}},
	{name: "refused: true for integer", schema: intSchema, value: `"true"`, errs: []string{" type"}},
	{name: "refused: an alternative takes a string", schema: `{"anyOf":[{"type":"integer"},{"type":"string","const":"n/a"}]}`, value: `"42"`, errs: []string{" type"}},
	{name: "refused: would add errors", schema: `{"type":"integer","maximum":100,"multipleOf":7}`, value: `"150"`, errs: []string{" type"}},
	{name: "refused: number never stringified", schema: `{"type":"string"}`, value: `42`, errs: []string{" type"}},

	// 2. enum and const case and whitespace.
	{name: "enum case", schema: `{"enum":["draft","sent"]}`, value: `"Sent"`, want: `"sent"`,
		repairs: `[{"kind":"enum_case","offset":0,"before":"Sent","after":"sent"}]`},
	{name: "enum surrounding whitespace", schema: `{"enum":["draft","sent"]}`, value: `" sent\t"`, want: `"sent"`,
		repairs: `[{"kind":"enum_case","offset":0,"before":" sent\t","after":"sent"}]`},
	{name: "const case", schema: `{"const":"USD"}`, value: `"usd"`, want: `"USD"`,
		repairs: `[{"kind":"const_case","offset":0,"before":"usd","after":"USD"}]`},
	{name: "non-ASCII case", schema: `{"enum":["Émile","Zoë"]}`, value: `"ÉMILE"`, want: `"Émile"`,
		repairs: `[{"kind":"enum_case","offset":0,"before":"ÉMILE","after":"Émile"}]`},
	{name: "oneOf of consts", schema: `{"oneOf":[{"const":"basic"},{"const":"pro"},{"type":"null"}]}`, value: `"PRO"`, want: `"pro"`,
		repairs: `[{"kind":"const_case","offset":0,"before":"PRO","after":"pro"}]`},
	{name: "discriminator case then the branch", schema: petSchema, value: `{"kind":"Dog","good":"true"}`, want: `{"good":true,"kind":"dog"}`,
		repairs: `[{"kind":"const_case","offset":0,"pointer":"/kind","before":"Dog","after":"dog"},{"kind":"coerce_boolean","offset":0,"pointer":"/good","before":"true","after":true}]`},
	{name: "discriminator rules out the other branch", schema: `{"oneOf":[
		{"type":"object","required":["kind"],"properties":{"kind":{"const":"cat"},"age":{"type":"string"}}},
		{"type":"object","required":["kind"],"properties":{"kind":{"const":"dog"},"age":{"type":"integer"},"good":{"type":"boolean"}}}]}`,
		value: `{"kind":"dog","good":"true","age":"3"}`, want: `{"age":3,"good":true,"kind":"dog"}`,
		repairs: `[{"kind":"coerce_number","offset":0,"pointer":"/age","before":"3","after":3},{"kind":"coerce_boolean","offset":0,"pointer":"/good","before":"true","after":true}]`},
	{name: "enum discriminator", schema: `{"oneOf":[
		{"properties":{"type":{"enum":["a","a1"]},"v":{"type":"string","pattern":"^x"}}},
		{"properties":{"type":{"enum":["b"]},"v":{"type":"boolean"}}}]}`,
		value: `{"type":"b","v":"true"}`, want: `{"type":"b","v":true}`,
		repairs: `[{"kind":"coerce_boolean","offset":0,"pointer":"/v","before":"true","after":true}]`},
	{name: "refused: no discriminator, a branch takes a string", schema: `{"oneOf":[
		{"type":"object","required":["kind"],"properties":{"kind":{"const":"cat"},"age":{"type":"string","pattern":"^[a-z]+$"}}},
		{"type":"object","required":["kind"],"properties":{"kind":{"const":"dog"},"age":{"type":"integer"}}}]}`,
		value: `{"kind":"bird","age":"3"}`, errs: []string{"/age pattern", "/kind const"}},
	{name: "refused: two case-insensitive matches", schema: `{"enum":["Draft","DRAFT","sent"]}`, value: `"draft"`, errs: []string{" enum"}},
	{name: "refused: no match", schema: `{"enum":["draft","sent"]}`, value: `"overdue"`, errs: []string{" enum"}},
	{name: "refused: inner whitespace", schema: `{"enum":["in progress"]}`, value: `"in  progress"`, errs: []string{" enum"}},
	// Canonically equivalent strings are the same text: "e" and a combining
	// acute accent (U+0301) is "é" (U+00E9). The expectations are Go strings
	// so that the escapes say which form is which.
	{name: "enum canonical equivalence", schema: `{"enum":["café","thé"]}`, value: `"cafe\u0301"`, want: "\"caf\u00e9\"",
		repairs: "[{\"kind\":\"enum_case\",\"offset\":0,\"before\":\"cafe\u0301\",\"after\":\"caf\u00e9\"}]"},
	{name: "enum canonical equivalence, decomposed allowed", schema: `{"enum":["cafe\u0301"]}`, value: `"caf\u00e9"`, want: "\"cafe\u0301\"",
		repairs: "[{\"kind\":\"enum_case\",\"offset\":0,\"before\":\"caf\u00e9\",\"after\":\"cafe\u0301\"}]"},
	{name: "const canonical equivalence and case", schema: `{"const":"\u00c5ngstr\u00f6m"}`, value: `" a\u030angstro\u0308m"`, want: "\"\u00c5ngstr\u00f6m\"",
		repairs: "[{\"kind\":\"const_case\",\"offset\":0,\"before\":\" a\u030angstro\u0308m\",\"after\":\"\u00c5ngstr\u00f6m\"}]"},
	{name: "refused: two allowed values canonically equal", schema: `{"enum":["caf\u00e9","cafe\u0301"]}`, value: `"CAF\u00c9"`, errs: []string{" enum"}},
	{name: "refused: compatibility form (superscript)", schema: `{"enum":["x2","y"]}`, value: `"x²"`, errs: []string{" enum"}},
	{name: "refused: compatibility form (ligature)", schema: `{"enum":["file"]}`, value: `"ﬁle"`, errs: []string{" enum"}},
	{name: "refused: compatibility form (full width)", schema: `{"enum":["bug"]}`, value: `"ｂｕｇ"`, errs: []string{" enum"}},

	// 3. a single value where an array is wanted.
	{name: "wrap scalar", schema: `{"type":"array","items":{"type":"string"}}`, value: `"x"`, want: `["x"]`,
		repairs: `[{"kind":"wrap_array","offset":0,"before":"x","after":["x"]}]`},
	{name: "wrap object", schema: `{"type":"object","properties":{"lines":{"type":"array","minItems":1,"items":{"type":"object","required":["sku"]}}}}`,
		value: `{"lines":{"sku":"A"}}`, want: `{"lines":[{"sku":"A"}]}`,
		repairs: `[{"kind":"wrap_array","offset":0,"pointer":"/lines","before":{"sku":"A"},"after":[{"sku":"A"}]}]`},
	{name: "wrap into optional array", schema: `{"anyOf":[{"type":"array","items":{"type":"integer"}},{"type":"null"}]}`, value: `5`, want: `[5]`,
		repairs: `[{"kind":"wrap_array","offset":0,"before":5,"after":[5]}]`},
	{name: "refused: minItems 2", schema: `{"type":"array","minItems":2,"items":{"type":"string"}}`, value: `"x"`, errs: []string{" type"}},
	{name: "refused: item does not match", schema: `{"type":"array","items":{"type":"integer"}}`, value: `"x"`, errs: []string{" type"}},
	{name: "refused: item needs coercion too", schema: `{"type":"array","items":{"type":"integer"}}`, value: `"4"`, errs: []string{" type"}},
	{name: "refused: null never wrapped", schema: `{"type":"array"}`, value: `null`, errs: []string{" type"}},

	// 4. null for an optional property.
	{name: "drop null", schema: objSchema, value: `{"id":1,"note":null}`, want: `{"id":1}`,
		repairs: `[{"kind":"drop_null","offset":0,"pointer":"/note","before":null}]`},
	{name: "drop null of an enum", schema: `{"properties":{"s":{"enum":["a","b"]}}}`, value: `{"s":null}`, want: `{}`,
		repairs: `[{"kind":"drop_null","offset":0,"pointer":"/s","before":null}]`},
	{name: "refused: null required", schema: objSchema, value: `{"id":null}`, errs: []string{"/id type"}},
	{name: "refused: null required by then", schema: `{"properties":{"a":{"type":"string"},"b":{"type":"string"}},"if":{"required":["b"]},"then":{"required":["a"]}}`,
		value: `{"a":null,"b":"x"}`, errs: []string{"/a type"}},
	{name: "refused: null required in an alternative", schema: `{"properties":{"a":{"type":"string"}},"anyOf":[{"required":["a"]},{"required":["b"]}]}`,
		value: `{"a":null,"b":1}`, errs: []string{"/a type"}},
	{name: "refused: null array item", schema: `{"type":"array","items":{"type":"string"}}`, value: `["a",null]`, errs: []string{"/1 type"}},
	{name: "refused: drop breaks minProperties", schema: `{"minProperties":1,"properties":{"a":{"type":"string"}}}`, value: `{"a":null}`, errs: []string{"/a type"}},

	// 5. properties additionalProperties forbids.
	{name: "refused: wrap a list written as text", schema: objSchema, value: `{"id":1,"tags":"a, b, c"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap lines of text", schema: objSchema, value: `{"id":1,"tags":"a\nb"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap a list written with bullets", schema: objSchema, value: `{"id":1,"tags":"a • b • c"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap a numbered list", schema: objSchema, value: `{"id":1,"tags":"1. a 2. b"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap an array written as text", schema: objSchema, value: `{"id":1,"tags":"['a']"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap an array written as text without commas", schema: objSchema, value: `{"id":1,"tags":"[\"a\" \"b\"]"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap a list with ideographic commas", schema: objSchema, value: `{"id":1,"tags":"a、b、c"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap a list with spaced middle dots", schema: objSchema, value: `{"id":1,"tags":"a · b"}`, errs: []string{"/tags type"}},
	// Every line break is one (CR, NEL, U+2028 and U+2029 were wrapped as
	// one item), so is a fullwidth vertical line, and a numbered list
	// spaced with no-break spaces.
	{name: "refused: wrap lines split by CR", schema: objSchema, value: `{"id":1,"tags":"red\rblue"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap lines split by U+2028", schema: objSchema, value: `{"id":1,"tags":"red\u2028blue"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap lines split by U+2029", schema: objSchema, value: `{"id":1,"tags":"red\u2029blue"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap lines split by NEL", schema: objSchema, value: `{"id":1,"tags":"red\u0085blue"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap lines split by a form feed", schema: objSchema, value: `{"id":1,"tags":"red\fblue"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap a list with fullwidth bars", schema: objSchema, value: `{"id":1,"tags":"red｜blue"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap a numbered list with no-break spaces", schema: objSchema, value: `{"id":1,"tags":"1)\u00a0red\u00a02)\u00a0blue"}`, errs: []string{"/tags type"}},
	// One value that merely looks like an item of a list is wrapped.
	{name: "wrap an address with a number", schema: objSchema, value: `{"id":1,"tags":"3. Main St"}`, want: `{"id":1,"tags":["3. Main St"]}`,
		repairs: `[{"kind":"wrap_array","offset":0,"pointer":"/tags","before":"3. Main St","after":["3. Main St"]}]`},
	{name: "wrap a word in parentheses", schema: objSchema, value: `{"id":1,"tags":"(beta)"}`, want: `{"id":1,"tags":["(beta)"]}`,
		repairs: `[{"kind":"wrap_array","offset":0,"pointer":"/tags","before":"(beta)","after":["(beta)"]}]`},
	{name: "wrap a tagged title", schema: objSchema, value: `{"id":1,"tags":"[draft] report"}`, want: `{"id":1,"tags":["[draft] report"]}`,
		repairs: `[{"kind":"wrap_array","offset":0,"pointer":"/tags","before":"[draft] report","after":["[draft] report"]}]`},
	{name: "wrap a word with a middle dot", schema: objSchema, value: `{"id":1,"tags":"Col·legi"}`, want: `{"id":1,"tags":["Col·legi"]}`,
		repairs: `[{"kind":"wrap_array","offset":0,"pointer":"/tags","before":"Col·legi","after":["Col·legi"]}]`},
	{name: "wrap a word in brackets' company", schema: objSchema, value: `{"id":1,"tags":"v2.0 (beta"}`, want: `{"id":1,"tags":["v2.0 (beta"]}`,
		repairs: `[{"kind":"wrap_array","offset":0,"pointer":"/tags","before":"v2.0 (beta","after":["v2.0 (beta"]}]`},
	// One row [[1,2,3]] or three rows [[1],[2],[3]]: not the fix's to choose.
	{name: "refused: wrap the items of a flat list where rows are wanted", schema: `{"type":"object","properties":{"rows":{"type":"array","items":{"type":"array","items":{"type":"integer"}}}}}`,
		value: `{"rows":[1,2,3]}`, errs: []string{"/rows/0 type", "/rows/1 type", "/rows/2 type"}},
	{name: "refused: additional in safe mode", schema: objSchema, value: `{"id":1,"extra":true}`, errs: []string{"/extra additionalProperties"}},
	{name: "drop additional in all mode", schema: objSchema, value: `{"id":1,"extra":{"a":[1]}}`, mode: fixpoint.CoerceAll, want: `{"id":1}`,
		repairs: `[{"kind":"drop_additional","offset":0,"pointer":"/extra","before":{"a":[1]}}]`},
	{name: "refused: additional while a required property is missing", schema: objSchema, value: `{"key":1}`, mode: fixpoint.CoerceAll,
		errs: []string{"/id required", "/key additionalProperties"}},
	{name: "refused: additional that is a declared property's twin", schema: objSchema, value: `{"id":1,"note":"a","Note":"b"}`, mode: fixpoint.CoerceAll,
		errs: []string{"/Note additionalProperties"}},
	{name: "drop a twin holding the same value", schema: objSchema, value: `{"id":1,"note":"a","Note":"a"}`, mode: fixpoint.CoerceAll, want: `{"id":1,"note":"a"}`,
		repairs: `[{"kind":"drop_additional","offset":0,"pointer":"/Note","before":"a"}]`},
	{name: "all mode renames before it drops", schema: objSchema, value: `{"id":1,"Note":"n","x":0}`, mode: fixpoint.CoerceAll,
		want:    `{"id":1,"note":"n"}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/note","before":"Note","after":"note"},{"kind":"drop_additional","offset":0,"pointer":"/x","before":0}]`},

	// 6. a property under another case or separators of its name.
	{name: "rename a required property", schema: objSchema, value: `{"ID":1}`, want: `{"id":1}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/id","before":"ID","after":"id"}]`},
	// "null" is the string "NULL" in another case and null.
	{name: "refused: enum case where the text is null and null is allowed", schema: `{"type":"object","properties":{"e":{"enum":["NULL","NA",null]}}}`,
		value: `{"e":"null"}`, errs: []string{"/e enum"}},
	// An empty string or a placeholder is no item: [""] and ["none"] were stored.
	{name: "refused: wrap an empty string", schema: objSchema, value: `{"id":1,"tags":""}`, errs: []string{"/tags type"}},
	{name: "refused: wrap a placeholder", schema: objSchema, value: `{"id":1,"tags":"N/A"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap a placeholder in brackets", schema: objSchema, value: `{"id":1,"tags":"(none)"}`, errs: []string{"/tags type"}},
	{name: "refused: wrap a placeholder sentence", schema: objSchema, value: `{"id":1,"tags":"Not applicable."}`, errs: []string{"/tags type"}},
	{name: "refused: enum case where the text is null in another case", schema: `{"type":"object","properties":{"e":{"enum":["NULL","NA",null]}}}`,
		value: `{"e":" Null"}`, errs: []string{"/e enum"}},
	// "true" is the string "TRUE" in another case and the boolean true.
	{name: "refused: enum case where the text is also an allowed literal", schema: `{"type":"object","properties":{"e":{"enum":["TRUE",true]}}}`,
		value: `{"e":"true"}`, errs: []string{"/e enum"}},
	{name: "enum case where the literal is not allowed", schema: `{"type":"object","properties":{"e":{"enum":["TRUE","FALSE"]}}}`,
		value: `{"e":"true"}`, want: `{"e":"TRUE"}`, repairs: `[{"kind":"enum_case","offset":0,"pointer":"/e","before":"true","after":"TRUE"}]`},
	// The new name would break propertyNames: the model would be pointed
	// at a key it never wrote.
	{name: "refused: rename to a name propertyNames forbids", schema: `{"type":"object","properties":{"user_id":{"type":"integer"}},"additionalProperties":false,"propertyNames":{"maxLength":6}}`,
		value: `{"UserId":5}`, errs: []string{"/UserId additionalProperties"}},
	{name: "rename camelCase to snake_case", schema: renameSchema, value: `{"customerName":"Ada","total":3}`, want: `{"customer_name":"Ada","total":3}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/customer_name","before":"customerName","after":"customer_name"}]`},
	{name: "rename with spaces and hyphens", schema: renameSchema, value: `{"Customer Name":"Ada","TOTAL":3}`, want: `{"customer_name":"Ada","total":3}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/customer_name","before":"Customer Name","after":"customer_name"},{"kind":"rename_key","offset":0,"pointer":"/total","before":"TOTAL","after":"total"}]`},
	{name: "rename an optional property additionalProperties forbids", schema: objSchema, value: `{"id":1,"NOTE":"n"}`, want: `{"id":1,"note":"n"}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/note","before":"NOTE","after":"note"}]`},
	{name: "rename where additional properties are allowed", schema: `{"required":["due_date"],"properties":{"due_date":{"type":"string"}}}`,
		value: `{"dueDate":"2026-01-31","x":1}`, want: `{"due_date":"2026-01-31","x":1}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/due_date","before":"dueDate","after":"due_date"}]`},
	{name: "renames of one object together", schema: `{"type":"object","additionalProperties":false,"required":["a_b","c_d","e_f","g_h","i_j"],
		"properties":{"a_b":{"type":"integer"},"c_d":{"type":"integer"},"e_f":{"type":"boolean"},"g_h":{"enum":["x"]},"i_j":{"type":"integer"}}}`,
		value: `{"aB":"1","cD":"2","eF":"true","gH":"X","iJ":"5"}`, want: `{"a_b":1,"c_d":2,"e_f":true,"g_h":"x","i_j":5}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/a_b","before":"aB","after":"a_b"},{"kind":"rename_key","offset":0,"pointer":"/c_d","before":"cD","after":"c_d"},{"kind":"rename_key","offset":0,"pointer":"/e_f","before":"eF","after":"e_f"},{"kind":"rename_key","offset":0,"pointer":"/g_h","before":"gH","after":"g_h"},{"kind":"rename_key","offset":0,"pointer":"/i_j","before":"iJ","after":"i_j"},` +
			`{"kind":"coerce_number","offset":0,"pointer":"/a_b","before":"1","after":1},{"kind":"coerce_number","offset":0,"pointer":"/c_d","before":"2","after":2},{"kind":"coerce_boolean","offset":0,"pointer":"/e_f","before":"true","after":true},{"kind":"enum_case","offset":0,"pointer":"/g_h","before":"X","after":"x"},{"kind":"coerce_number","offset":0,"pointer":"/i_j","before":"5","after":5}]`},
	{name: "rename in an array item", schema: `{"type":"array","items":` + renameSchema + `}`, value: `[{"customer_name":"A","total":1},{"customer_name":"B","Total":2}]`,
		want:    `[{"customer_name":"A","total":1},{"customer_name":"B","total":2}]`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/1/total","before":"Total","after":"total"}]`},
	{name: "rename then fix the value it moved", schema: renameSchema, value: `{"customer_name":"A","Total":"3"}`, want: `{"customer_name":"A","total":3}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/total","before":"Total","after":"total"},{"kind":"coerce_number","offset":0,"pointer":"/total","before":"3","after":3}]`},
	{name: "rename reveals what the value breaks", schema: renameSchema, value: `{"customer_name":"A","Total":-1}`, want: `{"customer_name":"A","total":-1}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/total","before":"Total","after":"total"}]`, errs: []string{"/total minimum"}},
	{name: "rename declared in an alternative", schema: `{"anyOf":[{"required":["a_b"],"properties":{"a_b":{"type":"integer"}}},{"required":["c"]}]}`,
		value: `{"aB":1}`, want: `{"a_b":1}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/a_b","before":"aB","after":"a_b"}]`},
	{name: "refused: two names match", schema: renameSchema, value: `{"customer_name":"A","Total":1,"TOTAL":2}`,
		errs: []string{"/TOTAL additionalProperties", "/Total additionalProperties", "/total required"}},
	{name: "an allowed extra property stays where it is", schema: `{"type":"object","properties":{"b_field":{"type":"string"},"note_text":{"type":"integer"}},"required":["b_field"]}`,
		value: `{"bField":"x","Note-Text":"hello"}`, want: `{"Note-Text":"hello","b_field":"x"}`,
		repairs: `[{"kind":"rename_key","offset":0,"pointer":"/b_field","before":"bField","after":"b_field"}]`},
	{name: "refused: a name of the alternative the discriminator rules out", schema: `{"oneOf":[
		{"type":"object","additionalProperties":false,"required":["kind"],"properties":{"kind":{"const":"cat"},"meow_level":{"type":"integer"}}},
		{"type":"object","additionalProperties":false,"required":["kind"],"properties":{"kind":{"const":"dog"},"bark_level":{"type":"integer"}}}]}`,
		value: `{"kind":"dog","meowLevel":3}`, errs: []string{"/meowLevel additionalProperties"}},
	{name: "refused: the misspelling folds like a name the object has", schema: `{"additionalProperties":false,"properties":{"a_b":{"type":"string"},"ab":{"type":"integer"}}}`,
		value: `{"AB":"x","ab":1}`, errs: []string{"/AB additionalProperties"}},
	{name: "refused: two wanted names match", schema: `{"additionalProperties":false,"properties":{"a_b":{"type":"integer"},"ab":{"type":"integer"}}}`,
		value: `{"AB":1}`, errs: []string{"/AB additionalProperties"}},
	{name: "refused: the name is declared", schema: `{"required":["user_id"],"properties":{"user_id":{"type":"string"},"userId":{"type":"string"}}}`,
		value: `{"userId":"u1"}`, errs: []string{"/user_id required"}},
	{name: "refused: the name is declared by a condition", schema: `{"required":["user_id"],"properties":{"user_id":{"type":"string"}},"if":{"required":["x"]},"then":{"properties":{"userId":{"type":"string"}}}}`,
		value: `{"userId":"u1"}`, errs: []string{"/user_id required"}},
	{name: "refused: patternProperties", schema: `{"required":["user_id"],"properties":{"user_id":{"type":"string"}},"patternProperties":{"^x-":{}}}`,
		value: `{"userId":"u1"}`, errs: []string{"/user_id required"}},
	{name: "refused: another word", schema: renameSchema, value: `{"customer":"A","total":1}`, errs: []string{"/customer additionalProperties", "/customer_name required"}},
	{name: "refused: the moved value breaks something else", schema: `{"required":["a_b"],"properties":{"a_b":{"type":"integer"}},"dependentRequired":{"a_b":["c"]}}`,
		value: `{"aB":1}`, errs: []string{"/a_b required"}},
	{name: "all mode does everything", schema: objSchema, value: `{"id":"1","note":null,"tags":"t","x":0}`, mode: fixpoint.CoerceAll,
		want:    `{"id":1,"tags":["t"]}`,
		repairs: `[{"kind":"coerce_number","offset":0,"pointer":"/id","before":"1","after":1},{"kind":"drop_null","offset":0,"pointer":"/note","before":null},{"kind":"wrap_array","offset":0,"pointer":"/tags","before":"t","after":["t"]},{"kind":"drop_additional","offset":0,"pointer":"/x","before":0}]`},

	// mode none, and what is out of reach.
	{name: "none makes no repair", schema: intSchema, value: `"42"`, mode: fixpoint.CoerceNone, errs: []string{" type"}},
	{name: "unknown mode makes no repair", schema: intSchema, value: `"42"`, mode: "SAFE", errs: []string{" type"}},
	{name: "refused: unreadable number elsewhere", schema: `{"items":{"type":"integer"}}`, value: `["1",1e99999]`, errs: []string{"/1 number"}},
	{name: "refused: dynamicRef", schema: `{"$dynamicAnchor":"n","properties":{"a":{"$dynamicRef":"#n"},"v":{"type":"integer"}}}`,
		value: `{"a":{"v":"1"}}`, errs: []string{"/a/v type"}},
}

func TestCoerce(t *testing.T) {
	t.Parallel()
	for _, tc := range coerceCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tc.schema)
			v := mustDecode(t, tc.value)
			orig := mustEncode(t, v)
			mode := tc.mode
			if mode == "" {
				mode = fixpoint.CoerceSafe
			}
			got, fixes, errs := Coerce(s, v, mode)
			want := tc.want
			if want == "" {
				want = orig
			}
			if g := mustEncode(t, got); g != want {
				t.Errorf("value = %s, want %s", g, want)
			}
			repairs := "null"
			if tc.repairs != "" {
				repairs = tc.repairs
			}
			if g := mustEncode(t, fixes); g != repairs {
				t.Errorf("repairs =\n%s\nwant\n%s", g, repairs)
			}
			var gotErrs []string
			for _, e := range errs {
				gotErrs = append(gotErrs, e.Path+" "+e.Keyword)
			}
			if !slices.Equal(gotErrs, tc.errs) {
				t.Errorf("errors = %q, want %q", gotErrs, tc.errs)
			}
			if !reflect.DeepEqual(errs, s.Validate(got)) {
				t.Errorf("errors returned %v, but the value has %v", errs, s.Validate(got))
			}
			if mustEncode(t, v) != orig {
				t.Errorf("input modified: %s, was %s", mustEncode(t, v), orig)
			}
		})
	}
}

// TestCoerceBounded: schemas whose references loop, or are too wide to
// read within the budget, make Coerce refuse rather than loop or guess.
func TestCoerceBounded(t *testing.T) {
	t.Parallel()
	wide := `{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"}]},"b":{"anyOf":[{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"}]},` +
		`"c":{"anyOf":[{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"}]},"d":{"anyOf":[{"$ref":"#/$defs/e"},{"$ref":"#/$defs/e"}]},` +
		`"e":{"anyOf":[{"$ref":"#/$defs/f"},{"$ref":"#/$defs/f"}]},"f":{"anyOf":[{"$ref":"#/$defs/g"},{"$ref":"#/$defs/g"}]},` +
		`"g":{"anyOf":[{"$ref":"#/$defs/h"},{"$ref":"#/$defs/h"}]},"h":{"anyOf":[{"$ref":"#/$defs/i"},{"$ref":"#/$defs/i"}]},` +
		`"i":{"anyOf":[{"$ref":"#/$defs/j"},{"$ref":"#/$defs/j"}]},"j":{"anyOf":[{"$ref":"#/$defs/k"},{"$ref":"#/$defs/k"}]},` +
		`"k":{"anyOf":[{"$ref":"#/$defs/l"},{"$ref":"#/$defs/l"}]},"l":{"anyOf":[{"$ref":"#/$defs/m"},{"$ref":"#/$defs/m"}]},` +
		`"m":{"type":"integer"}},"$ref":"#/$defs/a"}`
	for _, tc := range []struct{ name, schema, value string }{
		{"ref loop", `{"anyOf":[{"$ref":"#"},{"type":"integer"}]}`, `"1"`},
		{"allOf loop", `{"$defs":{"x":{"allOf":[{"$ref":"#/$defs/y"}],"type":"integer"},"y":{"allOf":[{"$ref":"#/$defs/x"}]}},"$ref":"#/$defs/x"}`, `"1"`},
		{"budget", wide, `"1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := validate.Compile([]byte(tc.schema))
			if err != nil {
				t.Skipf("schema refused: %v", err)
			}
			v := mustDecode(t, tc.value)
			if wantsAt(s, v, nil).Unknown != true {
				t.Errorf("view of %s is known; want unknown", tc.schema)
			}
			got, fixes, errs := Coerce(s, v, fixpoint.CoerceAll)
			if len(fixes) != 0 || !reflect.DeepEqual(got, v) || !reflect.DeepEqual(errs, s.Validate(v)) {
				t.Errorf("Coerce = %v, %v, %v; want no repair", got, fixes, errs)
			}
		})
	}
}

func TestParseCoerceMode(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]fixpoint.CoerceMode{"": fixpoint.CoerceNone, "none": fixpoint.CoerceNone, "safe": fixpoint.CoerceSafe, "all": fixpoint.CoerceAll} {
		if got, err := fixpoint.ParseCoerceMode(in); err != nil || got != want {
			t.Errorf("fixpoint.ParseCoerceMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Safe", "ALL", "unsafe", " safe"} {
		if got, err := fixpoint.ParseCoerceMode(in); err == nil || got != fixpoint.CoerceNone {
			t.Errorf("fixpoint.ParseCoerceMode(%q) = %q, %v; want an error", in, got, err)
		}
	}
}

// TestCoerceNilSchema: a nil schema accepts everything and repairs nothing.
func TestCoerceNilSchema(t *testing.T) {
	t.Parallel()
	var s *validate.Schema
	v := mustDecode(t, `{"a":"1"}`)
	if got, fixes, errs := Coerce(s, v, fixpoint.CoerceAll); !reflect.DeepEqual(got, v) || fixes != nil || errs != nil {
		t.Fatalf("nil schema: %v, %v, %v", got, fixes, errs)
	}
}

// checkSchema is the schema of the CheckWith tests.
const checkSchema = `{"type":"object","required":["n"],"properties":{"n":{"type":"integer","maximum":3}},"additionalProperties":false}`

// TestCheckWithNoneIsCheck: CheckWith with fixpoint.CoerceNone (or the zero options)
// is Check, for valid, repairable and unrepairable replies.
func TestCheckWithNoneIsCheck(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, schematest.TypicalSchema)
	replies := []string{
		schematest.TypicalValue, schematest.TypicalInvalid, "```json\n" + schematest.TypicalValue + "\n```",
		`{"id":"INV-004217","status":"SENT","created":"2025-03-01T10:15:00Z","customer":{"name":"A","email":"a@b.co"},"lines":[{"sku":"ABC-1234","qty":"2","price":1}]}`,
		"no JSON here", `{"a": 1,`,
	}
	for _, reply := range replies {
		want := validate.Check(s, reply)
		for _, opt := range []validate.CheckOptions{{}, {Coerce: Coercer(fixpoint.CoerceNone)}} {
			got := validate.CheckWith(s, reply, opt)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("CheckWith(%q, %+v) = %+v, want %+v", reply, opt, got, want)
			}
		}
		if got := validate.Check(s, reply); got.Coerced != 0 {
			t.Errorf("Check(%q).Coerced = %d", reply, got.Coerced)
		}
	}
	// Where no repair applies, safe and all choose as Check does.
	for _, reply := range []string{schematest.TypicalValue, "no JSON here", `{"a": 1,`, `{"id": 7} or {"id": 8}`} {
		want := validate.Check(s, reply)
		for _, mode := range []fixpoint.CoerceMode{fixpoint.CoerceSafe, fixpoint.CoerceAll} {
			if got := checkWith(s, reply, mode); !reflect.DeepEqual(got, want) {
				t.Errorf("CheckWith(%q, %s) = %+v, want %+v", reply, mode, got, want)
			}
		}
	}
}

func TestCheckWith(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, checkSchema)
	tests := []struct {
		name      string
		reply     string
		mode      fixpoint.CoerceMode
		wantValid bool
		wantValue string
		wantIndex int // the candidate chosen: its Start in the reply
		repairs   string
		coerced   int
	}{
		{
			name:  "candidate made valid wins",
			reply: "First {\"n\": \"x\"} then {\"n\": \"2\"}.", mode: fixpoint.CoerceSafe,
			wantValid: true, wantValue: `{"n":2}`, wantIndex: strings.Index("First {\"n\": \"x\"} then {\"n\": \"2\"}.", `{"n": "2"}`),
			repairs: `[{"kind":"coerce_number","offset":22,"pointer":"/n","before":"2","after":2}]`, coerced: 1,
		},
		{
			name:  "valid as extracted beats made valid",
			reply: "First {\"n\": \"3\"} then {\"n\": 3}.", mode: fixpoint.CoerceSafe,
			wantValid: true, wantValue: `{"n":3}`, wantIndex: strings.Index("First {\"n\": \"3\"} then {\"n\": 3}.", `{"n": 3}`),
			repairs: `[]`,
		},
		{
			// Two values that fit, one after a local fix: a draft and its
			// correction, or an example and the answer. It stored the one
			// valid as written.
			name:  "another value made valid is ambiguous",
			reply: "First {\"n\": \"2\"} then {\"n\": 3}.", mode: fixpoint.CoerceSafe,
			wantValue: `{"n":3}`, wantIndex: strings.Index("First {\"n\": \"2\"} then {\"n\": 3}.", `{"n": 3}`),
			repairs: `[]`,
		},
		{
			name:  "syntax repairs then schema repairs",
			reply: "Result:\n```json\n{\"n\": \"1\", \"x\": 0,}\n```", mode: fixpoint.CoerceAll,
			wantValid: true, wantValue: `{"n":1}`, wantIndex: strings.Index("Result:\n```json\n{\"n\": \"1\", \"x\": 0,}\n```", "{"),
			repairs: `[{"kind":"trailing_comma","offset":33},{"kind":"coerce_number","offset":16,"pointer":"/n","before":"1","after":1},{"kind":"drop_additional","offset":16,"pointer":"/x","before":0}]`, coerced: 2,
		},
		{
			name:  "still invalid keeps its lossless repairs",
			reply: `{"n": "9"}`, mode: fixpoint.CoerceSafe,
			wantValue: `{"n":9}`, wantIndex: 0,
			repairs: `[{"kind":"coerce_number","offset":0,"pointer":"/n","before":"9","after":9}]`, coerced: 1,
		},
		{
			name:  "none repairs nothing",
			reply: `{"n": "2"}`, mode: fixpoint.CoerceNone,
			wantValue: `{"n":"2"}`, wantIndex: 0, repairs: `[]`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := checkWith(s, tc.reply, tc.mode)
			if got.Valid != tc.wantValid || mustEncode(t, got.Value) != tc.wantValue || got.Coerced != tc.coerced {
				t.Fatalf("valid, value, coerced = %v, %s, %d; want %v, %s, %d (%v)", got.Valid, mustEncode(t, got.Value), got.Coerced, tc.wantValid, tc.wantValue, tc.coerced, got.Errors)
			}
			if got.Candidate == nil || got.Candidate.Start != tc.wantIndex {
				t.Fatalf("chose %+v, want the candidate at %d", got.Candidate, tc.wantIndex)
			}
			repairs := got.Repairs
			if repairs == nil {
				repairs = []fixpoint.Repair{}
			}
			if g := mustEncode(t, repairs); g != tc.repairs {
				t.Fatalf("repairs =\n%s\nwant\n%s", g, tc.repairs)
			}
			if tc.name == "another value made valid is ambiguous" {
				if len(got.Errors) != 1 || got.Errors[0].Keyword != "ambiguous" {
					t.Fatalf("errors %v; want one ambiguous error", got.Errors)
				}
			} else if !reflect.DeepEqual(got.Errors, candidateErrorsOf(s, tc.reply, got)) || got.Class != validate.ClassOf(got.Errors) {
				t.Fatalf("errors %v, class %q are not those of the value", got.Errors, got.Class)
			}
			// The `worker check` object shows the repaired value.
			b, err := got.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var out struct{ Value json.RawMessage }
			if err := json.Unmarshal(b, &out); err != nil || string(out.Value) != tc.wantValue {
				t.Fatalf("MarshalJSON value = %s (%v), want %s", out.Value, err, tc.wantValue)
			}
		})
	}
}

// candidateErrorsOf recomputes a result's errors from its value.
func candidateErrorsOf(s *validate.Schema, reply string, r validate.CheckResult) []fixpoint.ValidationError {
	c := extract.Candidate{Value: r.Value, Truncated: r.Truncated}
	if r.Candidate != nil {
		c.Repairs = r.Candidate.Repairs
	}
	errs := s.Validate(c.Value)
	if pre := validate.ExtractionErrors(reply, &c); len(pre) > 0 {
		errs = append(pre, errs...)
	}
	return errs
}

// TestCheckWithTruncated: a truncated candidate may be repaired but is
// never valid.
func TestCheckWithTruncated(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, checkSchema)
	got := checkWith(s, `{"n": "2"`, fixpoint.CoerceSafe)
	if got.Valid || !got.Truncated || got.Class != fixpoint.ClassSyntax || got.Coerced != 1 || len(got.Errors) != 1 || got.Errors[0].Keyword != "truncated" {
		t.Fatalf("got %+v", got)
	}
}

// TestProposeOnlyAgainstTheSchema: a driving error is acted on only when
// the schema at its location excludes what is there. Validate never reports
// these errors; the check must hold on its own.
func TestProposeOnlyAgainstTheSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, schema, value, path, keyword string }{
		{"null allowed", `{"properties":{"a":{"type":["string","null"]}}}`, `{"a":null}`, "/a", "type"},
		{"string allowed", `{"type":["integer","string"]}`, `"42"`, "", "type"},
		{"literal's type not wanted", `{"type":"boolean"}`, `"42"`, "", "type"},
		{"array not wanted", `{"type":"string"}`, `5`, "", "type"},
		{"value's type allowed", `{"type":["array","integer"]}`, `5`, "", "type"},
		{"strings open", `{"type":"string"}`, `"Sent"`, "", "enum"},
		{"not a driving keyword", `{"type":"integer"}`, `"42"`, "", "pattern"},
		{"nothing at the path", `{"properties":{"a":{"type":"integer"}}}`, `{}`, "/a", "type"},
		{"additional: not there", `{"additionalProperties":false}`, `{}`, "/a", "additionalProperties"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tc.schema)
			c, release := s.Begin()
			defer release()
			v := mustDecode(t, tc.value)
			if f, ok := newRound(c, v).proposeOne(v, fixpoint.ValidationError{Path: tc.path, Keyword: tc.keyword}, fixpoint.CoerceAll); ok {
				t.Fatalf("proposed %+v", f)
			}
		})
	}
}

// TestCoerceLarge: many fixes under a oneOf at the root of a large value
// are all made; BenchmarkCoerceLarge shows they cost one validation of each
// alternative per round and one copy of each container per round, not one
// per fix.
func TestCoerceLarge(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, largeOneOfSchema)
	const n = 20000
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"q":"` + strconv.Itoa(i) + `"}`)
	}
	sb.WriteByte(']')
	v := mustDecode(t, sb.String())
	got, fixes, errs := Coerce(s, v, fixpoint.CoerceSafe)
	if len(fixes) != n || len(errs) != 0 {
		t.Fatalf("%d repairs, errors %v", len(fixes), errs[:min(len(errs), 3)])
	}
	if q := got.([]any)[n-1].(map[string]any)["q"]; q != json.Number(strconv.Itoa(n-1)) {
		t.Fatalf("last q = %#v", q)
	}
}

// An object of a thousand misspelt properties, half of them numbers in
// strings, is repaired whole: every rename in one fix, then every number.
func TestCoerceWideObject(t *testing.T) {
	t.Parallel()
	src, value := wideRenamed(1000)
	s := mustCompile(t, src)
	got, fixes, errs := Coerce(s, mustDecode(t, value), fixpoint.CoerceSafe)
	kinds := map[string]int{}
	for _, f := range fixes {
		kinds[f.Kind]++
	}
	if len(errs) != 0 || kinds[KindRenameKey] != 1000 || kinds[KindCoerceNumber] != 500 {
		t.Fatalf("fixes %v, %d errors left", kinds, len(errs))
	}
	if n, ok := got.(map[string]any)["field_999"].(json.Number); !ok || n != "999" {
		t.Errorf("field_999 = %v, want 999", got.(map[string]any)["field_999"])
	}
}

// A value whose checks come near MaxChecks takes seconds to validate, so
// coercing it validates it once more at most; a small value has the whole
// budget.
func TestCoerceBudgetOfALargeValue(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"array","items":`+petSchema+`}`)
	pets := func(n int) any {
		var out []any
		for range n {
			out = append(out, map[string]any{"kind": "Dog", "good": "true"})
		}
		return out
	}
	if got := budgetOf(s, pets(2)); got != coerceValidations {
		t.Errorf("2 pets: budget %d; want %d", got, coerceValidations)
	}
	n := 1
	for c := checksOf(s, pets(n)); c <= validate.MaxChecks/2; c = checksOf(s, pets(n)) {
		n *= 2
	}
	if got := budgetOf(s, pets(n)); got != 1 {
		t.Errorf("%d pets: budget %d; want 1", n, got)
	}
	for c := checksOf(s, pets(n)); c <= validate.MaxChecks; c = checksOf(s, pets(n)) {
		n *= 2
	}
	if got := budgetOf(s, pets(n)); got != 0 {
		t.Errorf("%d pets, over MaxChecks: budget %d; want 0", n, got)
	}
}

const largeOneOfSchema = `{"oneOf":[{"type":"array","items":{"type":"object","properties":{"q":{"type":"integer"}}}},{"type":"string"}]}`

// BenchmarkCoerceLarge: 20,000 numbers in strings under a root oneOf, made
// numbers in one Coerce: about a second on a 2-core machine; a cost per fix
// instead of per round shows as minutes.
func BenchmarkCoerceLarge(b *testing.B) {
	s, err := validate.Compile([]byte(largeOneOfSchema))
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range 20000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"q":"` + strconv.Itoa(i) + `"}`)
	}
	sb.WriteByte(']')
	src := sb.String()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		var v any
		dec := json.NewDecoder(strings.NewReader(src))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, fixes, _ := Coerce(s, v, fixpoint.CoerceSafe); len(fixes) != 20000 {
			b.Fatalf("%d fixes", len(fixes))
		}
	}
}

// 2,000 wrong-case items of an enum of 10,000 values under "items" are
// fixed in a fraction of a second: they took 5.7 s, the list built and
// scanned again for each (validate's TestBigEnumUnderItems describes them).
func TestCoerceBigEnumUnderItems(t *testing.T) {
	t.Parallel()
	var vals []string
	for i := range 10000 {
		vals = append(vals, fmt.Sprintf(`"value-%05d"`, i))
	}
	s := mustCompile(t, `{"type":"array","items":{"enum":[`+strings.Join(vals, ",")+`]}}`)
	items := func(n int, v string) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	fixed, fixes, left := Coerce(s, items(2000, "VALUE-09999"), fixpoint.CoerceSafe)
	if len(fixes) != 2000 || len(left) != 0 || fixed.([]any)[1999] != "value-09999" {
		t.Errorf("coerce: %d fixes, %d errors left; want 2,000 and none", len(fixes), len(left))
	}
}

// A reply of 60,000 wrong items (180,000 errors, past validate.MaxErrors)
// is not coerced: the errors not kept could not be compared. Its errors
// are those the check without coercion keeps.
func TestCoerceNothingPastMaxErrors(t *testing.T) {
	s := mustCompile(t, `{"type":"array","items":`+schematest.LineSchema()+`}`)
	reply := schematest.ManyErrorsReply(60000)
	r := checkWith(s, reply, fixpoint.CoerceSafe)
	if r.Coerced != 0 {
		t.Errorf("%d coerced; want none past MaxErrors", r.Coerced)
	}
	if n := validate.ErrorCount(r.Errors); r.Valid || n != 180000 {
		t.Errorf("valid %v, ErrorCount %d; want invalid, 180000", r.Valid, n)
	}
	if want := validate.Check(s, reply).Errors; !reflect.DeepEqual(r.Errors, want) {
		t.Errorf("%d errors kept; want the %d Check keeps", len(r.Errors), len(want))
	}
}
