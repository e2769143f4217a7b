package subschema

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint/extract"
)

// ErrRef is matched (errors.Is) by every error Doc.Resolve and Doc.Deref
// return: a reference that names nothing in the document, or a chain of
// references that loops or runs too long.
var ErrRef = errors.New("reference cannot be resolved")

// MaxRefChain bounds how many references Doc.Deref follows in a row.
const MaxRefChain = 32

// Doc is a schema document indexed to resolve its references the way the
// validator does: local JSON pointers ("#/$defs/x", percent-encoded, with
// ~0 and ~1 escapes), the "$id" of every schema resource (a relative
// reference resolves against the nearest one), and plain-name anchors
// ("$anchor", "$dynamicAnchor", a draft-07 "$id": "#name"). Nothing
// outside the document is ever fetched. It is read-only once built, and
// safe for concurrent use.
type Doc struct {
	root Node
	// nodes holds every schema object Walk finds, by its map's identity,
	// so that a caller holding a subschema finds its pointer and base.
	nodes map[uintptr]Node
	// byPtr holds them by pointer.
	byPtr map[string]Node
	// resources holds the schema resources by their URI, without
	// fragment; anchors the anchors by "URI#name".
	resources map[string]Node
	anchors   map[string]Node
}

// NewDoc indexes root, a schema document as decoded by encoding/json (or
// jsonschema.UnmarshalJSON). It does not copy root, which must not change
// while the Doc is used.
func NewDoc(root any) *Doc {
	d := &Doc{
		root:      Node{Value: root, Base: URL},
		nodes:     map[uintptr]Node{},
		byPtr:     map[string]Node{},
		resources: map[string]Node{},
		anchors:   map[string]Node{},
	}
	d.resources[URL] = d.root
	version := docVersion(root, 2020)
	w := schemaWalker{version: version, idKey: "$id"}
	if version == 4 {
		w.idKey = "id"
	}
	walkDoc(root, version, func(n Node) bool {
		obj := n.Object()
		d.nodes[reflect.ValueOf(obj).Pointer()] = n
		d.byPtr[n.Ptr] = n
		if n.Ptr == "" {
			d.root = n
		}
		if _, ok := w.resource(obj); ok || n.Ptr == "" {
			if _, dup := d.resources[n.Base]; !dup || n.Ptr == "" {
				d.resources[n.Base] = n
			}
		}
		for _, a := range w.anchors(obj) {
			if _, dup := d.anchors[n.Base+"#"+a]; !dup {
				d.anchors[n.Base+"#"+a] = n
			}
		}
		return true
	})
	return d
}

// Root returns the document's root.
func (d *Doc) Root() Node { return d.root }

// NodeOf returns the node of a schema object of the document, found by
// identity: a map Walk found in the document, not an equal copy.
func (d *Doc) NodeOf(obj map[string]any) (Node, bool) {
	if obj == nil {
		return Node{}, false
	}
	n, ok := d.nodes[reflect.ValueOf(obj).Pointer()]
	return n, ok
}

// BaseOf returns the base URI of a schema object of the document, or the
// root's when obj is not one (a copy, or a map made by the caller).
func (d *Doc) BaseOf(obj map[string]any) string {
	if n, ok := d.NodeOf(obj); ok {
		return n.Base
	}
	return d.root.Base
}

// IsPointerRef reports whether ref is a JSON pointer into its own schema
// resource: "#" or "#/...".
func IsPointerRef(ref string) bool {
	return ref == "#" || strings.HasPrefix(ref, "#/")
}

// Resolve returns the node ref names, ref being resolved against base (a
// Node's Base). The node's Ptr is its pointer in the document, and its
// Base its own. An error, matching ErrRef, says what names nothing: a
// resource no "$id" declares (nothing outside the document is followed),
// an anchor no subschema declares, or a pointer token that is missing.
func (d *Doc) Resolve(ref, base string) (Node, error) {
	uri, frag, _ := strings.Cut(ref, "#")
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return Node{}, refError(ref, "its fragment is not percent-encoded correctly: %v", err)
	}
	if uri != "" {
		b, err := url.Parse(base)
		if err != nil {
			return Node{}, refError(ref, "the base URI %q is not a URI: %v", base, err)
		}
		u, err := url.Parse(uri)
		if err != nil {
			return Node{}, refError(ref, "not a URI reference: %v", err)
		}
		base = resolveURL(b, u).String()
	}
	res, ok := d.resources[base]
	if !ok {
		return Node{}, refError(ref, "no schema resource of the document has the $id %q (references outside the schema document are not followed)", base)
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		n, ok := d.anchors[base+"#"+frag]
		if !ok {
			return Node{}, refError(ref, "no subschema of %q declares the anchor %q", base, frag)
		}
		return n, nil
	}
	return d.pointer(ref, res, frag)
}

// pointer returns the node at the JSON pointer ptr inside the resource res.
func (d *Doc) pointer(ref string, res Node, ptr string) (Node, error) {
	cur, at := res.Value, res.Ptr
	if ptr != "" {
		for _, tok := range strings.Split(ptr[1:], "/") {
			name, ok := unescapePointerToken(tok)
			if !ok {
				return Node{}, refError(ref, "the pointer token %q has a ~ not followed by 0 or 1", tok)
			}
			next, found := memberAt(cur, name)
			if !found {
				return Node{}, refError(ref, "%s has no member %q", where(at), name)
			}
			cur, at = next, at+"/"+extract.PointerToken(name)
		}
	}
	if n, ok := d.byPtr[at]; ok {
		return n, nil
	}
	// A boolean schema, or a value at no schema position.
	return Node{Value: cur, Ptr: at, Base: res.Base, Depth: res.Depth}, nil
}

// memberAt returns the member name of an object, or the item an array index
// names.
func memberAt(v any, name string) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		e, ok := x[name]
		return e, ok
	case []any:
		i, err := strconv.Atoi(name)
		if err != nil || i < 0 || i >= len(x) || strconv.Itoa(i) != name {
			return nil, false
		}
		return x[i], true
	}
	return nil, false
}

// unescapePointerToken reverses escapeToken, refusing a ~ followed by
// anything but 0 or 1 (RFC 6901).
func unescapePointerToken(tok string) (string, bool) {
	if !strings.Contains(tok, "~") {
		return tok, true
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] == '~' && (i+1 == len(tok) || tok[i+1] != '0' && tok[i+1] != '1') {
			return "", false
		}
	}
	return tokenUnescaper.Replace(tok), true
}

// Deref follows the "$ref" of n, and of the node it names, and so on, as
// long as follow accepts the reference (nil: every one), and returns the
// node it ends at: one without a "$ref" (or with one follow refuses). It
// stops after MaxRefChain references, or when the chain comes back to a
// node it passed ({"$ref": "#"}); it then returns the node it reached with
// an error matching ErrRef, as it does the node holding a reference that
// names nothing.
func (d *Doc) Deref(n Node, follow func(ref string) bool) (Node, error) {
	var passed []string
	for {
		ref, ok := n.Object()["$ref"].(string)
		if !ok || follow != nil && !follow(ref) {
			return n, nil
		}
		for _, p := range passed {
			if p == n.Ptr {
				return n, refError(ref, "the references loop back to %s without reaching a schema", where(n.Ptr))
			}
		}
		if len(passed) >= MaxRefChain {
			return n, refError(ref, "over %d references in a row", MaxRefChain)
		}
		passed = append(passed, n.Ptr)
		next, err := d.Resolve(ref, n.Base)
		if err != nil {
			return n, err
		}
		n = next
	}
}

// refError returns an error matching ErrRef about the reference ref.
func refError(ref, format string, args ...any) error {
	return fmt.Errorf("%w: $ref %q: %s", ErrRef, ref, fmt.Sprintf(format, args...))
}

// where names the place at a JSON pointer in an error message.
func where(ptr string) string {
	if ptr == "" {
		return "the root"
	}
	return ptr
}
