package subschema

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint/ecma"
	"github.com/fixpoint-dev/fixpoint/extract"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Cost estimates the checks validating a value makes, following the
// value: at each place the subschemas every applicator there (allOf, anyOf,
// oneOf, $ref, not, if/then/else, dependentSchemas) adds, and for each
// child the subschemas they give a child of its key (properties,
// patternProperties, additionalProperties, items, prefixItems, contains,
// and the unevaluated keywords, counted as if they always applied). It is
// read-only once built: one compiled schema is shared.
type Cost struct {
	g          *Graph
	keys       []childKey
	names      map[string]int // a declared property name's key
	other      int            // the key of any other property name
	items      []int          // the key of an item at a position prefixItems names
	rest       int            // the key of any other item
	root       map[*jsonschema.Schema]int
	rootChecks int
}

// NewCost returns the estimate of the checks of g's root.
func NewCost(g *Graph) *Cost {
	names := map[string]bool{}
	prefix := 0
	for _, s := range g.nodes {
		for k := range s.Properties {
			names[k] = true
		}
		prefix = max(prefix, len(s.PrefixItems))
		if items, ok := s.Items.([]*jsonschema.Schema); ok {
			prefix = max(prefix, len(items))
		}
	}
	c := &Cost{g: g, names: map[string]int{}}
	for _, n := range sortedKeys(names) {
		c.names[n] = len(c.keys)
		c.keys = append(c.keys, childKey{name: n, at: -1})
	}
	c.other = len(c.keys)
	c.keys = append(c.keys, childKey{at: -1})
	for i := range prefix {
		c.items = append(c.items, len(c.keys))
		c.keys = append(c.keys, childKey{item: true, at: i})
	}
	c.rest = len(c.keys)
	c.keys = append(c.keys, childKey{item: true, at: -1})
	c.root, c.rootChecks = c.expand(map[*jsonschema.Schema]int{g.root: 1})
	return c
}

// expand returns the subschemas with children among what the subschemas
// counted apply at their place, each counted once for every chain of
// applicators that reaches it, and how many checks they all make there.
// The counts flow down the applicators in topological order, so a shared
// definition costs its edges once, not once a path; a cycle in place is
// cut (the library refuses it or stops it).
func (c *Cost) expand(count map[*jsonschema.Schema]int) (map[*jsonschema.Schema]int, int) {
	const (
		open = 1
		done = 2
	)
	mark := map[*jsonschema.Schema]int{}
	var order []*jsonschema.Schema // each subschema after those it applies
	var visit func(s *jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		mark[s] = open
		for _, sub := range c.g.inPlace(s) {
			if mark[sub] == 0 {
				visit(sub)
			}
		}
		mark[s] = done
		order = append(order, s)
	}
	starts := make([]*jsonschema.Schema, 0, len(count))
	for s := range count {
		starts = append(starts, s)
	}
	slices.SortFunc(starts, func(a, b *jsonschema.Schema) int { return strings.Compare(a.Location, b.Location) })
	for _, s := range starts {
		if mark[s] == 0 {
			visit(s)
		}
	}
	acc := maps.Clone(count)
	state := map[*jsonschema.Schema]int{}
	checks := 0
	for i := len(order) - 1; i >= 0; i-- {
		s := order[i]
		n := acc[s]
		if n == 0 {
			continue
		}
		checks = sat(checks + sat(n*checkWeight(s)))
		if c.g.productive[s] {
			state[s] = n
		}
		for _, sub := range c.g.inPlace(s) {
			// A subschema already passed is one of a cycle: cut.
			acc[sub] = sat(acc[sub] + n)
		}
	}
	return state, checks
}

// child returns the state and checks of a child of key k of a place in
// state.
func (c *Cost) child(state map[*jsonschema.Schema]int, k int) (map[*jsonschema.Schema]int, int) {
	count := map[*jsonschema.Schema]int{}
	for x, n := range state {
		for _, sub := range children(x, c.keys[k]) {
			count[sub] = sat(count[sub] + n)
		}
	}
	return c.expand(count)
}

// Estimate returns the checks validating v makes, counted until they pass
// limit, and the pointer of the place where they do.
func (c *Cost) Estimate(v any, limit int) (string, int) {
	total := c.rootChecks
	var path []string // the tokens of the place walked
	var walk func(v any, state *walkState) bool
	// child counts the checks of child e of key k under tok, and walks it;
	// true once they pass limit, path then holding its place.
	child := func(state *walkState, k int, tok string, e any) bool {
		next := c.step(state, k)
		total = sat(total + next.checks)
		if path = append(path, tok); total > limit || walk(e, next.state) {
			return true
		}
		path = path[:len(path)-1]
		return false
	}
	walk = func(v any, state *walkState) bool {
		if len(state.count) == 0 {
			return false
		}
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				key, ok := c.names[k]
				if !ok {
					key = c.other
				}
				if child(state, key, extract.PointerToken(k), x[k]) {
					return true
				}
			}
		case []any:
			for i, e := range x {
				key := c.rest
				if i < len(c.items) {
					key = c.items[i]
				}
				if child(state, key, strconv.Itoa(i), e) {
					return true
				}
			}
		}
		return false
	}
	if total > limit || !walk(v, &walkState{count: c.root}) {
		return "", total
	}
	return "/" + strings.Join(path, "/"), total
}

// walkState is a state of one estimate's walk: the subschemas counted at a
// place, and the steps to its children found so far, so that the items of
// an array, and their members, share them.
type walkState struct {
	count map[*jsonschema.Schema]int
	steps map[int]walkStep
}

type walkStep struct {
	state  *walkState
	checks int
}

// step returns the state and checks of a child of key k of a place in s.
func (c *Cost) step(s *walkState, k int) walkStep {
	if st, ok := s.steps[k]; ok {
		return st
	}
	next, n := c.child(s.count, k)
	st := walkStep{&walkState{count: next}, n}
	if s.steps == nil {
		s.steps = map[int]walkStep{}
	}
	s.steps[k] = st
	return st
}

// checkWeight is what checking a value against s counts for: 1, and an
// enum's scan of its values (the library compares them one by one: a
// 10,000-value enum under "items" took 31 s over 250,000 items, each
// comparison some 12 ns where a subschema's check is a microsecond or more).
func checkWeight(s *jsonschema.Schema) int {
	w := 1
	if s.Enum != nil {
		w += len(s.Enum.Values) / 128
	}
	return w
}

// sat caps a count, so that products of counts cannot overflow.
func sat(n int) int { return min(n, 1<<30) }

// Graph is a compiled schema's subschemas and what each applies to
// the same place in a value, with what a dynamic reference may resolve to.
// The check-cost estimate, the unfolding bound and the satisfiability
// check all read it. It is read-only once built.
type Graph struct {
	root       *jsonschema.Schema
	nodes      []*jsonschema.Schema // every subschema reachable, root first
	productive map[*jsonschema.Schema]bool
	// outerDynamic and outerRecursive are where a $dynamicRef of each
	// anchor and a $recursiveRef resolve: the declarers reachable from the
	// root without passing another (see outermost), or the root's own.
	outerDynamic   map[string][]*jsonschema.Schema
	outerRecursive []*jsonschema.Schema
}

// NewGraph returns the graph of root, the schema document doc compiled
// with c under URL. It first compiles with c every subschema of doc that
// holds a reference, so that an unused "$defs" entry cannot hide one the
// library refuses (its error is returned as the library gave it), and
// every subschema declaring a dynamic or recursive anchor, where a dynamic
// reference may resolve. draft is the draft of a schema without "$schema"
// (nil: 2020-12).
func NewGraph(c *jsonschema.Compiler, root *jsonschema.Schema, doc any, draft *jsonschema.Draft) (*Graph, error) {
	version := docVersion(doc, versionOf(draft, 2020))
	if err := compileRefs(c, doc, version); err != nil {
		return nil, err
	}
	extra, inRoot := compileDeclarers(c, doc, version)
	return newSchemaGraph(root, inRoot, extra...), nil
}

// Nodes returns every subschema the graph holds, the root first. It must
// not be modified.
func (g *Graph) Nodes() []*jsonschema.Schema { return g.nodes }

// outermost returns the subschemas is holds for that the root reaches
// without passing another: a dynamic reference resolves to the outermost
// resource of its dynamic scope declaring the anchor, the first declarer
// on the path from the root, so one of these.
func (g *Graph) outermost(is func(*jsonschema.Schema) bool) []*jsonschema.Schema {
	seen := map[*jsonschema.Schema]bool{}
	var out []*jsonschema.Schema
	var walk func(s *jsonschema.Schema)
	walk = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		if is(s) {
			out = append(out, s)
			return
		}
		for _, sub := range append(staticInPlace(s), allChildren(s)...) {
			walk(sub)
		}
	}
	walk(g.root)
	return out
}

// newSchemaGraph returns the graph of root and of declarers, the
// subschemas that declare a dynamic or recursive anchor, reachable from
// root or not: a dynamic reference may resolve to one in the root's
// "$defs" that nothing refers to. inRootResource holds those in the root's
// schema resource (under no other "$id").
func newSchemaGraph(root *jsonschema.Schema, inRootResource map[*jsonschema.Schema]bool, declarers ...*jsonschema.Schema) *Graph {
	g := &Graph{root: root, productive: map[*jsonschema.Schema]bool{}}
	dynamic := map[string][]*jsonschema.Schema{} // the declarers of each $dynamicAnchor
	var recursive []*jsonschema.Schema           // those of "$recursiveAnchor": true
	seen := map[*jsonschema.Schema]bool{}
	var collect func(s *jsonschema.Schema)
	collect = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		g.nodes = append(g.nodes, s)
		if s.DynamicAnchor != "" {
			dynamic[s.DynamicAnchor] = append(dynamic[s.DynamicAnchor], s)
		}
		if s.RecursiveAnchor {
			recursive = append(recursive, s)
		}
		kids := allChildren(s)
		g.productive[s] = len(kids) > 0
		for _, sub := range append(staticInPlace(s), kids...) {
			collect(sub)
		}
	}
	collect(root)
	for _, d := range declarers {
		collect(d)
	}
	// The root's resource opens every dynamic scope: an anchor it declares,
	// anywhere in it, is where the reference resolves. Otherwise one of
	// the declarers the root reaches first is.
	inRoot := func(is func(*jsonschema.Schema) bool, among []*jsonschema.Schema) []*jsonschema.Schema {
		for _, d := range among {
			if d == root || inRootResource[d] {
				return []*jsonschema.Schema{d}
			}
		}
		return g.outermost(is)
	}
	g.outerDynamic = map[string][]*jsonschema.Schema{}
	for anchor, among := range dynamic {
		g.outerDynamic[anchor] = inRoot(func(s *jsonschema.Schema) bool { return s.DynamicAnchor == anchor }, among)
	}
	if len(recursive) > 0 {
		g.outerRecursive = inRoot(func(s *jsonschema.Schema) bool { return s.RecursiveAnchor }, recursive)
	}
	return g
}

// compileRefs compiles every subschema of doc holding a reference: the
// library compiles only what the root reaches, and an unused "$defs" entry
// must not hide an external reference.
func compileRefs(c *jsonschema.Compiler, doc any, version int) error {
	var refErr error
	walkDoc(doc, version, func(n Node) bool {
		for _, kw := range refKeywords[:3] {
			if _, ok := n.Object()[kw].(string); ok && refErr == nil {
				if _, err := c.Compile(URL + "#" + encodeFragment(n.Ptr)); err != nil {
					refErr = err
				}
				break
			}
		}
		return refErr == nil
	})
	return refErr
}

// compileDeclarers compiles every subschema of doc declaring a dynamic or
// recursive anchor: a dynamic reference may resolve to one nothing refers
// to (see newSchemaGraph), and its cost is counted. inRoot holds those in
// the root's schema resource (under no other "$id").
func compileDeclarers(c *jsonschema.Compiler, doc any, version int) (declarers []*jsonschema.Schema, inRoot map[*jsonschema.Schema]bool) {
	inRoot = map[*jsonschema.Schema]bool{}
	rootBase := ""
	walkDoc(doc, version, func(n Node) bool {
		if n.Ptr == "" {
			rootBase = n.Base
		}
		obj := n.Object()
		_, dyn := obj["$dynamicAnchor"].(string)
		if rec, _ := obj["$recursiveAnchor"].(bool); !dyn && !rec {
			return true
		}
		d, err := c.Compile(URL + "#" + encodeFragment(n.Ptr))
		if err != nil {
			return true
		}
		declarers = append(declarers, d)
		if n.Base == rootBase {
			inRoot[d] = true
		}
		return true
	})
	return declarers, inRoot
}

// inPlace returns the subschemas s applies to the same place in a value. A
// dynamic reference whose static target declares its anchor resolves to the
// outermost schema resource of the dynamic scope declaring it, which is one
// of those the root reaches first (outermost): the root itself when it
// declares the anchor. Counting the static target and every declarer
// besides refused valid trees 12 to 17 levels deep, each level counted two
// or three times, that check in milliseconds.
func (g *Graph) inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := staticInPlace(s)
	swap := func(static *jsonschema.Schema, targets []*jsonschema.Schema) {
		if len(targets) == 0 {
			return // the static target, then
		}
		if i := slices.Index(out, static); i >= 0 {
			out = slices.Delete(out, i, i+1)
		}
		out = append(out, targets...)
	}
	if d := s.DynamicRef; d != nil && d.Ref != nil && d.Anchor != "" && d.Ref.DynamicAnchor == d.Anchor {
		swap(d.Ref, g.outerDynamic[d.Anchor])
	}
	if r := s.RecursiveRef; r != nil && r.RecursiveAnchor {
		swap(r, g.outerRecursive)
	}
	return out
}

// staticInPlace returns the subschemas s applies to the same place in a
// value, a dynamic reference's static target only.
func staticInPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, k := range sortedKeys(s.DependentSchemas) {
		out = append(out, s.DependentSchemas[k])
	}
	for _, k := range sortedKeys(s.Dependencies) {
		if sub, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			out = append(out, sub)
		}
	}
	return slices.DeleteFunc(out, func(x *jsonschema.Schema) bool { return x == nil })
}

// allChildren returns every subschema s applies to a child of the value.
func allChildren(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	out = append(out, s.PrefixItems...)
	for _, k := range sortedKeys(s.Properties) {
		out = append(out, s.Properties[k])
	}
	for _, sub := range s.PatternProperties {
		out = append(out, sub)
	}
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch x := v.(type) {
		case *jsonschema.Schema:
			out = append(out, x)
		case []*jsonschema.Schema:
			out = append(out, x...)
		}
	}
	return slices.DeleteFunc(out, func(x *jsonschema.Schema) bool { return x == nil })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// childKey is the kind of child a value has: a property of a name the
// schema declares, any other property, an item at a position some
// prefixItems names, or any other item.
type childKey struct {
	item bool
	name string // a declared property name; "" any other
	at   int    // an item's position; -1 any other
}

// children returns the subschemas s applies to a child of kind key.
func children(s *jsonschema.Schema, key childKey) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	add := func(subs ...*jsonschema.Schema) {
		for _, x := range subs {
			if x != nil {
				out = append(out, x)
			}
		}
	}
	addAny := func(v any) {
		if x, ok := v.(*jsonschema.Schema); ok {
			add(x)
		}
	}
	if !key.item {
		matched := false
		if key.name != "" {
			if sub, ok := s.Properties[key.name]; ok {
				add(sub)
				matched = true
			}
		}
		for re, sub := range s.PatternProperties {
			// A name no property declares may match any pattern.
			// A match out of time counts as one: the estimate must not
			// fall short.
			if key.name == "" || ecma.MatchOr(re, key.name, true) {
				add(sub)
				matched = true
			}
		}
		if !matched || key.name == "" {
			addAny(s.AdditionalProperties)
		}
		add(s.UnevaluatedProperties)
		return out
	}
	switch items := s.Items.(type) {
	case []*jsonschema.Schema: // draft-07 tuple form
		if key.at >= 0 && key.at < len(items) {
			add(items[key.at])
		} else {
			addAny(s.AdditionalItems)
		}
	case *jsonschema.Schema:
		add(items)
	}
	if key.at >= 0 && key.at < len(s.PrefixItems) {
		add(s.PrefixItems[key.at])
	} else {
		add(s.Items2020)
	}
	add(s.Contains, s.UnevaluatedItems)
	return out
}
