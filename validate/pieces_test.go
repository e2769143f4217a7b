package validate

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/schematest"
)

// samePieces reports a difference between the errors of v validated whole
// and piece by piece at every container the schema allows.
func samePieces(s *Schema, v any) error {
	keep := s.pieceMin
	defer func() { s.pieceMin = keep }()
	s.pieceMin = -1
	whole := s.Validate(v)
	if keep < 0 {
		return nil // never in pieces
	}
	s.pieceMin = 0
	pieces := s.Validate(v)
	if !reflect.DeepEqual(whole, pieces) {
		return fmt.Errorf("whole:\n%s\npiece by piece:\n%s", errLines(whole), errLines(pieces))
	}
	return nil
}

func errLines(errs []fixpoint.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  %s %s %s\n", e.Path, e.Keyword, e.Message)
	}
	return b.String()
}

// TestPiecewiseSameErrors: a value validated piece by piece has the errors
// it has validated whole, over the JSON Schema test suite, the SchemaStore
// sample and cases of what pieces.go takes apart.
func TestPiecewiseSameErrors(t *testing.T) {
	t.Parallel()
	cases := 0
	for _, tc := range []struct {
		dir   string
		draft *jsonschema.Draft
	}{{"draft2020-12", jsonschema.Draft2020}, {"draft7", jsonschema.Draft7}} {
		files, _ := filepath.Glob(filepath.Join("testdata", "suite", "tests", tc.dir, "*.json"))
		if len(files) == 0 {
			t.Fatalf("no suite files for %s", tc.dir)
		}
		opts := compileOptions{loader: suiteLoader{dir: filepath.Join("testdata", "suite", "remotes")}, draft: tc.draft}
		for _, file := range files {
			for _, g := range readSuiteFile(t, file) {
				s, err := compile(g.Schema, opts)
				if err != nil {
					continue
				}
				for _, c := range g.Tests {
					v, err := decode(c.Data)
					if err != nil {
						t.Fatal(err)
					}
					cases++
					if err := samePieces(s, v); err != nil {
						t.Errorf("%s: %s: %s: %v", filepath.Base(file), g.Description, c.Description, err)
					}
				}
			}
		}
	}
	src := filepath.Join("testdata", "schemastore", "src")
	loader, err := newSchemaStoreLoader(filepath.Join(src, "schemas", "json"))
	if err != nil {
		t.Fatal(err)
	}
	names, _ := schemaStoreNames(filepath.Join(src, "schemas", "json"))
	for _, name := range names {
		raw, err := os.ReadFile(filepath.Join(src, "schemas", "json", name))
		if err != nil {
			t.Fatal(err)
		}
		s, err := compile(raw, compileOptions{loader: loader})
		if err != nil {
			continue
		}
		for _, kind := range []string{"test", "negative_test"} {
			files, _ := filepath.Glob(filepath.Join(src, kind, strings.TrimSuffix(name, ".json"), "*.json"))
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				v, err := decode(b)
				if err != nil {
					continue
				}
				cases++
				if err := samePieces(s, v); err != nil {
					t.Errorf("%s: %s: %v", name, f, err)
				}
			}
		}
	}
	for _, tc := range piecewiseCases {
		s := mustCompile(t, tc.schema)
		for _, value := range tc.values {
			cases++
			if err := samePieces(s, mustDecode(t, value)); err != nil {
				t.Errorf("%s\n%s: %v", tc.schema, value, err)
			}
		}
	}
	if cases < 2000 {
		t.Errorf("compared %d cases; want the suites' and the sample's", cases)
	}
}

// piecewiseCases are schemas whose containers pieces.go takes apart, with
// values that fail them at every level.
var piecewiseCases = []struct {
	schema string
	values []string
}{
	{schematest.TypicalSchema, []string{schematest.TypicalInvalid, schematest.TypicalValue, `[]`, `{"lines": [1, {"sku": 2}, {"qty": 0, "x": 1}], "customer": {"email": 1, "tier": "x"}, "extra": null}`}},
	{`{"type":"array","items":` + schematest.LineSchema() + `,"minItems":5,"uniqueItems":true}`, []string{
		bigArray(4000, 3), `[{"sku":"a"},{"sku":"a"}]`, `{"not":"an array"}`,
	}},
	// properties and patternProperties both apply to "ab": one list,
	// duplicates dropped.
	{`{"properties":{"ab":{"type":"object","required":["x"],"minProperties":2}},"patternProperties":{"^a":{"type":"object","required":["x","y"]}},
	  "additionalProperties":{"type":"integer"},"propertyNames":{"maxLength":3},"required":["zz"],"maxProperties":3}`, []string{
		`{"ab":{"q":1},"ac":{"x":1},"b":"s","long-name":{"x":[1,2]}}`, `{"ab":[],"c":{}}`,
	}},
	// A member whose value is a container of its own checked in pieces.
	{`{"$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}},"name":{"type":"string","minLength":2}},"required":["name"],"additionalProperties":false}},"$ref":"#/$defs/n"}`, []string{
		`{"name":"a","kids":[{"name":"bb","kids":[{"x":1},{"name":"c","kids":[]}]},{"kids":"no"}]}`,
	}},
	// prefixItems, then items.
	{`{"prefixItems":[{"type":"string"},{"const":1}],"items":{"type":"object","properties":{"a":{"enum":[1,2]}}},"maxItems":3}`, []string{
		`[1,2,{"a":3},{"a":1},[]]`, `["s",1]`,
	}},
	// Keywords that keep a container whole: contains, anyOf, unevaluated.
	{`{"type":"array","contains":{"type":"integer"},"items":{"type":["string","integer"]}}`, []string{`["a",null,{}]`}},
	{`{"type":"object","properties":{"a":{"anyOf":[{"type":"array","items":{"type":"integer"}},{"type":"string"}]}},"unevaluatedProperties":false}`, []string{
		`{"a":[1,"x",[]],"b":1}`,
	}},
	{`{"type":"object","properties":{"list":{"type":"array","items":{"type":"object","properties":{"v":{"type":"integer"}},"unevaluatedProperties":false}}}}`, []string{
		`{"list":[{"v":"1","w":2},{"v":2}]}`,
	}},
	// draft-07 tuples and additionalItems.
	{`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"},{"type":"integer"}],"additionalItems":{"type":"boolean"}}`, []string{
		`[1,"a",true,"no",null]`,
	}},
	{`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}],"additionalItems":false}`, []string{`[1,2,3]`}},
	{`{"$schema":"http://json-schema.org/draft-07/schema#","additionalItems":{"type":"string"}}`, []string{`[1,"a"]`}},
	{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"$ref":"#/definitions/x"}},"definitions":{"x":{"type":"array","items":{"minimum":3}}},
	  "dependencies":{"a":["b"]}}`, []string{`{"a":[1,5,2]}`}},
	// Names failing propertyNames in nested objects (propnames.go).
	{`{"type":"object","additionalProperties":{"type":"object","propertyNames":{"pattern":"^[a-z]+$"},"additionalProperties":{"type":"object","propertyNames":{"maxLength":2}}}}`, []string{
		`{"bb":{"yyy":{"abc":1},"cc":{}},"dd":{"X":{"abcd":1,"ab":2}}}`,
	}},
	// A false subschema under properties, items.
	{`{"properties":{"no":false,"list":{"items":false}}}`, []string{`{"no":1,"list":[1,2]}`}},
	// draft 2019-09 and draft-04 arrays and objects.
	{`{"$schema":"https://json-schema.org/draft/2019-09/schema","items":[{"type":"string"}],"additionalItems":{"type":"integer"},"minItems":4}`, []string{`[1,"a",2.5]`}},
	{`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"a":{"type":"array","items":{"type":"integer","minimum":2}}},"additionalProperties":false,"required":["b"]}`, []string{
		`{"a":[1,"2",3],"c":1}`,
	}},
	// A backtracking pattern under patternProperties keeps its object whole.
	{`{"type":"object","patternProperties":{"^(?=x)":{"type":"integer"}},"additionalProperties":{"type":"string"}}`, []string{`{"xa":"1","b":2}`}},
}

// A schema holding a dynamic reference, or reaching one (the metaschema
// does), is never validated in pieces: where the reference resolves
// depends on the path the library took to it.
func TestPiecewiseNotWithDynamicRefs(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{"$dynamicAnchor":"node","type":"object","properties":{"kids":{"type":"array","items":{"$dynamicRef":"#node"}}}}`,
		`{"type":"array","items":{"$ref":"https://json-schema.org/draft/2020-12/schema"}}`,
	} {
		if s := mustCompile(t, src); s.pieceMin != -1 {
			t.Errorf("%s: pieceMin %d; want -1", src, s.pieceMin)
		}
	}
	if s := mustCompile(t, schematest.TypicalSchema); s.pieceMin != pieceMin {
		t.Errorf("typical schema: pieceMin %d; want %d", s.pieceMin, pieceMin)
	}
}

// TestValidateManyErrorsBounded: a reply of 60,000 wrong items (180,000
// errors, 1.5 MB) keeps MaxErrors of them, the first of each keyword, and
// one that counts the rest by keyword (TestValidateManyErrorsHeap bounds
// the memory; package repair's TestCoerceNothingPastMaxErrors checks it
// with schema-guided repair).
func TestValidateManyErrorsBounded(t *testing.T) {
	s := mustCompile(t, `{"type":"array","items":`+schematest.LineSchema()+`}`)
	reply := schematest.ManyErrorsReply(60000)
	r := Check(s, reply)
	if r.Valid || r.Class != fixpoint.ClassShape {
		t.Fatalf("valid %v, class %q", r.Valid, r.Class)
	}
	errs := r.Errors
	if n := ErrorCount(errs); n != 180000 {
		t.Errorf("ErrorCount = %d; want 180000", n)
	}
	if len(errs) > MaxErrors+len(keywordClasses)+1 {
		t.Fatalf("%d errors kept; want at most %d", len(errs), MaxErrors+len(keywordClasses)+1)
	}
	last := errs[len(errs)-1]
	if last.Keyword != KeywordMoreErrors || last.Path != "" || last.Class != fixpoint.ClassShape {
		t.Fatalf("last error %+v; want the count of the others", last)
	}
	kept := errs[:len(errs)-1]
	if !slices.IsSortedFunc(kept, compareErrors) {
		t.Error("kept errors not sorted")
	}
	if kept[0].Path != "/0/price" || kept[0].Keyword != "required" || kept[MaxErrors-1].Path != "/6666/qty" {
		t.Errorf("kept %v ... %v; want the first of the sorted list", kept[0], kept[MaxErrors-1])
	}
	left := map[string]int{"minimum": 60000, "pattern": 60000, "required": 60000}
	for _, e := range kept {
		left[e.Keyword]--
	}
	if msg := moreErrors(left).Message; last.Message != msg || !strings.HasPrefix(msg, fmt.Sprintf("%d more errors, not kept: ", 180000-len(kept))) {
		t.Errorf("last message %q; want %q", last.Message, msg)
	}
}

// A list over MaxErrors keeps the first of each keyword, so that every
// kind of error is seen.
func TestCapErrorsKeepsEachKeyword(t *testing.T) {
	t.Parallel()
	var errs []fixpoint.ValidationError
	for i := range MaxErrors + 10 {
		errs = append(errs, newError(fmt.Sprintf("/a/%d", i), "type", "expected integer, got string"))
	}
	errs = append(errs, newError("/b", "required", `missing required property "b"`))
	got := capErrors(errs)
	if len(got) != MaxErrors+2 || got[MaxErrors].Path != "/b" || got[MaxErrors+1].Message != "10 more errors, not kept: type 10" {
		t.Fatalf("%d kept, then %v, %v", len(got), got[MaxErrors], got[len(got)-1])
	}
	if ErrorCount(got) != MaxErrors+11 || ClassOf(got) != fixpoint.ClassShape {
		t.Errorf("ErrorCount %d, ClassOf %q", ErrorCount(got), ClassOf(got))
	}
	if small := capErrors(errs[:5]); len(small) != 5 || ErrorCount(small) != 5 {
		t.Errorf("5 errors kept as %d", len(small))
	}
}

// TestValidateManyErrorsHeap bounds the heap validating a value of
// 180,000 errors holds: at its peak, sampled every millisecond with the
// garbage collector set to collect at 10% growth, and once it returned.
// Before validate.MaxErrors and pieces.go, the library's tree of every
// error and their flat list peaked at 91 MB and the errors returned held
// 25 MB (now 9.6 and 2.5). Not parallel: the heap is the process's.
func TestValidateManyErrorsHeap(t *testing.T) {
	s := mustCompile(t, `{"type":"array","items":`+schematest.LineSchema()+`}`)
	v := mustDecode(t, schematest.ManyErrorsReply(60000))
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	var errs []fixpoint.ValidationError
	peak, held := schematest.HeapOf(func() { errs = s.Validate(v) })
	if len(errs) == 0 {
		t.Fatal("valid")
	}
	t.Logf("%d errors kept; heap peak %.1f MB, held %.1f MB", len(errs), float64(peak)/(1<<20), float64(held)/(1<<20))
	if peak > 40<<20 {
		t.Errorf("heap peaked %d MB over the value's; want under 40 MB", peak>>20)
	}
	if held > 10<<20 {
		t.Errorf("the errors hold %d MB; want under 10 MB", held>>20)
	}
	runtime.KeepAlive(errs)
	runtime.KeepAlive(v)
}
