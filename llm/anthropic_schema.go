package llm

import (
	"encoding/json"
	"strings"

	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/subschema"
)

// Anthropic's structured outputs (output_config.format, generally
// available on the Claude API for the 4.5 and later models; the beta's
// top-level output_format and its structured-outputs-2025-11-13 header
// have moved there) accept a subset of JSON Schema
// (platform.claude.com/docs/en/build-with-claude/structured-outputs,
// "JSON Schema limitations", read 2026-12-07 in third-party copies and
// summaries of it: a mirror of the page, and the limits LangSchema's
// Anthropic converter quotes from it; and the subset the Python SDK's
// transform_schema keeps, anthropics/anthropic-sdk-python
// src/anthropic/lib/_parse/_transform.py, which drops pattern too):
// every basic type; enum of scalars; const, anyOf, allOf; local $ref
// with $defs and definitions; required; additionalProperties, which must
// be false on every object; items; minItems of 0 or 1; the string formats
// below; pattern without lookaround, backreferences or word boundaries;
// default, description and title. Numeric bounds, string lengths, other
// array bounds, not, if/then/else and recursive schemas are not; a schema
// over its complexity limits (more than 24 optional properties, more than
// 16 unions) is refused with a 400.
// What is left out is listed in Response.DroppedKeywords and checked
// locally, as for OpenAI's strict mode.
var anthropicAllowed = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "anyOf": true, "allOf": true, "$ref": true,
	"$defs": true, "definitions": true, "description": true, "title": true,
	"format": true, "minItems": true, "pattern": true, "default": true,
}

// anthropicFormats are the string formats structured outputs accept.
var anthropicFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true, "email": true,
	"hostname": true, "uri": true, "ipv4": true, "ipv6": true, "uuid": true,
}

// Anthropic's complexity limits of one request's schemas.
const (
	anthropicMaxOptional = 24
	anthropicMaxUnions   = 16
	// anthropicMaxRefs bounds the references the recursion check reads;
	// a schema with more is sent as a tool.
	anthropicMaxRefs = 1000
)

// anthropicSchema rewrites schema for output_config.format. It returns the
// schema to send, the JSON pointers of the keywords dropped or changed
// (sorted), and whether structured outputs can take it at all: not when
// it is recursive, refers outside itself, nests deeper than
// maxStrictDepth or is over the complexity limits; the caller then asks
// for a forced tool, as before. Every instance of the result satisfies
// the original schema minus the dropped keywords.
func anthropicSchema(schema json.RawMessage) (json.RawMessage, []string, bool, error) {
	optional, unions := 0, 0
	out, dropped, ok, err := subsetSchema(schema, func(root map[string]any) bool { return !recursive(root) },
		func(s map[string]any, ptr string, dropped *[]string) {
			o, u := anthropicNode(s, ptr, dropped)
			optional, unions = optional+o, unions+u
		})
	if err != nil || !ok || optional > anthropicMaxOptional || unions > anthropicMaxUnions {
		return schema, nil, false, err
	}
	return out, dropped, true, nil
}

// anthropicNode makes the schema object s, at ptr, fit structured outputs
// in place, appending what it drops or changes to dropped, and returns
// its optional properties and unions (anyOf, a list of types) for the
// complexity limits. Its subschemas are the walk's.
func anthropicNode(s map[string]any, ptr string, dropped *[]string) (optional, unions int) {
	oneOfAsAnyOf(s, ptr, dropped)
	for k, v := range s {
		drop := false
		switch {
		case strings.HasPrefix(k, localKeywordPrefix):
			delete(s, k) // checked here, never the provider's: nothing was dropped
		case !anthropicAllowed[k]:
			drop = true
		case k == "format":
			f, _ := v.(string)
			drop = !anthropicFormats[f]
		case k == "items":
			_, obj := v.(map[string]any)
			drop = !obj // tuple form (draft 4)
		case k == "minItems":
			n, _ := v.(json.Number)
			drop = n != "0" && n != "1"
		case k == "enum":
			drop = !scalars(v)
		case k == "pattern":
			p, _ := v.(string)
			drop = !simplePattern(p)
		}
		if drop {
			delete(s, k)
			*dropped = append(*dropped, ptr+"/"+extract.PointerToken(k))
		}
	}
	if props, ok := closeObject(s, ptr, dropped); ok {
		req, _ := s["required"].([]any)
		optional = len(props)
		for _, r := range req {
			if name, _ := r.(string); props[name] != nil {
				optional--
			}
		}
	}
	if _, ok := s["anyOf"]; ok {
		unions++
	}
	if _, ok := s["type"].([]any); ok {
		unions++
	}
	return max(optional, 0), unions
}

// simplePattern reports whether a pattern uses only the regular
// expressions structured outputs take: no lookaround, no backreference,
// no word boundary.
func simplePattern(p string) bool {
	for _, bad := range []string{"(?=", "(?!", "(?<=", "(?<!", `\b`, `\B`, `\k<`} {
		if strings.Contains(p, bad) {
			return false
		}
	}
	for i := 0; i+1 < len(p); i++ {
		if p[i] == '\\' {
			if p[i+1] >= '1' && p[i+1] <= '9' {
				return false // a backreference
			}
			i++ // an escape: \\b is a backslash and a b
		}
	}
	return true
}

// scalars reports whether v is a list of strings, numbers, booleans and
// nulls, the enums structured outputs take.
func scalars(v any) bool {
	list, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range list {
		switch e.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

// recursive reports whether a schema refers to itself, through any chain
// of $refs, or has a reference that cannot be followed in it (one outside
// the document, or more than anthropicMaxRefs): a reference whose target
// holds, directly or through the targets of the references inside it,
// a reference back to that target or to one enclosing it.
func recursive(root map[string]any) bool {
	doc := subschema.NewDoc(root)
	type ref struct{ at, target string }
	var refs []ref
	bad := false
	subschema.Walk(root, func(n subschema.Node) bool {
		r, ok := n.Object()["$ref"].(string)
		if !ok || bad {
			return !bad
		}
		t, err := doc.Resolve(r, n.Base)
		if err != nil || len(refs) == anthropicMaxRefs {
			bad = true
			return false
		}
		refs = append(refs, ref{at: n.Ptr, target: t.Ptr})
		return true
	})
	if bad {
		return true
	}
	within := func(ptr, target string) bool {
		return target == "" || ptr == target || strings.HasPrefix(ptr, target+"/")
	}
	// A depth-first search for a cycle: reference i leads to j when j is
	// inside i's target.
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(refs))
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = open
		for j := range refs {
			if !within(refs[j].at, refs[i].target) {
				continue
			}
			if state[j] == open || state[j] == unseen && visit(j) {
				return true
			}
		}
		state[i] = done
		return false
	}
	for i := range refs {
		if state[i] == unseen && visit(i) {
			return true
		}
	}
	return false
}
