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
// holding prop and not yet claimed by another such error of this walk (two
// objects at one depth may both fail on the same name). Of several, the one
// agreeing most with the recorded tokens wins, then the first in key order.
func (f *flattener) propertyNamesLocation(recorded []string, prop string) []string {
	anchor := f.anchor
	if len(anchor) > len(recorded) {
		anchor = nil
	}
	var best []string
	bestScore := -1
	var visit func(v any, loc []string)
	visit = func(v any, loc []string) {
		if len(loc) == len(recorded) {
			obj, ok := v.(map[string]any)
			if !ok {
				return
			}
			if _, has := obj[prop]; !has || f.claimed[claimKey(loc, prop)] {
				return
			}
			score := 0
			for i := range loc {
				if loc[i] == recorded[i] {
					score++
				}
			}
			if score > bestScore {
				best, bestScore = slices.Clone(loc), score
			}
			return
		}
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				visit(x[k], append(loc, k))
			}
		case []any:
			for i, item := range x {
				visit(item, append(loc, strconv.Itoa(i)))
			}
		}
	}
	visit(lookup(f.root, anchor), slices.Clone(anchor))
	if best == nil {
		return recorded
	}
	if f.claimed == nil {
		f.claimed = map[string]bool{}
	}
	f.claimed[claimKey(best, prop)] = true
	return best
}

func claimKey(loc []string, prop string) string {
	return pointer(append(slices.Clone(loc), prop))
}
