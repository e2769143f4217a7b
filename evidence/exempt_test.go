package evidence

import (
	"github.com/fixpoint-dev/fixpoint"

	"slices"
	"testing"
)

func TestExempt(t *testing.T) {
	t.Parallel()
	schema := decode(t, `{
		"type": "object",
		"properties": {
			"vendor": {"type": "string"},
			"category": {"enum": ["billing", "bug"]},
			"kind": {"const": "invoice"},
			"summary": {"type": "string", "x-fixpoint-evidence": false},
			"quoted": {"type": "string", "x-fixpoint-evidence": true},
			"analysis": {"type": "object", "x-fixpoint-evidence": false,
				"properties": {"sentiment": {"type": "string"}, "notes": {"type": "array"}}},
			"lines": {"type": "array", "items": {"type": "object", "properties": {
				"sku": {"type": "string"}, "unit": {"enum": ["kg", "pcs"]}}}},
			"pair": {"prefixItems": [{"type": "string"}, {"enum": [1, 2]}], "items": {"x-fixpoint-evidence": false}},
			"tags": {"type": "object", "properties": {"owner": {"type": "string"}},
				"patternProperties": {"^x-": {"type": "string"}},
				"additionalProperties": {"x-fixpoint-evidence": false}},
			"byref": {"$ref": "#/$defs/status"},
			"escaped": {"$ref": "#/$defs/a~1b"},
			"tree": {"$ref": "#/$defs/node"},
			"either": {"anyOf": [{"type": "null"}, {"enum": ["x", "y"]}]},
			"both": {"allOf": [{"type": "string"}, {"x-fixpoint-evidence": false}]},
			"a/b": {"enum": [1]},
			"external": {"$ref": "other.json#/$defs/status"},
			"cond": {"if": {"enum": ["x"]}, "not": {"const": "y"}, "contains": {"enum": [1]}}
		},
		"$defs": {
			"status": {"enum": ["open", "closed"]},
			"a/b": {"x-fixpoint-evidence": false},
			"node": {"type": "object", "properties": {
				"label": {"type": "string"},
				"kind": {"enum": ["leaf", "branch"]},
				"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}
		}
	}`)
	exempt := Exempt(schema)
	yes := []string{
		"/category", "/kind", "/summary", "/analysis", "/analysis/sentiment", "/analysis/notes/3",
		"/lines/0/unit", "/lines/17/unit", "/pair/1", "/pair/2", "/pair/9/deep",
		"/tags/extra", "/byref", "/escaped", "/tree/kind", "/tree/children/0/kind",
		"/tree/children/4/children/0/children/2/kind", "/either", "/both", "/a~1b",
	}
	no := []string{
		"", "/vendor", "/quoted", "/lines/0/sku", "/lines/x/unit", "/lines/01/unit", "/pair/0",
		"/tags/owner", "/tags/x-custom", "/tree/label", "/tree/children/0/label", "/missing",
		"/external", "/cond",
	}
	for _, p := range yes {
		if !exempt(p) {
			t.Errorf("Exempt(schema)(%q) = false, want true", p)
		}
	}
	for _, p := range no {
		if exempt(p) {
			t.Errorf("Exempt(schema)(%q) = true, want false", p)
		}
	}
}

// TestExemptFollowsReferencesAsDoc: references resolve as validate.Doc
// resolves them, against the "$id" of the resource holding them and by
// anchor, not only as pointers from the document's root.
func TestExemptFollowsReferencesAsDoc(t *testing.T) {
	t.Parallel()
	exempt := Exempt(decode(t, `{
		"$id": "https://example.com/order",
		"properties": {
			"address": {"$ref": "https://example.com/addr"},
			"state": {"$ref": "#state"},
			"street": {"$ref": "addr#/properties/street"}
		},
		"$defs": {
			"addr": {"$id": "https://example.com/addr",
				"properties": {"country": {"$ref": "#/$defs/cc"}, "street": {"type": "string"}},
				"$defs": {"cc": {"enum": ["DE", "FR"]}}},
			"state": {"$anchor": "state", "const": "open"}
		}
	}`))
	for p, want := range map[string]bool{"/address/country": true, "/address/street": false, "/state": true, "/street": false} {
		if got := exempt(p); got != want {
			t.Errorf("exempt(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestExemptDraft07Tuples(t *testing.T) {
	t.Parallel()
	exempt := Exempt(decode(t, `{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"definitions": {"code": {"const": "A"}},
		"properties": {
			"tuple": {"items": [{"type": "string"}, {"$ref": "#/definitions/code"}], "additionalItems": {"enum": [0]}},
			"list": {"items": {"enum": [1]}, "additionalItems": {"type": "string"}}
		}
	}`))
	for p, want := range map[string]bool{
		"/tuple/0": false, "/tuple/1": true, "/tuple/2": true, "/tuple/9": true,
		"/list/0": true, "/list/5": true,
	} {
		if got := exempt(p); got != want {
			t.Errorf("exempt(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestExemptNothing(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`true`, `{}`, `{"properties": {"a": {"type": "string"}}}`} {
		if Exempt(decode(t, s))("/a") {
			t.Errorf("schema %s exempts /a", s)
		}
	}
}

// TestAlignSkipsExempt: an exempt location is not graded, nor anything in
// it, and is counted as exempt.
func TestAlignSkipsExempt(t *testing.T) {
	t.Parallel()
	schema := decode(t, `{"properties": {
		"vendor": {"type": "string"},
		"category": {"enum": ["billing"]},
		"analysis": {"x-fixpoint-evidence": false},
		"flag": {"type": "boolean"}}}`)
	v := decode(t, `{"vendor": "Globex", "category": "billing", "analysis": {"summary": "Lilac ripple timber", "score": 3}, "flag": true}`)
	r := Align("A ticket from Globex about a double charge.", v, Exempt(schema))
	if !slices.Equal(r.Leaves, []fixpoint.Grounding{{Path: "/vendor", Grade: fixpoint.GradeExact, Start: 14, End: 20}}) || r.Summary != (Summary{Exact: 1, Exempt: 3}) {
		t.Fatalf("got %+v %+v", r.Leaves, r.Summary)
	}
}
