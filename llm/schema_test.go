package llm

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

func TestStrictSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		in          string
		want        string
		wantDropped []string
		wantStrict  bool
	}{
		{
			name:       "already strict",
			in:         `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`,
			want:       `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`,
			wantStrict: true,
		},
		{
			name: "unsupported keywords dropped at every depth",
			in: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{
				"name":{"type":"string","minLength":1,"maxLength":9,"pattern":"^a","format":"email","default":"x"},
				"tags":{"type":"array","items":{"type":"string","format":"color"},"uniqueItems":true,"minItems":1,"contains":{"const":"a"}},
				"n":{"type":"number","minimum":0,"exclusiveMaximum":10,"examples":[1]},
				"inner":{"type":"object","properties":{"x":{"type":"integer"}},"patternProperties":{"^y":{}},"minProperties":1}
			},"required":["name","tags","n","inner"],"allOf":[{"required":["name"]}]}`,
			want: `{"type":"object","properties":{
				"name":{"type":"string","pattern":"^a","format":"email"},
				"tags":{"type":"array","items":{"type":"string"},"minItems":1},
				"n":{"type":"number","minimum":0,"exclusiveMaximum":10},
				"inner":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}
			},"required":["name","tags","n","inner"],"additionalProperties":false}`,
			wantDropped: []string{"/$schema", "/allOf", "/properties/inner/minProperties", "/properties/inner/patternProperties",
				"/properties/inner/required", "/properties/n/examples", "/properties/name/default", "/properties/name/maxLength",
				"/properties/name/minLength", "/properties/tags/contains", "/properties/tags/items/format", "/properties/tags/uniqueItems"},
			wantStrict: true,
		},
		{
			name:        "oneOf becomes anyOf, additionalProperties schema becomes false",
			in:          `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"integer"}]}},"required":["v"],"additionalProperties":{"type":"string"}}`,
			want:        `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}},"required":["v"],"additionalProperties":false}`,
			wantDropped: []string{"/additionalProperties", "/properties/v/oneOf"},
			wantStrict:  true,
		},
		{
			name:       "non-object root is sent unchanged without strict",
			in:         `{"type":"array","items":{"type":"string","minLength":1}}`,
			want:       `{"type":"array","items":{"type":"string","minLength":1}}`,
			wantStrict: false,
		},
		{
			name: "defs are walked",
			in:   `{"type":"object","properties":{"p":{"$ref":"#/$defs/P"}},"required":["p"],"$defs":{"P":{"type":"object","properties":{"q":{"type":"string","maxLength":3}}}}}`,
			want: `{"type":"object","properties":{"p":{"$ref":"#/$defs/P"}},"required":["p"],"additionalProperties":false,
				"$defs":{"P":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}}}`,
			wantDropped: []string{"/$defs/P/properties/q/maxLength", "/$defs/P/required"},
			wantStrict:  true,
		},
		// $ref is sent as is, never followed: a schema that refers to
		// itself is walked once, as the tree it is.
		{
			name:       "items cycle to a node with properties: not an object root",
			in:         selfReferentSchemas[0],
			want:       selfReferentSchemas[0],
			wantStrict: false,
		},
		{
			name:       "required self-reference",
			in:         `{"type":"object","required":["c"],"properties":{"c":{"$ref":"#"}}}`,
			want:       `{"type":"object","required":["c"],"properties":{"c":{"$ref":"#"}},"additionalProperties":false}`,
			wantStrict: true,
		},
		{
			name:        "optional self-reference becomes required",
			in:          `{"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"integer"}},"required":["v"]}`,
			want:        `{"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"integer"}},"required":["next","v"],"additionalProperties":false}`,
			wantDropped: []string{"/required"},
			wantStrict:  true,
		},
		{
			name:        "required with a repeat still lists every property",
			in:          `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","a"]}`,
			want:        `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"],"additionalProperties":false}`,
			wantDropped: []string{"/required"},
			wantStrict:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, dropped, strict, err := strictSchema(json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("strictSchema: %v", err)
			}
			var g, w any
			json.Unmarshal(got, &g)
			json.Unmarshal([]byte(tt.want), &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("schema\n got: %s\nwant: %s", got, tt.want)
			}
			if !reflect.DeepEqual(dropped, tt.wantDropped) {
				t.Errorf("dropped\n got: %q\nwant: %q", dropped, tt.wantDropped)
			}
			if strict != tt.wantStrict {
				t.Errorf("strict = %v, want %v", strict, tt.wantStrict)
			}
		})
	}
	if _, _, _, err := strictSchema(json.RawMessage(`{`)); err == nil {
		t.Error("invalid JSON schema accepted")
	}
}

// fixpoint's own keywords are checked locally (rules, evidence): strict
// mode leaves them out of what is sent without a word, at every depth, as
// no constraint the provider was asked for and dropped.
func TestStrictSchemaLeavesLocalKeywordsOut(t *testing.T) {
	t.Parallel()
	in := `{"type":"object","properties":{"start":{"type":"string"},"end":{"type":"string"},
		"summary":{"type":"string","x-fixpoint-evidence":false},
		"lines":{"type":"array","items":{"type":"object","properties":{"q":{"type":"integer"}},"x-fixpoint-rules":[{"rule":"self.q > 0"}]}}},
		"required":["start","end","summary","lines"],"additionalProperties":false,
		"x-fixpoint-rules":[{"rule":"self.end >= self.start","path":"/end"}],"x-fixpoint-future":1,"x-other":1}`
	want := `{"type":"object","properties":{"start":{"type":"string"},"end":{"type":"string"},
		"summary":{"type":"string"},
		"lines":{"type":"array","items":{"type":"object","properties":{"q":{"type":"integer"}},"required":["q"],"additionalProperties":false}}},
		"required":["start","end","summary","lines"],"additionalProperties":false}`
	got, dropped, strict, err := strictSchema(json.RawMessage(in))
	if err != nil || !strict {
		t.Fatalf("strictSchema: strict %v, %v", strict, err)
	}
	var g, w any
	_ = json.Unmarshal(got, &g)
	_ = json.Unmarshal([]byte(want), &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("schema\n got: %s\nwant: %s", got, want)
	}
	// Another extension keyword is still reported dropped.
	if wantDropped := []string{"/properties/lines/items/required", "/x-other"}; !reflect.DeepEqual(dropped, wantDropped) {
		t.Errorf("dropped %q, want %q", dropped, wantDropped)
	}
}

// selfReferentSchemas refer to themselves through $ref; seeds of
// FuzzStrictSchema too.
var selfReferentSchemas = []string{
	`{"$defs":{"node":{"type":["object","array"],"properties":{"name":{"type":"string"}},"items":{"$ref":"#/$defs/node"}}},"$ref":"#/$defs/node"}`,
	`{"$ref":"#"}`,
	`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
	`{"type":"object","required":["c"],"properties":{"c":{"$ref":"#"}}}`,
	`{"type":"object","required":["a","b"],"properties":{"a":{"$ref":"#"},"b":{"$ref":"#"}}}`,
}

// nested is an object schema nesting n objects.
func nested(n int) string {
	s := `{"type":"string","minLength":1}`
	for range n {
		s = `{"type":"object","properties":{"a":` + s + `}}`
	}
	return s
}

// TestStrictSchemaDepthBound: the strict transform walks at most
// maxStrictDepth levels of subschemas; a deeper schema is sent as given,
// without strict mode, rather than walked to whatever depth it has.
func TestStrictSchemaDepthBound(t *testing.T) {
	t.Parallel()
	in := nested(maxStrictDepth / 2)
	if _, _, strict, err := strictSchema(json.RawMessage(in)); err != nil || !strict {
		t.Fatalf("a schema %d deep: strict %v, %v; want strict", maxStrictDepth/2, strict, err)
	}
	in = nested(maxStrictDepth + 1)
	got, dropped, strict, err := strictSchema(json.RawMessage(in))
	if err != nil || strict || dropped != nil || string(got) != in {
		t.Fatalf("a schema %d deep: strict %v, %d keywords dropped, changed %v, %v; want it as given, not strict",
			maxStrictDepth+1, strict, len(dropped), string(got) != in, err)
	}
}

func TestCheckSchemaMode(t *testing.T) {
	t.Parallel()
	obj, str := []byte(`{"type":"object","properties":{}}`), []byte(`{"type":"string"}`)
	for _, tc := range []struct {
		provider string
		mode     fixpoint.Mode
		schema   []byte
		ok       bool
	}{
		{ProviderOpenAI, fixpoint.ModeTool, obj, true},
		{ProviderOpenAI, fixpoint.ModeTool, str, false},
		{ProviderOllama, fixpoint.ModeTool, []byte(`true`), false},
		{ProviderAnthropic, fixpoint.ModeJSONSchema, str, false},
		{ProviderAnthropic, fixpoint.ModeJSONSchema, obj, true},
		{ProviderOpenAI, fixpoint.ModeJSONSchema, str, true}, // sent without strict mode
		{ProviderOpenAI, fixpoint.ModePrompt, str, true},
	} {
		if err := CheckSchemaMode(tc.provider, tc.mode, tc.schema); (err == nil) != tc.ok {
			t.Errorf("%s %s %s: %v, want ok %v", tc.provider, tc.mode, tc.schema, err, tc.ok)
		}
	}
}
