package validate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fixpoint-dev/fixpoint/internal/schematest"
	"github.com/fixpoint-dev/fixpoint/satisfy"
)

// unsatisfiableCases are schemas no value satisfies, with the keyword and
// location the error must name and a part of its message. They also seed
// FuzzCompile.
var unsatisfiableCases = []struct {
	name, schema      string
	keyword, location string
	reason            string
}{
	{"false", `false`, "", "", "the schema is false"},
	{"false property required", `{"type":"object","required":["a"],"properties":{"a":false}}`, "required", "/required", `required property "a" must satisfy /properties/a, which is false`},
	{"ref to root", `{"$ref":"#"}`, "$ref", "/$ref", "refers back to (root) without consuming any part of the value"},
	{"ref loop through defs", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "$ref", "/$defs/b/$ref", "refers back to /$defs/a without consuming"},
	{"required self-reference", `{"type":"object","required":["c"],"properties":{"c":{"$ref":"#"}}}`, "$ref", "/properties/c/$ref", "refers back to (root), which only an infinitely deep value could satisfy (via required at /required)"},
	{"required recursion through items", `{"$defs":{"n":{"type":"object","required":["kids"],"properties":{"kids":{"type":"array","minItems":1,"items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`, "$ref", "/$defs/n/properties/kids/items/$ref", "only an infinitely deep value"},
	{"mutual recursion a b a", `{"$defs":{"a":{"type":"object","required":["b"],"properties":{"b":{"$ref":"#/$defs/b"}}},"b":{"type":"object","required":["a"],"properties":{"a":{"$ref":"#/$defs/a"}}}},"$ref":"#/$defs/a"}`, "$ref", "/$defs/b/properties/a/$ref", "refers back to /$defs/a, which only an infinitely deep value"},
	{"not empty", `{"not":{}}`, "not", "/not", `the "not" schema accepts every value`},
	{"not true", `{"not":true}`, "not", "/not", `accepts every value`},
	{"not its own type", `{"type":"string","not":{"type":"string"}}`, "not", "/not", `accepts every string`},
	{"empty enum", `{"enum":[]}`, "enum", "/enum", "enum is empty"},
	{"enum of the wrong type", `{"type":"integer","enum":["a",1.5,null]}`, "enum", "/enum", "no value of enum is of type integer"},
	{"const of the wrong type", `{"type":"string","const":1}`, "const", "/const", "const 1 is not of type string"},
	{"const in allOf", `{"allOf":[{"type":"boolean"},{"const":"x"}]}`, "allOf", "/allOf/1", "/allOf/1 allows only string"},
	{"allOf with a false member", `{"allOf":[{"type":"string"},false]}`, "allOf", "/allOf/1", "/allOf/1 is false"},
	{"allOf with an unsatisfiable member", `{"allOf":[{"type":"string"},{"$defs":{"x":{"type":"null"}},"type":"string","$ref":"#/allOf/1/$defs/x"}]}`, "$ref", "/allOf/1/$ref", "/allOf/1/$defs/x allows only null, which the rest of /allOf/1 does not allow (string) (via allOf at /allOf/1)"},
	{"allOf with disjoint types", `{"allOf":[{"type":"string"},{"type":["integer","null"]}]}`, "allOf", "/allOf/1", "allows only null or integer"},
	{"type and ref disjoint", `{"$defs":{"n":{"type":"number"}},"type":"string","$ref":"#/$defs/n"}`, "$ref", "/$ref", "allows only number"},
	{"anyOf without a satisfiable branch", `{"anyOf":[false,{"enum":[]}]}`, "anyOf", "/anyOf", "no anyOf branch can be satisfied"},
	{"oneOf without a satisfiable branch", `{"oneOf":[{"not":{}},{"type":"string","minLength":3,"maxLength":2}]}`, "oneOf", "/oneOf", "no oneOf branch"},
	{"oneOf with two true branches", `{"oneOf":[true,{},false]}`, "oneOf", "/oneOf", "two oneOf branches accept every value, so none matches exactly one"},
	{"oneOf with two branches for strings", `{"type":"string","oneOf":[{"type":"string"},{"type":["string","null"]}]}`, "oneOf", "/oneOf", "accept every string"},
	{"oneOf disjoint from type", `{"type":"object","oneOf":[{"type":"string"},{"type":"array"}]}`, "oneOf", "/oneOf", "the oneOf branches allow only string or array"},
	{"if then else", `{"type":"string","if":true,"then":{"type":"integer"}}`, "if", "/if", "neither"},
	{"required under additionalProperties false", `{"type":"object","required":["a"],"additionalProperties":false}`, "required", "/required", `required property "a" is not allowed`},
	{"required more than maxProperties", `{"type":"object","required":["a","b"],"maxProperties":1}`, "required", "/required", "2 properties are required but maxProperties is 1"},
	{"minProperties above maxProperties", `{"type":"object","minProperties":2,"maxProperties":1}`, "minProperties", "/minProperties", "greater than maxProperties"},
	{"minProperties with nothing allowed", `{"type":"object","minProperties":2,"properties":{"a":true,"b":false},"additionalProperties":false}`, "minProperties", "/minProperties", "at most 1 properties"},
	{"propertyNames false with required", `{"type":"object","required":["a"],"propertyNames":false}`, "propertyNames", "/propertyNames", "allows no name"},
	{"required property in conflicting schemas", `{"type":"object","required":["ab"],"properties":{"ab":{"type":"string"}},"patternProperties":{"^a":{"type":"integer"}}}`, "required", "/required", "no type in common"},
	{"minItems with a false prefix", `{"type":"array","prefixItems":[{"type":"string"},false],"minItems":2}`, "minItems", "/minItems", "item 1 must be present but /prefixItems/1 is false"},
	{"minItems with false items", `{"type":"array","items":false,"minItems":1}`, "minItems", "/minItems", "item 0 must be present but /items is false"},
	{"minItems with unsatisfiable items", `{"type":"array","items":{"enum":[]},"minItems":3}`, "enum", "/items/enum", "enum is empty (via minItems at /minItems)"},
	{"minItems above maxItems", `{"type":"array","minItems":3,"maxItems":2}`, "minItems", "/minItems", "minItems 3 is greater than maxItems 2"},
	{"contains false", `{"type":"array","contains":false}`, "contains", "/contains", "an item must satisfy /contains, which is false"},
	{"contains unsatisfiable", `{"type":"array","contains":{"type":"string","const":null}}`, "const", "/contains/const", "const null is not of type string (via contains at /contains)"},
	{"minContains above maxItems", `{"type":"array","contains":true,"minContains":3,"maxItems":2}`, "contains", "/contains", "contains needs 3 matching items but maxItems is 2"},
	{"minLength above maxLength", `{"type":"string","minLength":3,"maxLength":2}`, "minLength", "/minLength", "minLength 3 is greater than maxLength 2"},
	{"empty number range", `{"type":"number","minimum":2,"maximum":1}`, "minimum", "/minimum", "no number satisfies the bounds (minimum 2, maximum 1)"},
	{"exclusive point", `{"type":"number","exclusiveMinimum":1,"maximum":1}`, "exclusiveMinimum", "/exclusiveMinimum", "no number satisfies"},
	{"no integer in range", `{"type":"integer","minimum":1.1,"maximum":1.9}`, "minimum", "/minimum", "no integer satisfies"},
	{"no multiple in range", `{"type":"number","minimum":0.1,"maximum":0.9,"multipleOf":1}`, "multipleOf", "/multipleOf", "no number satisfies"},
	{"no integer multiple", `{"type":"integer","minimum":1,"maximum":5,"multipleOf":6}`, "multipleOf", "/multipleOf", "no integer satisfies"},
	{"no fractional multiple in range", `{"type":"number","multipleOf":0.5,"minimum":0.6,"maximum":0.9}`, "multipleOf", "/multipleOf", "no number satisfies"},
	{"object and array both impossible", `{"type":["object","array"],"required":["a"],"properties":{"a":false},"minItems":1,"items":false}`, "type", "/type", "no object: required property \"a\" must satisfy /properties/a, which is false; no array: item 0 must be present but /items is false"},
	{"deep cause", `{"type":"object","required":["a"],"properties":{"a":{"type":"array","minItems":1,"items":{"$ref":"#/$defs/x"}}},"$defs":{"x":{"type":"object","required":["b"],"properties":{"b":{"enum":[]}}}}}`, "enum", "/$defs/x/properties/b/enum", "enum is empty (via required at /required, minItems at /properties/a/minItems, $ref at /properties/a/items/$ref, required at /$defs/x/required)"},
	{"draft-07 ref ignores siblings but not const", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"$ref":"#/definitions/s","const":1}`, "$ref", "/$ref", "allows only string"},
	{"draft-07 tuple items", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[true],"additionalItems":false,"minItems":2}`, "minItems", "/minItems", "item 1 must be present but /additionalItems is false"},
}

// satisfiableCases are schemas some value satisfies, with that value; the
// check must accept them (it is conservative), including the ones it could
// get wrong.
var satisfiableCases = []struct {
	name, schema, value string
}{
	{"empty", `{}`, `1`},
	{"true", `true`, `null`},
	{"typical", schematest.TypicalSchema, schematest.TypicalValue},
	{"optional self-reference", `{"type":"object","properties":{"c":{"$ref":"#"}}}`, `{"c":{}}`},
	{"tree", `{"$defs":{"n":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`, `{"name":"a","kids":[{"name":"b"}]}`},
	{"recursion with a base case", `{"anyOf":[{"type":"string"},{"type":"array","minItems":1,"items":{"$ref":"#"}}]}`, `[["x"]]`},
	{"ref loop in a branch", `{"anyOf":[{"$ref":"#"},{"type":"string"}]}`, `"x"`},
	{"oneOf with two branches for some types", `{"oneOf":[{"type":"string"},{"type":["string","null"]}]}`, `null`},
	{"oneOf with one universal branch", `{"oneOf":[true,{"type":"string"}]}`, `1`},
	{"not of a type", `{"not":{"type":"string"}}`, `1`},
	{"not with a bound", `{"type":"string","not":{"type":"string","minLength":1}}`, `""`},
	{"not of const", `{"type":"boolean","not":{"const":true}}`, `false`},
	{"if then else", `{"if":{"type":"string"},"then":{"minLength":1},"else":{"type":"integer"}}`, `3`},
	{"if with no path", `{"if":{"type":"string"}}`, `1`},
	{"required through patternProperties", `{"type":"object","required":["ab"],"patternProperties":{"^a":{"type":"integer"}},"additionalProperties":false}`, `{"ab":1}`},
	{"minProperties through patternProperties", `{"type":"object","minProperties":3,"patternProperties":{"^x":true},"additionalProperties":false}`, `{"x1":1,"x2":2,"x3":3}`},
	{"minContains zero", `{"type":"array","contains":false,"minContains":0}`, `[]`},
	{"integer as 1.0", `{"type":"integer","const":1.0}`, `1`},
	{"fraction in a point range", `{"type":"number","minimum":0.5,"maximum":0.5}`, `0.5`},
	{"fraction multiple", `{"type":"number","multipleOf":0.5,"minimum":0.2,"maximum":0.6}`, `0.5`},
	{"negative integer multiple", `{"type":"integer","multipleOf":3,"exclusiveMinimum":-4,"exclusiveMaximum":-2}`, `-3`},
	{"huge minItems", `{"type":"array","minItems":1000000000,"items":{"type":"null"}}`, ``},
	{"draft-07 ref ignores siblings", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"$ref":"#/definitions/s","type":"integer"}`, `"x"`},
	{"draft-04 exclusive bounds", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"number","minimum":1,"exclusiveMinimum":true,"maximum":2}`, `2`},
	{"dynamic ref", `{"$dynamicAnchor":"n","type":"object","properties":{"c":{"$dynamicRef":"#n"}}}`, `{"c":{}}`},
	{"metaschema", `{"$ref":"https://json-schema.org/draft/2020-12/schema"}`, `{}`},
	{"bounds across allOf are not combined", `{"allOf":[{"minimum":2},{"maximum":1}]}`, `"not a number"`},
}

func TestSatisfiable(t *testing.T) {
	t.Parallel()
	for _, tc := range unsatisfiableCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tc.schema)
			err := s.Satisfiable()
			var se *SchemaError
			if !errors.Is(err, satisfy.ErrUnsatisfiable) || !errors.Is(err, ErrSchema) || !errors.As(err, &se) {
				t.Fatalf("Satisfiable() = %v, want a *SchemaError matching satisfy.ErrUnsatisfiable and ErrSchema", err)
			}
			if se.Keyword != tc.keyword || se.Location != tc.location || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Satisfiable() = keyword %q at %q: %v\nwant keyword %q at %q, with %q", se.Keyword, se.Location, err, tc.keyword, tc.location, tc.reason)
			}
			for _, v := range append(probeValues, `{"a":1}`) {
				if errs := s.Validate(mustDecode(t, v)); len(errs) == 0 {
					t.Fatalf("refused, but %s is valid", v)
				}
			}
		})
	}
	for _, tc := range satisfiableCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tc.schema)
			if err := s.Satisfiable(); err != nil {
				t.Fatalf("Satisfiable() = %v, want nil", err)
			}
			if tc.value == "" {
				return
			}
			if errs := s.Validate(mustDecode(t, tc.value)); len(errs) > 0 {
				t.Fatalf("the witness %s is not valid: %v", tc.value, errs)
			}
		})
	}
	t.Run("nil", func(t *testing.T) {
		t.Parallel()
		var s *Schema
		if err := s.Satisfiable(); err != nil {
			t.Fatalf("nil schema: %v", err)
		}
	})
}

// TestSatisfiableBounded: deep and dense schemas that compile are checked
// within the budget, with the verdict each should have; with a budget of
// one unit the check gives up and answers satisfiable (nil), never an
// error; an error's length is bounded whatever the depth.
func TestSatisfiableBounded(t *testing.T) {
	t.Parallel()
	// Nested as deep as MaxSchemaDepth lets these shapes compile.
	const deepLevels = 60
	nest := func(n int, open, close, leaf string) string {
		return strings.Repeat(open, n) + leaf + strings.Repeat(close, n)
	}
	// Every required name is matched against every pattern.
	var manyRequired strings.Builder
	manyRequired.WriteString(`{"type":"object","required":[`)
	for i := range 1000 {
		if i > 0 {
			manyRequired.WriteString(",")
		}
		fmt.Fprintf(&manyRequired, `"p%d"`, i)
	}
	manyRequired.WriteString(`],"patternProperties":{`)
	for i := range 100 {
		if i > 0 {
			manyRequired.WriteString(",")
		}
		fmt.Fprintf(&manyRequired, `"^p%d$":{"type":"integer"}`, i)
	}
	manyRequired.WriteString(`}}`)
	tests := []struct {
		name   string
		schema string
		unsat  bool
	}{
		{"deep properties", nest(deepLevels, `{"type":"object","required":["a"],"properties":{"a":`, `}}`, `{"type":"string"}`), false},
		{"deep properties, none at the bottom", nest(deepLevels, `{"type":"object","required":["a"],"properties":{"a":`, `}}`, `false`), true},
		{"deep items", nest(deepLevels, `{"type":"array","minItems":1,"items":`, `}`, `{"enum":[]}`), true},
		{"deep nots, even", nest(2*(deepLevels/2), `{"not":`, `}`, `{}`), false},
		{"deep allOf", nest(deepLevels, `{"allOf":[`, `]}`, `{"type":"string"}`), false},
		{"dense refs", denseRefs(10), true},
		{"many required and patterns", manyRequired.String(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Compile([]byte(tc.schema))
			if err != nil {
				t.Fatalf("does not compile: %v", err)
			}
			if _, ok := satisfy.Solve(s.graph, satisfy.Budget); !ok {
				t.Fatalf("the check ran out of its budget of %d", satisfy.Budget)
			}
			err = s.Satisfiable()
			if got := errors.Is(err, satisfy.ErrUnsatisfiable); got != tc.unsat || err != nil && !got {
				t.Fatalf("Satisfiable() = %v, want unsatisfiable %v", err, tc.unsat)
			}
			if err != nil && len(err.Error()) > 4<<10+len(tc.schema) {
				t.Fatalf("the error is %d bytes long", len(err.Error()))
			}
			if err := satisfy.Check(s.graph, 1); err != nil {
				t.Errorf("over its budget the check says %v, want nil (cannot tell)", err)
			}
		})
	}
}

// denseRefs returns a schema of defs d0..d(n-1), each an anyOf of refs to
// every later one: a dense graph whose kinds change in many rounds.
func denseRefs(n int) string {
	var dense strings.Builder
	dense.WriteString(`{"$defs":{`)
	for i := range n {
		if i > 0 {
			dense.WriteString(",")
		}
		fmt.Fprintf(&dense, `"d%d":{"anyOf":[`, i)
		for j := i + 1; j < n; j++ {
			fmt.Fprintf(&dense, `{"$ref":"#/$defs/d%d"},`, j)
		}
		fmt.Fprintf(&dense, `{"type":"object","required":["x"],"properties":{"x":{"$ref":"#/$defs/d%d"}}}]}`, (i+1)%n)
	}
	dense.WriteString(`},"$ref":"#/$defs/d0"}`)
	return dense.String()
}

// BenchmarkSatisfiable measures the check on the largest schema of the
// SchemaStore sample, on a recursive schema and on one that refers to the
// metaschema.
func BenchmarkSatisfiable(b *testing.B) {
	expo, err := os.ReadFile(filepath.Join("testdata", "schemastore", "src", "schemas", "json", "expo-52.0.0.json"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, schema string }{
		{"schemastore", string(expo)},
		{"thread", thread},
		{"metaschema", `{"type":"object","properties":{"schema":{"$ref":"https://json-schema.org/draft/2020-12/schema"}}}`},
	} {
		s, err := Compile([]byte(bc.schema))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Satisfiable(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSatisfiableOverBudget: a check that runs out of budget cannot tell,
// and accepts.
func TestSatisfiableOverBudget(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","required":["c"],"properties":{"c":{"$ref":"#"}}}`)
	if err := satisfy.Check(s.graph, satisfy.Budget); !errors.Is(err, satisfy.ErrUnsatisfiable) {
		t.Fatalf("with the budget: %v, want satisfy.ErrUnsatisfiable", err)
	}
	for budget := range 8 {
		if err := satisfy.Check(s.graph, budget); err != nil {
			t.Fatalf("with a budget of %d: %v, want nil", budget, err)
		}
	}
}

// probeValues are tried on schemas the suite has no valid case for.
var probeValues = []string{`null`, `true`, `0`, `1.5`, `""`, `"x"`, `{}`, `{"foo":1}`, `[]`, `[1]`}

// TestSatisfiableSuite: the check is conservative. Every schema of the
// official test suite with a valid case is satisfiable and must be
// accepted; of the schemas without one, it reports how many it refuses,
// none of which may accept one of probeValues.
func TestSatisfiableSuite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dir   string
		draft *jsonschema.Draft
	}{
		{dir: "draft2020-12", draft: jsonschema.Draft2020},
		{dir: "draft7", draft: jsonschema.Draft7},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			t.Parallel()
			files, err := filepath.Glob(filepath.Join("testdata", "suite", "tests", tc.dir, "*.json"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no suite files for %s: %v", tc.dir, err)
			}
			opts := compileOptions{loader: suiteLoader{dir: filepath.Join("testdata", "suite", "remotes")}, draft: tc.draft}
			var withValid, withoutValid, refused, witnessed int
			for _, file := range files {
				groups := readSuiteFile(t, file)
				for _, g := range groups {
					key := filepath.Base(file) + ": " + g.Description
					s, err := compile(g.Schema, opts)
					if err != nil {
						t.Fatalf("%s: compile: %v", key, err)
					}
					valid := false
					for _, c := range g.Tests {
						valid = valid || c.Valid
					}
					err = s.Satisfiable()
					switch {
					case valid:
						withValid++
						if err != nil {
							t.Errorf("%s: has a valid case, but Satisfiable() = %v", key, err)
						}
					default:
						withoutValid++
						witness := ""
						for _, v := range probeValues {
							if len(s.Validate(mustDecode(t, v))) == 0 {
								witness = v
								break
							}
						}
						switch {
						case err != nil && witness != "":
							t.Errorf("%s: Satisfiable() = %v, but %s is valid", key, err, witness)
						case err != nil:
							refused++
							t.Logf("%s: refused: %v", key, err)
						case witness != "":
							witnessed++
							t.Logf("%s: no valid case, accepted; valid: %s", key, witness)
						default:
							t.Logf("%s: no valid case, accepted", key)
						}
					}
					if err != nil && !errors.Is(err, satisfy.ErrUnsatisfiable) {
						t.Errorf("%s: Satisfiable() = %v, not satisfy.ErrUnsatisfiable", key, err)
					}
				}
			}
			fmt.Printf("satisfiable %s: %d schemas with a valid case, all accepted; %d without, %d of them refused, %d accepted with a valid probe value\n",
				tc.dir, withValid, withoutValid, refused, witnessed)
		})
	}
}
