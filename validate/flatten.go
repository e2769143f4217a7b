package validate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/render"
	"github.com/fixpoint-dev/fixpoint/subschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// maxWant is the longest rendering of an expected value (enum, const).
const maxWant = 200

// newError builds an Error whose message starts with the path.
func newError(path, keyword, body string) fixpoint.ValidationError {
	if keyword == "" {
		keyword = "schema"
	}
	return fixpoint.ValidationError{Path: path, Keyword: keyword, Class: KeywordClass(keyword), Message: render.Path(path) + ": " + body}
}

// flattener walks a library error tree and keeps its leaves as Errors.
type flattener struct {
	root any // the validated value
	out  []fixpoint.ValidationError
	// anchor is the location of the innermost error being walked whose
	// location the library copied (see propertyNamesLocation).
	anchor []string
	// holderIndex caches propertyHolders.
	holderIndex map[string]map[string]*holders
}

// flatten returns the leaves of the error tree e, raised validating root.
func flatten(e *jsonschema.ValidationError, root any) []fixpoint.ValidationError {
	f := flattener{root: root}
	f.walk(e)
	return f.out
}

// flattenAll flattens several error trees raised validating root.
func flattenAll(es []*jsonschema.ValidationError, root any) []fixpoint.ValidationError {
	f := flattener{root: root}
	for _, e := range es {
		f.walk(e)
	}
	return f.out
}

func (f *flattener) add(path, keyword, body string) {
	f.out = append(f.out, newError(path, keyword, body))
}

func (f *flattener) walk(e *jsonschema.ValidationError) {
	if e == nil {
		return
	}
	if k, ok := e.ErrorKind.(*kind.PropertyNames); ok {
		e.InstanceLocation = f.propertyNamesLocation(e.InstanceLocation, k.Property)
	} else {
		prev := f.anchor
		f.anchor = e.InstanceLocation
		defer func() { f.anchor = prev }()
	}
	path := pointer(e.InstanceLocation)
	val := func() any { return lookup(f.root, e.InstanceLocation) }
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		for _, c := range e.Causes {
			f.walk(c)
		}
		if len(e.Causes) == 0 {
			f.add(path, "schema", "does not match the schema")
		}
	case *kind.AnyOf:
		f.alternatives(e, "anyOf")
	case *kind.OneOf:
		if len(k.Subschemas) >= 2 {
			f.add(path, "oneOf", fmt.Sprintf("%s matches more than one oneOf alternative (%d and %d); it must match exactly one",
				render.Value(val(), render.MaxFound), k.Subschemas[0], k.Subschemas[1]))
			return
		}
		f.alternatives(e, "oneOf")
	case *kind.Not:
		f.add(path, "not", fmt.Sprintf("%s must not match the \"not\" schema", render.Value(val(), render.MaxFound)))
	case *kind.FalseSchema:
		f.falseSchema(e, path)
	case *kind.InvalidJsonValue:
		f.add(path, "type", fmt.Sprintf("a Go %T is not a JSON value", k.Value))
	case *kind.RefCycle:
		f.add(path, "$ref", "the schema's references loop without consuming the value: "+rootOr(k.KeywordLocation1)+" and "+rootOr(k.KeywordLocation2))
	default:
		if f.keywordError(e, path, val) {
			return
		}
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				f.walk(c)
			}
			return
		}
		kw := "schema"
		if kp := e.ErrorKind.KeywordPath(); len(kp) > 0 {
			kw = kp[0]
		}
		f.add(path, kw, libraryMessage(e))
	}
}

// keywordError adds the error of a keyword that checks the value itself
// (type, enum, bounds, lengths, required members, ...), and reports
// whether e was one.
func (f *flattener) keywordError(e *jsonschema.ValidationError, path string, val func() any) bool {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		f.add(path, "type", fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), describe(val())))
	case *kind.Enum:
		f.add(path, "enum", fmt.Sprintf("%s is not one of %s", render.Value(k.Got, render.MaxFound), render.Value(k.Want, maxWant)))
	case *kind.Const:
		f.add(path, "const", fmt.Sprintf("expected %s, got %s", render.Value(k.Want, maxWant), render.Value(k.Got, render.MaxFound)))
	case *kind.Format:
		msg := fmt.Sprintf("%s is not a valid %s", render.Value(k.Got, render.MaxFound), k.Want)
		if k.Err != nil {
			msg += ": " + oneLine(k.Err.Error())
		}
		f.add(path, "format", msg)
	case *kind.MinProperties:
		f.add(path, "minProperties", fmt.Sprintf("object has %s, fewer than the minimum %d", plural(k.Got, "property", "properties"), k.Want))
	case *kind.MaxProperties:
		f.add(path, "maxProperties", fmt.Sprintf("object has %s, more than the maximum %d", plural(k.Got, "property", "properties"), k.Want))
	case *kind.MinItems:
		f.add(path, "minItems", fmt.Sprintf("array has %s, fewer than the minimum %d", plural(k.Got, "item", "items"), k.Want))
	case *kind.MaxItems:
		f.add(path, "maxItems", fmt.Sprintf("array has %s, more than the maximum %d", plural(k.Got, "item", "items"), k.Want))
	case *kind.AdditionalItems:
		arr, _ := val().([]any)
		n := len(arr)
		for i := max(n-k.Count, 0); i < n; i++ {
			f.add(path+"/"+strconv.Itoa(i), "additionalItems", fmt.Sprintf("item %d is not allowed: the array may have at most %s", i, plural(n-k.Count, "item", "items")))
		}
	case *kind.Required:
		// Each missing property at its own pointer, so that every forgotten
		// field is counted apart; the object lacking it is the parent.
		for _, m := range k.Missing {
			f.add(path+"/"+escapeToken(m), "required", fmt.Sprintf("missing required property %s", render.Quote(m)))
		}
	case *kind.Dependency:
		for _, m := range k.Missing {
			f.add(path, "dependencies", fmt.Sprintf("missing property %s, required when %s is present", render.Quote(m), render.Quote(k.Prop)))
		}
	case *kind.DependentRequired:
		for _, m := range k.Missing {
			f.add(path, "dependentRequired", fmt.Sprintf("missing property %s, required when %s is present", render.Quote(m), render.Quote(k.Prop)))
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			f.add(path+"/"+escapeToken(p), "additionalProperties", fmt.Sprintf("property %s is not allowed", render.Quote(p)))
		}
	case *kind.PropertyNames:
		why := ""
		if sub := flattenAll(e.Causes, k.Property); len(sub) > 0 {
			why = ": " + body(sub[0].Message)
		}
		f.add(path+"/"+escapeToken(k.Property), "propertyNames", fmt.Sprintf("property name %s is not allowed%s", render.Quote(k.Property), why))
	case *kind.UniqueItems:
		f.add(path, "uniqueItems", fmt.Sprintf("items %d and %d are equal; all items must be unique", k.Duplicates[0], k.Duplicates[1]))
	case *kind.Contains:
		f.add(path, "contains", "no item matches the \"contains\" schema"+f.containsHint(e))
	case *kind.MinContains:
		f.add(path, "minContains", fmt.Sprintf("%s the \"contains\" schema, at least %d required%s", matched(len(k.Got)), k.Want, f.containsHint(e)))
	case *kind.MaxContains:
		f.add(path, "maxContains", fmt.Sprintf("%s the \"contains\" schema, at most %d allowed", matched(len(k.Got)), k.Want))
	case *kind.MinLength:
		f.add(path, "minLength", fmt.Sprintf("%s is shorter than the minimum length %d (it has %s)", render.Value(val(), render.MaxFound), k.Want, plural(k.Got, "character", "characters")))
	case *kind.MaxLength:
		f.add(path, "maxLength", fmt.Sprintf("%s is longer than the maximum length %d (it has %s)", render.Value(val(), render.MaxFound), k.Want, plural(k.Got, "character", "characters")))
	case *kind.Pattern:
		f.add(path, "pattern", fmt.Sprintf("%s does not match %s", render.Value(k.Got, render.MaxFound), k.Want))
	case *kind.Minimum:
		f.add(path, "minimum", fmt.Sprintf("%s is less than the minimum %s", number(val(), k.Got), render.Rat(k.Want)))
	case *kind.Maximum:
		f.add(path, "maximum", fmt.Sprintf("%s is greater than the maximum %s", number(val(), k.Got), render.Rat(k.Want)))
	case *kind.ExclusiveMinimum:
		f.add(path, "exclusiveMinimum", fmt.Sprintf("%s must be greater than %s", number(val(), k.Got), render.Rat(k.Want)))
	case *kind.ExclusiveMaximum:
		f.add(path, "exclusiveMaximum", fmt.Sprintf("%s must be less than %s", number(val(), k.Got), render.Rat(k.Want)))
	case *kind.MultipleOf:
		f.add(path, "multipleOf", fmt.Sprintf("%s is not a multiple of %s", number(val(), k.Got), render.Rat(k.Want)))
	default:
		return false
	}
	return true
}

// libraryMessage is the library's own message for a leaf, without its path.
func libraryMessage(e *jsonschema.ValidationError) string {
	msg := oneLine(e.Error())
	if strings.HasPrefix(msg, "at '") {
		if i := strings.Index(msg, "': "); i >= 0 {
			msg = msg[i+3:]
		}
	}
	return msg
}

// falseSchema reports a value where the subschema is false, naming the
// keyword that holds the false schema.
func (f *flattener) falseSchema(e *jsonschema.ValidationError, path string) {
	toks := strings.Split(subschema.Fragment(e.SchemaURL), "/")
	last, parent := "", ""
	if n := len(toks); n >= 1 {
		last = toks[n-1]
		if n >= 2 {
			parent = toks[n-2]
		}
	}
	name := ""
	if n := len(e.InstanceLocation); n > 0 {
		name = e.InstanceLocation[n-1]
	}
	switch {
	case last == "unevaluatedProperties" || last == "additionalProperties":
		f.add(path, last, fmt.Sprintf("property %s is not allowed", render.Quote(name)))
	case parent == "properties" || parent == "patternProperties":
		f.add(path, parent, fmt.Sprintf("property %s is not allowed", render.Quote(name)))
	case last == "unevaluatedItems" || last == "items" || last == "additionalItems":
		f.add(path, last, fmt.Sprintf("item %s is not allowed: the array has too many items", name))
	case parent == "prefixItems" || parent == "items":
		f.add(path, parent, fmt.Sprintf("item %s is not allowed", name))
	case last == "propertyNames":
		f.add(path, last, "no property is allowed here")
	default:
		f.add(path, "false", fmt.Sprintf("no value is allowed here, got %s", describe(lookup(f.root, e.InstanceLocation))))
	}
}

// containsHint names why the closest item failed "contains", from the
// per-item causes.
func (f *flattener) containsHint(e *jsonschema.ValidationError) string {
	if len(e.Causes) == 0 {
		return ""
	}
	items := make([][]fixpoint.ValidationError, len(e.Causes))
	for i, c := range e.Causes {
		items[i] = sortErrors(flatten(c, f.root))
	}
	best := closest(items, len(e.InstanceLocation)+1)
	if best < 0 {
		return ""
	}
	return " (closest: " + items[best][0].Message + ")"
}

// alternatives reports the closest alternative of a failed anyOf/oneOf.
func (f *flattener) alternatives(e *jsonschema.ValidationError, keyword string) {
	path := pointer(e.InstanceLocation)
	if len(e.Causes) == 0 {
		f.add(path, keyword, fmt.Sprintf("%s matches none of the %s alternatives", render.Value(lookup(f.root, e.InstanceLocation), render.MaxFound), keyword))
		return
	}
	depth := len(e.InstanceLocation)
	branches := make([][]fixpoint.ValidationError, 0, len(e.Causes))
	for _, c := range e.Causes {
		branches = append(branches, flatten(c, f.root))
	}
	if merged, ok := mergeAlternatives(branches, path, lookup(f.root, e.InstanceLocation)); ok {
		f.out = append(f.out, merged)
		return
	}
	best := closest(branches, depth)
	if best < 0 {
		f.add(path, keyword, fmt.Sprintf("%s matches none of the %s alternatives", render.Value(lookup(f.root, e.InstanceLocation), render.MaxFound), keyword))
		return
	}
	f.out = append(f.out, branches[best]...)
}

// closest returns the index of the closest of several failed alternatives,
// each given by its errors, for a value at the given pointer depth; -1 if
// none has errors. The closest has, in order: the fewest mismatches at the
// value itself (type, false, const or enum), the fewest mismatched
// discriminators (const or enum one level down), the fewest errors, the
// deepest shallowest error (it matched more of the structure), and comes
// first.
func closest(branches [][]fixpoint.ValidationError, depth int) int {
	type rank struct{ atValue, disc, n, minDepth int }
	rankOf := func(errs []fixpoint.ValidationError) rank {
		r := rank{n: len(errs), minDepth: -1}
		for _, e := range errs {
			d := pointerDepth(e.Path)
			if e.Keyword == "required" {
				d-- // a missing property is a mismatch of the object lacking it
			}
			if r.minDepth < 0 || d < r.minDepth {
				r.minDepth = d
			}
			switch {
			case d == depth && (e.Keyword == "type" || e.Keyword == "false" || e.Keyword == "const" || e.Keyword == "enum"):
				r.atValue++
			case d == depth+1 && (e.Keyword == "const" || e.Keyword == "enum"):
				r.disc++
			}
		}
		return r
	}
	best, bestRank := -1, rank{}
	for i, errs := range branches {
		if len(errs) == 0 {
			continue
		}
		r := rankOf(errs)
		if best < 0 || cmp.Or(cmp.Compare(r.atValue, bestRank.atValue), cmp.Compare(r.disc, bestRank.disc),
			cmp.Compare(r.n, bestRank.n), cmp.Compare(bestRank.minDepth, r.minDepth)) < 0 {
			best, bestRank = i, r
		}
	}
	return best
}

// mergeAlternatives merges alternatives that each fail only on the value's
// type, or only on its const/enum, into one error listing everything accepted.
func mergeAlternatives(all [][]fixpoint.ValidationError, path string, v any) (fixpoint.ValidationError, bool) {
	if len(all) < 2 {
		return fixpoint.ValidationError{}, false
	}
	kw := ""
	var wants []string
	for _, errs := range all {
		if len(errs) != 1 || errs[0].Path != path {
			return fixpoint.ValidationError{}, false
		}
		k := errs[0].Keyword
		if k == "enum" {
			k = "const"
		}
		if k != "type" && k != "const" || kw != "" && k != kw {
			return fixpoint.ValidationError{}, false
		}
		kw = k
		wants = append(wants, errs[0].Message)
	}
	// The wanted part of each message is between the fixed phrases.
	var items []string
	for _, m := range wants {
		b := body(m)
		switch {
		case strings.HasPrefix(b, "expected "):
			// "expected X, got Y" (type and const)
			if i := strings.LastIndex(b, ", got "); i >= 0 {
				items = append(items, strings.Split(b[len("expected "):i], " or ")...)
				continue
			}
			return fixpoint.ValidationError{}, false
		default:
			// "V is not one of [a,b]"
			if i := strings.Index(b, " is not one of "); i >= 0 {
				list := b[i+len(" is not one of "):]
				items = append(items, strings.TrimSuffix(strings.TrimPrefix(list, "["), "]"))
				continue
			}
			return fixpoint.ValidationError{}, false
		}
	}
	items = slices.Compact(items)
	if kw == "type" {
		slices.Sort(items)
		items = slices.Compact(items)
		return newError(path, "type", fmt.Sprintf("expected %s, got %s", strings.Join(items, " or "), describe(v))), true
	}
	return newError(path, "enum", fmt.Sprintf("%s is not one of [%s]", render.Value(v, render.MaxFound), strings.Join(items, ","))), true
}

// body strips the leading path from a message.
func body(msg string) string {
	if i := strings.Index(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

func pointerDepth(p string) int { return strings.Count(p, "/") }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func matched(n int) string {
	switch n {
	case 0:
		return "no item matches"
	case 1:
		return "1 item matches"
	}
	return strconv.Itoa(n) + " items match"
}

// describe names a value's JSON type and shows it: `string "42"`.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean " + render.Value(v, render.MaxFound)
	case string:
		return "string " + render.Value(v, render.MaxFound)
	case map[string]any:
		return "object " + render.Value(v, render.MaxFound)
	case []any:
		return "array " + render.Value(v, render.MaxFound)
	default:
		return "number " + render.Value(v, render.MaxFound)
	}
}

// number renders a number as found in the value, falling back to the
// library's rational.
func number(v any, r *big.Rat) string {
	switch v.(type) {
	case json.Number, float64, float32, int, int64, int32, uint, uint64, uint32:
		return render.Value(v, render.MaxFound)
	}
	return render.Rat(r)
}

func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// sortErrors sorts errors by path (array indexes numerically), keyword and
// message, so the order is deterministic, and drops exact duplicates.
func sortErrors(errs []fixpoint.ValidationError) []fixpoint.ValidationError {
	slices.SortStableFunc(errs, func(a, b fixpoint.ValidationError) int {
		return cmp.Or(comparePointers(a.Path, b.Path), strings.Compare(a.Keyword, b.Keyword), strings.Compare(a.Message, b.Message))
	})
	return slices.Compact(errs)
}

// comparePointers orders JSON pointers token by token, numeric tokens
// numerically, a parent before its children.
func comparePointers(a, b string) int {
	for {
		if a == "" || b == "" {
			return cmp.Compare(len(a), len(b))
		}
		ta, ra := nextToken(a)
		tb, rb := nextToken(b)
		if c := compareTokens(ta, tb); c != 0 {
			return c
		}
		a, b = ra, rb
	}
}

// nextToken splits "/a/b" into "a" and "/b".
func nextToken(p string) (tok, rest string) {
	p = p[1:]
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

func compareTokens(a, b string) int {
	if a == b {
		return 0
	}
	ia, ea := strconv.Atoi(a)
	ib, eb := strconv.Atoi(b)
	if ea == nil && eb == nil {
		return cmp.Compare(ia, ib)
	}
	return strings.Compare(a, b)
}

// rootOr names a location in the schema for a message: "(root)" for the
// empty pointer.
func rootOr(ptr string) string {
	if ptr == "" {
		return "(root)"
	}
	return ptr
}
