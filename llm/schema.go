package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/subschema"
)

// OpenAI's strict structured outputs accept a subset of JSON Schema
// (platform.openai.com/docs/guides/structured-outputs, "Supported schemas"):
// strings may use pattern and a few formats, numbers multipleOf and the
// (exclusive) bounds, arrays minItems and maxItems; anyOf, $ref and $defs
// are supported; every object must set additionalProperties false and list
// every property as required. Everything else (minLength, maxLength, allOf,
// not, if/then/else, patternProperties, uniqueItems, contains, default,
// examples, $schema, ...) is rejected, so it is left out of what is sent.
var strictAllowed = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "anyOf": true, "$ref": true,
	"$defs": true, "definitions": true, "description": true, "title": true,
	"pattern": true, "format": true, "multipleOf": true, "minimum": true,
	"maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minItems": true, "maxItems": true,
}

// localKeywordPrefix begins fixpoint's own keywords (x-fixpoint-rules,
// x-fixpoint-evidence): the worker checks them after the reply, so strict
// mode leaves them out of what it sends without reporting them dropped.
const localKeywordPrefix = "x-fixpoint-"

// strictFormats are the string formats strict mode accepts.
var strictFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true, "email": true,
	"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
}

// strictSchema rewrites schema for OpenAI strict mode. It returns the schema
// to send, the JSON pointers of the keywords dropped or changed (sorted), and
// whether strict mode can be used at all (the root must be an object
// schema nested at most maxStrictDepth deep). Every instance of the result
// also satisfies the original schema minus the dropped keywords, which are
// still validated locally. It walks the schema as the tree it is
// (subschema.Walk): a $ref is sent as written, never followed, so a schema
// that refers to itself is walked once.
func strictSchema(schema json.RawMessage) (json.RawMessage, []string, bool, error) {
	return subsetSchema(schema, func(root map[string]any) bool { return root["type"] == "object" }, strictNode)
}

// subsetSchema cuts schema to a provider's subset: node rewrites each
// schema object in place (subschema.Walk reads its subschemas after it,
// so a keyword it drops is not walked), appending the pointers of what
// it drops or changes. The result holds those pointers sorted. ok is
// false, and schema comes back as given, when its root is not an object
// that keep takes, or when a subschema lies deeper than maxStrictDepth.
func subsetSchema(schema json.RawMessage, keep func(root map[string]any) bool, node func(s map[string]any, ptr string, dropped *[]string)) (json.RawMessage, []string, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, nil, false, fmt.Errorf("decode schema: %w", err)
	}
	obj, ok := root.(map[string]any)
	if !ok || !keep(obj) {
		return schema, nil, false, nil
	}
	var dropped []string
	deep := false
	subschema.Walk(obj, func(n subschema.Node) bool {
		if deep = deep || n.Depth > maxStrictDepth; deep {
			return false
		}
		node(n.Object(), n.Ptr, &dropped)
		return true
	})
	if deep {
		return schema, nil, false, nil
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, false, fmt.Errorf("encode schema: %w", err)
	}
	sort.Strings(dropped)
	return out, dropped, true, nil
}

// oneOfAsAnyOf replaces s's oneOf, which neither provider's subset
// takes, by an anyOf (every oneOf instance is an anyOf instance) unless s
// has one.
func oneOfAsAnyOf(s map[string]any, ptr string, dropped *[]string) {
	if one, ok := s["oneOf"]; ok {
		delete(s, "oneOf")
		*dropped = append(*dropped, ptr+"/oneOf")
		if _, has := s["anyOf"]; !has {
			s["anyOf"] = one
		}
	}
}

// closeObject sets additionalProperties false on s when it is an object
// schema, as both providers' subsets want, and returns its properties;
// ok is false for a schema of another kind.
func closeObject(s map[string]any, ptr string, dropped *[]string) (props map[string]any, ok bool) {
	props, hasProps := s["properties"].(map[string]any)
	if s["type"] != "object" && !hasProps {
		return nil, false
	}
	if ap, ok := s["additionalProperties"]; !ok || ap != false {
		if ok {
			*dropped = append(*dropped, ptr+"/additionalProperties")
		}
		s["additionalProperties"] = false
	}
	return props, true
}

// strictNode makes the schema object s, found at ptr, strict-compatible in
// place, appending the pointers of what it drops or changes to dropped. It
// leaves its subschemas to the walk, which reads them after: a keyword it
// drops is not walked.
func strictNode(s map[string]any, ptr string, dropped *[]string) {
	oneOfAsAnyOf(s, ptr, dropped)
	for k, v := range s {
		switch {
		case strings.HasPrefix(k, localKeywordPrefix):
			delete(s, k) // checked here, never the provider's: nothing was dropped
		case !strictAllowed[k]:
			delete(s, k)
			*dropped = append(*dropped, ptr+"/"+extract.PointerToken(k))
		case k == "format":
			if f, _ := v.(string); !strictFormats[f] {
				delete(s, k)
				*dropped = append(*dropped, ptr+"/format")
			}
		case k == "items":
			if _, ok := v.(map[string]any); !ok {
				delete(s, k) // tuple form (draft 4) is not accepted
				*dropped = append(*dropped, ptr+"/items")
			}
		}
	}
	if props, ok := closeObject(s, ptr, dropped); ok {
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		req, _ := s["required"].([]any)
		if !requiresExactly(req, names) {
			if len(req) > 0 || len(names) > 0 {
				*dropped = append(*dropped, ptr+"/required")
			}
			all := make([]any, len(names))
			for i, n := range names {
				all[i] = n
			}
			s["required"] = all
		}
	}
}

// requiresExactly reports whether req lists each of names (sorted) once
// and nothing else, as strict mode wants.
func requiresExactly(req []any, names []string) bool {
	if len(req) != len(names) {
		return false
	}
	seen := make(map[string]bool, len(req))
	for _, r := range req {
		n, _ := r.(string)
		if _, found := slices.BinarySearch(names, n); seen[n] || !found {
			return false
		}
		seen[n] = true
	}
	return true
}

// maxStrictDepth bounds the nesting of subschemas the strict transform
// walks; a deeper schema is sent as given, without strict mode.
const maxStrictDepth = 64

// CheckSchemaMode reports a schema the provider cannot take in mode: a tool
// call's input must be an object, so where the provider's native form of
// mode is a tool, forced or offered (and Anthropic's output_config, which
// falls back to one), the schema's root must say "type": "object";
// the provider would refuse every request with a 400. An unknown provider
// or mode is left to the checks that name them.
func CheckSchemaMode(provider string, mode fixpoint.Mode, schema []byte) error {
	p, _ := ProviderNamed(provider)
	switch p.Modes[mode] {
	case NativeFunctionForced, NativeToolForced, NativeToolOffered, NativeOutputConfig:
	default:
		return nil
	}
	var root struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(schema, &root); err == nil && root.Type == "object" {
		return nil
	}
	return fmt.Errorf("mode %s on %s sends the schema as a tool's input, which must be an object: the schema's root needs \"type\": \"object\" (or use mode prompt)", mode, provider)
}
