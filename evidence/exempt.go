package evidence

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint/subschema"
)

// Keyword is the schema annotation that exempts a subschema's values from
// evidence: "x-fixpoint-evidence": false on a summary, a sentiment, a
// category, which the model derives rather than quotes.
const Keyword = "x-fixpoint-evidence"

// Exempt returns the predicate Align takes for a schema (decoded JSON):
// it reports whether an instance location (a JSON pointer) lies in a
// subschema whose values are not quoted from the source: one with "enum"
// or "const", or annotated "x-fixpoint-evidence": false. Booleans and
// nulls need no exemption: they are never graded.
//
// The schema's subschemas are those subschema.Walk visits. Each stands for
// the instance locations its place reaches:
//
//   - properties/NAME: key NAME; patternProperties/RE: the keys RE matches
//     (as a Go regular expression; every key when it does not compile);
//     additionalProperties, unevaluatedProperties: the other keys;
//   - items, prefixItems/N, additionalItems, unevaluatedItems: the array
//     elements each applies to (items after prefixItems, tuple items and
//     additionalItems before 2020-12);
//   - allOf, anyOf, oneOf, then, else, dependentSchemas, dependencies:
//     the location itself, so an exempt branch exempts it, whichever
//     branch the value matches;
//   - "$ref" (and "$dynamicRef", read as a "$ref"): the location itself,
//     through any depth of recursion. References resolve as subschema.Doc
//     resolves them (pointers, "$id"s, anchors); one outside the document
//     is not followed;
//   - not, if, contains, propertyNames, $defs and the rest: no location
//     (a $defs entry is reached through its references).
//
// A location inside an exempt one is exempt.
func Exempt(schema any) func(ptr string) bool {
	g := exemptGraph{nodes: map[string]map[string]any{}, edges: map[string][]schemaEdge{}, exempt: map[string]bool{}}
	doc := subschema.NewDoc(schema)
	var refs [][2]string // a subschema's pointer and its reference's target's
	subschema.Walk(schema, func(n subschema.Node) bool {
		obj := n.Object()
		g.nodes[n.Ptr] = obj
		for _, kw := range []string{"$ref", "$dynamicRef"} {
			if ref, ok := obj[kw].(string); ok {
				if target, err := doc.Resolve(ref, n.Base); err == nil {
					refs = append(refs, [2]string{n.Ptr, target.Ptr})
				}
			}
		}
		if _, ok := obj["enum"]; ok {
			g.exempt[n.Ptr] = true
		}
		if _, ok := obj["const"]; ok {
			g.exempt[n.Ptr] = true
		}
		if v, ok := obj[Keyword].(bool); ok && !v {
			g.exempt[n.Ptr] = true
		}
		return true
	})
	for ptr := range g.nodes {
		g.link(ptr)
	}
	for _, r := range refs {
		if _, ok := g.nodes[r[1]]; ok {
			g.edges[r[0]] = append(g.edges[r[0]], schemaEdge{kind: edgeSame, to: r[1]})
		}
	}
	if len(g.exempt) == 0 {
		return func(string) bool { return false }
	}
	return g.covers
}

type edgeKind int

const (
	edgeSame      edgeKind = iota // the same instance location
	edgeKey                       // the key name
	edgePattern                   // a key re matches
	edgeOtherKey                  // a key of none of the properties and patterns of the parent
	edgeIndex                     // the array index n
	edgeIndexFrom                 // an array index n or more
)

// schemaEdge leads from a subschema to one of its subschemas (to, a
// schema pointer) and says which instance locations the step takes.
type schemaEdge struct {
	kind edgeKind
	to   string
	name string         // edgeKey
	re   *regexp.Regexp // edgePattern; nil matches every key
	n    int            // edgeIndex, edgeIndexFrom
	// props and pats are the parent's properties and patterns, for
	// edgeOtherKey.
	props map[string]any
	pats  []*regexp.Regexp
}

type exemptGraph struct {
	nodes  map[string]map[string]any
	edges  map[string][]schemaEdge
	exempt map[string]bool
}

// link adds the edge into the subschema at ptr from the subschema holding
// it, read off the pointer: PARENT/KEYWORD for a keyword holding one
// schema, PARENT/KEYWORD/NAME for one holding an object or array of them.
func (g *exemptGraph) link(ptr string) {
	if ptr == "" {
		return
	}
	toks := strings.Split(ptr[1:], "/")
	n := len(toks)
	parentPtr, kw, name, named := "/"+strings.Join(toks[:n-1], "/"), toks[n-1], "", false
	if n == 1 {
		parentPtr = ""
	}
	parent, ok := g.nodes[parentPtr]
	if !ok && n >= 2 {
		parentPtr, kw, name, named = strings.TrimSuffix("/"+strings.Join(toks[:n-2], "/"), "/"), toks[n-2], unescapeToken(toks[n-1]), true
		parent, ok = g.nodes[parentPtr]
	}
	if !ok {
		return
	}
	e := schemaEdge{to: ptr}
	switch {
	case kw == "properties" && named:
		e.kind, e.name = edgeKey, name
	case kw == "patternProperties" && named:
		e.kind, e.re = edgePattern, compilePattern(name)
	case kw == "additionalProperties" || kw == "unevaluatedProperties":
		e.kind = edgeOtherKey
		e.props, _ = parent["properties"].(map[string]any)
		if pats, ok := parent["patternProperties"].(map[string]any); ok {
			for p := range pats {
				e.pats = append(e.pats, compilePattern(p))
			}
		}
	case kw == "prefixItems" && named, kw == "items" && named:
		e.kind, e.n = edgeIndex, atoi(name)
	case kw == "items":
		e.kind, e.n = edgeIndexFrom, arrayLen(parent["prefixItems"])
	case kw == "additionalItems":
		if _, tuple := parent["items"].([]any); !tuple {
			return
		}
		e.kind, e.n = edgeIndexFrom, arrayLen(parent["items"])
	case kw == "unevaluatedItems":
		e.kind, e.n = edgeIndexFrom, max(arrayLen(parent["prefixItems"]), arrayLen(parent["items"]))
	case kw == "allOf" || kw == "anyOf" || kw == "oneOf" || kw == "then" || kw == "else" ||
		kw == "dependentSchemas" || kw == "dependencies":
		e.kind = edgeSame
	default:
		return
	}
	g.edges[parentPtr] = append(g.edges[parentPtr], e)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func arrayLen(v any) int {
	a, _ := v.([]any)
	return len(a)
}

// compilePattern compiles a patternProperties key; nil (every key) when Go
// cannot read it.
func compilePattern(p string) *regexp.Regexp {
	re, err := regexp.Compile(p)
	if err != nil {
		return nil
	}
	return re
}

// takes reports whether the edge leads to the instance token tok.
func (e schemaEdge) takes(tok string) bool {
	switch e.kind {
	case edgeKey:
		return tok == e.name
	case edgePattern:
		return e.re == nil || e.re.MatchString(tok)
	case edgeOtherKey:
		if _, ok := e.props[tok]; ok {
			return false
		}
		for _, re := range e.pats {
			if re == nil || re.MatchString(tok) {
				return false
			}
		}
		return true
	}
	i, ok := arrayIndex(tok)
	if !ok {
		return false
	}
	if e.kind == edgeIndex {
		return i == e.n
	}
	return i >= e.n
}

// arrayIndex reads a JSON pointer token as an array index.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' || !allDigits(tok) {
		return 0, false
	}
	n, err := strconv.Atoi(tok)
	return n, err == nil
}

// covers reports whether the instance location ptr is exempt: whether a
// path of the schema's edges that takes ptr's tokens, or the first of
// them, reaches an exempt subschema.
func (g *exemptGraph) covers(ptr string) bool {
	states := g.closure([]string{""})
	for _, tok := range splitPointer(ptr) {
		if g.anyExempt(states) {
			return true
		}
		var next []string
		for _, st := range states {
			for _, e := range g.edges[st] {
				if e.kind != edgeSame && e.takes(tok) {
					next = append(next, e.to)
				}
			}
		}
		if len(next) == 0 {
			return false
		}
		states = g.closure(next)
	}
	return g.anyExempt(states)
}

func (g *exemptGraph) anyExempt(states []string) bool {
	for _, s := range states {
		if g.exempt[s] {
			return true
		}
	}
	return false
}

// closure adds to states every subschema that applies at the same
// location (edgeSame), each once.
func (g *exemptGraph) closure(states []string) []string {
	seen := map[string]bool{}
	out := states[:0:0]
	for len(states) > 0 {
		s := states[len(states)-1]
		states = states[:len(states)-1]
		if seen[s] {
			continue
		}
		if _, ok := g.nodes[s]; !ok {
			continue
		}
		seen[s] = true
		out = append(out, s)
		for _, e := range g.edges[s] {
			if e.kind == edgeSame {
				states = append(states, e.to)
			}
		}
	}
	return out
}
