package validate

import (
	"errors"
	"strings"
	"testing"
)

const (
	draft04 = `"$schema":"http://json-schema.org/draft-04/schema#"`
	draft06 = `"$schema":"http://json-schema.org/draft-06/schema#"`
)

// Schemas that repeat an id in sibling subschemas, as generators write
// them, compile; each subschema validates as written, and a reference to
// the id resolves to the first of them in the schema's text.
func TestRepeatedIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, schema    string
		valid, invalid  []string
		invalidKeywords []string
	}{
		{
			name:    "draft-04 siblings, the first in the text named by $ref",
			schema:  `{` + draft04 + `,"properties":{"a":{"id":"item.json","type":"string"},"b":{"id":"item.json","type":"integer"},"c":{"$ref":"item.json"}}}`,
			valid:   []string{`{"a":"x","b":1,"c":"y"}`, `{}`},
			invalid: []string{`{"c":1}`, `{"a":1}`, `{"b":"x"}`},
		},
		{
			// The same, with b first in the text: the reference follows
			// the text, not the names.
			name:    "draft-04 siblings in the other order",
			schema:  `{` + draft04 + `,"properties":{"b":{"id":"item.json","type":"integer"},"a":{"id":"item.json","type":"string"},"c":{"$ref":"item.json"}}}`,
			valid:   []string{`{"a":"x","b":1,"c":2}`},
			invalid: []string{`{"c":"y"}`, `{"a":1}`},
		},
		{
			name:    "draft-04 tuple items with one id",
			schema:  `{` + draft04 + `,"type":"array","items":[{"id":"#/items","type":"string"},{"id":"http://example.com/item","type":"integer"},{"id":"http://example.com/item","type":"boolean"}],"additionalItems":{"$ref":"http://example.com/item"}}`,
			valid:   []string{`["a",1,true,2,3]`, `["a"]`},
			invalid: []string{`["a",1,2]`, `["a","b"]`, `["a",1,true,false]`},
		},
		{
			name:    "draft-06 siblings",
			schema:  `{` + draft06 + `,"definitions":{"x":{"$id":"x.json","minimum":10},"y":{"$id":"x.json","maximum":5}},"properties":{"n":{"$ref":"x.json"},"m":{"$ref":"#/definitions/y"}}}`,
			valid:   []string{`{"n":10,"m":5}`},
			invalid: []string{`{"n":9}`, `{"m":6}`},
		},
		{
			name:    "draft-06 plain-name fragment ids",
			schema:  `{` + draft06 + `,"properties":{"a":{"$id":"#item","type":"string"},"b":{"$id":"#item","type":"integer"},"c":{"$ref":"#item"}}}`,
			valid:   []string{`{"a":"x","b":1,"c":"y"}`},
			invalid: []string{`{"c":1}`, `{"b":"x"}`},
		},
		{
			// A definition inlined twice with its id and its own
			// definitions: a reference inside each copy resolves as it
			// did.
			name: "draft-04 inlined copies",
			schema: `{` + draft04 + `,"properties":{` +
				`"home":{"id":"http://example.com/address.json","type":"object","properties":{"zip":{"$ref":"#/definitions/zip"},"geo":{"id":"geo.json","type":"array"}},"definitions":{"zip":{"type":"string","pattern":"^[0-9]{5}$"}}},` +
				`"work":{"id":"http://example.com/address.json","type":"object","properties":{"zip":{"$ref":"#/definitions/zip"},"geo":{"id":"geo.json","type":"array"}},"definitions":{"zip":{"type":"string","pattern":"^[0-9]{5}$"}}},` +
				`"ship":{"$ref":"http://example.com/address.json"},"at":{"$ref":"http://example.com/geo.json"}}}`,
			valid:   []string{`{"home":{"zip":"12345"},"work":{"zip":"54321","geo":[]},"ship":{"zip":"00000"},"at":[1]}`},
			invalid: []string{`{"work":{"zip":"1"}}`, `{"ship":{"zip":1}}`, `{"home":{"geo":{}}}`, `{"at":{}}`},
		},
		{
			name:    "draft-06 subschema repeating the root's id",
			schema:  `{` + draft06 + `,"$id":"http://example.com/root.json","type":"object","properties":{"a":{"$id":"http://example.com/root.json","type":"object","required":["z"]},"b":{"$ref":"http://example.com/root.json"}}}`,
			valid:   []string{`{"a":{"z":1},"b":{}}`},
			invalid: []string{`{"a":{}}`, `{"b":1}`},
		},
	} {
		s, err := Compile([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		for _, v := range tc.valid {
			if errs := s.Validate(mustDecode(t, v)); len(errs) != 0 {
				t.Errorf("%s: %s: %v; want valid", tc.name, v, errs)
			}
		}
		for _, v := range tc.invalid {
			errs := s.Validate(mustDecode(t, v))
			if len(errs) == 0 {
				t.Errorf("%s: %s: valid; want errors", tc.name, v)
			}
			if err := checkErrors(errs); err != nil {
				t.Errorf("%s: %s: %v", tc.name, v, err)
			}
		}
	}
}

// Which subschema keeps a repeated id does not depend on the order a map
// is walked in: compiled many times, the schema gives one verdict.
func TestRepeatedIDsDeterministic(t *testing.T) {
	t.Parallel()
	var props []string
	for _, k := range []string{"p", "e", "c", "g", "a", "h", "b", "f", "d"} {
		props = append(props, `"`+k+`":{"id":"dup.json","enum":["`+k+`"]}`)
	}
	schema := `{` + draft04 + `,"properties":{` + strings.Join(props, ",") + `,"ref":{"$ref":"dup.json"}}}`
	for range 30 {
		s := mustCompile(t, schema)
		if errs := s.Validate(mustDecode(t, `{"ref":"p"}`)); len(errs) != 0 {
			t.Fatalf("ref p: %v; want valid (p is first in the text)", errs)
		}
		if errs := s.Validate(mustDecode(t, `{"ref":"a"}`)); len(errs) == 0 {
			t.Fatal("ref a: valid; want the enum of p")
		}
	}
}

// A repeated $anchor (2019-09 and later) is still refused: its keyword
// says it names one place, and no generator was seen repeating it.
func TestRepeatedAnchorRefused(t *testing.T) {
	t.Parallel()
	_, err := Compile([]byte(`{"$defs":{"a":{"$anchor":"x","type":"string"},"b":{"$anchor":"x","type":"integer"}},"$ref":"#x"}`))
	var se *SchemaError
	if !errors.As(err, &se) || se.Keyword != "$anchor" {
		t.Errorf("Compile = %v; want a *SchemaError at $anchor", err)
	}
}
