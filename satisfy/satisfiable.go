// Package satisfy tells whether any value can satisfy a schema, before a
// job pays for replies that all fail: a schema can compile and accept no
// value at all ({"$ref": "#"}, {"enum": []}, a required property that
// refers back to its parent). It reads the graph of the compiled schema
// (subschema.Graph) and is pure: no network, no file system, no logging,
// bounded in time and memory by a budget of steps. Package validate
// refuses a schema with it (Schema.Satisfiable) and lists the parts of a
// schema no reply can give (Schema.UnsatisfiableParts).
//
// The check is conservative: it never refuses a schema that some value
// satisfies (it is tested against every schema of the official test suite
// with a valid case). It is not complete: a schema it accepts may still have
// no valid value. It computes, as a least fixpoint over the compiled schema
// graph, which JSON types (null, boolean, integer, non-integer number,
// string, object, array) some finite value of that type could satisfy each
// subschema with; the root is unsatisfiable when that set is empty. It
// detects:
//
//   - the false schema, "enum": [] and a "not" whose schema accepts every
//     value of the types left (such as {}, true, or a schema with only
//     "type");
//   - "type", "const" and "enum" with no type in common, within one schema
//     and across "allOf", "$ref", "if"/"then"/"else";
//   - an "allOf" member or a "$ref" target that is unsatisfiable, an "anyOf"
//     or "oneOf" with no satisfiable branch, a "oneOf" with two branches that
//     accept every value of the types left, "if"/"then"/"else" with neither
//     path satisfiable;
//   - "$ref" chains that loop without consuming any part of the value, such
//     as {"$ref": "#"} (the validator refuses every value for them);
//   - objects: a required property whose schema ("properties", every
//     matching "patternProperties", else "additionalProperties") is
//     unsatisfiable or false, more required properties than
//     "maxProperties", "minProperties" above "maxProperties" or above the
//     number of properties that can be present, "propertyNames" that allows
//     no name while a property is needed;
//   - arrays: an item that must be present ("minItems", "minContains") whose
//     schema ("prefixItems", "items", "additionalItems") is unsatisfiable or
//     false, an unsatisfiable "contains" that is needed, "minItems" above
//     "maxItems", "minContains" above "maxContains" or "maxItems";
//   - strings: "minLength" above "maxLength"; numbers: no integer, or no
//     non-integer, within "minimum"/"maximum" (exclusive or not) that is a
//     multiple of "multipleOf";
//   - recursion that only an infinitely deep value satisfies, such as a
//     required property that refers back to its parent:
//     {"type": "object", "required": ["c"], "properties": {"c": {"$ref": "#"}}}.
//
// It does not look at "pattern", "format", "uniqueItems", "dependencies",
// "dependentRequired", "dependentSchemas", "unevaluatedProperties",
// "unevaluatedItems", "$dynamicRef", "$recursiveRef" or the content keywords
// (leaving a keyword out can only make it accept more), does not check a
// "const" or "enum" value against the keywords other than "type", and does
// not combine the bounds or properties of different schemas:
// {"allOf": [{"minimum": 2}, {"maximum": 1}]} is accepted. Subschemas of the
// standard metaschemas count as satisfiable. ("type": [] never gets here:
// package validate refuses it at Compile.)
package satisfy

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fixpoint-dev/fixpoint/ecma"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/internal/render"
	"github.com/fixpoint-dev/fixpoint/subschema"
)

// ErrUnsatisfiable is matched (errors.Is) by the error Check returns for a
// schema no value can satisfy.
var ErrUnsatisfiable = errors.New("no value satisfies the schema")

// Error is why no value satisfies a schema, or a part of it: the keyword
// at fault ("" when none is, as for the false schema), its Location (the
// JSON pointer of the keyword in the schema document, or of the part), and
// why, matching ErrUnsatisfiable or ErrUnsatisfiablePart, with the chain
// of keywords that leads there from the root.
type Error struct {
	Keyword  string
	Location string
	Err      error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Keyword == "" {
		return fmt.Sprintf("at %s: %v", render.Path(e.Location), e.Err)
	}
	return fmt.Sprintf("keyword %q at %s: %v", e.Keyword, render.Path(e.Location), e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Check reports whether some finite JSON value could satisfy the schema
// whose graph is g, as far as a cheap static check can tell, spending at
// most budget steps (Budget is what package validate gives it). It returns
// nil when the schema may be satisfiable, or when it could not tell within
// its budget, and otherwise an *Error matching ErrUnsatisfiable.
func Check(g *subschema.Graph, budget int) error {
	sol, ok := Solve(g, budget)
	if !ok || sol.g.t[0] != 0 {
		return nil // over budget, so cannot tell; or satisfiable
	}
	return sol.g.explainFrom(0)
}

// Solution is the kinds of value each subschema of a graph can be
// satisfied with (the least fixpoint), as Solve found them.
type Solution struct {
	g    *satGraph
	done bool // solved within the budget
}

// Solve solves the graph g within budget steps, and reports whether it
// did. A Solution it did not finish tells nothing.
func Solve(g *subschema.Graph, budget int) (*Solution, bool) {
	sg, ok := solveKinds(g, budget)
	return &Solution{sg, ok}, ok
}

// Budget bounds the work of one check, in node evaluations, dependencies
// read and regular expressions matched: what package validate gives a
// check.
const (
	Budget = 1 << 22
	// satDepth bounds the recursion of the static part of a node (through
	// "not", "$ref", "allOf", ... without a value) and of an explanation.
	satDepth = 16
)

// Slots of a node's dependencies that are no schema.
const (
	noSchema = -1 // the keyword is absent, or true: anything goes
	never    = -2 // the keyword is false: nothing may be there
)

// satNode is one subschema of the graph, with the dependencies of its
// kinds precomputed.
type satNode struct {
	s   *jsonschema.Schema
	loc string // JSON pointer in the schema document, or the full URL elsewhere

	static    subschema.Types // the kinds the node's own keywords allow, regardless of subschemas
	staticWhy cause           // why static is empty
	legacy    bool            // draft < 2019 with $ref: only "const" and "$ref" apply

	ref                 int
	allOf, anyOf, oneOf []int
	ifN, thenN, elseN   int
	ifUniversal         subschema.Types

	// objects
	required   []string   // distinct, in schema order
	slots      [][]int    // per required name, every schema its value must satisfy; [never]: not allowed
	slotKw     [][]string // the keyword location of each schema of slots
	optProps   []int      // schemas of properties that are not required
	patterns   []int
	additional int // noSchema, never or a node
	propNames  int

	// arrays
	positions []int // schemas of the items that must be there: noSchema, never or a node
	posKw     []string
	optItems  []int // schemas of the items that may be there (UnsatisfiableParts reads them)
	contains  int   // noSchema when no item needs to match

	parents []int
	ndeps   int // dependencies: the cost of one evaluation
}

// satGraph is the graph of a schema's subschemas and the kinds each can be
// satisfied with (the least fixpoint, once solved). Its nodes are those of
// the schema's subschema.Graph, root first, but for the subschemas of the
// standard metaschemas: they count as satisfiable, and are not looked into.
type satGraph struct {
	nodes  []satNode
	index  map[*jsonschema.Schema]int
	t      []subschema.Types
	budget int
}

// solveKinds builds the graph of sg's subschemas and solves it, and
// reports whether it did within budget.
func solveKinds(sg *subschema.Graph, budget int) (*satGraph, bool) {
	g := &satGraph{index: make(map[*jsonschema.Schema]int, len(sg.Nodes())), budget: budget}
	schemas := make([]*jsonschema.Schema, 0, len(sg.Nodes()))
	for _, s := range sg.Nodes() {
		if !isMeta(s.Location) {
			g.index[s] = len(schemas)
			schemas = append(schemas, s)
		}
	}
	return g, g.build(schemas) && g.solve()
}

// spend takes n units of the budget and reports whether it lasted.
func (g *satGraph) spend(n int) bool {
	g.budget -= n
	return g.budget >= 0
}

// node returns the index of s; noSchema, which allows anything, for nil
// and for a subschema of a standard metaschema.
func (g *satGraph) node(s *jsonschema.Schema) int {
	if i, ok := g.index[s]; ok {
		return i
	}
	return noSchema
}

// nodesOf returns the indexes of ss.
func (g *satGraph) nodesOf(ss []*jsonschema.Schema) []int {
	out := make([]int, len(ss))
	for j, s := range ss {
		out[j] = g.node(s)
	}
	return out
}

// isMeta reports whether a location is in a standard metaschema.
func isMeta(u string) bool {
	return strings.HasPrefix(u, "https://json-schema.org/") || strings.HasPrefix(u, "http://json-schema.org/")
}

// build makes a node of each schema and links each to the nodes whose
// kinds it depends on.
func (g *satGraph) build(schemas []*jsonschema.Schema) bool {
	g.nodes = make([]satNode, len(schemas))
	for i, s := range schemas {
		if !g.spend(1) {
			return false
		}
		n := satNode{s: s, loc: subschema.Location(s.Location), ref: noSchema, ifN: noSchema, thenN: noSchema, elseN: noSchema,
			additional: noSchema, propNames: noSchema, contains: noSchema}
		n.static = g.staticKinds(s, 0, n.loc, &n.staticWhy)
		switch {
		case s.Bool != nil:
		case s.DraftVersion < 2019 && s.Ref != nil:
			// The validator checks "const", then "$ref", and ignores the rest.
			n.legacy = true
			n.ref = g.node(s.Ref)
		default:
			n.ref = g.node(s.Ref)
			n.allOf, n.anyOf, n.oneOf = g.nodesOf(s.AllOf), g.nodesOf(s.AnyOf), g.nodesOf(s.OneOf)
			if s.If != nil && (s.Then != nil || s.Else != nil) {
				n.ifN, n.thenN, n.elseN = g.node(s.If), g.node(s.Then), g.node(s.Else)
				n.ifUniversal = g.universalKinds(s.If, 0)
			}
			if !g.buildObject(&n) {
				return false
			}
			g.buildArray(&n)
		}
		g.nodes[i] = n
	}
	for i := range g.nodes {
		deps := g.deps(i)
		g.nodes[i].ndeps = len(deps)
		for _, d := range deps {
			g.nodes[d].parents = append(g.nodes[d].parents, i)
		}
	}
	return true
}

// buildObject precomputes what an object satisfying n needs. It returns
// false when a pattern could not be matched in time: neither answer is
// safe, so the analysis gives up, as when its budget is spent.
func (g *satGraph) buildObject(n *satNode) bool {
	s := n.s
	seen := map[string]bool{}
	for _, r := range s.Required {
		if !seen[r] {
			seen[r] = true
			n.required = append(n.required, r)
		}
	}
	switch a := s.AdditionalProperties.(type) {
	case bool:
		if !a {
			n.additional = never
		}
	case *jsonschema.Schema:
		n.additional = g.node(a)
	}
	n.propNames = g.node(s.PropertyNames) // the library sets it from draft 6 on
	patterns := slices.SortedFunc(maps.Keys(s.PatternProperties), func(a, b jsonschema.Regexp) int { return strings.Compare(a.String(), b.String()) })
	for _, re := range patterns {
		n.patterns = append(n.patterns, g.node(s.PatternProperties[re]))
	}
	if !g.spend(len(n.required) * len(patterns)) {
		return false
	}
	for _, r := range n.required {
		var slot []int
		var kws []string
		if p, ok := s.Properties[r]; ok {
			slot = append(slot, g.node(p))
			kws = append(kws, n.loc+"/properties/"+extract.PointerToken(r))
		}
		for j, re := range patterns {
			m, err := ecma.Match(re, r)
			if err != nil {
				return false
			}
			if m {
				slot = append(slot, n.patterns[j])
				kws = append(kws, n.loc+"/patternProperties/"+extract.PointerToken(re.String()))
			}
		}
		if len(slot) == 0 && n.additional != noSchema {
			slot = append(slot, n.additional)
			kws = append(kws, n.loc+"/additionalProperties")
		}
		n.slots = append(n.slots, slot)
		n.slotKw = append(n.slotKw, kws)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		if !seen[name] {
			n.optProps = append(n.optProps, g.node(s.Properties[name]))
		}
	}
	return true
}

// containsNeed is how many items must match "contains".
func containsNeed(s *jsonschema.Schema) int {
	switch {
	case s.Contains == nil:
		return 0
	case s.MinContains != nil:
		return *s.MinContains
	}
	return 1
}

// buildArray precomputes what an array satisfying n needs.
func (g *satGraph) buildArray(n *satNode) {
	s := n.s
	minItems := containsNeed(s)
	if minItems > 0 {
		n.contains = g.node(s.Contains)
	}
	if s.MinItems != nil {
		minItems = max(minItems, *s.MinItems)
	}
	// The schemas of the items the prefix names, and of those past it
	// (noSchema, never or a node), which share it: one stands for all.
	var prefix []*jsonschema.Schema
	prefixKw, rest, restKw := "", noSchema, ""
	if s.DraftVersion >= 2020 {
		prefix, prefixKw = s.PrefixItems, "/prefixItems/"
		rest, restKw = g.node(s.Items2020), "/items"
	} else {
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			rest, restKw = g.node(items), "/items"
		case []*jsonschema.Schema:
			prefix, prefixKw = items, "/items/"
			switch a := s.AdditionalItems.(type) {
			case bool:
				if !a {
					rest, restKw = never, "/additionalItems"
				}
			case *jsonschema.Schema:
				rest, restKw = g.node(a), "/additionalItems"
			}
		}
	}
	at := func(i int) (int, string) {
		if i < len(prefix) {
			return g.node(prefix[i]), n.loc + prefixKw + strconv.Itoa(i)
		}
		return rest, n.loc + restKw
	}
	for i := minItems; i < len(prefix)+1; i++ {
		if d, _ := at(i); d >= 0 {
			n.optItems = append(n.optItems, d)
		}
	}
	for i := range min(minItems, len(prefix)+1) {
		d, kw := at(i)
		n.positions = append(n.positions, d)
		n.posKw = append(n.posKw, kw)
	}
}

// deps are the nodes whose kinds the kinds of node i depend on.
func (g *satGraph) deps(i int) []int {
	n := &g.nodes[i]
	d := []int{n.ref, n.ifN, n.thenN, n.elseN, n.additional, n.propNames, n.contains}
	d = append(d, n.allOf...)
	d = append(d, n.anyOf...)
	d = append(d, n.oneOf...)
	for _, slot := range n.slots {
		d = append(d, slot...)
	}
	d = append(d, n.optProps...)
	d = append(d, n.patterns...)
	d = append(d, n.positions...)
	return slices.DeleteFunc(d, func(j int) bool { return j < 0 })
}

// solve computes the least fixpoint of the kinds of every node, and reports
// whether it did within the budget.
func (g *satGraph) solve() bool {
	g.t = make([]subschema.Types, len(g.nodes))
	queued := make([]bool, len(g.nodes))
	queue := make([]int, 0, len(g.nodes))
	for i := len(g.nodes) - 1; i >= 0; i-- {
		queue = append(queue, i)
		queued[i] = true
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		queued[i] = false
		if !g.spend(1 + g.nodes[i].ndeps + len(g.nodes[i].parents)) {
			return false
		}
		k := g.eval(i, nil) | g.t[i]
		if k == g.t[i] {
			continue
		}
		g.t[i] = k
		for _, p := range g.nodes[i].parents {
			if !queued[p] {
				queued[p] = true
				queue = append(queue, p)
			}
		}
	}
	return true
}

// isFalse reports whether dependency slot j is the false schema.
func (g *satGraph) isFalse(j int) bool {
	if j == never {
		return true
	}
	if j < 0 {
		return false
	}
	b := g.nodes[j].s.Bool
	return b != nil && !*b
}

// tk is the current kinds of a dependency slot.
func (g *satGraph) tk(j int) subschema.Types {
	switch j {
	case noSchema:
		return subschema.TypeAny
	case never:
		return 0
	}
	return g.t[j]
}

// cause is why a node has no kinds: the keyword at fault, its location, the
// reason and, when the fault is an unsatisfiable subschema, that subschema.
type cause struct {
	loc, keyword, reason string
	child                int // a node, or noSchema
	consumes             bool
}

// keywordCause is the cause of a keyword of the node at loc alone.
func keywordCause(loc, keyword, reason string) cause {
	return cause{loc: loc + "/" + keyword, keyword: keyword, reason: reason, child: noSchema}
}

// eval computes the kinds of node i from the current kinds of its
// dependencies. With why set, it records the first keyword that leaves no
// kind (eval is then only called on nodes without kinds).
func (g *satGraph) eval(i int, why *cause) subschema.Types {
	n := &g.nodes[i]
	if n.static == 0 || n.s.Bool != nil {
		if why != nil {
			*why = n.staticWhy
		}
		return n.static
	}
	e := evaluation{g: g, n: n, k: n.static, why: why}
	if !e.applicators() {
		return 0
	}
	if n.legacy {
		return e.k
	}
	return e.shapes()
}

// evaluation is one eval of a node: the kinds left so far, and where to
// record why none are left (nil: nowhere).
type evaluation struct {
	g   *satGraph
	n   *satNode
	k   subschema.Types
	why *cause
}

// cut intersects the kinds left with those of a dependency, child or
// noSchema, recording the cause when that leaves none.
func (e *evaluation) cut(with subschema.Types, loc, keyword string, child int, reason func() string) bool {
	if e.k&with != 0 {
		e.k &= with
		return true
	}
	if e.why != nil {
		*e.why = cause{loc: loc, keyword: keyword, reason: reason(), child: noSchema}
		if with == 0 && child >= 0 && !e.g.isFalse(child) {
			e.why.child = child
		}
	}
	e.k = 0
	return false
}

// sub is cut's reason for the subschema j at loc.
func (e *evaluation) sub(j int, loc string) func() string {
	return func() string {
		switch {
		case e.g.isFalse(j):
			return render.Path(loc) + " is false"
		case e.g.tk(j) == 0:
			return "no value satisfies " + render.Path(loc)
		}
		return fmt.Sprintf("%s allows only %s, which the rest of %s does not allow (%s)", render.Path(loc), e.g.tk(j), render.Path(e.n.loc), e.k)
	}
}

// applicators cuts the kinds left by "$ref" and, unless the node is
// legacy, "allOf", "anyOf", "oneOf" and "if"; false when none are left.
func (e *evaluation) applicators() bool {
	g, n := e.g, e.n
	if n.ref >= 0 && !e.cut(g.tk(n.ref), n.loc+"/$ref", "$ref", n.ref, e.sub(n.ref, g.nodes[n.ref].loc)) {
		return false
	}
	if n.legacy {
		return true
	}
	for j, a := range n.allOf {
		loc := n.loc + "/allOf/" + strconv.Itoa(j)
		if !e.cut(g.tk(a), loc, "allOf", a, e.sub(a, loc)) {
			return false
		}
	}
	for _, alt := range []struct {
		keyword string
		list    []int
	}{{"anyOf", n.anyOf}, {"oneOf", n.oneOf}} {
		if len(alt.list) == 0 {
			continue
		}
		var union subschema.Types
		for _, a := range alt.list {
			union |= g.tk(a)
		}
		only := noSchema
		if len(alt.list) == 1 {
			only = alt.list[0]
		}
		if !e.cut(union, n.loc+"/"+alt.keyword, alt.keyword, only, func() string {
			if union == 0 {
				return "no " + alt.keyword + " branch can be satisfied"
			}
			return fmt.Sprintf("the %s branches allow only %s, which the rest of %s does not allow (%s)", alt.keyword, union, render.Path(n.loc), e.k)
		}) {
			return false
		}
	}
	if n.ifN < 0 {
		return true
	}
	paths := g.tk(n.ifN)&g.tk(n.thenN) | ^n.ifUniversal&g.tk(n.elseN)
	return e.cut(paths, n.loc+"/if", "if", noSchema, func() string {
		return "neither the \"then\" path nor the \"else\" path can be satisfied"
	})
}

// shapes takes object and array out of the kinds left when no object, or
// no array, satisfies the node, and returns the kinds left.
func (e *evaluation) shapes() subschema.Types {
	var reasons []cause
	if e.k&subschema.TypeObject != 0 {
		if c, ok := e.g.object(e.n); !ok {
			e.k &^= subschema.TypeObject
			reasons = append(reasons, c)
		}
	}
	if e.k&subschema.TypeArray != 0 {
		if c, ok := e.g.array(e.n); !ok {
			e.k &^= subschema.TypeArray
			reasons = append(reasons, c)
		}
	}
	if e.k == 0 && e.why != nil {
		*e.why = reasons[0]
		if len(reasons) > 1 {
			*e.why = cause{loc: e.n.loc, child: noSchema, reason: "no object: " + reasons[0].reason + "; no array: " + reasons[1].reason}
			if e.n.s.Types != nil {
				e.why.loc, e.why.keyword = e.n.loc+"/type", "type"
			}
		}
	}
	return e.k
}

// object reports whether an object may satisfy n, and if not why.
func (g *satGraph) object(n *satNode) (cause, bool) {
	s := n.s
	switch {
	case s.MinProperties != nil && s.MaxProperties != nil && *s.MinProperties > *s.MaxProperties:
		return keywordCause(n.loc, "minProperties", fmt.Sprintf("minProperties %d is greater than maxProperties %d", *s.MinProperties, *s.MaxProperties)), false
	case s.MaxProperties != nil && len(n.required) > *s.MaxProperties:
		return keywordCause(n.loc, "required", fmt.Sprintf("%d properties are required but maxProperties is %d", len(n.required), *s.MaxProperties)), false
	}
	for j, slot := range n.slots {
		if len(slot) == 1 && slot[0] == never {
			return keywordCause(n.loc, "required", fmt.Sprintf("required property %s is not allowed: additionalProperties is false", render.Quote(n.required[j]))), false
		}
	}
	minProps := 0
	if s.MinProperties != nil {
		minProps = *s.MinProperties
	}
	if g.tk(n.propNames)&subschema.TypeString == 0 && (len(n.required) > 0 || minProps > 0) {
		return keywordCause(n.loc, "propertyNames", "propertyNames allows no name, but the object needs a property"), false
	}
	for j, slot := range n.slots {
		if c, ok := g.requiredSlot(n, j, slot); !ok {
			return c, false
		}
	}
	if minProps > len(n.required) {
		avail := len(n.required)
		for _, d := range n.optProps {
			if g.tk(d) != 0 {
				avail++
			}
		}
		open := g.tk(n.additional) != 0
		for _, d := range n.patterns {
			open = open || g.tk(d) != 0
		}
		if !open && avail < minProps {
			return keywordCause(n.loc, "minProperties", fmt.Sprintf("minProperties is %d but at most %d properties can be present", minProps, avail)), false
		}
	}
	return cause{}, true
}

// requiredSlot reports whether a value may satisfy every schema of the
// required property j of n, and if not why.
func (g *satGraph) requiredSlot(n *satNode, j int, slot []int) (cause, bool) {
	k := subschema.TypeAny
	for m, d := range slot {
		if k &= g.tk(d); k != 0 {
			continue
		}
		c := keywordCause(n.loc, "required", "")
		c.consumes = true
		switch name, kw := render.Quote(n.required[j]), render.Path(n.slotKw[j][m]); {
		case g.isFalse(d):
			c.reason = fmt.Sprintf("required property %s must satisfy %s, which is false", name, kw)
		case g.tk(d) == 0:
			c.child = d
			c.reason = fmt.Sprintf("required property %s must satisfy %s", name, kw)
		default:
			c.reason = fmt.Sprintf("required property %s must satisfy %s, which have no type in common", name, strings.Join(n.slotKw[j], " and "))
		}
		return c, false
	}
	return cause{}, true
}

// array reports whether an array may satisfy n, and if not why.
func (g *satGraph) array(n *satNode) (cause, bool) {
	s := n.s
	need := containsNeed(s)
	switch {
	case s.MinItems != nil && s.MaxItems != nil && *s.MinItems > *s.MaxItems:
		return keywordCause(n.loc, "minItems", fmt.Sprintf("minItems %d is greater than maxItems %d", *s.MinItems, *s.MaxItems)), false
	case need > 0 && s.MaxItems != nil && need > *s.MaxItems:
		return keywordCause(n.loc, "contains", fmt.Sprintf("contains needs %d matching items but maxItems is %d", need, *s.MaxItems)), false
	case need > 0 && s.MaxContains != nil && need > *s.MaxContains:
		return keywordCause(n.loc, "contains", fmt.Sprintf("contains needs %d matching items but maxContains is %d", need, *s.MaxContains)), false
	}
	for i, d := range n.positions {
		if g.tk(d) != 0 {
			continue
		}
		c := keywordCause(n.loc, "minItems", "")
		c.consumes = true
		if n.contains >= 0 && (s.MinItems == nil || *s.MinItems <= i) {
			c = keywordCause(n.loc, "contains", "")
			c.consumes = true
		}
		if g.isFalse(d) {
			c.reason = fmt.Sprintf("item %d must be present but %s is false", i, render.Path(n.posKw[i]))
		} else {
			c.child = d
			c.reason = fmt.Sprintf("item %d must be present and satisfy %s", i, render.Path(n.posKw[i]))
		}
		return c, false
	}
	if n.contains >= 0 && g.tk(n.contains) == 0 {
		loc := n.loc + "/contains"
		if g.isFalse(n.contains) {
			return keywordCause(n.loc, "contains", "an item must satisfy "+render.Path(loc)+", which is false"), false
		}
		c := keywordCause(n.loc, "contains", "an item must satisfy "+render.Path(loc))
		c.child, c.consumes = n.contains, true
		return c, false
	}
	return cause{}, true
}

// staticKinds are the kinds the keywords of s that need no subschema's
// kinds allow: type, const, enum, not, and the string and number bounds. With
// why set, it records the keyword that leaves no kind. Past satDepth, or
// over the budget, it gives up and allows every kind.
func (g *satGraph) staticKinds(s *jsonschema.Schema, depth int, loc string, why *cause) subschema.Types {
	if s.Bool != nil {
		if *s.Bool {
			return subschema.TypeAny
		}
		if why != nil {
			*why = cause{loc: loc, reason: "the schema is false", child: noSchema}
		}
		return 0
	}
	if depth > satDepth || !g.spend(1) {
		return subschema.TypeAny
	}
	k, keyword, reason := g.ownKinds(s, depth)
	if k != 0 && !(s.DraftVersion < 2019 && s.Ref != nil) {
		k, keyword, reason = boundKinds(s, k)
	}
	if k == 0 && why != nil {
		*why = keywordCause(loc, keyword, reason)
	}
	return k
}

// ownKinds are the kinds type, const, enum, not and oneOf allow, as far
// as told without solving the graph; with none, the keyword that leaves
// none, and why.
func (g *satGraph) ownKinds(s *jsonschema.Schema, depth int) (subschema.Types, string, string) {
	k := subschema.TypeAny
	legacy := s.DraftVersion < 2019 && s.Ref != nil
	if s.Types != nil && !legacy {
		k &= subschema.TypesOf(s.Types)
	}
	if s.Const != nil {
		c := subschema.TypeOf(*s.Const)
		if k&c == 0 {
			return 0, "const", fmt.Sprintf("const %s is not of type %s", render.Value(*s.Const, render.MaxFound), k)
		}
		k &= c
	}
	if legacy {
		return k, "", ""
	}
	if s.Enum != nil {
		var e subschema.Types
		for _, v := range s.Enum.Values {
			e |= subschema.TypeOf(v)
		}
		switch {
		case len(s.Enum.Values) == 0:
			return 0, "enum", "enum is empty"
		case k&e == 0:
			return 0, "enum", fmt.Sprintf("no value of enum is of type %s", k)
		}
		k &= e
	}
	if s.Not != nil {
		u := g.universalKinds(s.Not, depth+1)
		switch {
		case k&^u != 0:
			k &^= u
		case k == subschema.TypeAny:
			return 0, "not", "the \"not\" schema accepts every value"
		default:
			return 0, "not", fmt.Sprintf("the \"not\" schema accepts every %s", k)
		}
	}
	if len(s.OneOf) >= 2 {
		// A value of a kind two branches accept in full matches both.
		var once, twice subschema.Types
		for _, o := range s.OneOf {
			u := g.universalKinds(o, depth+1)
			twice |= once & u
			once |= u
		}
		if k&^twice == 0 {
			return 0, "oneOf", fmt.Sprintf("two oneOf branches accept every %s, so none matches exactly one", k)
		}
		k &^= twice
	}
	return k, "", ""
}

// boundKinds are the kinds of k the string and number bounds of s leave;
// with none, the keyword that leaves none, and why.
func boundKinds(s *jsonschema.Schema, k subschema.Types) (subschema.Types, string, string) {
	if s.MinLength != nil && s.MaxLength != nil && *s.MinLength > *s.MaxLength && k&subschema.TypeString != 0 {
		if k == subschema.TypeString {
			return 0, "minLength", fmt.Sprintf("minLength %d is greater than maxLength %d", *s.MinLength, *s.MaxLength)
		}
		k &^= subschema.TypeString
	}
	if k&subschema.TypeNumber == 0 {
		return k, "", ""
	}
	out := subschema.TypeNumber &^ numberKinds(s)
	if k&^out != 0 {
		return k &^ out, "", ""
	}
	kw := "minimum"
	switch {
	case s.MultipleOf != nil:
		kw = "multipleOf"
	case s.Minimum == nil && s.ExclusiveMinimum != nil:
		kw = "exclusiveMinimum"
	case s.Minimum == nil && s.Maximum != nil:
		kw = "maximum"
	case s.Minimum == nil:
		kw = "exclusiveMaximum"
	}
	return 0, kw, fmt.Sprintf("no %s satisfies the bounds%s", k, boundsText(s))
}

// boundsText lists the number bounds of s: " (minimum 1, maximum 0)".
func boundsText(s *jsonschema.Schema) string {
	var parts []string
	for _, b := range []struct {
		name string
		r    *big.Rat
	}{{"minimum", s.Minimum}, {"exclusiveMinimum", s.ExclusiveMinimum}, {"maximum", s.Maximum},
		{"exclusiveMaximum", s.ExclusiveMaximum}, {"multipleOf", s.MultipleOf}} {
		if b.r != nil {
			parts = append(parts, b.name+" "+render.Rat(b.r))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// universalKinds are kinds of which s accepts every value, as far as can be
// told without a value: an under-approximation. Past satDepth it gives up
// and claims none.
func (g *satGraph) universalKinds(s *jsonschema.Schema, depth int) subschema.Types {
	if s == nil {
		return subschema.TypeAny
	}
	if s.Bool != nil {
		if *s.Bool {
			return subschema.TypeAny
		}
		return 0
	}
	if depth > satDepth || isMeta(s.Location) || !g.spend(1) {
		return 0
	}
	if s.Const != nil {
		return 0
	}
	if s.DraftVersion < 2019 && s.Ref != nil {
		return g.universalKinds(s.Ref, depth+1)
	}
	if s.Enum != nil || s.Format != nil || s.RecursiveRef != nil || s.DynamicRef != nil || len(s.Extensions) > 0 {
		return 0
	}
	k := subschema.TypeAny
	if s.Types != nil {
		k &= subschema.TypesOf(s.Types)
	}
	if s.Ref != nil {
		k &= g.universalKinds(s.Ref, depth+1)
	}
	if s.Not != nil {
		k &^= g.staticKinds(s.Not, depth+1, "", nil)
	}
	for _, a := range s.AllOf {
		k &= g.universalKinds(a, depth+1)
	}
	if len(s.AnyOf) > 0 {
		var union subschema.Types
		for _, a := range s.AnyOf {
			union |= g.universalKinds(a, depth+1)
		}
		k &= union
	}
	switch len(s.OneOf) {
	case 0:
	case 1:
		k &= g.universalKinds(s.OneOf[0], depth+1)
	default:
		k = 0
	}
	if s.If != nil && (s.Then != nil || s.Else != nil) {
		k &= g.universalKinds(s.Then, depth+1) & g.universalKinds(s.Else, depth+1)
	}
	if s.MinLength != nil && *s.MinLength > 0 || s.MaxLength != nil || s.Pattern != nil ||
		s.ContentEncoding != nil || s.ContentMediaType != nil || s.ContentSchema != nil {
		k &^= subschema.TypeString
	}
	if s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil || s.MultipleOf != nil {
		k &^= subschema.TypeNumber
	}
	if s.MinProperties != nil && *s.MinProperties > 0 || s.MaxProperties != nil || len(s.Required) > 0 ||
		s.PropertyNames != nil || len(s.Properties) > 0 || len(s.PatternProperties) > 0 ||
		s.AdditionalProperties != nil && s.AdditionalProperties != true || len(s.Dependencies) > 0 ||
		len(s.DependentRequired) > 0 || len(s.DependentSchemas) > 0 || s.UnevaluatedProperties != nil {
		k &^= subschema.TypeObject
	}
	if s.MinItems != nil && *s.MinItems > 0 || s.MaxItems != nil || s.UniqueItems || s.Items != nil ||
		s.AdditionalItems != nil || len(s.PrefixItems) > 0 || s.Items2020 != nil || s.Contains != nil ||
		s.UnevaluatedItems != nil {
		k &^= subschema.TypeArray
	}
	return k
}

// numberKinds are the number kinds (integer, non-integer) some value within
// the bounds and multipleOf of s has.
func numberKinds(s *jsonschema.Schema) subschema.Types {
	lo, loEx := s.Minimum, false
	if x := s.ExclusiveMinimum; x != nil && (lo == nil || x.Cmp(lo) >= 0) {
		lo, loEx = x, true
	}
	hi, hiEx := s.Maximum, false
	if x := s.ExclusiveMaximum; x != nil && (hi == nil || x.Cmp(hi) <= 0) {
		hi, hiEx = x, true
	}
	if lo != nil && hi != nil {
		if c := lo.Cmp(hi); c > 0 || c == 0 && (loEx || hiEx) {
			return 0
		}
	}
	m := s.MultipleOf
	if m != nil && m.Sign() <= 0 {
		m = nil
	}
	var k subschema.Types
	// Integers: the integer multiples of p/q (in lowest terms) are the
	// multiples of p.
	step := big.NewRat(1, 1)
	if m != nil {
		step = new(big.Rat).SetInt(m.Num())
	}
	if n, bounded := multiples(lo, loEx, hi, hiEx, step); !bounded || n.Sign() > 0 {
		k |= subschema.TypeInteger
	}
	// Non-integers.
	switch {
	case m == nil:
		if lo == nil || hi == nil || lo.Cmp(hi) < 0 || !lo.IsInt() {
			k |= subschema.TypeFraction
		}
	case !m.Denom().IsInt64() || m.Denom().Int64() != 1:
		// k·m is an integer exactly when the denominator divides k; of two
		// consecutive multiples, one is not an integer.
		n, bounded := multiples(lo, loEx, hi, hiEx, m)
		switch {
		case !bounded || n.Cmp(big.NewInt(2)) >= 0:
			k |= subschema.TypeFraction
		case n.Sign() > 0:
			if first := ceilDiv(lo, m, loEx); new(big.Int).Mod(first, m.Denom()).Sign() != 0 {
				k |= subschema.TypeFraction
			}
		}
	}
	return k
}

// multiples counts the multiples of step between lo and hi (nil: unbounded,
// then bounded is false).
func multiples(lo *big.Rat, loEx bool, hi *big.Rat, hiEx bool, step *big.Rat) (n *big.Int, bounded bool) {
	if lo == nil || hi == nil {
		return nil, false
	}
	first := ceilDiv(lo, step, loEx)
	last := floorDiv(hi, step, hiEx)
	n = new(big.Int).Sub(last, first)
	n.Add(n, big.NewInt(1))
	if n.Sign() < 0 {
		n.SetInt64(0)
	}
	return n, true
}

// floorDiv is the greatest integer j with j·step <= x (< x when exclusive).
func floorDiv(x, step *big.Rat, exclusive bool) *big.Int {
	q := new(big.Rat).Quo(x, step)
	j := new(big.Int).Div(q.Num(), q.Denom()) // Euclidean: the floor, as Denom > 0
	if exclusive && q.IsInt() {
		j.Sub(j, big.NewInt(1))
	}
	return j
}

// ceilDiv is the least integer j with j·step >= x (> x when exclusive).
func ceilDiv(x, step *big.Rat, exclusive bool) *big.Int {
	neg := new(big.Rat).Neg(x)
	j := floorDiv(neg, step, exclusive)
	return j.Neg(j)
}

// explainFrom says why node start has no kinds: it follows the causes
// from start down to the first one that is not an unsatisfiable subschema,
// or to a subschema already on the way (a loop).
func (g *satGraph) explainFrom(start int) error {
	var via []string
	onPath := map[int]int{} // node -> index in via when it was entered
	consumed := []bool{}
	i := start
	for depth := 0; ; depth++ {
		onPath[i] = len(via)
		var c cause
		g.eval(i, &c)
		if c.child < 0 || depth > len(g.nodes) {
			return satError(c, via)
		}
		via = append(via, fmt.Sprintf("%s at %s", c.keyword, render.Path(c.loc)))
		consumed = append(consumed, c.consumes)
		if at, loop := onPath[c.child]; loop {
			deep := slices.Contains(consumed[at:], true)
			c.reason = fmt.Sprintf("%s refers back to %s without consuming any part of the value", c.keyword, render.Path(g.nodes[c.child].loc))
			if deep {
				c.reason = fmt.Sprintf("%s refers back to %s, which only an infinitely deep value could satisfy", c.keyword, render.Path(g.nodes[c.child].loc))
			}
			return satError(c, via[:len(via)-1])
		}
		i = c.child
	}
}

// satViaMax is the most steps of the way to a cause an error lists; the
// rest are elided in the middle. satViaBytes bounds the list.
const (
	satViaMax   = 8
	satViaBytes = 1 << 10
)

// satError builds the error for a cause reached through the steps via.
func satError(c cause, via []string) error {
	reason := c.reason
	if len(via) > satViaMax {
		short := append(via[:satViaMax/2:satViaMax/2], fmt.Sprintf("%d more", len(via)-satViaMax))
		via = append(short, via[len(via)-satViaMax/2:]...)
	}
	if len(via) > 0 {
		reason += " (via " + render.Shorten(strings.Join(via, ", "), satViaBytes) + ")"
	}
	return &Error{Keyword: c.keyword, Location: c.loc, Err: fmt.Errorf("%w: %s", ErrUnsatisfiable, reason)}
}
