package rules

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/subschema"
)

// kinds is a set of JSON types a value may have at a place. Numbers are
// split in two so that "integer" and "number" intersect as JSON Schema
// says: integer is an integral number, number any.
type kinds uint8

const (
	kNull kinds = 1 << iota
	kBool
	kObject
	kArray
	kString
	kInteger  // an integral number
	kFraction // a number that is not integral
	kNumber   = kInteger | kFraction
	kAll      = kNull | kBool | kObject | kArray | kString | kNumber
)

// typeNames maps the names of the "type" keyword to their kinds.
var typeNames = map[string]kinds{
	"null": kNull, "boolean": kBool, "object": kObject, "array": kArray,
	"string": kString, "integer": kInteger, "number": kNumber,
}

// declaredKinds returns the kinds the "type" keyword of obj allows, and
// whether obj has one.
func declaredKinds(obj map[string]any) (kinds, bool) {
	switch t := obj["type"].(type) {
	case string:
		return typeNames[t], true
	case []any:
		var k kinds
		for _, n := range t {
			if s, ok := n.(string); ok {
				k |= typeNames[s]
			}
		}
		return k, true
	}
	return kAll, false
}

// node is a schema object of the document, with the edges rules follow:
// to the subschemas that apply to the same value (refs, branches) and to
// those that apply to its members and items.
type node struct {
	id    int // its place in pointer order
	ptr   string
	obj   map[string]any
	rules []*rule

	// refs apply to the same value: the target of "$ref", each of "allOf".
	refs []*node
	// branches of "anyOf" and "oneOf" whose kinds are disjoint, each
	// applying where the value has its kinds (see graph.branches).
	branches []branch

	// props holds every name of "properties", with nil for a subschema
	// that is a boolean.
	props      map[string]*node
	patterns   []pattern
	additional *node
	// prefix applies to the first items (prefixItems, or "items" as an
	// array), rest to the items after them ("items", or
	// "additionalItems" after an "items" array).
	prefix []*node
	rest   *node

	// live: a rule is reached from here.
	live bool
}

// branch is one anyOf/oneOf branch and the kinds it applies to.
type branch struct {
	kinds kinds
	n     *node
}

// pattern is a patternProperties entry.
type pattern struct {
	src string
	re  *regexp.Regexp // compiled when the node is live
	n   *node
}

// graph is a schema document read for rules.
type graph struct {
	version int
	nodes   map[string]*node
	root    *node
	// sites are the nodes holding x-fixpoint-rules, by pointer.
	sites []*node
}

// buildGraph reads doc, a schema document decoded with UseNumber, with
// the project's schema walker, and resolves its references the way the
// validator does (subschema.Doc).
func buildGraph(doc any) *graph {
	g := &graph{version: draft(doc), nodes: map[string]*node{}}
	bases := map[string]string{} // node pointer -> base URI
	subschema.Walk(doc, func(n subschema.Node) bool {
		obj := n.Object()
		g.nodes[n.Ptr] = &node{ptr: n.Ptr, obj: obj}
		bases[n.Ptr] = n.Base
		if _, ok := obj[Keyword]; ok {
			g.sites = append(g.sites, g.nodes[n.Ptr])
		}
		return true
	})
	g.root = g.nodes[""]
	for i, ptr := range sortedKeys(g.nodes) {
		g.nodes[ptr].id = i
	}
	slices.SortFunc(g.sites, func(a, b *node) int { return strings.Compare(a.ptr, b.ptr) })
	refs := subschema.NewDoc(doc)
	for ptr, n := range g.nodes {
		g.link(n, func(ref string) *node {
			t, err := refs.Resolve(ref, bases[ptr])
			if err != nil {
				return nil
			}
			return g.nodes[t.Ptr]
		})
	}
	for _, n := range g.nodes {
		g.branches(n)
	}
	return g
}

// draft returns the JSON Schema draft the "$schema" of doc names: 4, 6,
// 7, 2019 or 2020 (the default).
func draft(doc any) int {
	m, _ := doc.(map[string]any)
	s, _ := m["$schema"].(string)
	for _, d := range []struct {
		name    string
		version int
	}{{"draft-04", 4}, {"draft-06", 6}, {"draft-07", 7}, {"2019-09", 2019}} {
		if strings.Contains(s, d.name) {
			return d.version
		}
	}
	return 2020
}

// link sets the edges of n; ref resolves a reference written in n.
func (g *graph) link(n *node, ref func(string) *node) {
	obj, ptr := n.obj, n.ptr
	if s, ok := obj["$ref"].(string); ok {
		if t := ref(s); t != nil {
			n.refs = append(n.refs, t)
		}
		if g.version < 2019 {
			// Before 2019-09 the keywords beside "$ref" are ignored.
			return
		}
	}
	n.refs = append(n.refs, g.list(ptr, "allOf")...)
	if props, ok := obj["properties"].(map[string]any); ok {
		n.props = make(map[string]*node, len(props))
		for name := range props {
			n.props[name] = g.nodes[ptr+"/properties/"+extract.PointerToken(name)]
		}
	}
	if pats, ok := obj["patternProperties"].(map[string]any); ok {
		for src := range pats {
			n.patterns = append(n.patterns, pattern{src: src, n: g.nodes[ptr+"/patternProperties/"+extract.PointerToken(src)]})
		}
		slices.SortFunc(n.patterns, func(a, b pattern) int { return strings.Compare(a.src, b.src) })
	}
	n.additional = g.nodes[ptr+"/additionalProperties"]
	if _, tuple := obj["items"].([]any); tuple {
		n.prefix = g.list(ptr, "items")
		n.rest = g.nodes[ptr+"/additionalItems"]
	} else {
		n.prefix = g.list(ptr, "prefixItems")
		n.rest = g.nodes[ptr+"/items"]
	}
}

// list returns the nodes of the array keyword kw of the node at ptr, a
// nil entry for one that is a boolean schema.
func (g *graph) list(ptr, kw string) []*node {
	arr, _ := g.nodes[ptr].obj[kw].([]any)
	if len(arr) == 0 {
		return nil
	}
	out := make([]*node, len(arr))
	for i := range arr {
		out[i] = g.nodes[ptr+"/"+kw+"/"+strconv.Itoa(i)]
	}
	return out
}

// branches sets the anyOf/oneOf branches of n that rules follow: those of
// a keyword whose branches allow pairwise disjoint kinds, so that the
// value's own type says which branch it is (null or an object, a string
// or a number). The branches of any other anyOf/oneOf are not followed.
func (g *graph) branches(n *node) {
	if _, ok := n.obj["$ref"]; ok && g.version < 2019 {
		return
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		arr, ok := n.obj[kw].([]any)
		if !ok {
			continue
		}
		var seen kinds
		var bs []branch
		for i := range arr {
			b := g.nodes[n.ptr+"/"+kw+"/"+strconv.Itoa(i)]
			k := kAll
			if b != nil {
				k = g.kindsOf(b, map[*node]bool{})
			}
			if k&seen != 0 {
				bs = nil
				break
			}
			seen |= k
			if b != nil {
				bs = append(bs, branch{kinds: k, n: b})
			}
		}
		n.branches = append(n.branches, bs...)
	}
}

// kindsOf returns the kinds n allows by its "type" and those of what it
// refers to and its allOf; kAll when none says.
func (g *graph) kindsOf(n *node, seen map[*node]bool) kinds {
	if seen[n] {
		return kAll
	}
	seen[n] = true
	k := kAll
	if _, hasRef := n.obj["$ref"]; !hasRef || g.version >= 2019 {
		k, _ = declaredKinds(n.obj)
	}
	for _, r := range n.refs {
		k &= g.kindsOf(r, seen)
	}
	return k
}

// edges calls fn for every node n leads to.
func (n *node) edges(fn func(*node)) {
	visit := func(t *node) {
		if t != nil {
			fn(t)
		}
	}
	for _, t := range n.refs {
		visit(t)
	}
	for _, b := range n.branches {
		visit(b.n)
	}
	for _, t := range n.props {
		visit(t)
	}
	for _, p := range n.patterns {
		visit(p.n)
	}
	visit(n.additional)
	for _, t := range n.prefix {
		visit(t)
	}
	visit(n.rest)
}

// mark sets live on every node from which a node holding rules is
// reached, and compiles the patterns of the live nodes, which decide
// which members a live node's subschemas apply to.
func (g *graph) mark() []error {
	back := map[*node][]*node{}
	for _, n := range g.nodes {
		n.edges(func(t *node) { back[t] = append(back[t], n) })
	}
	var queue []*node
	for _, n := range g.nodes {
		if len(n.rules) > 0 {
			n.live = true
			queue = append(queue, n)
		}
	}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		for _, n := range back[t] {
			if !n.live {
				n.live = true
				queue = append(queue, n)
			}
		}
	}
	var errs []error
	for _, ptr := range sortedKeys(g.nodes) {
		n := g.nodes[ptr]
		if !n.live {
			continue
		}
		for i := range n.patterns {
			re, err := regexp.Compile(n.patterns[i].src)
			if err != nil {
				errs = append(errs, &CompileError{Location: ptr + "/patternProperties/" + extract.PointerToken(n.patterns[i].src),
					Err: fmt.Errorf("rules below this object need the pattern in RE2 syntax: %v", err)})
				continue
			}
			n.patterns[i].re = re
		}
	}
	return errs
}

// reached returns the nodes reached from the root by the edges rules
// follow.
func (g *graph) reached() map[*node]bool {
	seen := map[*node]bool{}
	if g.root == nil {
		return seen
	}
	stack := []*node{g.root}
	seen[g.root] = true
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n.edges(func(t *node) {
			if !seen[t] {
				seen[t] = true
				stack = append(stack, t)
			}
		})
	}
	return seen
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
