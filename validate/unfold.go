package validate

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxUnfolded bounds how many subschemas one value can be checked against
// along one path from the root to a leaf, each reference replaced by what
// it names (cycles counted once): at one place in the value every
// applicator there (anyOf, oneOf, allOf, $ref, not, if/then/else) adds up,
// and the deepest child place counts once (a wide schema, 3,000
// properties each a $ref to a 55-node definition, is not a slow one).
// Levels of "anyOf": [{"$ref": next}, {"$ref": next}] double at each level:
// 22 of them took 34 s and 4.4 GB to check one wrong reply.
const MaxUnfolded = 100_000

// unfolded returns how many subschemas s unfolds to along its costliest
// path (see MaxUnfolded), counting at most to limit+1.
func unfolded(g *schemaGraph, limit int) int {
	memo := map[*jsonschema.Schema]int{}
	const inProgress = -1
	var size func(s *jsonschema.Schema) int
	size = func(s *jsonschema.Schema) int {
		if s == nil {
			return 0
		}
		switch n, ok := memo[s]; {
		case ok && n == inProgress:
			return 0 // a cycle: recursion is bounded by the value's depth
		case ok:
			return n
		}
		memo[s] = inProgress
		n := 1
		// Applicators at this place in the value: they add up.
		for _, sub := range g.inPlace(s) {
			if n <= limit {
				n += size(sub)
			}
		}
		// Schemas of the value's children: the costliest one counts.
		deepest := 0
		for _, sub := range allChildren(s) {
			if deepest <= limit {
				deepest = max(deepest, size(sub))
			}
		}
		n = min(n+deepest, limit+1)
		memo[s] = n
		return n
	}
	return size(g.root)
}

// treeSize returns how many subschemas s unfolds to with every reference
// replaced by what it names and every path counted (at most limit+1): the
// applicators at one place add up, and so do the schemas of every kind of
// child (properties, items, contains, unevaluated...), as a member may
// match several. No place in a value is checked against more. It returns
// 0 when s recurses: then no size bounds a place's checks.
func treeSize(g *schemaGraph, limit int) int {
	memo := map[*jsonschema.Schema]int{}
	const inProgress = -1
	recurses := false
	var size func(s *jsonschema.Schema) int
	size = func(s *jsonschema.Schema) int {
		if s == nil || recurses {
			return 0
		}
		switch n, ok := memo[s]; {
		case ok && n == inProgress:
			recurses = true
			return 0
		case ok:
			return n
		}
		memo[s] = inProgress
		n := checkWeight(s)
		for _, sub := range append(g.inPlace(s), allChildren(s)...) {
			n = min(n+size(sub), limit+1)
		}
		memo[s] = n
		return n
	}
	n := size(g.root)
	if recurses {
		return 0
	}
	return n
}
