package validate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxCopies bounds how many subschemas one place in a value may be checked
// against when a schema's recursion branches: "anyOf" of two object shapes
// that each $ref the same definition for their children check a value
// nested d levels deep against 2^d copies of it at the bottom, and a
// 100-byte reply nested 20 levels took a worker 44 s and 6 GB before it ran
// out of memory. A value nested deeper than the schema can check within
// this bound is refused (keyword "maxDepth", see Schema.MaxDepth) instead
// of being checked.
const MaxCopies = 4096

// recursionLimit returns how deeply a value may nest before one place in
// it is checked against more than MaxCopies subschemas, or 0 when no depth
// reaches that (the schema does not recurse, or its recursion does not
// branch). It follows the value's worst key at every level: for each place
// it counts the subschemas every applicator there (allOf, anyOf, oneOf,
// $ref, not, if/then/else, dependentSchemas) adds, and the child schemas
// each of them gives a child of that key (properties, patternProperties,
// additionalProperties, items, prefixItems, contains, and the unevaluated
// keywords, which are counted as if they always applied). A schema too
// wide and recursive to follow within a million steps is not limited.
func recursionLimit(root *jsonschema.Schema) int {
	if root == nil || !recursive(root) {
		return 0
	}
	a := newRecursion(root)
	// Each state is the copies of subschemas one place in the value is
	// checked against (those that have children to give: a bare $ref
	// gives its target's); every key a child may have gives the next
	// level's. Places reached by different keys are different places:
	// their copies do not add up.
	expand := func(count map[*jsonschema.Schema]int) (map[*jsonschema.Schema]int, int) {
		state := map[*jsonschema.Schema]int{}
		total := 0
		for c, n := range count {
			for y, m := range a.closure(c) {
				total = sat(total + sat(n*m))
				if a.hasChildren(y) {
					state[y] = sat(state[y] + sat(n*m))
				}
			}
		}
		return state, total
	}
	first, _ := expand(map[*jsonschema.Schema]int{root: 1})
	states := []map[*jsonschema.Schema]int{first}
	prev := ""
	const (
		maxLevels = 64  // enough to tell growth that doubles from growth that adds
		maxStates = 256 // the costliest kept, should a schema have more
	)
	work := 0
	for depth := 1; depth <= maxLevels && len(states) > 0; depth++ {
		if work += len(states) * len(a.keys); work > 1_000_000 {
			// A schema this wide and this recursive is not analysed
			// further (it would cost more than it guards).
			return 0
		}
		seen := map[string]bool{}
		var next []map[*jsonschema.Schema]int
		var totals []int
		for _, v := range states {
			for k := range a.keys {
				count := map[*jsonschema.Schema]int{}
				for x, n := range v {
					for _, c := range a.childrenOf(x, k) {
						count[c] = sat(count[c] + n)
					}
				}
				if len(count) == 0 {
					continue
				}
				state, total := expand(count)
				if total > MaxCopies {
					return max(depth-1, 1)
				}
				id := a.id(state)
				if len(state) == 0 || seen[id] {
					continue
				}
				seen[id] = true
				next = append(next, state)
				totals = append(totals, total)
			}
		}
		if len(next) > maxStates {
			order := make([]int, len(next))
			for i := range order {
				order[i] = i
			}
			slices.SortFunc(order, func(i, j int) int { return totals[j] - totals[i] })
			kept := make([]map[*jsonschema.Schema]int, maxStates)
			for i := range kept {
				kept[i] = next[order[i]]
			}
			next = kept
		}
		ids := make([]string, len(next))
		for i, v := range next {
			ids[i] = a.id(v)
		}
		slices.Sort(ids)
		now := strings.Join(ids, ";")
		if now == prev {
			return 0 // the same at every level from here: it does not grow
		}
		prev, states = now, next
	}
	return 0
}

// sat caps a count, so that products of counts cannot overflow.
func sat(n int) int { return min(n, 1<<30) }

// recursive reports whether some subschema of root can be reached from
// itself: only then can checking a value cost more than its size times
// the schema's.
func recursive(root *jsonschema.Schema) bool {
	const (
		open = 1
		done = 2
	)
	state := map[*jsonschema.Schema]int{}
	var visit func(s *jsonschema.Schema) bool
	visit = func(s *jsonschema.Schema) bool {
		if s == nil {
			return false
		}
		switch state[s] {
		case open:
			return true
		case done:
			return false
		}
		state[s] = open
		for _, sub := range append(inPlace(s), allChildren(s)...) {
			if visit(sub) {
				return true
			}
		}
		state[s] = done
		return false
	}
	return visit(root)
}

// inPlace returns the subschemas s applies to the same place in a value.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
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

type recursion struct {
	keys    []childKey
	closure func(s *jsonschema.Schema) map[*jsonschema.Schema]int
	ids     map[*jsonschema.Schema]int // each subschema's number, for id
	kids    map[*jsonschema.Schema][][]*jsonschema.Schema
	// productive says which subschemas have children to give.
	productive map[*jsonschema.Schema]bool
}

// hasChildren reports whether s applies a subschema to a child.
func (a *recursion) hasChildren(s *jsonschema.Schema) bool {
	has, ok := a.productive[s]
	if !ok {
		has = len(allChildren(s)) > 0
		a.productive[s] = has
	}
	return has
}

// childrenOf is children for the key numbered k, remembered.
func (a *recursion) childrenOf(s *jsonschema.Schema, k int) []*jsonschema.Schema {
	byKey, ok := a.kids[s]
	if !ok {
		byKey = make([][]*jsonschema.Schema, len(a.keys))
		for i, key := range a.keys {
			byKey[i] = a.children(s, key)
		}
		a.kids[s] = byKey
	}
	return byKey[k]
}

// id names a state: its subschemas' numbers and counts, in order.
func (a *recursion) id(v map[*jsonschema.Schema]int) string {
	parts := make([]string, 0, len(v))
	for s, n := range v {
		num, ok := a.ids[s]
		if !ok {
			num = len(a.ids)
			a.ids[s] = num
		}
		parts = append(parts, fmt.Sprintf("%d:%d", num, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func newRecursion(root *jsonschema.Schema) *recursion {
	names := map[string]bool{}
	prefix := 0
	seen := map[*jsonschema.Schema]bool{}
	var collect func(s *jsonschema.Schema)
	collect = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		for k := range s.Properties {
			names[k] = true
		}
		prefix = max(prefix, len(s.PrefixItems))
		if items, ok := s.Items.([]*jsonschema.Schema); ok {
			prefix = max(prefix, len(items))
		}
		for _, sub := range append(inPlace(s), allChildren(s)...) {
			collect(sub)
		}
	}
	collect(root)
	a := &recursion{ids: map[*jsonschema.Schema]int{}, kids: map[*jsonschema.Schema][][]*jsonschema.Schema{},
		productive: map[*jsonschema.Schema]bool{}}
	for _, n := range sortedKeys(names) {
		a.keys = append(a.keys, childKey{name: n, at: -1})
	}
	a.keys = append(a.keys, childKey{at: -1})
	for i := range prefix {
		a.keys = append(a.keys, childKey{item: true, at: i})
	}
	a.keys = append(a.keys, childKey{item: true, at: -1})

	memo := map[*jsonschema.Schema]map[*jsonschema.Schema]int{}
	onStack := map[*jsonschema.Schema]bool{}
	var closure func(s *jsonschema.Schema) map[*jsonschema.Schema]int
	closure = func(s *jsonschema.Schema) map[*jsonschema.Schema]int {
		if m, ok := memo[s]; ok {
			return m
		}
		out := map[*jsonschema.Schema]int{s: 1}
		onStack[s] = true
		for _, sub := range inPlace(s) {
			if onStack[sub] {
				continue // a cycle in place: the library refuses it or stops it
			}
			for x, n := range closure(sub) {
				out[x] = sat(out[x] + n)
			}
		}
		onStack[s] = false
		memo[s] = out
		return out
	}
	a.closure = closure
	return a
}

// children returns the subschemas s applies to a child of kind key.
func (a *recursion) children(s *jsonschema.Schema, key childKey) []*jsonschema.Schema {
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
			if key.name == "" || re.MatchString(key.name) {
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
