package validate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/subschema"
)

// thread is a comment thread whose items are one of two shapes, each with
// replies of the same items: its recursion branches at every level.
const thread = `{"$defs":{"item":{"oneOf":[{"type":"object","properties":{"kind":{"const":"comment"},"author":{"type":"string"},"text":{"type":"string"},"replies":{"type":"array","items":{"$ref":"#/$defs/item"}}},"required":["kind","author","text"]},{"type":"object","properties":{"kind":{"const":"deleted"},"replies":{"type":"array","items":{"$ref":"#/$defs/item"}}},"required":["kind"]}]}},"type":"object","properties":{"thread":{"type":"array","items":{"$ref":"#/$defs/item"}}},"required":["thread"]}`

// comments returns a thread nested depth comment levels, each comment
// with width replies (the last level none); author left out when bad.
func comments(depth, width int, bad bool) any {
	var item func(d int) any
	item = func(d int) any {
		c := map[string]any{"kind": "comment", "author": "u", "text": "t"}
		if bad {
			delete(c, "author")
		}
		if d > 1 {
			var rs []any
			for range width {
				rs = append(rs, item(d-1))
			}
			c["replies"] = rs
		}
		return c
	}
	return map[string]any{"thread": []any{item(depth)}}
}

// A value whose checks against a recursive schema would pass MaxChecks is
// refused before it is checked, where it costs that: a thread nested deep,
// or wide and deep, against a schema whose recursion branches. Realistic
// threads are checked as before, and recursion that does not branch (a
// tree, a list, any JSON value) allows deep values.
func TestCheckCost(t *testing.T) {
	t.Parallel()
	th := mustCompile(t, thread)
	for _, tc := range []struct {
		name         string
		depth, width int
		bad, refused bool
	}{
		{"a realistic thread", 6, 3, false, false},
		{"a thread of 255 comments 8 deep", 8, 2, false, false},
		{"a realistic thread, not valid", 6, 3, true, false},
		{"a deep chain, valid", 12, 1, false, false},
		{"a deep chain", 20, 1, true, true},
		{"wide and deep", 10, 2, true, true},
	} {
		errs := th.Validate(comments(tc.depth, tc.width, tc.bad))
		refused := len(errs) == 1 && errs[0].Keyword == "checkCost"
		if refused != tc.refused {
			t.Errorf("%s: errors %v; want refused for its cost %v", tc.name, errs, tc.refused)
		}
		if refused && (errs[0].Class != fixpoint.ClassShape || !strings.HasPrefix(errs[0].Path, "/thread/0/replies/")) {
			t.Errorf("%s: %+v; want a shape error at a place deep in the thread", tc.name, errs[0])
		}
	}
	deep := func(d int) any {
		var v any = map[string]any{}
		for range d {
			v = map[string]any{"next": v, "left": map[string]any{}, "children": []any{map[string]any{}}}
		}
		return v
	}
	for _, schema := range []string{
		`{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#"}}}`,
		`{"type":"object","properties":{"left":{"$ref":"#"},"right":{"$ref":"#"},"next":{"$ref":"#"}}}`,
		`{"$defs":{"v":{"anyOf":[{"type":"string"},{"type":"number"},{"type":"object","additionalProperties":{"$ref":"#/$defs/v"}},{"type":"array","items":{"$ref":"#/$defs/v"}}]}},"$ref":"#/$defs/v"}`,
		`{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#"}},"next":{"$ref":"#"}}}`,
	} {
		if errs := mustCompile(t, schema).Validate(deep(200)); len(errs) != 0 {
			t.Errorf("%s: a value 200 levels deep: %v; want valid", schema, errs)
		}
	}
}

// BenchmarkCheckCostRefused measures a refusal: the estimate stops at
// MaxChecks, where checking the value took seconds and gigabytes.
func BenchmarkCheckCostRefused(b *testing.B) {
	th, err := Compile([]byte(thread))
	if err != nil {
		b.Fatal(err)
	}
	v := comments(10, 2, true)
	b.ReportAllocs()
	for b.Loop() {
		if errs := th.Validate(v); len(errs) != 1 || errs[0].Keyword != "checkCost" {
			b.Fatal(errs)
		}
	}
}

// BenchmarkValidateThreadNearTheBound measures the costliest thread that is
// still checked: the time MaxChecks allows a value.
func BenchmarkValidateThreadNearTheBound(b *testing.B) {
	th, err := Compile([]byte(thread))
	if err != nil {
		b.Fatal(err)
	}
	// The deepest chain of comments, not valid at its end, still checked.
	depth := 40
	for ; depth > 0; depth-- {
		if _, over := th.overChecks(comments(depth, 1, true)); !over {
			break
		}
	}
	v := comments(depth, 1, true)
	b.Logf("a chain %d deep", depth)
	b.ReportAllocs()
	for b.Loop() {
		th.Validate(v)
	}
}

// BenchmarkCompileRecursiveWide measures the recursion analysis on a
// recursive schema of 200 properties, each a $ref to the root, and an
// anyOf of two shapes that recurse too.
func BenchmarkCompileRecursiveWide(b *testing.B) {
	var props []string
	for i := range 200 {
		props = append(props, `"p`+strings.Repeat("x", i%7)+string(rune('a'+i%26))+`_`+itoa(i)+`":{"$ref":"#"}`)
	}
	schema := []byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"anyOf":[{"properties":{"k":{"$ref":"#"}}},{"properties":{"k":{"items":{"$ref":"#"}}}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		s, err := Compile(schema)
		if err != nil || s.cost == nil {
			b.Fatal(err)
		}
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// layered returns a schema of levels anyOf-deep whose branches share the
// next level's definition, for an array of objects {"a": integer}: no
// recursion, but each level multiplies the checks of an item.
func layered(levels int) string {
	defs := []string{`"l0":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`}
	for i := 1; i <= levels; i++ {
		next := `{"$ref":"#/$defs/l` + itoa(i-1) + `"}`
		defs = append(defs, `"l`+itoa(i)+`":{"anyOf":[{"allOf":[`+next+`,`+next+`]},`+next+`]}`)
	}
	return `{"$defs":{` + strings.Join(defs, ",") + `},"type":"array","items":{"$ref":"#/$defs/l` + itoa(levels) + `"}}`
}

// A schema that does not recurse but whose alternatives share definitions
// level after level is bounded too: a place's checks are under MaxUnfolded,
// but an array's items add theirs up. 8 levels checked 100 wrong items in
// 29 s and 840 MB; now they are refused before they are checked, at the
// item where the bound passes, and 10 items are checked as before.
func TestCheckCostLayered(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, layered(8))
	items := func(n int, a any) any {
		var out []any
		for range n {
			out = append(out, map[string]any{"a": a})
		}
		return out
	}
	errs := s.Validate(items(100, "x"))
	if len(errs) != 1 || errs[0].Keyword != "checkCost" || !strings.HasPrefix(errs[0].Path, "/") || errs[0].Path == "/99" {
		t.Errorf("100 wrong items: %v; want refused for its cost at an item before the last", errs[:min(len(errs), 3)])
	}
	if errs := s.Validate(items(10, "x")); len(errs) != 10 || errs[0].Keyword == "checkCost" {
		t.Errorf("10 wrong items: %v; want each item's error", errs)
	}
	if errs := s.Validate(items(10, 1)); len(errs) != 0 {
		t.Errorf("10 good items: %v; want valid", errs)
	}
	// Nothing is walked or tabulated for a small value.
	small := mustCompile(t, layered(3))
	if small.Validate(items(3, "x")); small.cost != nil {
		t.Errorf("a small value built the cost tables")
	}
}

// TreeSize counts every path: shared definitions once for each branch that
// reaches them, and every kind of child schema, which may all apply to one
// item; a schema that recurses has none.
func TestTreeSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		schema string
		want   int
	}{
		{`{"type":"string"}`, 1},
		{`{"$defs":{"d":{"type":"string"}},"anyOf":[{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"}]}`, 5},
		{`{"items":{"type":"string"},"contains":{"type":"string"},"unevaluatedItems":{"type":"string"}}`, 4},
		{`{"properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`, 3},
		{`{"properties":{"next":{"$ref":"#"}}}`, 0},
		// a tree of nodes that refers to itself
		{`{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}}}}}`, 0},
	} {
		if got := subschema.TreeSize(mustCompile(t, tc.schema).graph, MaxChecks); got != tc.want {
			t.Errorf("%s: %d; want %d", tc.schema, got, tc.want)
		}
	}
	if got := subschema.TreeSize(mustCompile(t, layered(6)).graph, 1000); got != 1001 {
		t.Errorf("6 levels, limit 1000: %d; want 1001", got)
	}
}

// chain returns a chain of comments depth deep whose last text is wrong.
func chain(depth int) any {
	var v any = map[string]any{"kind": "a", "text": json.Number("5")}
	for range depth {
		v = map[string]any{"kind": "a", "text": "t", "replies": []any{v}}
	}
	return v
}

// The bound holds however wide the schema: a thread schema with 1,100 more
// properties at its root (whose tables were once too wide to build, so the
// bound was off) ran a worker out of memory on a 775-byte chain 18 deep.
func TestCheckCostWideSchema(t *testing.T) {
	t.Parallel()
	var pad []string
	for i := range 1100 {
		pad = append(pad, `"pad`+itoa(i)+`":{"type":"string","maxLength":`+itoa(i+1)+`}`)
	}
	s := mustCompile(t, strings.Replace(thread, `"properties":{"thread":`, `"properties":{`+strings.Join(pad, ",")+`,"thread":`, 1))
	errs := s.Validate(map[string]any{"thread": []any{chain(18)}})
	if len(errs) != 1 || errs[0].Keyword != "checkCost" {
		t.Errorf("a chain 18 deep: %v; want refused for its cost", errs[:min(len(errs), 3)])
	}
}

// A $dynamicRef (or $recursiveRef) may resolve to any subschema declaring
// its anchor, depending on the path taken: the estimate counts them all.
// The "extend a generic tree" pattern below checked a 600-byte chain 16
// deep in 17.5 s and 1.3 GB, and 18 deep ran out of memory.
func TestCheckCostDynamicRef(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{
		`{"$id":"https://ex.invalid/root.json","$dynamicAnchor":"node",
		 "oneOf":[{"$ref":"tree.json","properties":{"kind":{"const":"a"}},"required":["kind"]},{"$ref":"tree.json","properties":{"kind":{"const":"b"}},"required":["kind"]}],
		 "$defs":{"tree":{"$id":"https://ex.invalid/tree.json","$dynamicAnchor":"node","type":"object",
		   "properties":{"kind":{"type":"string"},"text":{"type":"string"},"replies":{"type":"array","items":{"$dynamicRef":"#node"}}},"required":["text"]}}}`,
		`{"$schema":"https://json-schema.org/draft/2019-09/schema","$id":"https://ex.invalid/root.json","$recursiveAnchor":true,
		 "oneOf":[{"$ref":"tree.json","properties":{"kind":{"const":"a"}},"required":["kind"]},{"$ref":"tree.json","properties":{"kind":{"const":"b"}},"required":["kind"]}],
		 "$defs":{"tree":{"$id":"https://ex.invalid/tree.json","$recursiveAnchor":true,"type":"object",
		   "properties":{"kind":{"type":"string"},"text":{"type":"string"},"replies":{"type":"array","items":{"$recursiveRef":"#"}}},"required":["text"]}}}`,
	} {
		s := mustCompile(t, schema)
		if errs := s.Validate(chain(18)); len(errs) != 1 || errs[0].Keyword != "checkCost" {
			t.Errorf("%.60s: a chain 18 deep: %v; want refused for its cost", schema, errs[:min(len(errs), 3)])
		}
		// The dynamic target still applies: "c" is neither kind.
		if errs := s.Validate(map[string]any{"kind": "a", "text": "t", "replies": []any{map[string]any{"kind": "c", "text": "t"}}}); len(errs) == 0 || errs[0].Keyword == "checkCost" {
			t.Errorf("%.60s: a reply of kind c: %v; want its error", schema, errs)
		}
		if errs := s.Validate(chain(4)); len(errs) == 0 || errs[0].Keyword == "checkCost" {
			t.Errorf("%.60s: a chain 4 deep: %v; want checked", schema, errs)
		}
	}
}

// An enum of 10,000 values under "items": each item's check scans the
// values, so it counts for more (checkWeight), and a reply of 20,000 items
// is refused where 250,000 valid ones took 31 s; 2,000 wrong-case items
// are described in a fraction of a second (they took 1.6 s, the enum
// rendered whole for each; package repair's TestCoerceBigEnumUnderItems
// fixes them).
func TestBigEnumUnderItems(t *testing.T) {
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
	if errs := s.Validate(items(20000, "value-09999")); len(errs) != 1 || errs[0].Keyword != "checkCost" {
		t.Errorf("20,000 items: %v; want refused for its cost", errs[:min(len(errs), 2)])
	}
	errs := s.Validate(items(2000, "VALUE-09999"))
	if len(errs) != 2000 || errs[0].Keyword != "enum" || len(errs[0].Message) > 400 || !strings.Contains(errs[0].Message, `"value-00000"`) {
		t.Fatalf("2,000 wrong items: %d errors, first %+v; want each item's enum error, its list cut short", len(errs), errs[0])
	}
}

// The specification's "strict tree" and a 2019-09 recursive tree are not
// refused at realistic sizes: their dynamic references resolve to the root,
// which declares the anchor (counting each declarer besides the static
// target refused a chain 12 deep and a tree 6 deep with 3 children each,
// which check in milliseconds).
func TestCheckCostDynamicTrees(t *testing.T) {
	t.Parallel()
	tree := func(depth, width int) any {
		var node func(d int) any
		node = func(d int) any {
			n := map[string]any{"data": "x"}
			if d > 0 {
				var kids []any
				for range width {
					kids = append(kids, node(d-1))
				}
				n["children"] = kids
			}
			return n
		}
		return node(depth)
	}
	for _, schema := range []string{
		`{"$id":"https://example.com/strict-tree","$dynamicAnchor":"node","$ref":"tree","unevaluatedProperties":false,
		  "$defs":{"tree":{"$id":"https://example.com/tree","$dynamicAnchor":"node","type":"object",
		    "properties":{"data":{"type":"string"},"children":{"type":"array","items":{"$dynamicRef":"#node"}}}}}}`,
		`{"$schema":"https://json-schema.org/draft/2019-09/schema","$id":"https://example.com/rtree","$recursiveAnchor":true,"type":"object",
		  "properties":{"data":{"type":"string"},"children":{"type":"array","items":{"$recursiveRef":"#"}}}}`,
		// The root does not declare the anchor: the tree it names first
		// does (a regression tester's chain 17 deep was refused).
		`{"$id":"https://example.com/root","$ref":"mytree","$defs":{
		  "tree":{"$id":"https://example.com/tree","$dynamicAnchor":"node","type":"object","properties":{"data":true,"children":{"type":"array","items":{"$dynamicRef":"#node"}}}},
		  "mytree":{"$id":"https://example.com/mytree","$dynamicAnchor":"node","$ref":"tree","properties":{"name":{"type":"string"}},"unevaluatedProperties":false}}}`,
	} {
		s := mustCompile(t, schema)
		for _, v := range []any{tree(12, 1), tree(20, 1), tree(60, 1), tree(6, 3), tree(4, 8), tree(9, 2)} {
			if errs := s.Validate(v); len(errs) != 0 {
				t.Errorf("%.50s: a valid tree: %v; want valid", schema, errs[:min(len(errs), 2)])
			}
		}
		// The strict tree's root still applies at every level.
		bad := tree(3, 1)
		bad.(map[string]any)["children"].([]any)[0].(map[string]any)["extra"] = 1
		if errs := s.Validate(bad); (strings.Contains(schema, "strict") || strings.Contains(schema, "mytree")) && (len(errs) == 0 || errs[0].Keyword == "checkCost") {
			t.Errorf("strict tree: an extra property at level 2: %v; want its error", errs)
		}
	}
}

// An anchor the root's resource declares in "$defs", which nothing refers
// to, is where every dynamic reference resolves: its branching is counted.
// A 412-byte wrong chain 20 deep was checked for 25 s and 3.7 GB (22 deep:
// 162 s, 17.6 GB), the estimate following only the tree the root refers to.
func TestCheckCostAnchorInTheRootsDefs(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"$id":"https://ex.com/r","$ref":"t","$defs":{
	  "x":{"$dynamicAnchor":"node","type":"object","required":["v"],"properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"anyOf":[
	    {"$dynamicRef":"#node","properties":{"v":{"minimum":0}}},{"$dynamicRef":"#node","properties":{"v":{"maximum":0}}}]}}}},
	  "t":{"$id":"https://ex.com/t","$dynamicAnchor":"node","type":"object","properties":{"kids":{"type":"array","items":{"$dynamicRef":"#node"}}}}}}`)
	chain := func(depth int) any {
		var v any = map[string]any{"v": "bad"}
		for range depth {
			v = map[string]any{"v": json.Number("1"), "kids": []any{v}}
		}
		return v
	}
	if errs := s.Validate(chain(22)); len(errs) != 1 || errs[0].Keyword != "checkCost" {
		t.Errorf("a wrong chain 22 deep: %v; want refused for its cost", errs[:min(len(errs), 2)])
	}
	// x applies: a node without "v" fails.
	if errs := s.Validate(map[string]any{"kids": []any{map[string]any{"kids": []any{}}}}); len(errs) == 0 || errs[0].Keyword == "checkCost" {
		t.Errorf("a node without v: %v; want its error", errs)
	}
}
