package validate

import (
	"strings"
	"testing"
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
		if refused && (errs[0].Class != ClassShape || !strings.HasPrefix(errs[0].Path, "/thread/0/replies/")) {
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
		if _, over := th.cost.over(comments(depth, 1, true), MaxChecks); !over {
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

// treeSize counts every path: shared definitions once for each branch that
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
		{listSchema, 0},
	} {
		if got := treeSize(mustCompile(t, tc.schema).sch, MaxChecks); got != tc.want {
			t.Errorf("%s: %d; want %d", tc.schema, got, tc.want)
		}
	}
	if got := treeSize(mustCompile(t, layered(6)).sch, 1000); got != 1001 {
		t.Errorf("6 levels, limit 1000: %d; want 1001", got)
	}
}
