package repair

import (
	"bytes"
	"encoding/json"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/extract"
	"github.com/fixpoint-dev/fixpoint/subschema"
	"github.com/fixpoint-dev/fixpoint/validate"
	"golang.org/x/text/unicode/norm"
)

// The kinds of the schema-guided repairs, as recorded in fixpoint.Repair.Kind.
const (
	KindCoerceNumber   = "coerce_number"   // "42" -> 42
	KindCoerceBoolean  = "coerce_boolean"  // "true" -> true
	KindEnumCase       = "enum_case"       // "Paid " -> "paid" for an enum
	KindConstCase      = "const_case"      // likewise for a const
	KindWrapArray      = "wrap_array"      // v -> [v]
	KindDropNull       = "drop_null"       // an optional property that is null is dropped
	KindDropAdditional = "drop_additional" // a property additionalProperties forbids is dropped (fixpoint.CoerceAll)
	KindRenameKey      = "rename_key"      // "customerName": v -> "customer_name": v
)

// Bounds of one Coerce call.
const (
	// coerceRounds bounds the rounds of fixes: a fix can reveal an error
	// another round fixes (fixing the case of a oneOf discriminator reveals
	// the errors of the alternative it names).
	coerceRounds = 4
	// coerceValidations bounds the validations of the whole value one call
	// makes after the first: one per round for its fixes together, one
	// more for those a failure cannot be blamed on, one per fix tried
	// alone.
	coerceValidations = 16
	// coerceChecks bounds those validations' checks together (see
	// validate.MaxChecks): a value near that bound, which takes seconds to
	// check, is checked once more at most, not 16 times.
	coerceChecks = validate.MaxChecks
)

// Coerce makes the schema-guided repairs of mode to v, each driven by a
// validation error, that cannot change what the model meant, and returns the
// repaired value, the repairs in the order made and the errors of the
// repaired value (nil when it is valid). v is not modified: the repaired
// value shares what it did not change with v. With fixpoint.CoerceNone (or any mode
// other than fixpoint.CoerceSafe and fixpoint.CoerceAll), a nil *Schema, a valid v, or a v
// holding a number that cannot be validated (keyword "number"), or one with
// more than validate.MaxErrors errors, it returns v, no repairs and
// s.Validate(v).
//
// The repairs, at the location of the error that drives them:
//
//   - coerce_number, coerce_boolean (type, enum or const error): a string
//     that is exactly a JSON number, or true or false, where the schema
//     allows no string but allows that literal's type. JSON's insignificant
//     whitespace (space, tab, CR, LF) may surround it, as a JSON parser
//     would accept; no other character. The number keeps its text as
//     json.Number, so its value never changes; "integer" takes only an
//     integral value (4.0 is one). Refused: "about 40", "40 kg", "4O", "",
//     "0x10", "+1", "01", ".5", "1,000", "NaN", "True", "yes", and a number
//     a float64 cannot hold (1e400 overflows, 1e-400 would become 0): most
//     consumers decode numbers into float64.
//   - enum_case, const_case (enum or const error): a string that equals
//     exactly one allowed string once letter case (Unicode simple folding,
//     strings.EqualFold), surrounding white space (unicode.IsSpace) and
//     Unicode canonical equivalence (both sides in NFC: "cafe\u0301" is
//     "café") are set aside becomes that allowed string. No match, or
//     several, is refused. Compatibility forms (NFKC) are not equated:
//     "x²" is not "x2", and "ﬁ" is not "fi" to every reader.
//   - wrap_array (type error): a single value other than null where the
//     schema allows an array and not that value's type becomes a one-item
//     array, only when the array then has no error at all at or under that
//     location (its items match, minItems <= 1, ...). A string that may be
//     several items written as text (listLike: "a, b, c", "1. a 2. b",
//     "['a']") is not wrapped, nor is an item of an array ([1, 2, 3] where
//     rows of numbers are wanted may be one row or three).
//   - drop_null (type, enum or const error): a null object property the
//     schema does not allow null for, and that no schema at the object
//     lists in "required", is dropped, only when that adds no error.
//   - rename_key (required or additionalProperties error): a property the
//     object's schemas do not declare whose name equals, once letter case
//     and the separators _, - and space are set aside, the name of exactly
//     one property the schemas require or declare and the object lacks
//     ("customerName", "Customer Name" or "CUSTOMER-NAME" for
//     "customer_name") is moved to that name, its value unchanged (all such
//     properties of one object together). Refused when two names of the
//     object match it, or the object's schemas have
//     patternProperties (the name may be one of them). The repair's Pointer
//     is the new location; Before and After are the old and new names as
//     JSON strings. The value may now show errors of its own, which the
//     schema did not check under the wrong name; they may be reported (see
//     value fixes below), the next round may fix them.
//   - drop_additional (fixpoint.CoerceAll only, additionalProperties error): a
//     property additionalProperties forbids is dropped, only when every
//     property the object's schemas require is present (else the extra
//     property may be a misnamed required one) and that adds no error,
//     rename_key does not apply to it, and its name is not that of a
//     declared or required property up to letter case and separators
//     holding another value ("Total Price": 12 beside "total_price": 3 is
//     a second answer for it; the same value twice is dropped).
//
// What the schema wants at a location is validate.Reader's reading (see
// Reader.At): the types and allowed strings of the alternatives of an
// anyOf or oneOf are united, so a string is never converted where some
// alternative takes a string, and an enum match must be unique across all
// alternatives. A location whose reading is Unknown ($dynamicRef,
// $recursiveRef, a loop of references that consumes no part of the value,
// more than a fixed budget of schema nodes) is not repaired. "not" and
// unevaluatedProperties/Items are not read; the validation after each fix
// covers them.
//
// Every round collects at most one fix per location (none inside another's
// location), applies them together and validates the whole value again. The
// round is kept when no error appeared and each driving error is gone.
// Otherwise the fixes the failure cannot be blamed on (their driving error
// is gone and no error appeared at, under or above their location) are
// kept together if that passes the same test, and the others are tried one
// at a time, each kept only when its driving error is gone and the number of
// errors does not grow. A structural fix (wrap_array, drop_null,
// drop_additional) must also make no error appear, rename_key none outside
// the value it moved; a value fix (the others) may reveal an error the
// value had all along: "150" for an integer with maximum 100 becomes 150 and
// reports the maximum, which is lossless and tells the model what is really
// wrong, and fixing the case of a oneOf discriminator reveals the errors of
// the alternative it names, which the next round may fix. Rounds repeat, at
// most 4, while they make progress, and one call validates the whole value
// at most 16 times after the first (fixes beyond that budget are not made).
// A value that still fails keeps the fixes made (each is lossless) and is
// returned with its remaining errors, never more than v had.
func Coerce(s *validate.Schema, v any, mode fixpoint.CoerceMode) (fixed any, fixes []fixpoint.Repair, errs []fixpoint.ValidationError) {
	c, release := s.Begin()
	defer release()
	return coerce(c, v, c.Validate(v), mode)
}

// Coercer is the validate.Coercer of mode for validate.CheckWith: nil (no
// repairs) for any mode but fixpoint.CoerceSafe and fixpoint.CoerceAll.
func Coercer(mode fixpoint.CoerceMode) validate.Coercer {
	if mode != fixpoint.CoerceSafe && mode != fixpoint.CoerceAll {
		return nil
	}
	return func(c *validate.Session, v any, errs []fixpoint.ValidationError) (any, []fixpoint.Repair, []fixpoint.ValidationError) {
		return coerce(c, v, errs, mode)
	}
}

// coerce is Coerce given errs, the errors of v, within the check c.
func coerce(c *validate.Session, v any, errs []fixpoint.ValidationError, mode fixpoint.CoerceMode) (any, []fixpoint.Repair, []fixpoint.ValidationError) {
	if len(errs) == 0 || (mode != fixpoint.CoerceSafe && mode != fixpoint.CoerceAll) {
		return v, nil, errs
	}
	for _, e := range errs {
		if e.Keyword == "number" || e.Keyword == validate.KeywordMoreErrors {
			// (Past MaxErrors the errors not kept could not be compared.)
			return v, nil, errs
		}
	}
	cur, budget := v, coerceBudget(c, v)
	var fixes []fixpoint.Repair
	keep := func(next any, nerrs []fixpoint.ValidationError, kept []fix) {
		cur, errs = next, nerrs
		for _, f := range kept {
			fixes = append(fixes, f.repairs()...)
		}
	}
	for range coerceRounds {
		if budget == 0 {
			break
		}
		props := propose(c, cur, errs, mode)
		if len(props) == 0 {
			break
		}
		budget--
		next := applyAll(cur, props, 0)
		nerrs := c.Validate(next)
		if batchAccepted(errs, nerrs, props) {
			keep(next, nerrs, props)
			continue
		}
		progress := false
		// Keep together, in one more validation, the fixes the failure
		// cannot be blamed on; try the others one at a time.
		innocent, suspect := blame(errs, nerrs, props)
		if len(innocent) > 0 && len(suspect) > 0 && budget > 0 {
			budget--
			next := applyAll(cur, innocent, 0)
			nerrs := c.Validate(next)
			if batchAccepted(errs, nerrs, innocent) {
				keep(next, nerrs, innocent)
				props, progress = suspect, true
			}
		}
		for _, f := range props {
			if budget == 0 {
				break
			}
			budget--
			next := f.apply(cur)
			nerrs := c.Validate(next)
			if fixAccepted(errs, nerrs, f) {
				keep(next, nerrs, []fix{f})
				progress = true
			}
		}
		if !progress || len(errs) == 0 {
			break
		}
	}
	return cur, fixes, errs
}

// coerceBudget returns how many validations of v one Coerce call may make
// after the first (see coerceValidations and coerceChecks).
func coerceBudget(c *validate.Session, v any) int {
	if n := c.Checks(v); n > 0 {
		return min(coerceValidations, coerceChecks/n)
	}
	return coerceValidations
}

// blame splits a round's fixes, whose batch turned the errors before into
// those after, into those the failure cannot be blamed on and the suspects:
// a fix whose driving error is still there, or at whose location, under it
// or above it an error appeared.
func blame(before, after []fixpoint.ValidationError, fixes []fix) (innocent, suspect []fix) {
	left := countKeys(before)
	var appeared []string
	for _, e := range after {
		k := errKey{e.Path, e.Keyword}
		if left[k] > 0 {
			left[k]--
			continue
		}
		appeared = append(appeared, e.Path)
	}
	stayed, had := countKeys(after), countKeys(before)
	for _, f := range fixes {
		p := validate.Pointer(f.toks)
		moved := map[string]bool{}
		for _, m := range f.moved() {
			moved[m] = true
		}
		bad := stayed[f.driver] >= had[f.driver]
		for _, a := range appeared {
			if bad {
				break
			}
			bad = (under(a, p) || strings.HasPrefix(p, a+"/")) && !underSet(a, moved)
		}
		if bad {
			suspect = append(suspect, f)
		} else {
			innocent = append(innocent, f)
		}
	}
	return innocent, suspect
}

// fix is one proposed schema-guided repair.
type fix struct {
	kind   string
	toks   []string // the location changed or dropped; for rename_key, the object
	driver errKey   // the error it removes
	before any
	after  any
	drop   bool
	// renames are the old and new names of a rename_key's properties.
	renames []rename
}

type rename struct{ from, to string }

// moved are the new locations of a rename_key's values (none for other
// fixes): errors may appear there, the values being checked under their
// right names.
func (f fix) moved() []string {
	var out []string
	for _, r := range f.renames {
		out = append(out, validate.Pointer(append(slices.Clip(f.toks), r.to)))
	}
	return out
}

// errKey identifies an error for counting: its path and keyword (messages
// change with the value they describe).
type errKey struct{ path, keyword string }

// valueFix reports the fix changes a value in place (not its structure).
func (f fix) valueFix() bool {
	switch f.kind {
	case KindCoerceNumber, KindCoerceBoolean, KindEnumCase, KindConstCase:
		return true
	}
	return false
}

// apply returns root with the fix made, copying the containers on its path.
func (f fix) apply(root any) any {
	return setAt(root, f.toks, f.after, f.drop)
}

// repairs records the fix: one repair, or one a property renamed. Offset
// is set by the caller that knows it.
func (f fix) repairs() []fixpoint.Repair {
	if f.kind == KindRenameKey {
		out := make([]fixpoint.Repair, len(f.renames))
		for i, r := range f.renames {
			out[i] = fixpoint.Repair{Kind: f.kind, Pointer: validate.Pointer(append(slices.Clip(f.toks), r.to)), Before: rawJSON(r.from), After: rawJSON(r.to)}
		}
		return out
	}
	r := fixpoint.Repair{Kind: f.kind, Pointer: validate.Pointer(f.toks), Before: rawJSON(f.before)}
	if !f.drop {
		r.After = rawJSON(f.after)
	}
	return []fixpoint.Repair{r}
}

// rawJSON is v as compact JSON, nil if it cannot be encoded.
func rawJSON(v any) json.RawMessage {
	b, err := encode(v)
	if err != nil {
		return nil
	}
	return b
}

// setAt returns root with the value at toks replaced by val, or deleted from
// its object when del; the containers on the path are copied, root is not
// modified. The path must exist.
func setAt(root any, toks []string, val any, del bool) any {
	if len(toks) == 0 {
		return val
	}
	switch n := root.(type) {
	case map[string]any:
		m := maps.Clone(n)
		if len(toks) == 1 && del {
			delete(m, toks[0])
		} else {
			m[toks[0]] = setAt(n[toks[0]], toks[1:], val, del)
		}
		return m
	case []any:
		i, err := strconv.Atoi(toks[0])
		if err != nil || i < 0 || i >= len(n) {
			return root
		}
		a := slices.Clone(n)
		a[i] = setAt(n[i], toks[1:], val, del)
		return a
	}
	return root
}

// lookupOK returns the value at the tokens in doc, and whether it exists.
func lookupOK(doc any, toks []string) (any, bool) {
	node := doc
	for _, tok := range toks {
		switch n := node.(type) {
		case map[string]any:
			v, ok := n[tok]
			if !ok {
				return nil, false
			}
			node = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) || strconv.Itoa(i) != tok {
				return nil, false
			}
			node = n[i]
		default:
			return nil, false
		}
	}
	return node, true
}

// propose returns the fixes the errors drive, at most one per location and
// none inside another's location, in the order of the errors.
func propose(c *validate.Session, root any, errs []fixpoint.ValidationError, mode fixpoint.CoerceMode) []fix {
	var out []fix
	taken := map[string]bool{}
	rd := newRound(c, root)
	for _, e := range errs {
		if (e.Keyword != "required" && e.Keyword != "additionalProperties") || e.Path == "" {
			continue
		}
		i := strings.LastIndexByte(e.Path, '/')
		parent, name := e.Path[:i], lastToken(e.Path)
		d := rd.renameDrivers[parent]
		if d == nil {
			d = &renameDrivers{extra: map[string]bool{}, missing: map[string]bool{}}
			rd.renameDrivers[parent] = d
		}
		if e.Keyword == "required" {
			d.missing[name] = true
		} else {
			d.extra[name] = true
		}
	}
	for _, e := range errs {
		if taken[e.Path] {
			continue
		}
		if (e.Keyword == "required" || e.Keyword == "additionalProperties") && e.Path != "" && taken[e.Path[:strings.LastIndexByte(e.Path, '/')]] {
			continue // its object is renamed this round
		}
		f, ok := rd.proposeOne(root, e, mode)
		if !ok {
			continue
		}
		// A rename's location is its object, not the error's path.
		loc := validate.Pointer(f.toks)
		if taken[loc] {
			continue
		}
		taken[loc] = true
		out = append(out, f)
	}
	// A fix inside another's location waits for the next round: the outer
	// one changes the path to it.
	return slices.DeleteFunc(out, func(f fix) bool {
		for i := range f.toks {
			if taken[validate.Pointer(f.toks[:i])] {
				return true
			}
		}
		return false
	})
}

// applyAll returns root with the fixes made, copying each container on
// their paths once. The fixes are at distinct locations, none inside
// another's, all under root, which is at depth tokens.
func applyAll(root any, fixes []fix, depth int) any {
	for _, f := range fixes {
		if len(f.toks) == depth {
			return f.after // the only fix here
		}
	}
	byTok := map[string][]fix{}
	var order []string
	for _, f := range fixes {
		tok := f.toks[depth]
		if _, ok := byTok[tok]; !ok {
			order = append(order, tok)
		}
		byTok[tok] = append(byTok[tok], f)
	}
	switch n := root.(type) {
	case map[string]any:
		m := maps.Clone(n)
		for _, tok := range order {
			group := byTok[tok]
			if len(group) == 1 && len(group[0].toks) == depth+1 && group[0].drop {
				delete(m, tok)
				continue
			}
			m[tok] = applyAll(n[tok], group, depth+1)
		}
		return m
	case []any:
		a := slices.Clone(n)
		for _, tok := range order {
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n) {
				a[i] = applyAll(n[i], byTok[tok], depth+1)
			}
		}
		return a
	}
	return root
}

// proposeOne returns the fix error e drives, if any.
func (rd *round) proposeOne(root any, e fixpoint.ValidationError, mode fixpoint.CoerceMode) (fix, bool) {
	toks := validate.SplitPointer(e.Path)
	key := errKey{e.Path, e.Keyword}
	switch e.Keyword {
	case "type", "enum", "const":
	case "required":
		if len(toks) == 0 {
			return fix{}, false
		}
		return rd.proposeRename(root, toks[:len(toks)-1], toks[len(toks)-1], "", key)
	case "additionalProperties":
		if len(toks) == 0 {
			return fix{}, false
		}
		return rd.proposeAdditional(root, toks, mode, key)
	default:
		return fix{}, false
	}
	val, ok := lookupOK(root, toks)
	if !ok {
		return fix{}, false
	}
	vw := rd.wants.At(toks)
	if vw.Unknown {
		return fix{}, false
	}
	switch x := val.(type) {
	case nil:
		// null: dropped when optional, never wrapped.
		if len(toks) == 0 || vw.Types&subschema.TypeNull != 0 {
			return fix{}, false
		}
		parent, _ := lookupOK(root, toks[:len(toks)-1])
		if _, isObj := parent.(map[string]any); !isObj {
			return fix{}, false
		}
		pv := rd.wants.At(toks[:len(toks)-1])
		if pv.Unknown || slices.Contains(pv.Required, toks[len(toks)-1]) {
			return fix{}, false
		}
		return fix{kind: KindDropNull, toks: toks, driver: key, before: nil, drop: true}, true
	case string:
		if lit, k, ok := jsonLiteral(x); ok && vw.Types&subschema.TypeString == 0 && vw.Types&k != 0 {
			kind := KindCoerceNumber
			if k == subschema.TypeBoolean {
				kind = KindCoerceBoolean
			}
			return fix{kind: kind, toks: toks, driver: key, before: x, after: lit}, true
		}
		if e.Keyword != "type" {
			if !vw.StringsClosed {
				return fix{}, false
			}
			if _, k, ok := jsonLiteral(strings.TrimSpace(x)); ok && vw.Types&k != 0 || strings.EqualFold(strings.TrimSpace(x), "null") && vw.Types&subschema.TypeNull != 0 {
				// "true" where the enum has "TRUE" and true: which one is
				// not the fix's to choose.
				return fix{}, false
			}
			a, ok := rd.uniqueFold(x, vw.Strings)
			if !ok {
				return fix{}, false
			}
			kind := KindEnumCase
			if e.Keyword == "const" {
				kind = KindConstCase
			}
			return fix{kind: kind, toks: toks, driver: key, before: x, after: a}, true
		}
	}
	if e.Keyword == "type" && vw.Types&subschema.TypeArray != 0 && vw.Types&subschema.TypeOf(val) == 0 {
		if str, ok := val.(string); ok && (listLike(str) || noItem(str)) {
			// "a, b, c": a list written as text, not one item; "" or
			// "none": no item at all.
			return fix{}, false
		}
		if len(toks) > 0 {
			if parent, ok := lookupOK(root, toks[:len(toks)-1]); ok {
				if _, inArray := parent.([]any); inArray {
					// [1, 2, 3] where rows of numbers are wanted: one row
					// [[1, 2, 3]] or three [[1], [2], [3]]? Either reading
					// is the model's only if it said so.
					return fix{}, false
				}
			}
		}
		return fix{kind: KindWrapArray, toks: toks, driver: key, before: val, after: []any{val}}, true
	}
	return fix{}, false
}

// proposeAdditional fixes a property the schema does not allow, at toks:
// a rename to the property it stands for, or, with CoerceAll, dropping it
// when the object has every required property and no twin of it.
func (rd *round) proposeAdditional(root any, toks []string, mode fixpoint.CoerceMode, key errKey) (fix, bool) {
	if f, ok := rd.proposeRename(root, toks[:len(toks)-1], "", toks[len(toks)-1], key); ok {
		return f, true
	}
	if mode != fixpoint.CoerceAll {
		return fix{}, false
	}
	parent, ok := lookupOK(root, toks[:len(toks)-1])
	obj, isObj := parent.(map[string]any)
	if !ok || !isObj {
		return fix{}, false
	}
	val, ok := obj[toks[len(toks)-1]]
	if !ok {
		return fix{}, false
	}
	pv := rd.wants.At(toks[:len(toks)-1])
	if pv.Unknown {
		return fix{}, false
	}
	for _, r := range pv.Required {
		if _, ok := obj[r]; !ok {
			return fix{}, false
		}
	}
	// "Total Price" beside "total_price" with another value: two
	// answers for one property, not an extra one to drop. The same
	// value twice is one answer.
	extra := toks[len(toks)-1]
	for _, n := range concat(pv.Required, pv.Props) {
		if twin, ok := obj[n]; sameKey(extra, n) && !(ok && extract.SameValue(twin, val)) {
			return fix{}, false
		}
	}
	return fix{kind: KindDropAdditional, toks: toks, driver: key, before: val, drop: true}, true
}

// proposeRename returns the rename_key that gives the object at parent its
// missing property (missing set, driven by a required error) or moves its
// extra property (extra set, driven by an additionalProperties error) to
// the one declared or required name it matches up to letter case and
// separators.
func (rd *round) proposeRename(root any, parent []string, missing, extra string, driver errKey) (fix, bool) {
	node, ok := lookupOK(root, parent)
	obj, isObj := node.(map[string]any)
	if !ok || !isObj {
		return fix{}, false
	}
	loc := validate.Pointer(parent)
	rs, done := rd.renames[loc]
	if !done {
		rs = &renameSet{list: rd.renamesOf(root, parent, obj), from: map[string]bool{}, to: map[string]bool{}}
		for _, r := range rs.list {
			rs.from[r.from], rs.to[r.to] = true, true
		}
		rd.renames[loc] = rs
	}
	// The driving error's name must be among them.
	if !rs.from[extra] && !rs.to[missing] {
		return fix{}, false
	}
	renamed := maps.Clone(obj)
	for _, r := range rs.list {
		delete(renamed, r.from)
		renamed[r.to] = obj[r.from]
	}
	return fix{kind: KindRenameKey, toks: slices.Clip(parent), driver: driver, before: obj, after: renamed, renames: rs.list}, true
}

// renamesOf returns the renames the object obj at parent allows, in order
// of the old names: every name no schema there declares whose keyFold is
// that of exactly one name the schemas declare or require and obj lacks,
// and of no other undeclared name. None when the schemas there cannot be
// read or have patternProperties.
func (rd *round) renamesOf(root any, parent []string, obj map[string]any) []rename {
	pv := rd.wants.At(parent)
	if pv.Unknown || pv.Patterns {
		return nil
	}
	declared := make(map[string]bool, len(pv.Props))
	for _, n := range pv.Props {
		declared[n] = true
	}
	// Every name the schemas declare or require, present or not: a
	// misspelling that folds like two of them (a_b and ab) is ambiguous
	// even when the object has one of them.
	wanted := map[string][]string{}
	seen := map[string]bool{}
	for _, n := range concat(pv.Required, pv.Props) {
		if !seen[n] {
			seen[n] = true
			if f := keyFold(n); f != "" {
				wanted[f] = append(wanted[f], n)
			}
		}
	}
	drivers := rd.renameDrivers[validate.Pointer(parent)]
	undeclared := map[string][]string{}
	for k := range obj {
		if !declared[k] {
			if f := keyFold(k); f != "" {
				undeclared[f] = append(undeclared[f], k)
			}
		}
	}
	var rs []rename
	for f, froms := range undeclared {
		tos := wanted[f]
		if len(froms) != 1 || len(tos) != 1 || froms[0] == tos[0] {
			continue
		}
		if _, has := obj[tos[0]]; has {
			continue
		}
		// Only a name an error is about moves: the old one not allowed,
		// or the new one required and missing. An extra property the
		// schema allows stays where the model put it.
		if drivers == nil || !drivers.extra[froms[0]] && !drivers.missing[tos[0]] {
			continue
		}
		rs = append(rs, rename{froms[0], tos[0]})
	}
	slices.SortFunc(rs, func(a, b rename) int { return strings.Compare(a.from, b.from) })
	return rs
}

// listSeparators are the characters that make a string look like a list
// written as text, which wrap_array does not make a one-item array:
// separators (ASCII, and the ideographic comma, fullwidth comma, semicolon
// and vertical line), every line break (CR, NEL, U+2028 and U+2029 as well
// as LF, vertical tab and form feed) and bullets. A middle dot is a separator only between spaces
// ("a · b"): inside a word it is a letter's ("Col·legi"), and the katakana
// middle dot joins the parts of one name.
const listSeparators = ",;|\n\r\t\v\f\u0085\u2028\u2029•、，；｜"

// numberedItem matches an item number of a list written as text: "1. a
// 2. b", "1) a 2) b", spaced with any Unicode space (a no-break space too).
var numberedItem = regexp.MustCompile(`(^|[\s\p{Z}])\d{1,3}[.)][\s\p{Z}]`)

// listLike reports whether a string may be several items written as text:
// it holds a separator or bullet (listSeparators) or a spaced middle dot,
// two or more numbered items ("1. a 2. b"; one is an address or a
// sentence: "3. Main St", "I am 25. I live here"), or is written as an
// array ("['a']", "[1 2]"; not "[draft] report").
func listLike(s string) bool {
	if strings.ContainsAny(s, listSeparators) || strings.Contains(s, " · ") || len(numberedItem.FindAllStringIndex(s, 2)) >= 2 {
		return true
	}
	t := strings.TrimSpace(s)
	return strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]")
}

// noItem reports whether a string says there is nothing: empty, white
// space, a dash, or a placeholder such as "none" or "N/A". Wrapped, it
// became a list of one empty or placeholder item.
func noItem(s string) bool {
	switch strings.Trim(strings.ToLower(s), " \t\r\n.()<>[]…") {
	case "", "-", "—", "–", "none", "n/a", "na", "n.a", "null", "nil", "nothing", "empty", "not applicable", "unknown", "tbd", "tba":
		return true
	}
	return false
}

// keyFold is a property name as rename_key compares names: in NFC, without
// the separators _, - and space, in Unicode simple case folding (the
// smallest rune of each rune's folding orbit, as strings.EqualFold
// equates them). Two different names with one keyFold differ only in case
// and separators; "" matches nothing.
func keyFold(name string) string {
	return strings.Map(foldRune, stripSeparators(norm.NFC.String(name)))
}

// foldRune is the smallest rune of r's simple case folding orbit.
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// sameKey reports whether two different property names are equal once
// letter case, the separators _, - and space and Unicode canonical
// equivalence are set aside, and not empty then.
func sameKey(a, b string) bool {
	fa := keyFold(a)
	return a != b && fa != "" && fa == keyFold(b)
}

// stripSeparators is s without _, - and space.
func stripSeparators(s string) string {
	if !strings.ContainsAny(s, "_- ") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == ' ' {
			return -1
		}
		return r
	}, s)
}

// jsonWhitespace is JSON's insignificant whitespace.
const jsonWhitespace = " \t\r\n"

// jsonLiteral parses s, less surrounding JSON whitespace, as a JSON number,
// true or false, returning the value and its kind. A number keeps its text;
// one a float64 cannot hold (overflow, or underflow to zero) or that
// Validate would refuse (longer than 1000 characters, exponent beyond
// ±1000) is refused.
func jsonLiteral(s string) (any, subschema.Types, bool) {
	t := strings.Trim(s, jsonWhitespace)
	switch t {
	case "true":
		return true, subschema.TypeBoolean, true
	case "false":
		return false, subschema.TypeBoolean, true
	}
	if validate.NumberTextProblem(t) != "" {
		return nil, 0, false
	}
	r, ok := new(big.Rat).SetString(t)
	if !ok {
		return nil, 0, false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || (f == 0 && r.Sign() != 0) {
		return nil, 0, false
	}
	k := subschema.TypeFraction
	if r.IsInt() {
		k = subschema.TypeInteger
	}
	return json.Number(t), k, true
}

// uniqueFold returns the one allowed string equal to s up to letter case,
// surrounding white space and Unicode canonical equivalence, if exactly one
// (distinct) allowed string is, and it differs from s.
func uniqueFold(s string, allowed []string) (string, bool) {
	t := norm.NFC.String(strings.TrimSpace(s))
	match, n := "", 0
	seen := map[string]bool{}
	for _, a := range allowed {
		if seen[a] {
			continue
		}
		seen[a] = true
		if strings.EqualFold(norm.NFC.String(strings.TrimSpace(a)), t) {
			match, n = a, n+1
		}
	}
	return match, n == 1 && match != s
}

// batchAccepted reports whether a round's fixes, applied together, are kept:
// the errors after are among those before less each fix's driving error (no
// error appeared but under a renamed property, each driver is gone, no more
// errors than before), and each wrapped array is clean.
func batchAccepted(before, after []fixpoint.ValidationError, fixes []fix) bool {
	left := countKeys(before)
	var moved []string
	for _, f := range fixes {
		if left[f.driver] == 0 {
			return false
		}
		left[f.driver]--
		moved = append(moved, f.moved()...)
	}
	if len(after) > len(before) || !within(after, left, moved...) {
		return false
	}
	for _, f := range fixes {
		if f.kind == KindWrapArray && !clean(after, f.toks) {
			return false
		}
	}
	return true
}

// fixAccepted reports whether one fix is kept: its driving error is gone
// and there are no more errors than before. A value fix may reveal other
// errors (the value is now read as meant: 150 above a maximum of 100, the
// other branch of a oneOf); a structural fix (wrap, drop) may not, and a
// wrapped array must be clean.
func fixAccepted(before, after []fixpoint.ValidationError, f fix) bool {
	if len(after) > len(before) {
		return false
	}
	left := countKeys(before)
	if countKeys(after)[f.driver] >= left[f.driver] {
		return false
	}
	if f.valueFix() {
		return true
	}
	left[f.driver]--
	if f.kind == KindRenameKey {
		return within(after, left, f.moved()...)
	}
	return within(after, left) && (f.kind != KindWrapArray || clean(after, f.toks))
}

// within reports whether every error of errs is one of left (a count by
// path and keyword, used up as it matches) or at or under one of the
// locations allowed: no error appeared elsewhere.
func within(errs []fixpoint.ValidationError, left map[errKey]int, allowed ...string) bool {
	set := make(map[string]bool, len(allowed))
	for _, p := range allowed {
		set[p] = true
	}
	for _, e := range errs {
		k := errKey{e.Path, e.Keyword}
		if left[k] == 0 {
			// The moved value's own errors may show; its new name not
			// being allowed (another alternative's, or against
			// propertyNames) may not.
			if len(set) > 0 && underSet(e.Path, set) && !(set[e.Path] && nameKeyword(e.Keyword)) {
				continue
			}
			return false
		}
		left[k]--
	}
	return true
}

// nameKeyword reports whether an error of keyword at a property's own
// location is about its name, not its value.
func nameKeyword(keyword string) bool {
	switch keyword {
	case "additionalProperties", "unevaluatedProperties", "propertyNames":
		return true
	}
	return false
}

// underSet reports whether path or one of its ancestors is in set.
func underSet(path string, set map[string]bool) bool {
	for {
		if set[path] {
			return true
		}
		i := strings.LastIndexByte(path, '/')
		if i < 0 {
			return false
		}
		path = path[:i]
	}
}

// under reports whether path is p or below it.
func under(path, p string) bool {
	return path == p || strings.HasPrefix(path, p+"/")
}

// clean reports no error is at or under the location.
func clean(errs []fixpoint.ValidationError, toks []string) bool {
	p := validate.Pointer(toks)
	for _, e := range errs {
		if e.Path == p || strings.HasPrefix(e.Path, p+"/") {
			return false
		}
	}
	return true
}

func countKeys(errs []fixpoint.ValidationError) map[errKey]int {
	m := make(map[errKey]int, len(errs))
	for _, e := range errs {
		m[errKey{e.Path, e.Keyword}]++
	}
	return m
}

// round is what the fixes proposed in one round share, all on the same
// value: what the schema wants at its locations (read once per location
// and alternative, not once per error of a large value), the renames of
// its objects and the indexes of its allowed lists.
type round struct {
	wants *validate.Reader
	// renames holds the renames an object's names allow, by the object's
	// pointer: the same for each of its required and additionalProperties
	// errors (nil when none is allowed).
	renames map[string]*renameSet
	// renameDrivers holds, by object pointer, the names its required and
	// additionalProperties errors are about.
	renameDrivers map[string]*renameDrivers
	// folds indexes an allowed list by its first element's address (see
	// uniqueFold): an enum of 10,000 values under "items" was scanned again
	// for each of 2,000 wrong items.
	folds map[*string]map[string][]string
}

func newRound(c *validate.Session, root any) *round {
	return &round{
		wants:         c.Reader(root),
		renames:       map[string]*renameSet{},
		renameDrivers: map[string]*renameDrivers{},
		folds:         map[*string]map[string][]string{},
	}
}

// uniqueFold is the package's uniqueFold, looking a long list up in an
// index built once a round.
func (rd *round) uniqueFold(s string, allowed []string) (string, bool) {
	if len(allowed) < 16 {
		return uniqueFold(s, allowed)
	}
	idx, ok := rd.folds[&allowed[0]]
	if !ok || idx == nil {
		idx = map[string][]string{}
		for _, a := range allowed {
			k := foldKey(a)
			if !slices.Contains(idx[k], a) {
				idx[k] = append(idx[k], a)
			}
		}
		rd.folds[&allowed[0]] = idx
	}
	match := idx[foldKey(s)]
	return firstOr(match), len(match) == 1 && match[0] != s
}

// foldKey is what uniqueFold compares: s without surrounding white space,
// in NFC, each rune the smallest of its case-folding orbit.
func foldKey(s string) string {
	return strings.Map(foldRune, norm.NFC.String(strings.TrimSpace(s)))
}

func firstOr(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[0]
}

// renameSet is the renames one object allows, and the names they touch.
type renameSet struct {
	list     []rename
	from, to map[string]bool
}

// renameDrivers are the names an object's errors are about: not allowed
// (extra) and required but missing.
type renameDrivers struct {
	extra, missing map[string]bool
}

// lastToken is the last token of a JSON pointer, unescaped.
func lastToken(ptr string) string {
	tok := ptr[strings.LastIndexByte(ptr, '/')+1:]
	if !strings.Contains(tok, "~") {
		return tok
	}
	return validate.SplitPointer("/" + tok)[0]
}

// concat joins two lists, sharing the one when the other is empty.
func concat[T any](a, b []T) []T {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	return slices.Concat(a, b)
}

// encode marshals v without HTML escaping and without a trailing newline.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
