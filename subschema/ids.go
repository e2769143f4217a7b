package subschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fixpoint-dev/fixpoint/extract"
)

// Generated draft-04 and draft-06 schemas often repeat an id ("id" in
// draft-04, "$id" after) in sibling subschemas: a definition inlined in
// several places with its id, or tuple items all given the same one. The
// schema library refuses a document in which two subschemas have the same
// id, and so is every job of a batch using one; widely used validators
// accept them: ajv keeps the last it meets for a full URL (and refuses a
// repeated "#name" id only when the subschemas differ), Python's
// jsonschema registers every one and keeps the one it crawls last.
//
// Here the first in document order (the order of the schema's text) keeps
// the id: a reference to it resolves there, whatever order a JSON decoder
// keeps members in. Every later one keeps its content and validates as it
// is, under an id of its own: its URL with a query naming it a duplicate
// (fixpoint-duplicate-id=N), so that a relative reference inside it
// resolves to the same URL as before. A repeated plain-name fragment
// ("#item", a draft-04 to draft-07 id that names a place in its resource)
// is dropped from every later subschema, which changes no base URL. When
// the subschemas are the same, as in the generated schemas seen, every
// reading gives the same verdicts. Ids of 2019-09 and 2020-12 are handled
// alike; their $anchor is not ("$anchor" has no generated repeats seen).

// duplicateIDQuery marks the id given to a later subschema of a repeated
// id.
const duplicateIDQuery = "fixpoint-duplicate-id"

// idSite is a subschema declaring an id: the resource URL it names (""
// for a fragment-only id), the plain-name fragment, and the resource that
// fragment names a place in.
type idSite struct {
	ptr    string
	obj    map[string]any
	res    string
	anchor string
	scope  string
}

// DedupeIDs rewrites doc, the schema text raw decoded, so that no id names
// two subschemas (see above), before the schema library compiles it.
// draft is the draft of a schema without "$schema" (nil: 2020-12).
func DedupeIDs(doc any, raw []byte, draft *jsonschema.Draft) {
	version := versionOf(draft, 2020)
	root, ok := doc.(map[string]any)
	if !ok {
		return
	}
	if s, ok := root["$schema"].(string); ok {
		version = draftVersion(s, version)
	}
	idKey := "$id"
	if version == 4 {
		idKey = "id"
	}
	// Resources first: renaming one changes the scope of the fragments
	// inside it.
	sites := collectIDs(doc, idKey, version)
	groups := map[string][]idSite{}
	for _, s := range sites {
		if s.res != "" {
			groups[s.res] = append(groups[s.res], s)
		}
	}
	used := map[string]bool{}
	for res := range groups {
		used[res] = true
	}
	var later []idSite
	order := documentOrder(raw, repeated(groups))
	for _, g := range groups {
		if len(g) > 1 {
			later = append(later, sortByOrder(g, order)[1:]...)
		}
	}
	slices.SortFunc(later, func(a, b idSite) int { return order[a.ptr] - order[b.ptr] })
	n := 0
	for _, s := range later {
		u, err := url.Parse(s.res)
		if err != nil {
			continue
		}
		var id string
		for {
			n++
			v := *u
			q := duplicateIDQuery + "=" + strconv.Itoa(n)
			if v.RawQuery != "" {
				q = v.RawQuery + "&" + q
			}
			v.RawQuery = q
			if id = v.String(); !used[id] {
				break
			}
		}
		used[id] = true
		if s.anchor != "" {
			id += "#" + s.anchor
		}
		s.obj[idKey] = id
	}

	if version >= 2019 {
		return
	}
	anchors := map[string][]idSite{}
	for _, s := range collectIDs(doc, idKey, version) {
		if s.anchor != "" {
			k := s.scope + "#" + s.anchor
			anchors[k] = append(anchors[k], s)
		}
	}
	order = documentOrder(raw, repeated(anchors))
	for _, g := range anchors {
		if len(g) < 2 {
			continue
		}
		for _, s := range sortByOrder(g, order)[1:] {
			id, _ := s.obj[idKey].(string)
			if i := strings.IndexByte(id, '#'); i > 0 {
				s.obj[idKey] = id[:i]
			} else {
				delete(s.obj, idKey)
			}
		}
	}
}

// draftVersion returns the draft a "$schema" URL names, or def.
func draftVersion(schema string, def int) int {
	for _, d := range []struct {
		name string
		v    int
	}{{"draft-04", 4}, {"draft-06", 6}, {"draft-07", 7}, {"2019-09", 2019}, {"2020-12", 2020}} {
		if strings.Contains(schema, d.name) {
			return d.v
		}
	}
	return def
}

// versionOf returns the version of a library draft, def for nil.
func versionOf(d *jsonschema.Draft, def int) int {
	switch d {
	case jsonschema.Draft4:
		return 4
	case jsonschema.Draft6:
		return 6
	case jsonschema.Draft7:
		return 7
	case jsonschema.Draft2019:
		return 2019
	case jsonschema.Draft2020:
		return 2020
	}
	return def
}

// repeated returns the pointers of the sites of groups of two or more.
func repeated(groups map[string][]idSite) map[string]bool {
	want := map[string]bool{}
	for _, g := range groups {
		if len(g) > 1 {
			for _, s := range g {
				want[s.ptr] = true
			}
		}
	}
	return want
}

// sortByOrder sorts sites by their place in the schema's text.
func sortByOrder(sites []idSite, order map[string]int) []idSite {
	slices.SortFunc(sites, func(a, b idSite) int { return order[a.ptr] - order[b.ptr] })
	return sites
}

// collectIDs returns the subschemas of doc that declare an id, the way
// the library reads them (see schemaWalker.resource and anchors): an id
// is resolved against the base URI of the subschema holding it, and its
// fragment, when a plain name before 2019-09, names a place. The root is a
// site whether it declares an id or not.
func collectIDs(doc any, idKey string, version int) []idSite {
	w := schemaWalker{version: version, idKey: idKey}
	var sites []idSite
	walkDoc(doc, version, func(n Node) bool {
		obj := n.Object()
		s := idSite{ptr: n.Ptr, obj: obj, scope: n.Base}
		_, opens := w.resource(obj)
		if opens || n.Ptr == "" {
			s.res = n.Base
		}
		if a := w.anchors(obj); version < 2019 && len(a) > 0 {
			s.anchor = a[0]
		}
		if s.res != "" || s.anchor != "" {
			sites = append(sites, s)
		}
		return true
	})
	return sites
}

// documentOrder returns the place in the JSON text raw of each value whose
// pointer is in want: the number of values that open before it.
func documentOrder(raw []byte, want map[string]bool) map[string]int {
	order := map[string]int{}
	if len(want) == 0 {
		return order
	}
	type frame struct {
		obj     bool
		key     string
		idx     int
		needKey bool
	}
	var stack []frame
	next := func() {
		if len(stack) == 0 {
			return
		}
		top := &stack[len(stack)-1]
		if top.obj {
			top.needKey = true
		} else {
			top.idx++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var sb strings.Builder
	for n := 0; ; {
		tok, err := dec.Token()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return order
			}
			break
		}
		d, isDelim := tok.(json.Delim)
		if isDelim && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			next()
			continue
		}
		if len(stack) > 0 && stack[len(stack)-1].obj && stack[len(stack)-1].needKey {
			stack[len(stack)-1].key, _ = tok.(string)
			stack[len(stack)-1].needKey = false
			continue
		}
		sb.Reset()
		for _, f := range stack {
			sb.WriteByte('/')
			if f.obj {
				sb.WriteString(extract.PointerToken(f.key))
			} else {
				sb.WriteString(strconv.Itoa(f.idx))
			}
		}
		if p := sb.String(); want[p] {
			order[p] = n
		}
		n++
		switch {
		case isDelim && d == '{':
			stack = append(stack, frame{obj: true, needKey: true})
		case isDelim && d == '[':
			stack = append(stack, frame{})
		default:
			next()
		}
	}
	return order
}
