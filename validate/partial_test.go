package validate

import (
	"strings"
	"sync"
	"testing"
)

// partialCases are schema/value pairs with the keywords of the errors the
// partial schema reports (in their order), and those the full schema
// reports, so that each case shows what Partial relaxes and what it keeps.
var partialCases = []struct {
	name          string
	schema, value string
	partial, full []string // "path keyword"
}{
	{
		name:    "nested required",
		schema:  `{"type":"object","required":["contract"],"properties":{"contract":{"type":"object","required":["parties","term"],"properties":{"parties":{"type":"array"},"term":{"type":"object","required":["months"],"properties":{"months":{"type":"integer"}}}}}}}`,
		value:   `{"contract":{"term":{}}}`,
		partial: nil,
		full:    []string{"/contract/parties required", "/contract/term/months required"},
	},
	{
		name:    "an empty part",
		schema:  `{"type":"object","required":["a","b"]}`,
		value:   `{}`,
		partial: nil,
		full:    []string{"/a required", "/b required"},
	},
	{
		name:    "type, enum, format and pattern are still errors",
		schema:  `{"type":"object","required":["id","kind","email","code","n"],"properties":{"id":{"type":"integer"},"kind":{"enum":["a","b"]},"email":{"type":"string","format":"email"},"code":{"type":"string","pattern":"^[A-Z]{3}$"},"n":{"type":"number","maximum":10}}}`,
		value:   `{"id":"7","kind":"c","email":"not an email","code":"ab","n":11}`,
		partial: []string{"/code pattern", "/email format", "/id type", "/kind enum", "/n maximum"},
		full:    []string{"/code pattern", "/email format", "/id type", "/kind enum", "/n maximum"},
	},
	{
		name:    "arrays of objects",
		schema:  `{"type":"object","properties":{"subsidiaries":{"type":"array","minItems":1,"items":{"type":"object","required":["name","country"],"additionalProperties":false,"properties":{"name":{"type":"string"},"country":{"type":"string","minLength":2}}}}}}`,
		value:   `{"subsidiaries":[{"name":"Acme"},{"country":"D"},{"name":"X","city":"Y"}]}`,
		partial: []string{"/subsidiaries/1/country minLength", "/subsidiaries/2/city additionalProperties"},
		full:    []string{"/subsidiaries/0/country required", "/subsidiaries/1/country minLength", "/subsidiaries/1/name required", "/subsidiaries/2/city additionalProperties", "/subsidiaries/2/country required"},
	},
	{
		name:    "minItems is still an error",
		schema:  `{"type":"object","properties":{"items":{"type":"array","minItems":2}}}`,
		value:   `{"items":[1]}`,
		partial: []string{"/items minItems"},
		full:    []string{"/items minItems"},
	},
	{
		name:    "through $ref, recursive too",
		schema:  `{"$defs":{"party":{"type":"object","required":["name","role"],"properties":{"name":{"type":"string"},"role":{"enum":["buyer","seller"]},"parent":{"$ref":"#/$defs/party"}}}},"type":"object","required":["buyer"],"properties":{"buyer":{"$ref":"#/$defs/party"}}}`,
		value:   `{"buyer":{"name":"Acme","parent":{"role":"owner"}}}`,
		partial: []string{"/buyer/parent/role enum"},
		full:    []string{"/buyer/parent/name required", "/buyer/parent/role enum", "/buyer/role required"},
	},
	{
		name:    "dependentRequired",
		schema:  `{"type":"object","dependentRequired":{"iban":["bic"]},"properties":{"iban":{"type":"string"}}}`,
		value:   `{"iban":"DE00"}`,
		partial: nil,
		full:    []string{" dependentRequired"},
	},
	{
		name:    "draft-07 dependencies: the list form is relaxed, the schema form checks",
		schema:  `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","dependencies":{"iban":["bic"],"vat":{"properties":{"country":{"type":"string"}}}},"properties":{"iban":{"type":"string"}}}`,
		value:   `{"iban":"DE00","vat":"x","country":3}`,
		partial: []string{"/country type"},
		full:    []string{" dependencies", "/country type"},
	},
	{
		// A part that lacks the discriminating property fits both
		// alternatives: checked as anyOf, it is no error.
		name:    "oneOf told apart by required",
		schema:  `{"type":"object","properties":{"party":{"oneOf":[{"type":"object","required":["person"],"properties":{"person":{"type":"string"},"id":{"type":"integer"}}},{"type":"object","required":["company"],"properties":{"company":{"type":"string"},"id":{"type":"integer"}}}]}}}`,
		value:   `{"party":{"id":4}}`,
		partial: nil,
		full:    []string{"/party/person required"},
	},
	{
		name:    "oneOf: an alternative's other errors still count",
		schema:  `{"type":"object","properties":{"party":{"oneOf":[{"type":"object","required":["person"],"properties":{"person":{"type":"string"},"id":{"type":"integer"}}},{"type":"object","required":["company"],"properties":{"company":{"type":"string"},"id":{"type":"integer"}}}],"anyOf":[{"type":"object"}]}}}`,
		value:   `{"party":{"id":"x"}}`,
		partial: []string{"/party/id type"},
		full:    []string{"/party/id type", "/party/person required"},
	},
	{
		// The "if" reads what the part holds: without "kind" the
		// condition does not hold and "then" does not apply.
		name:    "if keeps its required",
		schema:  `{"type":"object","if":{"required":["kind"],"properties":{"kind":{"const":"company"}}},"then":{"required":["vat"],"properties":{"vat":{"type":"string","minLength":4}}},"else":{"properties":{"vat":{"type":"null"}}}}`,
		value:   `{"vat":"x"}`,
		partial: []string{"/vat type"},
		full:    []string{"/vat type"},
	},
	{
		name:    "then is relaxed, its other checks kept",
		schema:  `{"type":"object","if":{"required":["kind"],"properties":{"kind":{"const":"company"}}},"then":{"required":["vat","reg"],"properties":{"vat":{"type":"string","minLength":4}}}}`,
		value:   `{"kind":"company","vat":"x"}`,
		partial: []string{"/vat minLength"},
		full:    []string{"/reg required", "/vat minLength"},
	},
	{
		// not {required: [a]}: a part without "a" passes, as in the full
		// schema; relaxed, "not" would refuse every value.
		name:    "not keeps its required, through a $ref too",
		schema:  `{"$defs":{"hasA":{"required":["a"]}},"type":"object","properties":{"x":{"not":{"required":["a"]}},"y":{"not":{"$ref":"#/$defs/hasA"}}}}`,
		value:   `{"x":{"b":1},"y":{"b":2}}`,
		partial: nil,
		full:    nil,
	},
	{
		name:    "not still refuses what it names",
		schema:  `{"type":"object","properties":{"x":{"not":{"required":["a"]}}}}`,
		value:   `{"x":{"a":1}}`,
		partial: []string{"/x not"},
		full:    []string{"/x not"},
	},
}

func keywordsOf(s *Schema, v any) []string {
	var out []string
	for _, e := range s.Validate(v) {
		out = append(out, e.Path+" "+e.Keyword)
	}
	return out
}

func TestPartial(t *testing.T) {
	t.Parallel()
	for _, c := range partialCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, c.schema)
			p, err := s.Partial()
			if err != nil {
				t.Fatalf("Partial: %v", err)
			}
			v := mustDecode(t, c.value)
			if got := keywordsOf(p, v); strings.Join(got, ", ") != strings.Join(c.partial, ", ") {
				t.Errorf("partial schema: errors %q, want %q", got, c.partial)
			}
			// The schema itself is unchanged.
			if got := keywordsOf(s, v); strings.Join(got, ", ") != strings.Join(c.full, ", ") {
				t.Errorf("full schema: errors %q, want %q", got, c.full)
			}
		})
	}
}

// TestPartialKeepsMessagesAndClasses: an error of the partial schema is
// the one the full schema gives, word for word.
func TestPartialKeepsMessagesAndClasses(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","required":["a","b"],"properties":{"a":{"type":"integer"},"b":{"type":"string"}}}`)
	p, err := s.Partial()
	if err != nil {
		t.Fatal(err)
	}
	v := mustDecode(t, `{"a":"seven"}`)
	got, full := p.Validate(v), s.Validate(v)
	if len(got) != 1 || len(full) != 2 || got[0] != full[0] {
		t.Fatalf("partial %s, full %s", dump(got), dump(full))
	}
}

// TestPartialOnce: concurrent callers share one partial schema.
func TestPartialOnce(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","required":["a"]}`)
	var wg sync.WaitGroup
	got := make([]*Schema, 8)
	for i := range got {
		wg.Go(func() { got[i], _ = s.Partial() })
	}
	wg.Wait()
	for _, p := range got {
		if p == nil || p != got[0] {
			t.Fatalf("Partial returned %p and %p", p, got[0])
		}
	}
	if strings.Contains(string(got[0].Raw()), "required") || !strings.Contains(string(s.Raw()), "required") {
		t.Fatalf("partial Raw %s, schema Raw %s", got[0].Raw(), s.Raw())
	}
	var nilSchema *Schema
	if p, err := nilSchema.Partial(); p != nil || err != nil {
		t.Fatalf("nil schema: %v, %v", p, err)
	}
}

// TestPartialItems: a list item keeps its own required properties (also
// through a $ref and the branches of an allOf), while the root, an
// object that is no list item, and what lies inside an item stay relaxed;
// every other check is Partial's.
func TestPartialItems(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		schema, value string
		want          []string // "path keyword" of PartialItems
		partial       []string // of Partial, for contrast
	}{
		{
			name:    "an item lacks a field, the root lacks one",
			schema:  `{"type":"object","required":["provider","subsidiaries"],"properties":{"provider":{"type":"string"},"subsidiaries":{"type":"array","items":{"type":"object","required":["name","country"],"properties":{"name":{"type":"string"},"country":{"type":"string","minLength":2}}}}}}`,
			value:   `{"subsidiaries":[{"name":"Acme","country":"DE"},{"country":"F"},{"name":"X"}]}`,
			want:    []string{"/subsidiaries/1/country minLength", "/subsidiaries/1/name required", "/subsidiaries/2/country required"},
			partial: []string{"/subsidiaries/1/country minLength"},
		},
		{
			name:    "an item through a $ref and an allOf",
			schema:  `{"$defs":{"sub":{"type":"object","allOf":[{"required":["share"]}],"required":["name"],"properties":{"name":{"type":"string"},"share":{"type":"number"}}}},"type":"object","properties":{"subs":{"type":"array","items":{"$ref":"#/$defs/sub"}}}}`,
			value:   `{"subs":[{"share":3},{"name":"A"},{"name":"B","share":4}]}`,
			want:    []string{"/subs/0/name required", "/subs/1/share required"},
			partial: nil,
		},
		{
			name:    "inside an item stays relaxed",
			schema:  `{"type":"object","properties":{"sections":{"type":"array","items":{"type":"object","required":["title"],"properties":{"title":{"type":"string"},"head":{"type":"object","required":["date"]},"clauses":{"type":"array","items":{"type":"object","required":["number"]}}}}}}}`,
			value:   `{"sections":[{"title":"1","head":{},"clauses":[{"number":1},{}]}]}`,
			want:    []string{"/sections/0/clauses/1/number required"},
			partial: nil,
		},
		{
			name:    "an object that is no list item stays relaxed",
			schema:  `{"type":"object","properties":{"party":{"type":"object","required":["name","role"]},"tags":{"type":"array","items":{"type":"string"}}}}`,
			value:   `{"party":{"name":"Acme"},"tags":["a"]}`,
			want:    nil,
			partial: nil,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, c.schema)
			items, err := s.PartialItems()
			if err != nil {
				t.Fatalf("PartialItems: %v", err)
			}
			p, err := s.Partial()
			if err != nil {
				t.Fatalf("Partial: %v", err)
			}
			v := mustDecode(t, c.value)
			if got := keywordsOf(items, v); strings.Join(got, ", ") != strings.Join(c.want, ", ") {
				t.Errorf("PartialItems: errors %q, want %q", got, c.want)
			}
			if got := keywordsOf(p, v); strings.Join(got, ", ") != strings.Join(c.partial, ", ") {
				t.Errorf("Partial: errors %q, want %q", got, c.partial)
			}
		})
	}
}
