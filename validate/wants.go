package validate

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/subschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// What a fix of a value asks of the compiled schema: the questions a
// schema-guided repair (package repair) needs answered, and the validations
// it makes, within one check of the schema.

// Bounds of one Reader's walk to a location: viewBudget bounds the schema
// nodes visited to learn what the schema wants there; viewDepth the
// in-place applicators ($ref, allOf, anyOf, oneOf, then, else,
// dependentSchemas) followed without moving down the value.
const (
	viewBudget = 2048
	viewDepth  = 32
)

// A Coercer makes the schema-guided repairs of v, whose errors against the
// schema are errs (not empty), within the check c, and returns the repaired
// value, the repairs in the order made and the errors left (nil when the
// value is valid). It must not modify v, and must validate through c only:
// c holds the schema's pattern clock, which Schema.Validate would wait for.
// Package repair supplies the coercers; CheckWith calls one for each
// candidate it tries.
type Coercer func(c *Session, v any, errs []fixpoint.ValidationError) (fixed any, fixes []fixpoint.Repair, left []fixpoint.ValidationError)

// Session is one check of a schema in progress. For a schema with
// backtracking patterns, the check holds the schema's pattern clock: its
// validations share one budget for those matches, and other checks of the
// schema wait for it to end. A Session is used by one goroutine, and only
// until its release is called.
type Session struct{ s *Schema }

// Begin starts a check of s (which may be nil: then nothing is invalid).
// The caller calls release when the check ends, and must not check s by
// any other means before that.
func (s *Schema) Begin() (c *Session, release func()) {
	return &Session{s}, s.guard()
}

// Validate is Schema.Validate within the check.
func (c *Session) Validate(v any) []fixpoint.ValidationError {
	return c.s.validate(v)
}

// Checks estimates the checks validating v makes, counted until they pass
// MaxChecks; 0 means not known (the schema is too wide to tabulate, and its
// values are not bounded).
func (c *Session) Checks(v any) int {
	if c.s == nil || c.s.sch == nil {
		return 0
	}
	_, n := c.s.checks(v)
	return n
}

// Wants is what the schema wants of the value at one location, as far as a
// schema-guided repair needs to know.
type Wants struct {
	// Types are the types some branch of the schema allows here (by type,
	// const and enum); subschema.TypeAny when unconstrained.
	Types subschema.Types
	// StringsClosed: the strings allowed here are only those in Strings
	// (by const or enum, or none when Types has no string).
	StringsClosed bool
	Strings       []string
	// Required are the property names some schema here requires of an
	// object (in any branch: counted as required).
	Required []string
	// Props are the property names some schema here declares in
	// "properties" (in any branch, conditional ones too); Patterns is set
	// when some schema here has patternProperties.
	Props    []string
	Patterns bool
	// Unknown: part of the schema here could not be read ($dynamicRef,
	// $recursiveRef, a reference loop, the budget ran out); what a repair
	// would rest on is not known.
	Unknown bool
	// Key are the fields that identify an item of the array here, as a
	// schema here names them with "x-fixpoint-key" (see ItemKey): the
	// first such schema's, nil when none does (or names them wrongly).
	Key []string
	// Tuple: a schema here checks the array's items by their position
	// (prefixItems, or draft-07 "items" as a list).
	Tuple bool
}

// KeyKeyword is the schema keyword that names the fields identifying an
// item of an array: "x-fixpoint-key": "name", or a list of names.
const KeyKeyword = "x-fixpoint-key"

// ItemKey reads the value of a KeyKeyword: a field name, or a list of
// one or more, none empty nor repeated. The error says what is wrong.
func ItemKey(v any) ([]string, error) {
	var names []string
	switch k := v.(type) {
	case string:
		names = []string{k}
	case []any:
		for _, x := range k {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%s lists %s: it must list field names (strings)", KeyKeyword, describe(x))
			}
			names = append(names, s)
		}
	default:
		return nil, fmt.Errorf("%s is %s: it must be a field name or a list of them", KeyKeyword, describe(v))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s is an empty list: name at least one field", KeyKeyword)
	}
	for i, n := range names {
		if n == "" {
			return nil, fmt.Errorf("%s names an empty field name", KeyKeyword)
		}
		if slices.Contains(names[:i], n) {
			return nil, fmt.Errorf("%s names %q twice", KeyKeyword, n)
		}
	}
	return names, nil
}

// keyOf returns the item key the subschema sch declares, nil when none.
func (s *Schema) keyOf(sch *jsonschema.Schema) []string {
	s.keysOnce.Do(func() {
		if !bytes.Contains(s.raw, []byte(KeyKeyword)) {
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.raw))
		if err != nil {
			return
		}
		s.keys = map[string]any{}
		subschema.Walk(doc, func(n subschema.Node) bool {
			if k, ok := n.Object()[KeyKeyword]; ok {
				s.keys[n.Ptr] = k
			}
			return true
		})
	})
	if s.keys == nil || sch.Location != subschema.URL && !strings.HasPrefix(sch.Location, subschema.URL+"#") {
		return nil
	}
	k, ok := s.keys[subschema.Location(sch.Location)]
	if !ok {
		return nil
	}
	names, _ := ItemKey(k)
	return names
}

// A Reader reads what the schema wants at the locations of one value. Its
// reads share what they learn (which alternatives the value fails, and
// why), which is only right while the value does not change: a Reader is
// for one value, within the check that made it.
type Reader struct {
	s     *Schema
	root  any
	cache *viewCache
}

// Reader returns a Reader of what the schema wants at the locations of
// root.
func (c *Session) Reader(root any) *Reader {
	return &Reader{s: c.s, root: root, cache: newViewCache()}
}

// At returns what the schema wants of the value at toks (unescaped
// pointer tokens) in the Reader's value.
//
// It is read from the compiled schema by following the value's path
// through properties, patternProperties, additionalProperties, prefixItems,
// items and additionalItems, and at each level through $ref, allOf (all
// apply), anyOf and oneOf (any may apply: the types and allowed strings of
// the alternatives are united; an alternative the value fails
// elsewhere on a const or enum, such as a discriminator, or on the type of
// a container on the way, is left out, unless all are), if/then/else and
// dependentSchemas (only their "required" counts, as required, and the
// names they declare). A location reached through $dynamicRef or
// $recursiveRef, a loop of references that consumes no part of the value,
// or more than a fixed budget of schema nodes is Unknown. "not" and
// unevaluatedProperties/Items are not read: a repair validates what it
// changed. Key and Tuple are read from the schemas that apply at the
// location itself (not from "then", "else" or dependentSchemas).
func (r *Reader) At(toks []string) Wants {
	if r.s == nil || r.s.sch == nil {
		return Wants{Types: subschema.TypeAny}
	}
	v := r.s.viewAtCached(r.root, toks, r.cache)
	return Wants{Types: v.kinds, StringsClosed: v.strClosed, Strings: v.strs, Required: v.required,
		Props: v.props, Patterns: v.patterns, Unknown: v.unknown, Key: v.key, Tuple: v.tuple}
}

// NumberTextProblem reports what is wrong with s as the text of a JSON
// number Validate accepts (the JSON grammar, at most 1000 characters, an
// exponent within ±1000), "" when nothing is.
func NumberTextProblem(s string) string { return numberTextProblem(s) }

// Pointer joins unescaped tokens into a JSON pointer (RFC 6901).
func Pointer(toks []string) string { return pointer(toks) }

// SplitPointer splits a JSON pointer into unescaped tokens.
func SplitPointer(ptr string) []string { return splitPointer(ptr) }

// view is what the schema says about the value at one location, as far as
// coercion needs to know.
type view struct {
	// kinds are the kinds of value some branch of the schema allows here
	// (by type, const and enum); kAll when unconstrained.
	kinds subschema.Types
	// strClosed: the strings allowed here are only those in strs (by const
	// or enum, or none when kinds has no string).
	strClosed bool
	strs      []string
	// required are the property names some schema here requires of an
	// object (in any branch: counted as required).
	required []string
	// props are the property names some schema here declares in
	// "properties" (in any branch, conditional ones too); patterns is set
	// when some schema here has patternProperties.
	props    []string
	patterns bool
	// unknown: part of the schema here could not be read ($dynamicRef,
	// $recursiveRef, a reference loop, the budget ran out); no fix.
	unknown bool
	// key is the item key a schema here declares (the first found);
	// tuple: a schema here checks items by position.
	key   []string
	tuple bool
}

var (
	anyView     = view{kinds: subschema.TypeAny}
	falseView   = view{strClosed: true}
	unknownView = view{kinds: subschema.TypeAny, unknown: true}
)

// norm closes the strings when no string is allowed.
func (v view) norm() view {
	if v.kinds&subschema.TypeString == 0 {
		v.strClosed, v.strs = true, nil
	}
	return v
}

// conj is the view of a value both a and b apply to.
func conj(a, b view) view {
	out := view{kinds: a.kinds & b.kinds, unknown: a.unknown || b.unknown, required: concat(a.required, b.required),
		props: concat(a.props, b.props), patterns: a.patterns || b.patterns, key: firstKey(a.key, b.key), tuple: a.tuple || b.tuple}
	switch {
	case a.strClosed && b.strClosed:
		out.strClosed = true
		for _, s := range a.strs {
			if slices.Contains(b.strs, s) {
				out.strs = append(out.strs, s)
			}
		}
	case a.strClosed:
		out.strClosed, out.strs = true, a.strs
	case b.strClosed:
		out.strClosed, out.strs = true, b.strs
	}
	return out.norm()
}

// disj is the view of a value a or b applies to.
func disj(a, b view) view {
	out := view{kinds: a.kinds | b.kinds, unknown: a.unknown || b.unknown, required: concat(a.required, b.required),
		props: concat(a.props, b.props), patterns: a.patterns || b.patterns, key: firstKey(a.key, b.key), tuple: a.tuple || b.tuple}
	if a.strClosed && b.strClosed {
		out.strClosed, out.strs = true, concat(a.strs, b.strs)
	}
	return out.norm()
}

// firstKey is a, or b when a names no key.
func firstKey(a, b []string) []string {
	if a != nil {
		return a
	}
	return b
}

// concat joins two lists without sharing either's backing array.
func concat[T any](a, b []T) []T {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	return slices.Concat(a, b)
}

// viewWalker reads the schema along one path, within a budget.
type viewWalker struct {
	s      *Schema
	budget int
	chain  []*jsonschema.Schema // the in-place applicators followed at the current location
	path   []string             // the whole path walked
	cache  *viewCache
}

// viewAtCached returns what the schema says about the value at toks in
// root, sharing cache with other walks of root.
func (s *Schema) viewAtCached(root any, toks []string, cache *viewCache) view {
	w := viewWalker{s: s, budget: viewBudget, path: toks, cache: cache}
	return w.level(s.sch, root, toks).norm()
}

// level starts a new location: the chain of in-place applicators restarts.
func (w *viewWalker) level(s *jsonschema.Schema, v any, toks []string) view {
	saved := w.chain
	w.chain = nil
	out := w.at(s, v, toks, 0)
	w.chain = saved
	return out
}

// at returns the view of the value at toks under v, which s applies to.
func (w *viewWalker) at(s *jsonschema.Schema, v any, toks []string, depth int) view {
	if s == nil {
		return anyView
	}
	w.budget--
	if w.budget < 0 || depth > viewDepth {
		return unknownView
	}
	if s.Bool != nil {
		if *s.Bool {
			return anyView
		}
		return falseView
	}
	if slices.Contains(w.chain, s) {
		return unknownView // a loop that consumes no part of the value
	}
	w.chain = append(w.chain, s)
	defer func() { w.chain = w.chain[:len(w.chain)-1] }()

	// Before 2019-09 a "$ref" makes the validator ignore its siblings but
	// "const".
	legacy := s.DraftVersion < 2019 && s.Ref != nil
	var out view
	if len(toks) == 0 {
		out = w.cache.own(s, legacy)
		if !legacy {
			out.key = w.s.keyOf(s)
		}
	} else {
		out = w.child(s, v, toks, legacy)
	}
	if s.Ref != nil {
		out = conj(out, w.at(s.Ref, v, toks, depth+1))
	}
	if legacy {
		return out
	}
	if s.DynamicRef != nil || s.RecursiveRef != nil {
		out.unknown = true
	}
	for _, sub := range s.AllOf {
		out = conj(out, w.at(sub, v, toks, depth+1))
	}
	for _, group := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf} {
		if len(group) == 0 {
			continue
		}
		group = w.live(group, v, toks)
		d := w.at(group[0], v, toks, depth+1)
		for _, sub := range group[1:] {
			d = disj(d, w.at(sub, v, toks, depth+1))
		}
		out = conj(out, d)
	}
	// Conditional schemas: only what they require counts (as required), and
	// the names they declare.
	cond := []*jsonschema.Schema{s.Then, s.Else}
	for _, name := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		cond = append(cond, s.DependentSchemas[name])
	}
	for _, name := range slices.Sorted(maps.Keys(s.Dependencies)) {
		if sub, ok := s.Dependencies[name].(*jsonschema.Schema); ok {
			cond = append(cond, sub)
		}
	}
	for _, sub := range cond {
		if sub == nil {
			continue
		}
		c := w.at(sub, v, toks, depth+1)
		out.required = concat(out.required, c.required)
		out.props = concat(out.props, c.props)
		out.patterns = out.patterns || c.patterns
		out.unknown = out.unknown || c.unknown
	}
	return out
}

// live returns the alternatives of an anyOf or oneOf the value v may be
// meant for, as far as the location toks below it goes: all of them but
// those v fails, outside that location, on a const or enum (a discriminator
// such as {"kind": {"const": "dog"}}) or on the type of the value or of one
// of its containers on the way to the location. When that rules out every
// alternative, all of them.
func (w *viewWalker) live(group []*jsonschema.Schema, v any, toks []string) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	loc := pointer(w.path[:len(w.path)-len(toks)])
	for _, sub := range group {
		w.budget--
		k := failedKey{sub, loc}
		verr, ok := w.cache.failed[k]
		if !ok {
			if err := sub.Validate(v); err != nil && !errors.As(err, &verr) {
				verr = nil // not a validation failure: keep the alternative
			}
			w.cache.failed[k] = verr
		}
		if verr == nil || !w.cache.rulesOut(verr, toks) {
			out = append(out, sub)
		}
	}
	if len(out) == 0 {
		return group
	}
	return out
}

// viewCache is shared by the schema walks of one Reader, all on the
// same value: the alternatives of a oneOf at the root would otherwise
// validate, and their errors be searched, once per error of a large value.
type viewCache struct {
	// failed holds the validation of an alternative at a location (its
	// pointer): nil when it passes.
	failed map[failedKey]*jsonschema.ValidationError
	// off memoizes offPath; causes indexes the causes of an error by the
	// next token of their location.
	off    map[*jsonschema.ValidationError]bool
	causes map[*jsonschema.ValidationError]*causeIndex
	// owns memoizes own: an enum of 10,000 values under "items" was built
	// again for each of 2,000 wrong items.
	owns map[ownKey]view
}

type ownKey struct {
	s      *jsonschema.Schema
	legacy bool
}

// own is the package's own, memoized.
func (c *viewCache) own(s *jsonschema.Schema, legacy bool) view {
	k := ownKey{s, legacy}
	if v, ok := c.owns[k]; ok {
		return v
	}
	v := own(s, legacy)
	c.owns[k] = v
	return v
}

type failedKey struct {
	s   *jsonschema.Schema
	loc string
}

func newViewCache() *viewCache {
	return &viewCache{
		failed: map[failedKey]*jsonschema.ValidationError{},
		off:    map[*jsonschema.ValidationError]bool{},
		causes: map[*jsonschema.ValidationError]*causeIndex{},
		owns:   map[ownKey]view{},
	}
}

// causeIndex sorts the causes of an error at location L: those at L, and
// those below it by the token after L, with how many of those rule out
// wherever the location looked at is not under them.
type causeIndex struct {
	here     []*jsonschema.ValidationError
	below    map[string][]*jsonschema.ValidationError
	offBelow map[string]int
	offAll   int
}

// rulesOut reports whether the error tree e shows the value is not meant for
// the schema that raised it, as far as the location toks goes: see live.
// Each call follows only the path to toks; what lies off it is summarized
// once per tree.
func (c *viewCache) rulesOut(e *jsonschema.ValidationError, toks []string) bool {
	loc := e.InstanceLocation
	switch {
	case len(loc) >= len(toks) && slices.Equal(loc[:len(toks)], toks):
		return false // at or under the location
	case !slices.Equal(toks[:len(loc)], loc):
		return c.offPath(e) // beside the path to the location
	}
	// On the path, above the location.
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		idx := c.index(e)
		next := toks[len(loc)]
		if idx.offAll-idx.offBelow[next] > 0 {
			return true
		}
		for _, list := range [][]*jsonschema.ValidationError{idx.here, idx.below[next]} {
			for _, cause := range list {
				if c.rulesOut(cause, toks) {
					return true
				}
			}
		}
		return false
	case *kind.AnyOf, *kind.OneOf:
		return len(e.Causes) > 0 && !slices.ContainsFunc(e.Causes, func(cause *jsonschema.ValidationError) bool { return !c.rulesOut(cause, toks) })
	case *kind.Const, *kind.Enum, *kind.Type, *kind.FalseSchema:
		// A discriminator, or the type of the value or of a container on
		// the way.
		return true
	}
	return false
}

// offPath is rulesOut for an error beside the path to the location: only a
// const or enum failure rules out there (a type failure of a sibling does
// not), whatever the location.
func (c *viewCache) offPath(e *jsonschema.ValidationError) bool {
	if r, ok := c.off[e]; ok {
		return r
	}
	r := false
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		r = slices.ContainsFunc(e.Causes, c.offPath)
	case *kind.AnyOf, *kind.OneOf:
		r = len(e.Causes) > 0 && !slices.ContainsFunc(e.Causes, func(cause *jsonschema.ValidationError) bool { return !c.offPath(cause) })
	case *kind.Const, *kind.Enum:
		r = true
	}
	c.off[e] = r
	return r
}

// index returns the causeIndex of e's causes.
func (c *viewCache) index(e *jsonschema.ValidationError) *causeIndex {
	if idx, ok := c.causes[e]; ok {
		return idx
	}
	n := len(e.InstanceLocation)
	idx := &causeIndex{below: map[string][]*jsonschema.ValidationError{}, offBelow: map[string]int{}}
	for _, cause := range e.Causes {
		if len(cause.InstanceLocation) <= n {
			idx.here = append(idx.here, cause)
			continue
		}
		tok := cause.InstanceLocation[n]
		idx.below[tok] = append(idx.below[tok], cause)
		if c.offPath(cause) {
			idx.offBelow[tok]++
			idx.offAll++
		}
	}
	c.causes[e] = idx
	return idx
}

// own is the view of s's own keywords for the value it applies to.
func own(s *jsonschema.Schema, legacy bool) view {
	out := view{kinds: subschema.TypeAny}
	if s.Types != nil && !legacy {
		out.kinds &= subschema.TypesOf(s.Types)
	}
	if s.Const != nil {
		c := *s.Const
		out.kinds &= subschema.TypeOf(c)
		out.strClosed = true
		if str, ok := c.(string); ok {
			out.strs = []string{str}
		}
	}
	if s.Enum != nil && !legacy {
		var k subschema.Types
		var strs []string
		for _, x := range s.Enum.Values {
			k |= subschema.TypeOf(x)
			if str, ok := x.(string); ok {
				strs = append(strs, str)
			}
		}
		out.kinds &= k
		if out.strClosed {
			out = conj(out, view{kinds: subschema.TypeAny, strClosed: true, strs: strs})
		} else {
			out.strClosed, out.strs = true, strs
		}
	}
	if !legacy {
		out.required = s.Required
		out.props = slices.Sorted(maps.Keys(s.Properties))
		out.patterns = len(s.PatternProperties) > 0
		_, list := s.Items.([]*jsonschema.Schema)
		out.tuple = len(s.PrefixItems) > 0 || list
	}
	return out.norm()
}

// child is the view, under s's keywords for the items of v, of the value at
// toks (at least one token) below v.
func (w *viewWalker) child(s *jsonschema.Schema, v any, toks []string, legacy bool) view {
	if legacy {
		return anyView // only the "$ref" applies; the caller follows it
	}
	tok := toks[0]
	switch c := v.(type) {
	case map[string]any:
		cv, ok := c[tok]
		if !ok {
			return unknownView
		}
		out, matched := anyView, false
		if p, ok := s.Properties[tok]; ok {
			out, matched = conj(out, w.level(p, cv, toks[1:])), true
		}
		for re, p := range s.PatternProperties {
			w.budget--
			if re.MatchString(tok) {
				out, matched = conj(out, w.level(p, cv, toks[1:])), true
			}
		}
		if !matched {
			switch a := s.AdditionalProperties.(type) {
			case bool:
				if !a {
					out = falseView
				}
			case *jsonschema.Schema:
				out = conj(out, w.level(a, cv, toks[1:]))
			}
		}
		return out
	case []any:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(c) {
			return unknownView
		}
		var sub *jsonschema.Schema
		if s.DraftVersion >= 2020 {
			if i < len(s.PrefixItems) {
				sub = s.PrefixItems[i]
			} else {
				sub = s.Items2020
			}
		} else {
			switch items := s.Items.(type) {
			case *jsonschema.Schema:
				sub = items
			case []*jsonschema.Schema:
				if i < len(items) {
					sub = items[i]
				} else {
					switch a := s.AdditionalItems.(type) {
					case bool:
						if !a {
							return falseView
						}
					case *jsonschema.Schema:
						sub = a
					}
				}
			}
		}
		return w.level(sub, c[i], toks[1:])
	}
	return unknownView
}
