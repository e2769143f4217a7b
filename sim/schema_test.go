package sim

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

var generatorSchemas = []struct {
	name   string
	schema string
}{
	{"order", orderSchema},
	{"scalars", `{"type":"object","required":["a","b","c","d","e","f"],"properties":{
		"a":{"type":"integer","exclusiveMinimum":5,"exclusiveMaximum":8},
		"b":{"type":"number","minimum":-1.5,"maximum":-1.25},
		"c":{"type":"integer","multipleOf":7,"minimum":100,"maximum":130},
		"d":{"type":"string","minLength":20,"maxLength":22},
		"e":{"type":"boolean"},
		"f":{"type":"null"}}}`},
	{"formats", `{"type":"object","required":["email","date","dt","uri","uuid","time","host","ip"],"properties":{
		"email":{"type":"string","format":"email"},
		"date":{"type":"string","format":"date"},
		"dt":{"type":"string","format":"date-time"},
		"uri":{"type":"string","format":"uri"},
		"uuid":{"type":"string","format":"uuid"},
		"time":{"type":"string","format":"time"},
		"host":{"type":"string","format":"hostname"},
		"ip":{"type":"string","format":"ipv4"}}}`},
	{"patterns", `{"type":"object","required":["a","b","c","d"],"properties":{
		"a":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},
		"b":{"type":"string","pattern":"^(red|green|blue)-\\d+$"},
		"c":{"type":"string","pattern":"^[a-z]+(\\.[a-z]+)*@corp\\.example$"},
		"d":{"type":"string","pattern":"^\\w{2,5}$"}}}`},
	{"refs", `{"$defs":{"addr":{"type":"object","required":["city","zip"],"additionalProperties":false,
		"properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}}}},
		"type":"object","required":["home","work"],"properties":{
		"home":{"$ref":"#/$defs/addr"},"work":{"$ref":"#/$defs/addr"}}}`},
	{"definitions-draft7-style", `{"definitions":{"n":{"type":"integer","minimum":3,"maximum":3}},
		"type":"object","required":["x"],"properties":{"x":{"$ref":"#/definitions/n"}}}`},
	{"combinators", `{"type":"object","required":["one","any","all","c"],"properties":{
		"one":{"oneOf":[{"type":"string","const":"fixed"},{"type":"integer"}]},
		"any":{"anyOf":[{"type":"null"},{"type":"integer","minimum":1,"maximum":2}]},
		"all":{"allOf":[{"type":"object","required":["p"],"properties":{"p":{"type":"string"}}},
		                {"required":["q"],"properties":{"q":{"type":"boolean"}}}]},
		"c":{"const":{"k":[1,2]}}}}`},
	{"arrays", `{"type":"object","required":["u","t","big"],"properties":{
		"u":{"type":"array","items":{"type":"integer","minimum":1,"maximum":5},"minItems":5,"maxItems":5,"uniqueItems":true},
		"t":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false},
		"big":{"type":"array","items":{"type":"string","enum":["x","y"]},"minItems":6}}}`},
	{"recursive", `{"$defs":{"node":{"type":"object","required":["name"],"properties":{
		"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},
		"$ref":"#/$defs/node"}`},
	{"multiples", `{"type":"object","required":["a","b","c","d"],"properties":{
		"a":{"type":"number","multipleOf":2.5,"minimum":-20,"maximum":-5},
		"b":{"type":"number","multipleOf":0.001,"exclusiveMinimum":0,"exclusiveMaximum":0.003},
		"c":{"type":"number","multipleOf":1e-2,"minimum":1,"maximum":2},
		"d":{"type":"number","multipleOf":0.3333,"minimum":1,"maximum":2}}}`},
	{"root-array", `{"type":"array","items":{"type":"object","required":["id"],"properties":{"id":{"type":"string","format":"uuid"}}},"minItems":2}`},
	{"type-array", `{"type":"object","required":["v"],"properties":{"v":{"type":["integer","string"],"minimum":10,"maximum":11}}}`},
}

func TestGeneratorProducesValidInstances(t *testing.T) {
	t.Parallel()
	for _, tc := range generatorSchemas {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sch := compileSchema(t, tc.schema)
			doc, err := parseSchema([]byte(tc.schema))
			if err != nil {
				t.Fatalf("parseSchema: %v", err)
			}
			for seed := range uint64(200) {
				g := generator{doc: doc, rng: rand.New(rand.NewPCG(seed, 1))}
				v := g.gen(doc.root, "", 0)
				b := encode(v, encOpts{})
				if err := sch.Validate(decodeValue(t, b)); err != nil {
					t.Fatalf("seed %d: instance %s is invalid: %v", seed, b, err)
				}
				var c checker
				c.doc = doc
				c.walk(doc.root, v, "", 0)
				if len(c.out) != 0 {
					t.Fatalf("seed %d: checker finds faults %v in a valid instance %s", seed, c.out, b)
				}
			}
		})
	}
}

func TestInjectedContentFaultsAreInvalidAndDetected(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t, orderSchema)
	doc, err := parseSchema([]byte(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range contentKinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(100) {
				r := rand.New(rand.NewPCG(seed, 2))
				g := generator{doc: doc, rng: r}
				v := g.gen(doc.root, "", 0)
				c := checker{doc: doc}
				sites := map[FaultKind][]site{}
				c.sites(doc.root, v, "", 0, sites)
				ptr, ok := injectOne(v, kind, sites[kind], nil, r)
				if !ok {
					t.Fatalf("seed %d: no site for %s", seed, kind)
				}
				b := encode(v, encOpts{})
				if err := sch.Validate(decodeValue(t, b)); err == nil {
					t.Fatalf("seed %d: %s at %s left %s valid", seed, kind, ptr, b)
				}
				c.walk(doc.root, v, "", 0)
				want := ContentFault{Kind: kind, Pointer: ptr}
				if len(c.out) != 1 || c.out[0].Kind != want.Kind || c.out[0].Pointer != want.Pointer {
					t.Fatalf("seed %d: checker found %v, want [%v]", seed, c.out, want)
				}
			}
		})
	}
}

func TestGeneratorIsDeterministic(t *testing.T) {
	t.Parallel()
	doc, err := parseSchema([]byte(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	gen := func(seed uint64) string {
		g := generator{doc: doc, rng: rand.New(rand.NewPCG(seed, 9))}
		return string(encode(g.gen(doc.root, "", 0), encOpts{}))
	}
	if a, b := gen(1), gen(1); a != b {
		t.Fatalf("same seed, different instances:\n%s\n%s", a, b)
	}
	if a, b := gen(1), gen(2); a == b {
		t.Fatalf("different seeds, same instance %s", a)
	}
}

func TestGenPattern(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pattern string
		wantOK  bool
	}{
		{"code", `^[A-Z]{3}-[0-9]{4}$`, true},
		{"alternation", `^(a|bc)+x?$`, true},
		{"unanchored", `[0-9]{2}`, true},
		{"negated-class", `^[^a-z]{4}$`, true},
		{"unparsable", `(`, false},
		{"backreference-unsupported", `(a)\1`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(1, 1))
			for range 50 {
				s, ok := genPattern(r, tc.pattern)
				if ok != tc.wantOK {
					t.Fatalf("genPattern(%q) = %q, %v; want ok %v", tc.pattern, s, ok, tc.wantOK)
				}
			}
		})
	}
}

func TestEncodeFormattingFaults(t *testing.T) {
	t.Parallel()
	v := map[string]any{"a": "it's", "b": true, "c": nil, "d": []any{json.Number("1")}}
	tests := []struct {
		name string
		o    encOpts
		want string
	}{
		{"strict", encOpts{}, `{"a":"it's","b":true,"c":null,"d":[1]}`},
		{"trailing-comma", encOpts{trailingComma: true}, `{"a":"it's","b":true,"c":null,"d":[1],}`},
		{"single-quotes", encOpts{singleQuotes: true}, `{'a':'it\'s','b':true,'c':null,'d':[1]}`},
		{"python", encOpts{python: true}, `{"a":"it's","b":True,"c":None,"d":[1]}`},
		{"comment", encOpts{comment: "note"}, "{\n  // note\n  \"a\": \"it's\",\n  \"b\": true,\n  \"c\": null,\n  \"d\": [\n    1\n  ]\n}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := string(encode(v, tc.o)); got != tc.want {
				t.Fatalf("encode = %s, want %s", got, tc.want)
			}
		})
	}
	if got, want := string(encode(v, encOpts{})), string(mustJSON(v)); got != want {
		t.Fatalf("strict encode %s differs from encoding/json %s", got, want)
	}
}

// TestJSONEqualMatchesEncodedEquality: jsonEqual's shortcuts for strings and
// booleans agree with comparing the values' JSON, as const and enum do.
func TestJSONEqualMatchesEncodedEquality(t *testing.T) {
	vals := []any{"billing", "bug", "", "a\xff", "a\xfe", "a\ufffd", true, false, nil,
		json.Number("1"), json.Number("1.0"), json.Number("2"), map[string]any{"a": "b"}, []any{"b"}}
	for _, a := range vals {
		for _, b := range vals {
			want := string(mustJSON(a)) == string(mustJSON(b))
			an, aok := a.(json.Number)
			bn, bok := b.(json.Number)
			if aok && bok {
				want = an == bn || (an == "1" && bn == "1.0") || (an == "1.0" && bn == "1")
			}
			if got := jsonEqual(a, b); got != want {
				t.Errorf("jsonEqual(%#v, %#v) = %v, want %v", a, b, got, want)
			}
		}
	}
}
