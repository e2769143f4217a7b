package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// mergeValues reads the chunk values of a merge request (a parallel job's
// merge by a model): the lines between fixpoint.MergeValuesOpen and
// MergeValuesClose, each a JSON object with the chunk's "part" and its
// "value", in the order of their parts; nil when the text has none.
func mergeValues(text string) []any {
	inner, ok := between(text, fixpoint.MergeValuesOpen, fixpoint.MergeValuesClose)
	if !ok {
		return nil
	}
	type part struct {
		n     int
		value any
	}
	var parts []part
	for line := range strings.Lines(inner) {
		obj, ok := decodeNumbers([]byte(line)).(map[string]any)
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(fmt.Sprint(obj["part"]))
		if v, has := obj["value"]; has {
			parts = append(parts, part{n, v})
		}
	}
	slices.SortStableFunc(parts, func(a, b part) int { return cmp.Compare(a.n, b.n) })
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p.value
	}
	return out
}

// mergeChunks makes the truth of a merge request the chunk values merged
// as a model asked to merge them writes it (see mergeAll); the reply's
// faults are then drawn on that truth as on any. Copying values given as
// JSON is not extracting them: no list cut applies.
func (t *task) mergeChunks(values []any) {
	if len(values) > 0 {
		t.truth = mergeAll(values)
	}
}

// mergeAll merges values, in part order: objects by property; lists
// item by item, an object item whose name (case and spacing folded) an
// earlier item has merged into that one, any other item kept unless an
// equal one is already there; a scalar, the first that is not null.
func mergeAll(values []any) any {
	var out any
	for _, v := range values {
		out = mergeTwo(out, v)
	}
	return out
}

// mergeTwo merges b, from a later part, into a.
func mergeTwo(a, b any) any {
	switch x := a.(type) {
	case nil:
		return deepCopy(b)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return a
		}
		for k, v := range y {
			x[k] = mergeTwo(x[k], v)
		}
		return x
	case []any:
		y, ok := b.([]any)
		if !ok {
			return a
		}
		for _, it := range y {
			x = mergeItem(x, it)
		}
		return x
	}
	return a
}

// mergeItem adds it to list: merged into the item of the same name, else
// appended unless an equal item is there.
func mergeItem(list []any, it any) []any {
	name := foldName(itemString(it, "name"))
	for i, have := range list {
		if name != "" && foldName(itemString(have, "name")) == name {
			list[i] = mergeTwo(have, it)
			return list
		}
		if name == "" && jsonEqual(have, it) {
			return list
		}
	}
	return append(list, deepCopy(it))
}
