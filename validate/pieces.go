package validate

import (
	"cmp"
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

// MaxErrors bounds the errors one validation keeps. A reply of 60,000
// wrong items (180,000 errors, 1.5 MB) made the schema library build a
// tree of them all and the worker hold every one, flattened: 91 MB of
// heap at the peak to validate it, 211 MB to check it, 1.2 GB with a few
// such replies checked at once. Past
// the bound a validation keeps the first MaxErrors in their order and the
// first error of each keyword, and one more error, of keyword
// KeywordMoreErrors, counts the others by keyword (see ErrorCount).
const MaxErrors = 20_000

// KeywordMoreErrors is the keyword of the last error of a list that stands
// for the errors not kept. Its message reads "N more errors, not kept:
// required 1100, type 901" (most first), its path is the root and its
// class is that of the errors it counts.
const KeywordMoreErrors = "moreErrors"

// ErrorCount is how many errors errs stands for: its length, plus those
// a last error of keyword KeywordMoreErrors counts, less that one.
func ErrorCount(errs []fixpoint.ValidationError) int {
	n := len(errs)
	if n > 0 && errs[n-1].Keyword == KeywordMoreErrors {
		var more int
		if _, err := fmt.Sscanf(errs[n-1].Message, "%d more errors", &more); err == nil {
			n += more - 1
		}
	}
	return n
}

// errorCap gathers the errors of a validation, part by part, keeping at
// most max of them (1.25 times as many before it trims them) plus the
// first of each keyword. The parts are sorted and free of duplicates, and
// no error is in two parts.
type errorCap struct {
	max int
	buf []fixpoint.ValidationError // the smallest errors seen, past max not yet trimmed
	// bound is the greatest error kept once buf was trimmed: a greater
	// one is only counted. (The parts come mostly in order: after the
	// first trim, most errors are past it.)
	bound *fixpoint.ValidationError
	first map[string]fixpoint.ValidationError
	count map[string]int // every error seen, by keyword
	total int
}

func newErrorCap(max int) *errorCap {
	return &errorCap{max: max, first: map[string]fixpoint.ValidationError{}, count: map[string]int{}}
}

func compareErrors(a, b fixpoint.ValidationError) int {
	return cmp.Or(comparePointers(a.Path, b.Path), strings.Compare(a.Keyword, b.Keyword), strings.Compare(a.Message, b.Message))
}

func (c *errorCap) add(errs []fixpoint.ValidationError) {
	for _, e := range errs {
		c.total++
		c.count[e.Keyword]++
		if f, ok := c.first[e.Keyword]; !ok || compareErrors(e, f) < 0 {
			c.first[e.Keyword] = e
		}
		if c.bound == nil || compareErrors(e, *c.bound) < 0 {
			c.buf = append(c.buf, e)
		}
	}
	if len(c.buf) > c.max+c.max/4 {
		c.trim()
	}
}

// trim keeps the max smallest errors of buf.
func (c *errorCap) trim() {
	slices.SortStableFunc(c.buf, compareErrors)
	if len(c.buf) > c.max {
		clear(c.buf[c.max:]) // let the dropped messages go
		c.buf = c.buf[:c.max]
		last := c.buf[c.max-1]
		c.bound = &last
	}
}

// result returns the errors kept, sorted, then one of keyword
// KeywordMoreErrors counting the others when there are any.
func (c *errorCap) result() []fixpoint.ValidationError {
	if c.total == 0 {
		return nil
	}
	c.trim()
	if c.total <= c.max {
		return c.buf
	}
	kept := slices.Clone(c.buf) // not the room trimming needed
	for _, k := range slices.Sorted(maps.Keys(c.first)) {
		f := c.first[k]
		if _, found := slices.BinarySearchFunc(c.buf[:c.max], f, compareErrors); !found {
			kept = append(kept, f)
		}
	}
	slices.SortStableFunc(kept, compareErrors)
	left := maps.Clone(c.count)
	for _, e := range kept {
		left[e.Keyword]--
	}
	return append(kept, moreErrors(left))
}

// moreErrors is the error that counts the errors not kept, by keyword.
func moreErrors(left map[string]int) fixpoint.ValidationError {
	keys := slices.DeleteFunc(slices.Collect(maps.Keys(left)), func(k string) bool { return left[k] <= 0 })
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(left[b]-left[a], strings.Compare(a, b)) })
	parts := make([]string, len(keys))
	n := 0
	class := make([]fixpoint.ValidationError, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + strconv.Itoa(left[k])
		n += left[k]
		class[i] = fixpoint.ValidationError{Keyword: k}
	}
	return fixpoint.ValidationError{Path: "", Keyword: KeywordMoreErrors, Class: ClassOf(class),
		Message: fmt.Sprintf("%d more errors, not kept: %s", n, strings.Join(parts, ", "))}
}

// capErrors bounds a sorted list of errors free of duplicates (see
// MaxErrors).
func capErrors(errs []fixpoint.ValidationError) []fixpoint.ValidationError {
	if len(errs) <= MaxErrors {
		return errs
	}
	c := newErrorCap(MaxErrors)
	c.add(errs)
	return c.result()
}

// Validating a large value piece by piece.
//
// The library builds the tree of every error of the value it validates
// before it returns. A value of more than pieceMin places is validated in
// pieces instead, so that no tree holds more than one piece's errors and
// no list more than 1.25 times MaxErrors: where the schema at an array or
// object only says what its items or members are (properties,
// patternProperties, additionalProperties, items, prefixItems, and
// keywords of the container itself, through a "$ref" standing alone),
// the container is checked against a copy of that schema whose subschemas
// for its children are true, and each child against its own subschema,
// as the library does. Anything else (an applicator, const, enum, format,
// contains, unevaluated*) is validated whole, as is every value when the
// schema holds a dynamic or recursive reference, whose target depends on
// the path taken to it. The errors are those of validating the value
// whole (TestPiecewiseSameErrors).

// pieceMin is the places in a value above which it is validated piece
// by piece.
const pieceMin = 512

// trueSchema stands in for a child's subschema in a container's own
// check.
var trueSchema = func() *jsonschema.Schema {
	t := true
	return &jsonschema.Schema{Bool: &t}
}()

// validateAt validates x, the value at toks in root, against sch, adding
// its errors to c.
func (s *Schema) validateAt(sch *jsonschema.Schema, root, x any, toks []string, c *errorCap) {
	if s.pieceMin < 0 || places(x, s.pieceMin) <= s.pieceMin {
		s.whole([]*jsonschema.Schema{sch}, root, x, toks, c)
		return
	}
	plain := standalone(sch)
	if plain == nil || plain.Ref != nil {
		s.whole([]*jsonschema.Schema{sch}, root, x, toks, c)
		return
	}
	switch x := x.(type) {
	case []any:
		if !containerOnly(plain, "array") {
			s.whole([]*jsonschema.Schema{sch}, root, x, toks, c)
			return
		}
		own := *plain
		own.PrefixItems = trueSchemas(len(plain.PrefixItems))
		if plain.Items2020 != nil {
			own.Items2020 = trueSchema
		}
		switch items := plain.Items.(type) {
		case *jsonschema.Schema:
			own.Items = trueSchema
		case []*jsonschema.Schema:
			own.Items = trueSchemas(len(items))
		}
		if _, ok := plain.AdditionalItems.(*jsonschema.Schema); ok {
			own.AdditionalItems = trueSchema
		}
		s.whole([]*jsonschema.Schema{&own}, root, x, toks, c)
		for i, item := range x {
			if sub := itemSchema(plain, i); sub != nil {
				s.validateAt(sub, root, item, append(slices.Clip(toks), strconv.Itoa(i)), c)
			}
		}
	case map[string]any:
		// (Matching a member's name against patternProperties here too
		// would spend the clock of backtracking patterns again, and a
		// failure could go unreported.)
		if !containerOnly(plain, "object") || s.clock != nil && len(plain.PatternProperties) > 0 {
			s.whole([]*jsonschema.Schema{sch}, root, x, toks, c)
			return
		}
		own := *plain
		if plain.Properties != nil {
			own.Properties = make(map[string]*jsonschema.Schema, len(plain.Properties))
			for k := range plain.Properties {
				own.Properties[k] = trueSchema
			}
		}
		if plain.PatternProperties != nil {
			own.PatternProperties = make(map[jsonschema.Regexp]*jsonschema.Schema, len(plain.PatternProperties))
			for re := range plain.PatternProperties {
				own.PatternProperties[re] = trueSchema
			}
		}
		if _, ok := plain.AdditionalProperties.(*jsonschema.Schema); ok {
			own.AdditionalProperties = trueSchema
		}
		s.whole([]*jsonschema.Schema{&own}, root, x, toks, c)
		for _, k := range slices.Sorted(maps.Keys(x)) {
			subs := memberSchemas(plain, k)
			at := append(slices.Clip(toks), k)
			switch len(subs) {
			case 0:
			case 1:
				s.validateAt(subs[0], root, x[k], at, c)
			default:
				// Errors of two subschemas at one place may repeat: one
				// list, free of duplicates.
				s.whole(subs, root, x[k], at, c)
			}
		}
	default:
		s.whole([]*jsonschema.Schema{sch}, root, x, toks, c)
	}
}

func trueSchemas(n int) []*jsonschema.Schema {
	if n == 0 {
		return nil
	}
	out := make([]*jsonschema.Schema, n)
	for i := range out {
		out[i] = trueSchema
	}
	return out
}

// itemSchema returns the subschema the library checks item i against,
// nil if none.
func itemSchema(s *jsonschema.Schema, i int) *jsonschema.Schema {
	if s.DraftVersion < 2020 {
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			return items
		case []*jsonschema.Schema:
			if i < len(items) {
				return items[i]
			}
		}
		add, _ := s.AdditionalItems.(*jsonschema.Schema)
		return add
	}
	if i < len(s.PrefixItems) {
		return s.PrefixItems[i]
	}
	return s.Items2020
}

// memberSchemas returns the subschemas the library checks the member
// named k against.
func memberSchemas(s *jsonschema.Schema, k string) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	if sub, ok := s.Properties[k]; ok {
		out = append(out, sub)
	}
	for re, sub := range s.PatternProperties {
		if re.MatchString(k) {
			out = append(out, sub)
		}
	}
	if len(out) == 0 {
		if add, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
			out = append(out, add)
		}
	}
	return out
}

// standalone follows the "$ref"s that stand alone from s (the only
// keyword of their schema) and returns the schema they lead to; nil when
// one is a boolean schema or they loop.
func standalone(s *jsonschema.Schema) *jsonschema.Schema {
	for range 32 {
		if s == nil || s.Bool != nil {
			return nil
		}
		if s.Ref == nil || !refOnly(s) {
			return s
		}
		s = s.Ref
	}
	return nil
}

// refOnly reports whether s validates with its "$ref" alone.
func refOnly(s *jsonschema.Schema) bool {
	return s.Types == nil && s.Enum == nil && s.Const == nil && s.Not == nil && s.AllOf == nil && s.AnyOf == nil && s.OneOf == nil &&
		s.If == nil && s.Then == nil && s.Else == nil && s.Format == nil && s.RecursiveRef == nil && s.DynamicRef == nil &&
		s.MaxProperties == nil && s.MinProperties == nil && s.Required == nil && s.PropertyNames == nil && s.Properties == nil &&
		s.PatternProperties == nil && s.AdditionalProperties == nil && s.Dependencies == nil && s.DependentRequired == nil &&
		s.DependentSchemas == nil && s.UnevaluatedProperties == nil && s.MinItems == nil && s.MaxItems == nil && !s.UniqueItems &&
		s.Contains == nil && s.MinContains == nil && s.MaxContains == nil && s.Items == nil && s.AdditionalItems == nil &&
		s.PrefixItems == nil && s.Items2020 == nil && s.UnevaluatedItems == nil && s.MinLength == nil && s.MaxLength == nil &&
		s.Pattern == nil && s.ContentEncoding == nil && s.ContentMediaType == nil && s.ContentSchema == nil &&
		s.Maximum == nil && s.Minimum == nil && s.ExclusiveMaximum == nil && s.ExclusiveMinimum == nil && s.MultipleOf == nil &&
		s.Extensions == nil
}

// containerOnly reports whether s, at a value of JSON type want ("array"
// or "object"), only checks the container itself and each child against
// subschemas of its own: its type allows want, and it has no reference,
// applicator, const, enum, format, contains, dependent schema,
// unevaluated keyword or extension.
func containerOnly(s *jsonschema.Schema, want string) bool {
	if s.Types != nil && !s.Types.IsEmpty() && !slices.Contains(s.Types.ToStrings(), want) {
		return false
	}
	if s.Bool != nil || s.Ref != nil || s.RecursiveRef != nil || s.DynamicRef != nil || s.Enum != nil || s.Const != nil ||
		s.Not != nil || s.AllOf != nil || s.AnyOf != nil || s.OneOf != nil || s.If != nil || s.Then != nil || s.Else != nil ||
		s.Format != nil || s.DependentSchemas != nil || s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil ||
		s.Contains != nil || s.Extensions != nil {
		return false
	}
	for _, d := range s.Dependencies {
		if _, ok := d.(*jsonschema.Schema); ok {
			return false
		}
	}
	return true
}

// whole validates x, the value at toks in root, against each of schs with
// the library and adds the errors to c: sorted, free of duplicates, a
// pattern that could not be matched in time said so (patternErrors).
func (s *Schema) whole(schs []*jsonschema.Schema, root, x any, toks []string, c *errorCap) {
	from := s.failures()
	var errs []fixpoint.ValidationError
	for _, sch := range schs {
		err := sch.Validate(x)
		if err == nil {
			continue
		}
		var verr *jsonschema.ValidationError
		if !errors.As(err, &verr) {
			errs = append(errs, newError(pointer(toks), "", "value cannot be validated: "+err.Error()))
			continue
		}
		if len(toks) > 0 {
			prefixLocations(verr, toks)
		}
		found := flatten(verr, root)
		if len(found) == 0 {
			// The library found the value invalid but no leaf survived
			// flattening; never report an invalid value as valid.
			found = []fixpoint.ValidationError{newError(pointer(toks), "", "value does not match the schema: "+oneLine(verr.Error()))}
		}
		errs = append(errs, found...)
	}
	if len(errs) == 0 && s.failures() == from {
		return
	}
	c.add(s.patternErrorsIn(root, x, pointer(toks), sortErrors(errs), from))
}

// prefixLocations puts toks before the instance location of every error
// of the tree e, raised validating the value at toks on its own.
func prefixLocations(e *jsonschema.ValidationError, toks []string) {
	if e == nil {
		return
	}
	e.InstanceLocation = append(slices.Clip(toks), e.InstanceLocation...)
	if _, ok := e.ErrorKind.(*kind.PropertyNames); ok {
		return // its causes are the name's, at the name's own locations
	}
	for _, c := range e.Causes {
		prefixLocations(c, toks)
	}
}

// hasDynamicRefs reports whether a subschema of g holds a $dynamicRef or a
// $recursiveRef.
func hasDynamicRefs(g *subschema.Graph) bool {
	for _, n := range g.Nodes() {
		if n.DynamicRef != nil || n.RecursiveRef != nil {
			return true
		}
	}
	return false
}
