package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fixpoint-dev/fixpoint/subschema"
)

// Partial returns the schema a part of a value is checked against: the
// value extracted from one chunk of a long document, which the merge of
// every chunk's value completes. It is s with what a part may lack
// allowed:
//
//   - a missing property is no error anywhere in the value: "required",
//     "dependentRequired" and the lists of draft-07 "dependencies" are
//     dropped;
//   - "oneOf" is checked as "anyOf": without the properties that tell its
//     alternatives apart, a part may fit several of them, which the whole
//     value will not.
//
// Every other keyword checks as in s, with the same errors and classes:
// a wrong type, an enum, a format, a pattern, a bound or a property that
// is not allowed is still an error, fed back at once. A chunk may not
// hold what its document does (the parties of a contract on its first
// page, its termination clause on the last): asking the model to fill in
// what its chunk lacks makes it invent a value, which the merge would
// then have to tell from the real one. The merged value is checked
// against s itself.
//
// What tests a value rather than demands of it keeps its "required": the
// "if" of a condition and the subschema of a "not" (and what their
// references reach), so that a condition reads the properties the part
// has, and a "not" is no stricter than in s.
//
// The partial schema is built once, the first time it is asked for; its
// Raw is its own text. Its error, which a schema that compiled should not
// have, is a *SchemaError.
func (s *Schema) Partial() (*Schema, error) {
	if s == nil || s.sch == nil {
		return s, nil
	}
	s.partialOnce.Do(func() { s.partial, s.partialErr = compilePartial(s.raw, false) })
	return s.partial, s.partialErr
}

// PartialItems returns the partial schema (see Partial) with one thing
// less relaxed: an item of a list keeps its own "required". A list item
// (the schema of an array's "items", what its references name, and the
// branches of its "allOf", "anyOf" and "oneOf") is written in one place
// of a document, a subsidiary's name, country and share on one line or
// in one table row: a part that lists the item holds its fields, so an
// item that lacks one is a slip of the model's, which the part's own
// conversation can fix while its text is in the request. Relaxed, the
// slip reaches the merged value, where every such item is an error of
// the full schema with no chunk's text beside it. An item cut at a
// part's edge is read whole by the overlap of the part next to it.
// What lies inside an item (an object of it, a list of it) stays
// relaxed: an item that holds a list may run over several parts.
//
// It is built once, as Partial is.
func (s *Schema) PartialItems() (*Schema, error) {
	if s == nil || s.sch == nil {
		return s, nil
	}
	s.partialItemsOnce.Do(func() { s.partialItems, s.partialItemsErr = compilePartial(s.raw, true) })
	return s.partialItems, s.partialItemsErr
}

// compilePartial compiles the partial schema of the schema text raw, which
// Compile accepted; with items, list items keep their "required" (see
// PartialItems).
func compilePartial(raw []byte, items bool) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &SchemaError{Err: fmt.Errorf("decode schema: %w", err)}
	}
	subschema.DedupeIDs(doc, raw, nil)
	relaxRequired(doc, items)
	text, err := json.Marshal(doc)
	if err != nil {
		return nil, &SchemaError{Err: fmt.Errorf("encode the partial schema: %w", err)}
	}
	return compileDoc(doc, text, compileOptions{})
}

// relaxRequired rewrites doc, a schema document, into its partial form
// (see Partial), in place; with items, list items keep their "required"
// (see PartialItems).
func relaxRequired(doc any, items bool) {
	type visited struct {
		node subschema.Node
		test bool // in the "if" or "not" of a schema, or reached from one
		item bool // the "items" of a schema
	}
	var nodes []visited
	var stack []string // the pointers of the nodes enclosing the current one
	subschema.Walk(doc, func(n subschema.Node) bool {
		stack = append(stack[:n.Depth], n.Ptr)
		test, item := false, false
		if n.Depth > 0 {
			parent := stack[n.Depth-1]
			test = n.Ptr == parent+"/not" || n.Ptr == parent+"/if"
			item = n.Ptr == parent+"/items"
		}
		nodes = append(nodes, visited{node: n, test: test, item: item})
		return true
	})
	// A test's subschemas, and what its references name, test too.
	d := subschema.NewDoc(doc)
	var roots []string
	for _, v := range nodes {
		if v.test {
			roots = append(roots, v.node.Ptr)
		}
	}
	under := func(ptr, root string) bool { return ptr == root || strings.HasPrefix(ptr, root+"/") }
	tests := map[string]bool{}
	for len(roots) > 0 {
		root := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		for _, v := range nodes {
			if tests[v.node.Ptr] || !under(v.node.Ptr, root) {
				continue
			}
			tests[v.node.Ptr] = true
			for _, kw := range []string{"$ref", "$dynamicRef", "$recursiveRef"} {
				ref, ok := v.node.Object()[kw].(string)
				if !ok {
					continue
				}
				if to, err := d.Resolve(ref, v.node.Base); err == nil && !tests[to.Ptr] {
					roots = append(roots, to.Ptr)
				}
			}
		}
	}
	// The list items keep their required, and so do the schemas an item
	// is made of: what its references name, the branches of its allOf,
	// anyOf and oneOf, and theirs in turn.
	keep := map[string]bool{}
	var todo []string
	byPtr := map[string]subschema.Node{}
	for _, v := range nodes {
		byPtr[v.node.Ptr] = v.node
		if items && v.item {
			todo = append(todo, v.node.Ptr)
		}
	}
	for len(todo) > 0 {
		ptr := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		n, ok := byPtr[ptr]
		if keep[ptr] || !ok {
			continue
		}
		keep[ptr] = true
		obj := n.Object()
		for _, kw := range []string{"$ref", "$dynamicRef", "$recursiveRef"} {
			if ref, ok := obj[kw].(string); ok {
				if to, err := d.Resolve(ref, n.Base); err == nil {
					todo = append(todo, to.Ptr)
				}
			}
		}
		for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
			if alts, ok := obj[kw].([]any); ok {
				for i := range alts {
					todo = append(todo, fmt.Sprintf("%s/%s/%d", ptr, kw, i))
				}
			}
		}
	}
	for _, v := range nodes {
		if tests[v.node.Ptr] {
			continue
		}
		obj := v.node.Object()
		if !keep[v.node.Ptr] {
			delete(obj, "required")
		}
		delete(obj, "dependentRequired")
		if deps, ok := obj["dependencies"].(map[string]any); ok {
			for name, dep := range deps {
				if _, list := dep.([]any); list {
					delete(deps, name)
				}
			}
		}
		if alts, ok := obj["oneOf"]; ok {
			delete(obj, "oneOf")
			if _, taken := obj["anyOf"]; taken {
				all, _ := obj["allOf"].([]any)
				obj["allOf"] = append(all, map[string]any{"anyOf": alts})
			} else {
				obj["anyOf"] = alts
			}
		}
	}
}
