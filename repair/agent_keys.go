package repair

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// keyedList is a list whose items the schema keys ("x-fixpoint-key"):
// its place, a JSON pointer with "*" for any array index, and the key's
// fields.
type keyedList struct {
	at     []string
	fields []string
}

// keyedLists finds the keyed lists of a schema, through "properties" and
// an object "items" (a list reached through "$ref" or a combinator is
// not found, and its items are not checked).
func keyedLists(raw []byte) []keyedList {
	var root any
	if json.Unmarshal(raw, &root) != nil {
		return nil
	}
	var out []keyedList
	var walk func(s any, at []string, depth int)
	walk = func(s any, at []string, depth int) {
		m, ok := s.(map[string]any)
		if !ok || depth > 32 {
			return
		}
		if k, ok := keyFields(m["x-fixpoint-key"]); ok {
			out = append(out, keyedList{at: append([]string(nil), at...), fields: k})
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for name, p := range props {
				walk(p, append(at, name), depth+1)
			}
		}
		if items, ok := m["items"].(map[string]any); ok {
			walk(items, append(at, "*"), depth+1)
		}
	}
	walk(root, nil, 0)
	return out
}

// keyFields reads an "x-fixpoint-key": a field name or a list of them.
func keyFields(v any) ([]string, bool) {
	switch k := v.(type) {
	case string:
		return []string{k}, k != ""
	case []any:
		var out []string
		for _, f := range k {
			if s, ok := f.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out, len(out) > 0
	}
	return nil, false
}

// unkeyedItems are the errors of the items of v's keyed lists that lack a
// key field (or hold null there): such an item merges with no other, and
// update_output cannot replace or remove it, so it is refused when it is
// put, not at finish. Paths are in v.
func unkeyedItems(lists []keyedList, v any) []fixpoint.ValidationError {
	var errs []fixpoint.ValidationError
	for _, l := range lists {
		forEachAt(v, l.at, "", func(list any, ptr string) {
			items, ok := list.([]any)
			if !ok {
				return
			}
			for i, it := range items {
				obj, ok := it.(map[string]any)
				if !ok {
					continue
				}
				for _, f := range l.fields {
					if obj[f] == nil {
						p := ptr + "/" + strconv.Itoa(i) + "/" + escapeToken(f)
						errs = append(errs, fixpoint.ValidationError{Path: p, Keyword: "required", Class: fixpoint.ClassShape,
							Message: fmt.Sprintf("%s: missing key field %q: an item of this list needs its key (%s) to be merged with the others or changed later", p, f, strings.Join(l.fields, ", "))})
					}
				}
			}
		})
	}
	return errs
}

// forEachAt calls fn with each value of v at the place at ("*" any array
// index) and its pointer.
func forEachAt(v any, at []string, ptr string, fn func(v any, ptr string)) {
	if len(at) == 0 {
		fn(v, ptr)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if at[0] == "*" {
			return
		}
		if next, ok := x[at[0]]; ok {
			forEachAt(next, at[1:], ptr+"/"+escapeToken(at[0]), fn)
		}
	case []any:
		if at[0] != "*" {
			return
		}
		for i, next := range x {
			forEachAt(next, at[1:], ptr+"/"+strconv.Itoa(i), fn)
		}
	}
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// keyNote names the keyed list item a path is in, by its key, for an
// error at finish: the model put the item under its key, and an index
// into the merged list is not one it ever saw. "" when the path is in no
// keyed item, or the item has no key.
func keyNote(lists []keyedList, value any, path string) string {
	if path == "" {
		return ""
	}
	toks := strings.Split(path[1:], "/")
	for _, l := range lists {
		if len(toks) <= len(l.at) || !matchesAt(toks, l.at) {
			continue
		}
		item, ok := pointerValue(value, toks[:len(l.at)+1])
		obj, isObj := item.(map[string]any)
		if !ok || !isObj {
			continue
		}
		var parts []string
		for _, f := range l.fields {
			if obj[f] == nil {
				return ""
			}
			b, _ := json.Marshal(obj[f])
			parts = append(parts, fmt.Sprintf("%s %s", f, b))
		}
		return " (in the item with " + strings.Join(parts, " and ") + ")"
	}
	return ""
}

// matchesAt reports whether the tokens of a path start at the place at
// ("*" any array index).
func matchesAt(toks, at []string) bool {
	for i, a := range at {
		t := strings.ReplaceAll(strings.ReplaceAll(toks[i], "~1", "/"), "~0", "~")
		if a == "*" {
			if _, err := strconv.Atoi(t); err != nil {
				return false
			}
		} else if a != t {
			return false
		}
	}
	return true
}

// pointerValue is the value at the path of tokens toks in v.
func pointerValue(v any, toks []string) (any, bool) {
	for _, t := range toks {
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[t]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(x) {
				return nil, false
			}
			v = x[n]
		default:
			return nil, false
		}
	}
	return v, true
}
