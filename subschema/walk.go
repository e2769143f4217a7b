package subschema

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint/extract"
)

// Node is one subschema of a schema document, as Walk and Doc find it.
type Node struct {
	// Value is the subschema: a map[string]any for a schema object (Walk
	// visits only those), a bool for the true and false schemas, or the
	// value a reference names when that is no schema at all.
	Value any
	// Ptr is its JSON pointer in the document, "" for the root.
	Ptr string
	// Base is the absolute URI its relative references resolve against:
	// the "$id" of the nearest schema resource holding it, or the URI the
	// document is compiled under.
	Base string
	// Depth is how many subschemas enclose it: 0 for the root.
	Depth int
}

// Object returns the node's schema object, nil for a boolean schema or a
// value that is no schema.
func (n Node) Object() map[string]any {
	m, _ := n.Value.(map[string]any)
	return m
}

// Walk calls fn for every subschema object of the schema document root,
// each before its own subschemas, at schema positions only: the values of
// properties, items, allOf, $defs, not and the other keywords that hold
// schemas, never inside const, enum, examples or an unknown keyword. It
// follows no reference: a document that refers to itself is walked once.
// When fn returns false the node's subschemas are skipped. fn may change
// the node's map: its subschemas are read after fn returns. The draft
// (which keyword is an id) is the one the root's "$schema" names, 2020-12
// without it.
func Walk(root any, fn func(Node) bool) {
	walkDoc(root, docVersion(root, 2020), fn)
}

// docVersion returns the draft the "$schema" of root names, or def.
func docVersion(root any, def int) int {
	if m, ok := root.(map[string]any); ok {
		if s, ok := m["$schema"].(string); ok {
			return draftVersion(s, def)
		}
	}
	return def
}

// walkDoc is Walk for a document of the given draft version.
func walkDoc(root any, version int, fn func(Node) bool) {
	w := schemaWalker{version: version, idKey: "$id", fn: fn}
	if version == 4 {
		w.idKey = "id"
	}
	base, _ := url.Parse(URL)
	w.walk(root, "", base, URL, 0)
}

// schemaWalker is the state of one Walk.
type schemaWalker struct {
	version int
	idKey   string // "id" in draft-04, "$id" after
	fn      func(Node) bool
}

// walk visits node, found at ptr under the base URI base (baseText its
// text), and its subschemas.
func (w *schemaWalker) walk(node any, ptr string, base *url.URL, baseText string, depth int) {
	obj, ok := node.(map[string]any)
	if !ok {
		return
	}
	if u, ok := w.resource(obj); ok {
		base = resolveURL(base, u)
		baseText = base.String()
	}
	if !w.fn(Node{Value: obj, Ptr: ptr, Base: baseText, Depth: depth}) {
		return
	}
	for kw, val := range obj {
		p := ptr + "/" + extract.PointerToken(kw)
		switch {
		case schemaMapKeywords[kw]:
			m, _ := val.(map[string]any)
			for name, sub := range m {
				w.walk(sub, p+"/"+extract.PointerToken(name), base, baseText, depth+1)
			}
		case schemaArrayKeywords[kw] || schemaKeywords[kw]:
			if arr, ok := val.([]any); ok {
				for i, sub := range arr {
					w.walk(sub, p+"/"+strconv.Itoa(i), base, baseText, depth+1)
				}
			} else {
				w.walk(val, p, base, baseText, depth+1)
			}
		}
	}
}

// resource returns the URI (without its fragment) of the schema resource
// obj opens, if it does: its id, the way the library reads it (before
// 2019-09 an id next to "$ref" is ignored, and one that is only a
// fragment names a place, not a resource).
func (w *schemaWalker) resource(obj map[string]any) (*url.URL, bool) {
	id, ok := obj[w.idKey].(string)
	if !ok {
		return nil, false
	}
	if _, hasRef := obj["$ref"]; hasRef && w.version < 2019 {
		return nil, false
	}
	id, _, _ = strings.Cut(id, "#")
	if id == "" {
		return nil, false
	}
	u, err := url.Parse(id)
	if err != nil {
		return nil, false
	}
	return u, true
}

// anchors returns the plain-name anchors obj declares: "$anchor" and
// "$dynamicAnchor" since 2019-09 and 2020-12, the fragment of its id
// before.
func (w *schemaWalker) anchors(obj map[string]any) []string {
	var out []string
	if w.version < 2019 {
		if _, hasRef := obj["$ref"]; hasRef {
			return nil
		}
		if id, ok := obj[w.idKey].(string); ok {
			if _, frag, ok := strings.Cut(id, "#"); ok {
				if f, err := url.PathUnescape(frag); err == nil && f != "" && !strings.HasPrefix(f, "/") {
					out = append(out, f)
				}
			}
		}
		return out
	}
	if s, ok := obj["$anchor"].(string); ok {
		out = append(out, s)
	}
	if s, ok := obj["$dynamicAnchor"].(string); ok && w.version >= 2020 {
		out = append(out, s)
	}
	return out
}

// resolveURL resolves ref against base, keeping an opaque base (a URN) as
// the schema library does.
func resolveURL(base, ref *url.URL) *url.URL {
	out := base.ResolveReference(ref)
	if !ref.IsAbs() && base.Opaque != "" {
		out.Opaque = base.Opaque
	}
	return out
}
