package sim

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FaultKind names one kind of fault the simulator puts in a reply. The names
// are stable: they appear in Stats and in the X-Sim-Faults response header.
type FaultKind string

// Formatting faults: the extractor repairs them locally.
const (
	FaultFence          FaultKind = "fence"           // ```json ... ``` around the JSON
	FaultProse          FaultKind = "prose"           // a sentence before and after the JSON
	FaultTrailingComma  FaultKind = "trailing_comma"  // a comma before the root's closing bracket
	FaultSingleQuotes   FaultKind = "single_quotes"   // 'strings' instead of "strings"
	FaultPythonLiterals FaultKind = "python_literals" // True, False, None
	FaultComments       FaultKind = "comments"        // a // comment line inside the root
)

// Content faults: the JSON parses but breaks the schema; only a correction
// fixes them. Each is recorded with the JSON pointer it applies to.
const (
	FaultWrongType       FaultKind = "wrong_type"
	FaultMissingRequired FaultKind = "missing_required"
	FaultExtraProperty   FaultKind = "extra_property"
	FaultEnumViolation   FaultKind = "enum_violation"
	FaultOutOfRange      FaultKind = "out_of_range"
)

// Shape faults: content faults of first attempts that a schema-guided
// local repair can fix without loss (the first five) or must not coerce,
// the value being lost (the last two). Each is recorded with its JSON
// pointer; a validator reports the first four and number_prose as type
// errors, enum_case and enum_synonym as enum (or const) errors,
// renamed_key as a missing required property or one additionalProperties
// forbids. See "Shape faults" in the package documentation for exactly what
// each writes.
const (
	FaultScalarAsString FaultKind = "scalar_as_string" // "42" for 42, "true" for true
	FaultEnumCase       FaultKind = "enum_case"        // "Bug" or " bug" for "bug"
	FaultSingleForArray FaultKind = "single_for_array" // "x" for ["x"]
	FaultNullOptional   FaultKind = "null_optional"    // "tags": null where the truth has no tags
	FaultRenamedKey     FaultKind = "renamed_key"      // "customerName" for "customer_name", "Category" for "category"
	FaultNumberProse    FaultKind = "number_prose"     // "about 40" or "40 kg" for 40 (lossy)
	FaultEnumSynonym    FaultKind = "enum_synonym"     // "Bug report" for "bug" (lossy)
)

// Outcome faults: the reply as a whole fails.
const (
	FaultTruncation FaultKind = "truncation" // cut mid-value, finish reason length
	FaultRefusal    FaultKind = "refusal"
	FaultEmpty      FaultKind = "empty"
)

// Patch faults: a JSON Patch reply (see "Patch replies" in the package
// documentation) with a wrong operation in it. Each is recorded with the
// path of the operation it spoiled or added.
const (
	FaultPatchBadPointer FaultKind = "patch_bad_pointer" // a path that does not exist: the patch does not apply
	FaultPatchWrongOp    FaultKind = "patch_wrong_op"    // add for replace at an array index, remove for replace of a required property, replace for add
	FaultPatchExtraOp    FaultKind = "patch_extra_op"    // a replace of a value that had no error
)

// Truth faults: the value keeps the schema but is not true. Each is
// recorded with the JSON pointer of the value at fault (for a rule break,
// the path its error names). See "Truth faults" in the package
// documentation.
const (
	FaultRuleBreak FaultKind = "rule_break" // a value that makes one of the schema's error rules fail
	FaultInvented  FaultKind = "invented"   // a value of the task's text replaced by one the text does not hold
	// FaultInventedAbsent is a value for a field of a long document that
	// the request's text does not hold (a chunk without it), invented:
	// see "Long documents" in the package documentation.
	FaultInventedAbsent FaultKind = "invented_absent"
)

// FaultKinds lists every fault kind: formatting, content, shape, outcome,
// patch, then truth faults.
func FaultKinds() []FaultKind {
	return slices.Clone(allFaultKinds[:])
}

// allFaultKinds is an array so that its length sizes the fault counters.
var allFaultKinds = [...]FaultKind{
	FaultFence, FaultProse, FaultTrailingComma, FaultSingleQuotes, FaultPythonLiterals, FaultComments,
	FaultWrongType, FaultMissingRequired, FaultExtraProperty, FaultEnumViolation, FaultOutOfRange,
	FaultScalarAsString, FaultEnumCase, FaultSingleForArray, FaultNullOptional, FaultRenamedKey, FaultNumberProse, FaultEnumSynonym,
	FaultTruncation, FaultRefusal, FaultEmpty,
	FaultPatchBadPointer, FaultPatchWrongOp, FaultPatchExtraOp,
	FaultRuleBreak, FaultInvented, FaultInventedAbsent,
}

// numFaultKinds is the number of fault kinds, the size of the counters.
const numFaultKinds = len(allFaultKinds)

var contentKinds = []FaultKind{FaultWrongType, FaultMissingRequired, FaultExtraProperty, FaultEnumViolation, FaultOutOfRange}

// shapeKinds are the shape faults, in the order they are drawn (renamed_key
// last: it came last, and a mix without it draws as before).
var shapeKinds = []FaultKind{FaultScalarAsString, FaultEnumCase, FaultSingleForArray, FaultNullOptional, FaultNumberProse, FaultEnumSynonym, FaultRenamedKey}

// patchKinds are the faults of a patch reply, in the order they are drawn.
var patchKinds = []FaultKind{FaultPatchWrongOp, FaultPatchBadPointer, FaultPatchExtraOp}

// FaultKindInfo describes a fault kind for help texts.
type FaultKindInfo struct {
	Kind FaultKind
	// Group is formatting, content, shape, outcome, patch or truth.
	Group string
	// Lossless is set for the kinds a local repair fixes back to the
	// truth: the formatting faults (the extractor) and the first five
	// shape faults (a schema-guided coercion).
	Lossless    bool
	Description string
}

// FaultKindInfos describes every fault kind, in the order of FaultKinds.
func FaultKindInfos() []FaultKindInfo {
	return slices.Clone(faultKindInfos)
}

var faultKindInfos = []FaultKindInfo{
	{FaultFence, "formatting", true, "```json fences around the JSON"},
	{FaultProse, "formatting", true, "a sentence before and after the JSON"},
	{FaultTrailingComma, "formatting", true, "a comma before the root's closing bracket"},
	{FaultSingleQuotes, "formatting", true, "'single-quoted' keys and strings"},
	{FaultPythonLiterals, "formatting", true, "True, False, None"},
	{FaultComments, "formatting", true, "a // comment line inside the root"},
	{FaultWrongType, "content", false, "a value of a type the schema does not allow"},
	{FaultMissingRequired, "content", false, "a required property left out"},
	{FaultExtraProperty, "content", false, "a property additionalProperties: false forbids"},
	{FaultEnumViolation, "content", false, "a value outside enum or const"},
	{FaultOutOfRange, "content", false, "a number past minimum or maximum"},
	{FaultScalarAsString, "shape", true, `a number or boolean written as a string: "42", "true"`},
	{FaultEnumCase, "shape", true, `an enum or const string in another case or with surrounding spaces: "Bug", " bug"`},
	{FaultSingleForArray, "shape", true, `the one item of a one-item array without the array: "x" for ["x"]`},
	{FaultNullOptional, "shape", true, "null for an optional property the truth lacks, whose type excludes null"},
	{FaultRenamedKey, "shape", true, `a property under another case or separators of its name: "customerName" for "customer_name"`},
	{FaultNumberProse, "shape", false, `a number as prose in a string: "about 40", "40 kg" (must not be coerced)`},
	{FaultEnumSynonym, "shape", false, `an enum or const string replaced by a synonym: "Bug report" for "bug" (must not be coerced)`},
	{FaultTruncation, "outcome", false, "the reply cut off mid-value (finish reason length)"},
	{FaultRefusal, "outcome", false, "a refusal instead of the value"},
	{FaultEmpty, "outcome", false, "an empty reply"},
	{FaultPatchBadPointer, "patch", false, "a JSON Patch operation whose path does not exist"},
	{FaultPatchWrongOp, "patch", false, "a JSON Patch operation with the wrong op (add/remove/replace)"},
	{FaultPatchExtraOp, "patch", false, "a JSON Patch operation replacing a value that had no error"},
	{FaultRuleBreak, "truth", false, "a value that breaks one of the schema's error rules (x-fixpoint-rules): two dates swapped, a total changed"},
	{FaultInvented, "truth", false, "a value copied from the task replaced by a plausible one the task does not hold"},
	{FaultInventedAbsent, "truth", false, "a long document's field the request's text (a chunk) does not hold, answered with a plausible invented value"},
}

func faultIndex(k FaultKind) int { return slices.Index(allFaultKinds[:], k) }

// ContentFault is one schema violation in a reply.
type ContentFault struct {
	Kind FaultKind `json:"kind"`
	// Pointer is the JSON pointer of the offending value; for a missing
	// property it is where the property should be (parent pointer + "/" +
	// name), for an extra property where it is.
	Pointer string `json:"pointer"`
	// schema is the node the value at Pointer must match (nil for extras).
	schema any
	// note is a rule break's message (its rule's text when it has none):
	// a correction names the break when it says the message.
	note string
}

// checker finds the content faults in a value, for the kinds the simulator
// injects. It is not a validator: it only looks at type, enum/const, numeric
// bounds, required and additionalProperties: false. Its walks stop 64 deep
// and after maxCheckNodes values, and it records at most maxFaults faults,
// whatever the reply holds.
type checker struct {
	doc    *schemaDoc
	out    []ContentFault
	visits int
}

// visit counts a value visited and reports whether the walk may go on.
func (c *checker) visit(depth int) bool {
	c.visits++
	return depth <= 64 && c.visits <= maxCheckNodes
}

// add records a fault, up to maxFaults: a reply to a schema no value
// satisfies can break it in thousands of places, and a correction reads
// its feedback once per fault.
func (c *checker) add(f ContentFault) {
	if len(c.out) < maxFaults {
		c.out = append(c.out, f)
	}
}

func (c *checker) walk(s any, v any, ptr string, depth int) {
	if !c.visit(depth) {
		return
	}
	m := c.doc.resolve(s)
	if m == nil {
		return
	}
	if types, inferred := typesOf(m); !inferred && !typeMatches(v, types) {
		c.add(ContentFault{Kind: FaultWrongType, Pointer: ptr, schema: s})
		return
	}
	if !enumMatches(m, v) {
		c.add(ContentFault{Kind: FaultEnumViolation, Pointer: ptr, schema: s})
		return
	}
	if n, ok := v.(json.Number); ok && !inBounds(m, n) {
		c.add(ContentFault{Kind: FaultOutOfRange, Pointer: ptr, schema: s})
		return
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := m["properties"].(map[string]any)
		if req, ok := m["required"].([]any); ok {
			for _, r := range req {
				if k, ok := r.(string); ok {
					if _, present := x[k]; !present {
						var sub any = props[k]
						if sub == nil {
							sub = true
						}
						c.add(ContentFault{Kind: FaultMissingRequired, Pointer: ptr + "/" + escapeToken(k), schema: sub})
					}
				}
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		ap := m["additionalProperties"]
		for _, k := range keys {
			p := ptr + "/" + escapeToken(k)
			if sub, ok := props[k]; ok {
				c.walk(sub, x[k], p, depth+1)
			} else if b, ok := ap.(bool); ok && !b {
				c.add(ContentFault{Kind: FaultExtraProperty, Pointer: p})
			} else if apm, ok := ap.(map[string]any); ok {
				c.walk(apm, x[k], p, depth+1)
			}
		}
	case []any:
		prefix, items := itemSchemas(m)
		for i, e := range x {
			p := ptr + "/" + strconv.Itoa(i)
			switch {
			case i < len(prefix):
				c.walk(prefix[i], e, p, depth+1)
			case items != nil:
				c.walk(items, e, p, depth+1)
			}
		}
	}
}

// itemSchemas returns the schemas of an array's leading items and of the
// rest: prefixItems and items (2020-12), or items as a list and
// additionalItems (draft-07).
func itemSchemas(m map[string]any) (prefix []any, items any) {
	prefix, _ = m["prefixItems"].([]any)
	items = m["items"]
	if arr, ok := items.([]any); ok {
		prefix, items = arr, m["additionalItems"]
	}
	return prefix, items
}

func typeMatches(v any, types []string) bool {
	for _, t := range types {
		switch t {
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "null":
			if v == nil {
				return true
			}
		case "number":
			if _, ok := v.(json.Number); ok {
				return true
			}
		case "integer":
			if n, ok := v.(json.Number); ok && isIntegral(n) {
				return true
			}
		}
	}
	return false
}

func isIntegral(n json.Number) bool {
	if !strings.ContainsAny(string(n), ".eE") {
		return true
	}
	r, ok := new(big.Rat).SetString(string(n))
	return ok && r.IsInt()
}

func enumMatches(m map[string]any, v any) bool {
	if c, ok := m["const"]; ok {
		return jsonEqual(c, v)
	}
	e, ok := m["enum"].([]any)
	if !ok {
		return true
	}
	for _, x := range e {
		if jsonEqual(x, v) {
			return true
		}
	}
	return false
}

func jsonEqual(a, b any) bool {
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if aok && bok {
		if an == bn {
			return true
		}
		ar, ok1 := new(big.Rat).SetString(string(an))
		br, ok2 := new(big.Rat).SetString(string(bn))
		return ok1 && ok2 && ar.Cmp(br) == 0
	}
	switch a := a.(type) {
	case string:
		// The common case (an enum of strings), without two marshals:
		// equal strings encode alike, and valid UTF-8 encodes one to one.
		if b, ok := b.(string); ok && (a == b || utf8.ValidString(a) && utf8.ValidString(b)) {
			return a == b
		}
	case bool:
		if b, ok := b.(bool); ok {
			return a == b
		}
	}
	return string(mustJSON(a)) == string(mustJSON(b))
}

func inBounds(m map[string]any, n json.Number) bool {
	f, err := n.Float64()
	if err != nil {
		return true
	}
	lo, hi, loEx, hiEx := bounds(m)
	if f < lo || (loEx && f == lo) || f > hi || (hiEx && f == hi) {
		return false
	}
	return true
}

// site is a place a content fault of one kind can be put.
type site struct {
	ptr    string
	schema map[string]any
	value  any
}

// sites lists where each content fault kind can be injected into v (a valid
// instance of s). Keys of objects are visited in sorted order so the lists
// are deterministic.
func (c *checker) sites(s any, v any, ptr string, depth int, out map[FaultKind][]site) {
	if !c.visit(depth) {
		return
	}
	m := c.doc.resolve(s)
	if m == nil {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := m["properties"].(map[string]any)
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		req := map[string]bool{}
		if r, ok := m["required"].([]any); ok {
			for _, e := range r {
				if k, ok := e.(string); ok {
					req[k] = true
				}
			}
		}
		for _, k := range keys {
			p := ptr + "/" + escapeToken(k)
			if req[k] {
				out[FaultMissingRequired] = append(out[FaultMissingRequired], site{ptr: p})
			}
			if sub, ok := props[k]; ok {
				c.sites(sub, x[k], p, depth+1, out)
			}
		}
		if b, ok := m["additionalProperties"].(bool); ok && !b {
			for _, name := range extraNames {
				if _, taken := props[name]; !taken {
					out[FaultExtraProperty] = append(out[FaultExtraProperty], site{ptr: ptr + "/" + name})
					break
				}
			}
		}
		return
	case []any:
		prefix, items := itemSchemas(m)
		for i, e := range x {
			p := ptr + "/" + strconv.Itoa(i)
			switch {
			case i < len(prefix):
				c.sites(prefix[i], e, p, depth+1, out)
			case items != nil:
				c.sites(items, e, p, depth+1, out)
			}
		}
		return
	}
	if ptr == "" {
		return // faults go inside the root, never replace it
	}
	types, inferred := typesOf(m)
	if !inferred {
		out[FaultWrongType] = append(out[FaultWrongType], site{ptr, m, v})
	}
	_, isEnum := m["enum"]
	_, isConst := m["const"]
	if isEnum || isConst {
		out[FaultEnumViolation] = append(out[FaultEnumViolation], site{ptr, m, v})
		return
	}
	if _, ok := v.(json.Number); ok && slices.ContainsFunc(types, func(t string) bool { return t == "integer" || t == "number" }) {
		lo, hi, _, _ := bounds(m)
		if !math.IsInf(lo, 0) || !math.IsInf(hi, 0) {
			out[FaultOutOfRange] = append(out[FaultOutOfRange], site{ptr, m, v})
		}
	}
}

var extraNames = []string{"notes", "confidence", "explanation", "source", "comment_text"}

// wrongTypeValue returns a value of a type the node does not allow.
func wrongTypeValue(m map[string]any, v any) any {
	types, _ := typesOf(m)
	var cands []any
	switch v.(type) {
	case string:
		cands = []any{json.Number("42"), true, []any{v}}
	case json.Number:
		cands = []any{string(v.(json.Number)), true, nil}
	case bool:
		if v.(bool) {
			cands = []any{"yes", json.Number("1")}
		} else {
			cands = []any{"no", json.Number("0")}
		}
	default:
		cands = []any{"unknown", json.Number("0"), false}
	}
	cands = append(cands, map[string]any{"value": v})
	for _, c := range cands {
		if !typeMatches(c, types) {
			return c
		}
	}
	return map[string]any{"value": v}
}

// enumViolationValue returns a value of the same type that is not allowed.
func enumViolationValue(m map[string]any, v any) any {
	var cands []any
	switch x := v.(type) {
	case string:
		cands = []any{strings.ToUpper(x), x + "s", "unknown", "other", x + "_other"}
	case json.Number:
		f, _ := x.Float64()
		cands = []any{json.Number(strconv.FormatFloat(f+1, 'f', -1, 64)), json.Number(strconv.FormatFloat(f+7, 'f', -1, 64)), json.Number("-999")}
	case bool:
		cands = []any{!x}
	default:
		cands = []any{"unknown"}
	}
	for _, c := range cands {
		if !enumMatches(m, c) {
			return c
		}
	}
	return "unknown-value"
}

// outOfRangeValue returns a number just past the node's bounds.
func outOfRangeValue(m map[string]any, v any) any {
	lo, hi, _, _ := bounds(m)
	step := 1.0
	if mo, ok := num(m, "multipleOf"); ok && mo > 0 {
		step = mo
	}
	types, _ := typesOf(m)
	if !math.IsInf(hi, 0) {
		return formatNum(hi+step*math.Max(1, math.Ceil(math.Abs(hi)*0.1/step)), types)
	}
	return formatNum(lo-step*math.Max(1, math.Ceil(math.Abs(lo)*0.1/step)), types)
}

func formatNum(f float64, types []string) json.Number {
	if slices.Contains(types, "integer") {
		return json.Number(strconv.FormatInt(int64(math.Round(f)), 10))
	}
	return json.Number(strconv.FormatFloat(f, 'f', -1, 64))
}

// injectOne puts one fault of kind k into v at a site not overlapping used,
// and reports whether it found one.
func injectOne(v any, k FaultKind, sites []site, used []string, rng *rand.Rand) (string, bool) {
	free := sites[:0:0]
	for _, s := range sites {
		if !slices.ContainsFunc(used, func(u string) bool { return overlaps(u, s.ptr) }) {
			free = append(free, s)
		}
	}
	if len(free) == 0 {
		return "", false
	}
	s := free[rng.IntN(len(free))]
	switch k {
	case FaultWrongType:
		pointerSet(v, s.ptr, wrongTypeValue(s.schema, s.value))
	case FaultEnumViolation:
		pointerSet(v, s.ptr, enumViolationValue(s.schema, s.value))
	case FaultOutOfRange:
		pointerSet(v, s.ptr, outOfRangeValue(s.schema, s.value))
	case FaultMissingRequired:
		pointerDelete(v, s.ptr)
	case FaultExtraProperty:
		val := any("see attached")
		if strings.HasSuffix(s.ptr, "/confidence") {
			val = json.Number("0.9")
		}
		pointerSet(v, s.ptr, val)
	}
	return s.ptr, true
}

// overlaps reports whether one pointer is the other or an ancestor of it.
func overlaps(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == b || strings.HasPrefix(b, a+"/")
}

// names reports whether a correction message names the fault exactly: the
// pointer appears delimited (not as part of a longer pointer), or, for a
// missing or extra property, the parent's pointer appears delimited (or the
// parent is the root) together with the quoted property name; for a rule
// break, the rule's message (as is, or escaped for XML) and its path (any
// text, for a rule on the root).
func names(msg string, f ContentFault) bool {
	if f.Kind == FaultRuleBreak {
		return (strings.Contains(msg, f.note) || strings.Contains(msg, xmlEscape(f.note))) &&
			(f.Pointer == "" || containsPointer(msg, f.Pointer))
	}
	if f.Pointer != "" && containsPointer(msg, f.Pointer) {
		return true
	}
	if f.Kind != FaultMissingRequired && f.Kind != FaultExtraProperty {
		return false
	}
	i := strings.LastIndexByte(f.Pointer, '/')
	parent, name := f.Pointer[:i], unescapeToken(f.Pointer[i+1:])
	if parent != "" && !containsPointer(msg, parent) {
		return false
	}
	for _, q := range []string{`"` + name + `"`, "'" + name + "'", "`" + name + "`"} {
		if strings.Contains(msg, q) {
			return true
		}
	}
	return false
}

func isPointerChar(c byte) bool {
	return c == '/' || c == '_' || c == '-' || c == '~' ||
		c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// containsPointer reports whether p occurs in msg with no pointer character
// directly before or after it.
func containsPointer(msg, p string) bool {
	for off := 0; ; {
		i := strings.Index(msg[off:], p)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(p)
		before := i == 0 || !isPointerChar(msg[i-1])
		after := end == len(msg) || !isPointerChar(msg[end])
		if before && after {
			return true
		}
		off = i + 1
	}
}

func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapeToken(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

func splitPointer(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		parts[i] = unescapeToken(s)
	}
	return parts
}

// pointerGet returns the value at JSON pointer p.
func pointerGet(v any, p string) (any, bool) {
	for _, tok := range splitPointer(p) {
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = e
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// pointerSet sets the value at p; the parent must exist.
func pointerSet(root any, p string, val any) bool {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return false
	}
	parent, ok := pointerGet(root, p[:i])
	if !ok {
		return false
	}
	tok := unescapeToken(p[i+1:])
	switch x := parent.(type) {
	case map[string]any:
		x[tok] = val
		return true
	case []any:
		j, err := strconv.Atoi(tok)
		if err != nil || j < 0 || j >= len(x) {
			return false
		}
		x[j] = val
		return true
	}
	return false
}

// pointerDelete removes an object member at p.
func pointerDelete(root any, p string) bool {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return false
	}
	parent, ok := pointerGet(root, p[:i])
	if !ok {
		return false
	}
	if x, ok := parent.(map[string]any); ok {
		delete(x, unescapeToken(p[i+1:]))
		return true
	}
	return false
}

// xmlEscape is s as the xml feedback format writes it in an element.
func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
