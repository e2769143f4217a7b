package validate

import (
	"slices"
	"strconv"
)

// propertyNamesLocation returns the location of the object one of whose
// property names, prop, failed "propertyNames". The schema library
// (santhosh-tekuri/jsonschema v6.0.3) records that error's location
// without copying it from the stack it validates with, so the properties
// it goes on to validate overwrite it: {"bb": {"yyy": 1}, "cc": 1}, with
// "propertyNames" under "bb", was reported at /cc, and a bad pattern in
// "patternProperties" at some other keyword of the schema. The recorded
// location keeps its length; the object is found again in the value at
// that depth under f.anchor (the nearest location the library did copy),
// holding prop and not yet taken by another such error of this walk (many
// objects may fail on the same name). The recorded location itself wins if
// it is one; else, of the next few in order, the one agreeing most with the
// recorded tokens.
func (f *flattener) propertyNamesLocation(recorded []string, prop string) []string {
	anchor := f.anchor
	if len(anchor) > len(recorded) {
		anchor = nil
	}
	c := f.propertyHolders(anchor, len(recorded))[prop]
	if c == nil {
		return recorded
	}
	if i, ok := c.index[pointer(recorded)]; ok && !c.taken[i] {
		return c.take(i)
	}
	best, bestScore := -1, -1
	seen := 0
	for i := c.next; i < len(c.locs) && seen < propertyNamesWindow; i++ {
		if c.taken[i] {
			continue
		}
		seen++
		score := 0
		for j, tok := range c.locs[i] {
			if tok == recorded[j] {
				score++
			}
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		return recorded
	}
	return c.take(best)
}

// propertyNamesWindow bounds the candidates one error is compared with, so
// that many errors cost linear time.
const propertyNamesWindow = 64

// holders lists, in key order, the locations of the objects at one depth
// that hold one property name.
type holders struct {
	locs  [][]string
	index map[string]int // pointer -> position in locs
	taken []bool
	next  int // no position before it is free
}

func (c *holders) take(i int) []string {
	c.taken[i] = true
	for c.next < len(c.locs) && c.taken[c.next] {
		c.next++
	}
	return c.locs[i]
}

// propertyHolders returns, by property name, the objects at the given
// depth under anchor, built once per anchor and depth.
func (f *flattener) propertyHolders(anchor []string, depth int) map[string]*holders {
	key := pointer(anchor) + "\x00" + strconv.Itoa(depth)
	if m, ok := f.holderIndex[key]; ok {
		return m
	}
	m := map[string]*holders{}
	var visit func(v any, loc []string)
	visit = func(v any, loc []string) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if len(loc) == depth {
				at := slices.Clone(loc)
				ptr := pointer(at)
				for _, k := range keys {
					c := m[k]
					if c == nil {
						c = &holders{index: map[string]int{}}
						m[k] = c
					}
					c.index[ptr] = len(c.locs)
					c.locs = append(c.locs, at)
					c.taken = append(c.taken, false)
				}
				return
			}
			for _, k := range keys {
				visit(x[k], append(loc, k))
			}
		case []any:
			if len(loc) == depth {
				return
			}
			for i, item := range x {
				visit(item, append(loc, strconv.Itoa(i)))
			}
		}
	}
	visit(lookup(f.root, anchor), slices.Clone(anchor))
	if f.holderIndex == nil {
		f.holderIndex = map[string]map[string]*holders{}
	}
	f.holderIndex[key] = m
	return m
}
