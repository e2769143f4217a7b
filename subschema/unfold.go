package subschema

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Unfolded returns how many subschemas g's root unfolds to along its
// costliest path, counting at most to limit+1: how many one value can be
// checked against along one path from the root to a leaf, each reference
// replaced by what it names (cycles counted once). At one place in the
// value every applicator there (anyOf, oneOf, allOf, $ref, not,
// if/then/else) adds up, and the deepest child place counts once.
func Unfolded(g *Graph, limit int) int {
	n, _ := fold(g, func(s *jsonschema.Schema, size func(*jsonschema.Schema) int) int {
		// Applicators at this place in the value: they add up.
		n := 1
		for _, sub := range g.inPlace(s) {
			n = min(n+size(sub), limit+1)
		}
		// Schemas of the value's children: the costliest one counts.
		deepest := 0
		for _, sub := range allChildren(s) {
			deepest = max(deepest, size(sub))
		}
		return min(n+deepest, limit+1)
	})
	return n
}

// TreeSize returns how many subschemas g's root unfolds to with every reference
// replaced by what it names and every path counted (at most limit+1): the
// applicators at one place add up, and so do the schemas of every kind of
// child (properties, items, contains, unevaluated...), as a member may
// match several. No place in a value is checked against more. It returns
// 0 when s recurses: then no size bounds a place's checks.
func TreeSize(g *Graph, limit int) int {
	n, cyclic := fold(g, func(s *jsonschema.Schema, size func(*jsonschema.Schema) int) int {
		n := checkWeight(s)
		for _, sub := range append(g.inPlace(s), allChildren(s)...) {
			n = min(n+size(sub), limit+1)
		}
		return n
	})
	if cyclic {
		return 0
	}
	return n
}

// fold returns the size of g's root, computing the size of each subschema
// once, from the sizes of those it names. A subschema met again on its own
// path, a cycle, counts 0 there (the value's depth bounds the recursion),
// and cyclic says one was met.
func fold(g *Graph, of func(s *jsonschema.Schema, size func(*jsonschema.Schema) int) int) (n int, cyclic bool) {
	memo := map[*jsonschema.Schema]int{}
	const inProgress = -1
	var size func(s *jsonschema.Schema) int
	size = func(s *jsonschema.Schema) int {
		if s == nil {
			return 0
		}
		switch n, ok := memo[s]; {
		case ok && n == inProgress:
			cyclic = true
			return 0
		case ok:
			return n
		}
		memo[s] = inProgress
		n := of(s, size)
		memo[s] = n
		return n
	}
	return size(g.root), cyclic
}
