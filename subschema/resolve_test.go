package subschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// refuseLoader refuses every document outside the schema, as the
// validator's compile does.
type refuseLoader struct{}

func (refuseLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("load %q: references outside the schema document are not allowed", u)
}

func decodeDoc(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("decode %s: %v", text, err)
	}
	return v
}

// TestDocResolve: every form of reference a schema document uses resolves
// to the node the validator checks, with that node's pointer and base.
func TestDocResolve(t *testing.T) {
	t.Parallel()
	doc := NewDoc(decodeDoc(t, `{
		"$id": "https://example.com/s/root.json",
		"$defs": {
			"x y": {"type": "integer"},
			"a/b": {"type": "string"},
			"t~n": {"type": "boolean"},
			"pct%": {"type": "null"},
			"flag": true,
			"item": {"$id": "item.json", "type": "object",
				"properties": {"v": {"$ref": "#/$defs/inner"}},
				"$defs": {"inner": {"type": "number"}}},
			"named": {"$anchor": "num", "type": "number"}
		},
		"definitions": {"old": {"type": "array"}},
		"properties": {"p": {"type": "string"}}
	}`))
	root := doc.Root().Base
	tests := []struct {
		ref, base string
		ptr, key  string // the pointer reached, and the keyword it declares
	}{
		{"#", root, "", "$id"},
		{"#/properties/p", root, "/properties/p", "type"},
		{"#/definitions/old", root, "/definitions/old", "type"},
		{"#/$defs/x%20y", root, "/$defs/x y", "type"},
		{"#/$defs/a~1b", root, "/$defs/a~1b", "type"},
		{"#/$defs/t~0n", root, "/$defs/t~0n", "type"},
		{"#/$defs/pct%25", root, "/$defs/pct%", "type"},
		{"item.json", root, "/$defs/item", "$id"},
		{"https://example.com/s/item.json#/properties/v", root, "/$defs/item/properties/v", "$ref"},
		{"#num", root, "/$defs/named", "$anchor"},
		{"root.json#num", root, "/$defs/named", "$anchor"},
		// Inside item.json, "#/..." is a pointer into item.json.
		{"#/$defs/inner", "https://example.com/s/item.json", "/$defs/item/$defs/inner", "type"},
		{"root.json#/$defs/x%20y", "https://example.com/s/item.json", "/$defs/x y", "type"},
		// The URI the document is compiled under names the root too.
		{URL + "#/properties/p", root, "/properties/p", "type"},
	}
	for _, tc := range tests {
		n, err := doc.Resolve(tc.ref, tc.base)
		if err != nil {
			t.Errorf("Resolve(%q, %q): %v", tc.ref, tc.base, err)
			continue
		}
		if n.Ptr != tc.ptr {
			t.Errorf("Resolve(%q, %q) reached %q, want %q", tc.ref, tc.base, n.Ptr, tc.ptr)
		}
		if _, ok := n.Object()[tc.key]; !ok {
			t.Errorf("Resolve(%q, %q) = %v, want the schema declaring %q", tc.ref, tc.base, n.Value, tc.key)
		}
	}
	// A boolean schema is a node too.
	if n, err := doc.Resolve("#/$defs/flag", root); err != nil || n.Value != true || n.Ptr != "/$defs/flag" {
		t.Errorf(`Resolve("#/$defs/flag") = %+v, %v; want the true schema`, n, err)
	}
	// The base of a node under an $id is that $id.
	if n, _ := doc.Resolve("#/$defs/item/properties/v", root); n.Base != "https://example.com/s/item.json" || n.Depth != 2 {
		t.Errorf("node under item.json: base %q depth %d, want item.json's and 2", n.Base, n.Depth)
	}
}

// TestDocResolveErrors: a reference that names nothing is an error that
// says which part names nothing.
func TestDocResolveErrors(t *testing.T) {
	t.Parallel()
	doc := NewDoc(decodeDoc(t, `{"$defs": {"a": {"type": "string"}, "list": [1]}, "$anchor": "top"}`))
	base := doc.Root().Base
	tests := []struct{ ref, want string }{
		{"#/$defs/b", `/$defs has no member "b"`},
		{"#/$defs/a/type/x", `/$defs/a/type has no member "x"`},
		{"#/$defs/list/01", `/$defs/list has no member "01"`},
		{"#/nope", `the root has no member "nope"`},
		{"#/$defs/a~2", `has a ~ not followed by 0 or 1`},
		{"#/$defs/%zz", "not percent-encoded correctly"},
		{"#missing", `declares the anchor "missing"`},
		{"other.json", `$id "https://schema.fixpoint.invalid/other.json" (references outside the schema document are not followed)`},
		{"https://example.com/x.json#/a", `references outside the schema document are not followed`},
	}
	for _, tc := range tests {
		_, err := doc.Resolve(tc.ref, base)
		if err == nil || !errors.Is(err, ErrRef) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.ref) {
			t.Errorf("Resolve(%q) error = %v, want ErrRef naming the reference and %q", tc.ref, err, tc.want)
		}
	}
	if n, err := doc.Resolve("#top", base); err != nil || n.Ptr != "" {
		t.Errorf("Resolve(#top) = %+v, %v; want the root", n, err)
	}
}

// TestDocDeref: a chain of references is followed to its end, a loop or an
// over-long chain stops with an error, and follow limits what is followed.
func TestDocDeref(t *testing.T) {
	t.Parallel()
	chain := `{"$ref": "#/$defs/d00", "$defs": {`
	for i := range MaxRefChain + 2 {
		if i > 0 {
			chain += ","
		}
		chain += `"d` + two(i) + `": {"$ref": "#/$defs/d` + two(i+1) + `"}`
	}
	chain += `}}`
	tests := []struct {
		name, schema string
		from         string // the pointer Deref starts at
		follow       func(string) bool
		ptr, err     string // where it ends, and its error ("" none)
	}{
		{"chain", `{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer"}}}`, "", nil, "/$defs/b", ""},
		{"self", `{"$ref": "#"}`, "", nil, "", "loop back to the root"},
		{"loop", `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}`, "/properties/x", nil, "/$defs/a", "loop back to /$defs/a"},
		{"long", chain, "", nil, "/$defs/d31", "over 32 references in a row"},
		{"missing", `{"properties": {"x": {"$ref": "#/$defs/a"}}}`, "/properties/x", nil, "/properties/x", `the root has no member "$defs"`},
		{"not followed", `{"$id": "https://example.com/r.json", "properties": {"x": {"$ref": "i.json"}}, "$defs": {"i": {"$id": "i.json"}}}`, "/properties/x", IsPointerRef, "/properties/x", ""},
		{"followed", `{"$id": "https://example.com/r.json", "properties": {"x": {"$ref": "i.json"}}, "$defs": {"i": {"$id": "i.json"}}}`, "/properties/x", nil, "/$defs/i", ""},
	}
	for _, tc := range tests {
		doc := NewDoc(decodeDoc(t, tc.schema))
		start, err := doc.Resolve("#"+tc.from, doc.Root().Base)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		n, err := doc.Deref(start, tc.follow)
		if n.Ptr != tc.ptr {
			t.Errorf("%s: Deref ended at %q, want %q", tc.name, n.Ptr, tc.ptr)
		}
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: Deref error %v, want none", tc.name, err)
		case tc.err != "" && (err == nil || !errors.Is(err, ErrRef) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: Deref error %v, want ErrRef with %q", tc.name, err, tc.err)
		}
	}
}

// two writes i in two digits.
func two(i int) string { return fmt.Sprintf("%02d", i) }

// TestDocResolvesAsTheValidator: for every reference of these documents,
// Resolve reaches the subschema the compiled schema refers to: the
// describer, the simulator and the validator read one schema.
func TestDocResolvesAsTheValidator(t *testing.T) {
	t.Parallel()
	docs := []string{
		`{"$id": "https://example.com/s/root.json",
		  "properties": {"a": {"$ref": "item.json"}, "b": {"$ref": "#num"}, "c": {"$ref": "#/$defs/x%20y"},
		    "d": {"$ref": "item.json#/properties/v"}, "e": {"$ref": "#/$defs/a~1b"}, "f": {"$ref": "#"}},
		  "$defs": {"x y": {"type": "integer"}, "a/b": {"type": "string"},
		    "it": {"$id": "item.json", "properties": {"v": {"$ref": "#/$defs/in"}, "w": {"$ref": "root.json#num"}},
		      "$defs": {"in": {"type": "number"}}},
		    "n": {"$anchor": "num", "type": "number"}}}`,
		`{"$schema": "http://json-schema.org/draft-07/schema#",
		  "definitions": {"a": {"$id": "#anchor7", "type": "string"}, "b": {"$id": "sub/b.json", "definitions": {"c": {"type": "null"}},
		    "properties": {"c": {"$ref": "#/definitions/c"}}}},
		  "properties": {"x": {"$ref": "#anchor7"}, "y": {"$ref": "sub/b.json"}, "z": {"$ref": "#/definitions/b/properties/c"}}}`,
		`{"$schema": "http://json-schema.org/draft-04/schema#", "id": "urn:example:root",
		  "definitions": {"a": {"id": "#four", "type": "string"}},
		  "properties": {"x": {"$ref": "#four"}, "y": {"$ref": "#/definitions/a"}}}`,
	}
	for _, text := range docs {
		raw := decodeDoc(t, text)
		doc := NewDoc(raw)
		c := jsonschema.NewCompiler()
		c.UseLoader(refuseLoader{})
		libDoc := decodeDoc(t, text)
		if err := c.AddResource(URL, libDoc); err != nil {
			t.Fatal(err)
		}
		checked := 0
		Walk(raw, func(n Node) bool {
			ref, ok := n.Object()["$ref"].(string)
			if !ok {
				return true
			}
			sch, err := c.Compile(URL + "#" + encodeFragment(n.Ptr))
			if err != nil || sch.Ref == nil {
				t.Errorf("library: %s: %v", n.Ptr, err)
				return true
			}
			got, err := doc.Resolve(ref, n.Base)
			if err != nil {
				t.Errorf("Resolve(%q) at %s: %v", ref, n.Ptr, err)
				return true
			}
			if want := Location(sch.Ref.Location); got.Ptr != want {
				t.Errorf("Resolve(%q) at %s reached %q, the validator %q", ref, n.Ptr, got.Ptr, want)
			}
			checked++
			return true
		})
		if checked < 2 {
			t.Errorf("only %d references checked in %s", checked, text)
		}
	}
}

// TestWalk: Walk visits schema positions only, parents first, with each
// node's pointer, base and depth; false skips a node's subschemas, and a
// change fn makes is what the walk goes on with.
func TestWalk(t *testing.T) {
	t.Parallel()
	root := decodeDoc(t, `{
		"$id": "https://example.com/r.json",
		"properties": {"a/b": {"type": "string", "enum": [{"type": "x"}]}, "skip": {"not": {"type": "null"}}},
		"items": [{"const": {"properties": {}}}],
		"oneOf": [{"$id": "sub.json", "anyOf": [{"type": "integer"}]}],
		"examples": [{"type": "string"}],
		"x-unknown": {"type": "string"}
	}`)
	var got []string
	Walk(root, func(n Node) bool {
		got = append(got, n.Ptr+" "+n.Base+" "+two(n.Depth))
		obj := n.Object()
		if n.Ptr == "" {
			obj["anyOf"] = obj["oneOf"] // seen by the walk below
			delete(obj, "oneOf")
		}
		return n.Ptr != "/properties/skip"
	})
	slices.Sort(got)
	want := []string{
		" https://example.com/r.json 00",
		"/anyOf/0 https://example.com/sub.json 01",
		"/anyOf/0/anyOf/0 https://example.com/sub.json 02",
		"/items/0 https://example.com/r.json 01",
		"/properties/a~1b https://example.com/r.json 01",
		"/properties/skip https://example.com/r.json 01",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Walk visited\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// FuzzDocResolve: any document and reference resolve, or fail with
// ErrRef, without panicking; Deref from any node ends within the bound.
func FuzzDocResolve(f *testing.F) {
	f.Add(`{"$id": "https://e.com/r.json", "$defs": {"a b": {"$anchor": "x"}}, "properties": {"p": {"$ref": "#/$defs/a%20b"}}}`, "#x")
	f.Add(`{"$schema": "http://json-schema.org/draft-04/schema#", "id": "urn:x", "definitions": {"a": {"id": "#a"}}}`, "#a")
	f.Add(`{"$ref": "#", "items": [{"$ref": "#/items/0"}]}`, "#/items/0")
	f.Add(`true`, "#/a~2")
	f.Fuzz(func(t *testing.T, text, ref string) {
		var root any
		if json.Unmarshal([]byte(text), &root) != nil {
			return
		}
		doc := NewDoc(root)
		_, err := doc.Resolve(ref, doc.Root().Base)
		if err != nil && !errors.Is(err, ErrRef) {
			t.Fatalf("Resolve(%q): error %v does not match ErrRef", ref, err)
		}
		Walk(root, func(w Node) bool {
			if _, err := doc.Deref(w, nil); err != nil && !errors.Is(err, ErrRef) {
				t.Fatalf("Deref(%s): error %v does not match ErrRef", w.Ptr, err)
			}
			return true
		})
	})
}
