package validate

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxUnfolded bounds the subschemas a schema unfolds to when each
// reference is replaced by what it names (cycles counted once). Validating
// a value that fails can visit each of them, and build an error for it: 22
// levels of "anyOf": [{"$ref": next}, {"$ref": next}] unfold to 4 million,
// and checking one wrong reply took 34 s and 4.4 GB. Real schemas, shared
// definitions and all, stay far below.
const MaxUnfolded = 100_000

// unfolded returns the number of subschemas s unfolds to, counting at most
// to limit+1.
func unfolded(s *jsonschema.Schema, limit int) int {
	memo := map[*jsonschema.Schema]int{}
	const inProgress = -1
	var size func(s *jsonschema.Schema) int
	size = func(s *jsonschema.Schema) int {
		if s == nil {
			return 0
		}
		switch n, ok := memo[s]; {
		case ok && n == inProgress:
			return 0 // a cycle: recursion is bounded by the value's depth
		case ok:
			return n
		}
		memo[s] = inProgress
		n := 1
		add := func(subs ...*jsonschema.Schema) {
			for _, sub := range subs {
				if n <= limit {
					n += size(sub)
				}
			}
		}
		add(s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames, s.UnevaluatedProperties,
			s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema)
		if s.DynamicRef != nil {
			add(s.DynamicRef.Ref)
		}
		add(s.AllOf...)
		add(s.AnyOf...)
		add(s.OneOf...)
		add(s.PrefixItems...)
		for _, sub := range s.Properties {
			add(sub)
		}
		for _, sub := range s.PatternProperties {
			add(sub)
		}
		for _, sub := range s.DependentSchemas {
			add(sub)
		}
		for _, dep := range s.Dependencies {
			if sub, ok := dep.(*jsonschema.Schema); ok {
				add(sub)
			}
		}
		for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
			switch x := v.(type) {
			case *jsonschema.Schema:
				add(x)
			case []*jsonschema.Schema:
				add(x...)
			}
		}
		n = min(n, limit+1)
		memo[s] = n
		return n
	}
	return size(s)
}
