package sim

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// injection records a shape fault put into a first attempt: its kind,
// where, and the value written there. A reply's faults are found by the
// checker, which reports shape faults as wrong_type or enum_violation; the
// records give them back their kind (see relabel).
type injection struct {
	kind  FaultKind
	ptr   string
	value any
	// from is where renamed_key wrote the value: the property under the
	// spelling it used.
	from string
}

// shapeSites lists where each shape fault kind can go in v, a valid
// instance of s (the ground truth). Keys are visited in sorted order so
// the lists are deterministic. A node that reaches oneOf or anyOf is left
// alone: the checker reads only its first branch, and another branch may
// allow what the fault writes.
func (c *checker) shapeSites(s any, v any, ptr string, depth int, out map[FaultKind][]site) {
	if !c.visit(depth) {
		return
	}
	m := c.doc.resolve(s)
	if m == nil || c.doc.branchy(s, 0) {
		return
	}
	types, inferred := typesOf(m)
	switch x := v.(type) {
	case map[string]any:
		props, _ := m["properties"].(map[string]any)
		req := requiredSet(m)
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		slices.Sort(names)
		closed := m["additionalProperties"] == false
		for _, k := range names {
			p := ptr + "/" + escapeToken(k)
			if e, ok := x[k]; ok {
				if (req[k] || closed) && renameable(k, names) {
					out[FaultRenamedKey] = append(out[FaultRenamedKey], site{p, m, e})
				}
				c.shapeSites(props[k], e, p, depth+1, out)
				continue
			}
			if req[k] {
				continue
			}
			if sub := c.doc.resolve(props[k]); sub != nil && !c.doc.branchy(props[k], 0) && excludesNull(sub) {
				out[FaultNullOptional] = append(out[FaultNullOptional], site{ptr: p, schema: sub})
			}
		}
		return
	case []any:
		prefix, items := itemSchemas(m)
		if len(x) == 1 && len(prefix) == 0 && items != nil && ptr != "" && !inferred && !typeMatches(x[0], types) && !hasEnum(m) {
			out[FaultSingleForArray] = append(out[FaultSingleForArray], site{ptr, m, x[0]})
		}
		for i, e := range x {
			p := ptr + "/" + strconv.Itoa(i)
			switch {
			case i < len(prefix):
				c.shapeSites(prefix[i], e, p, depth+1, out)
			case items != nil:
				c.shapeSites(items, e, p, depth+1, out)
			}
		}
		return
	}
	if ptr == "" {
		return // faults go inside the root, never replace it
	}
	if str, ok := v.(string); ok && hasEnum(m) {
		if len(enumCaseVariants(m, str)) > 0 {
			out[FaultEnumCase] = append(out[FaultEnumCase], site{ptr, m, v})
		}
		if _, ok := enumSynonym(m, str); ok {
			out[FaultEnumSynonym] = append(out[FaultEnumSynonym], site{ptr, m, v})
		}
		return
	}
	if inferred || slices.Contains(types, "string") {
		return
	}
	switch v.(type) {
	case json.Number:
		out[FaultScalarAsString] = append(out[FaultScalarAsString], site{ptr, m, v})
		out[FaultNumberProse] = append(out[FaultNumberProse], site{ptr, m, v})
	case bool:
		out[FaultScalarAsString] = append(out[FaultScalarAsString], site{ptr, m, v})
	}
}

// misspell returns the spelling renamed_key writes for a property name:
// camelCase for a name with _ or - ("customer_name": "customerName"),
// snake_case for a camelCase one ("dueDate": "due_date"), else capitalized
// ("category": "Category").
func misspell(name string) string {
	if strings.ContainsAny(name, "_-") {
		parts := strings.FieldsFunc(name, func(r rune) bool { return r == '_' || r == '-' })
		for i := 1; i < len(parts); i++ {
			parts[i] = capitalize(parts[i])
		}
		return strings.Join(parts, "")
	}
	if strings.ToLower(name) != name {
		var b strings.Builder
		for i, r := range name {
			if unicode.IsUpper(r) {
				if i > 0 {
					b.WriteByte('_')
				}
				r = unicode.ToLower(r)
			}
			b.WriteRune(r)
		}
		return b.String()
	}
	return capitalize(name)
}

// renameable reports whether name's misspelling differs from it and from
// every spelling of the object's other declared names (names), up to
// letter case and the separators _, - and space: the one name a repair
// could give it back.
func renameable(name string, names []string) bool {
	w := misspell(name)
	if w == name || foldKey(w) == "" || foldKey(w) != foldKey(name) {
		return false
	}
	for _, n := range names {
		if n != name && (n == w || foldKey(n) == foldKey(w)) {
			return false
		}
	}
	return true
}

// foldKey is a property name without _, - and space, in lower case.
func foldKey(s string) string { return strings.ToLower(keyFolder.Replace(s)) }

// keyFolder is built once: a Replacer builds its tables on first use, which
// cost more than the replacing itself.
var keyFolder = strings.NewReplacer("_", "", "-", "", " ", "")

func requiredSet(m map[string]any) map[string]bool {
	req := map[string]bool{}
	if r, ok := m["required"].([]any); ok {
		for _, e := range r {
			if k, ok := e.(string); ok {
				req[k] = true
			}
		}
	}
	return req
}

func hasEnum(m map[string]any) bool {
	_, isEnum := m["enum"]
	_, isConst := m["const"]
	return isEnum || isConst
}

// excludesNull reports whether a resolved node declares its types and
// rejects null.
func excludesNull(m map[string]any) bool {
	types, inferred := typesOf(m)
	if inferred || slices.Contains(types, "null") {
		return false
	}
	if c, ok := m["const"]; ok && c == nil {
		return false
	}
	if e, ok := m["enum"].([]any); ok && slices.Contains(e, nil) {
		return false
	}
	return true
}

// branchy reports whether s, through $ref and allOf, reaches oneOf or
// anyOf.
func (d *schemaDoc) branchy(s any, depth int) bool {
	for range 8 {
		m, ok := s.(map[string]any)
		if !ok || depth > 8 {
			return false
		}
		if _, ok := m["oneOf"]; ok {
			return true
		}
		if _, ok := m["anyOf"]; ok {
			return true
		}
		if all, ok := m["allOf"].([]any); ok {
			for _, sub := range all {
				if d.branchy(sub, depth+1) {
					return true
				}
			}
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return false
		}
		s = d.lookup(m, ref)
	}
	return false
}

// allowed lists the strings of an enum or const.
func allowed(m map[string]any) []string {
	var out []string
	if c, ok := m["const"].(string); ok {
		return []string{c}
	}
	if e, ok := m["enum"].([]any); ok {
		for _, x := range e {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// foldMatches counts the allowed strings equal to s up to letter case and
// surrounding white space: what a lossless repair of an enum accepts.
func foldMatches(m map[string]any, s string) int {
	n := 0
	t := strings.TrimSpace(s)
	for _, a := range allowed(m) {
		if strings.EqualFold(strings.TrimSpace(a), t) {
			n++
		}
	}
	return n
}

// enumCaseVariants lists the variants of v, an allowed enum or const
// string, that enum_case may write, in this order: capitalized (first
// letter upper case), all upper case, all lower case, a leading space, a
// trailing space. Each differs from v, is not allowed itself, and matches
// exactly one allowed value (v) up to case and surrounding space.
func enumCaseVariants(m map[string]any, v string) []string {
	if foldMatches(m, v) != 1 || strings.TrimSpace(v) != v {
		return nil
	}
	var out []string
	for _, c := range []string{capitalize(v), strings.ToUpper(v), strings.ToLower(v), " " + v, v + " "} {
		if c != v && !slices.Contains(out, c) && !enumMatches(m, c) {
			out = append(out, c)
		}
	}
	return out
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// synonyms are what a model writes for common enum values when it
// paraphrases; enum_synonym uses them, keyed by the lower-case value.
var synonyms = map[string]string{
	"bug": "Bug report", "feature_request": "Feature suggestion", "billing": "Payment issue",
	"account": "Login problem", "shipping": "Delivery problem", "other": "Miscellaneous",
	"negative": "Unhappy", "neutral": "Mixed feelings", "positive": "Satisfied",
	"pending": "Awaiting shipment", "shipped": "Dispatched", "delivered": "Received",
	"cancelled": "Called off", "canceled": "Called off", "open": "Active", "closed": "Resolved",
	"low": "Minor", "medium": "Moderate", "high": "Urgent", "critical": "Blocker", "urgent": "Top priority",
	"yes": "Affirmative", "no": "Not at all", "paid": "Settled", "unpaid": "Outstanding",
	"active": "Enabled", "inactive": "Disabled", "draft": "Work in progress", "approved": "Signed off",
	"rejected": "Turned down", "standard": "Regular rate", "reduced": "Lower rate", "zero": "Zero-rated",
	"exempt": "Tax-free", "eur": "Euro", "usd": "US dollars", "gbp": "Pounds sterling",
}

// enumSynonym returns what enum_synonym writes for v: the synonym in the
// table above; else, when v has _ or - in it, its words separated by
// spaces with the first capitalized ("in_progress": "In progress"); else
// "similar to " + v. It reports false when that is allowed or matches an
// allowed value up to case and surrounding space (it would be lossless).
func enumSynonym(m map[string]any, v string) (string, bool) {
	syn, ok := synonyms[strings.ToLower(strings.TrimSpace(v))]
	switch {
	case ok:
	case strings.ContainsAny(v, "_-"):
		syn = capitalize(strings.NewReplacer("_", " ", "-", " ").Replace(v))
	default:
		syn = "similar to " + v
	}
	if enumMatches(m, syn) || foldMatches(m, syn) > 0 {
		return "", false
	}
	return syn, true
}

// numberProse returns what number_prose writes for n: "about R", R being n
// rounded to two significant digits; or, when the property's name hints at
// a unit and r draws it, n's own text and the unit ("40 kg", "12.5 EUR").
func numberProse(n json.Number, name string, r *rand.Rand) string {
	unit := unitFor(name)
	if unit != "" && r.IntN(2) == 0 {
		return string(n) + " " + unit
	}
	f, err := n.Float64()
	if err != nil {
		return "about " + string(n)
	}
	return "about " + roundSig(f, 2)
}

func unitFor(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.Contains(n, "price") || strings.Contains(n, "amount") || strings.Contains(n, "total") ||
		strings.Contains(n, "cost") || strings.Contains(n, "fee"):
		return "EUR"
	case strings.Contains(n, "qty") || strings.Contains(n, "quantity") || strings.Contains(n, "count"):
		return "units"
	case strings.Contains(n, "weight") || strings.Contains(n, "mass"):
		return "kg"
	case n == "age" || strings.HasSuffix(n, "_age") || strings.Contains(n, "years"):
		return "years"
	case strings.Contains(n, "percent") || strings.Contains(n, "rate"):
		return "%"
	}
	return ""
}

// roundSig formats f rounded to d significant digits, without exponent.
func roundSig(f float64, d int) string {
	if f == 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	mag := math.Floor(math.Log10(math.Abs(f)))
	scale := math.Pow(10, mag-float64(d-1))
	r := math.Round(f/scale) * scale
	prec := max(0, int(-(mag - float64(d-1))))
	out := strconv.FormatFloat(r, 'f', prec, 64)
	if strings.Contains(out, ".") {
		out = strings.TrimRight(strings.TrimRight(out, "0"), ".")
	}
	return out
}

// shapeValue returns the value shape fault k writes at site st.
func shapeValue(k FaultKind, st site, r *rand.Rand) any {
	switch k {
	case FaultScalarAsString:
		switch x := st.value.(type) {
		case json.Number:
			return string(x)
		case bool:
			return strconv.FormatBool(x)
		}
	case FaultEnumCase:
		vs := enumCaseVariants(st.schema, st.value.(string))
		return vs[r.IntN(len(vs))]
	case FaultSingleForArray:
		return deepCopy(st.value)
	case FaultNullOptional:
		return nil
	case FaultNumberProse:
		name := ""
		if i := strings.LastIndexByte(st.ptr, '/'); i >= 0 {
			name = unescapeToken(st.ptr[i+1:])
		}
		return numberProse(st.value.(json.Number), name, r)
	case FaultEnumSynonym:
		syn, _ := enumSynonym(st.schema, st.value.(string))
		return syn
	}
	return nil
}

// injectShape draws the shape faults of a first attempt from their own
// seed stream and puts the drawn ones into value, scarcest kind first, at
// sites of truth not overlapping used (the content faults' pointers).
func (s *Server) injectShape(doc *schemaDoc, truth, value any, key string, used []string) []injection {
	mix := s.cfg.Mix
	if !mix.shapeOn() {
		return nil
	}
	r := s.rng("shape", key, doc.src)
	drawn := make([]FaultKind, 0, len(shapeKinds))
	for _, k := range shapeKinds {
		if r.Float64() < mix.Prob(k) {
			drawn = append(drawn, k)
		}
	}
	if len(drawn) == 0 {
		return nil
	}
	c := checker{doc: doc}
	sites := map[FaultKind][]site{}
	c.shapeSites(doc.root, truth, "", 0, sites)
	slices.SortStableFunc(drawn, func(a, b FaultKind) int { return len(sites[a]) - len(sites[b]) })
	var out []injection
	for _, k := range drawn {
		free := sites[k][:0:0]
		for _, st := range sites[k] {
			if !slices.ContainsFunc(used, func(u string) bool { return overlaps(u, st.ptr) }) {
				free = append(free, st)
			}
		}
		if len(free) == 0 {
			continue
		}
		st := free[r.IntN(len(free))]
		if k == FaultRenamedKey {
			if rec, ok := renameAt(value, st.ptr); ok {
				used = append(used, st.ptr, rec.from)
				out = append(out, rec)
			}
			continue
		}
		v := shapeValue(k, st, r)
		if !pointerSet(value, st.ptr, v) {
			continue
		}
		used = append(used, st.ptr)
		out = append(out, injection{kind: k, ptr: st.ptr, value: v})
	}
	return out
}

// renameAt moves the property at ptr in value to its misspelling, unless
// the object already has that name.
func renameAt(value any, ptr string) (injection, bool) {
	i := strings.LastIndexByte(ptr, '/')
	parent, name := ptr[:i], unescapeToken(ptr[i+1:])
	p, _ := pointerGet(value, parent)
	obj, ok := p.(map[string]any)
	if !ok {
		return injection{}, false
	}
	v, has := obj[name]
	w := misspell(name)
	if _, taken := obj[w]; !has || taken {
		return injection{}, false
	}
	delete(obj, name)
	obj[w] = v
	return injection{kind: FaultRenamedKey, ptr: ptr, value: v, from: parent + "/" + escapeToken(w)}, true
}

// relabel gives the faults the checker found at an injected shape fault,
// still holding the value written there, the kind of that fault.
func relabel(faults []ContentFault, recs []injection, value any) {
	if len(recs) == 0 {
		return
	}
	for i := range faults {
		f := &faults[i]
		if f.Kind == FaultMissingRequired || f.Kind == FaultExtraProperty {
			relabelRename(f, recs, value)
			continue
		}
		if f.Kind != FaultWrongType && f.Kind != FaultEnumViolation {
			continue
		}
		for _, r := range recs {
			if r.ptr != f.Pointer {
				continue
			}
			if cur, ok := pointerGet(value, f.Pointer); ok && jsonEqual(cur, r.value) {
				f.Kind = r.kind
			}
			break
		}
	}
}

// relabelRename gives a missing required property or an extra one its
// renamed_key kind when a renamed_key record names it and the misspelt
// property still holds the value written.
func relabelRename(f *ContentFault, recs []injection, value any) {
	for _, r := range recs {
		if r.kind != FaultRenamedKey || (f.Pointer != r.ptr || f.Kind != FaultMissingRequired) && (f.Pointer != r.from || f.Kind != FaultExtraProperty) {
			continue
		}
		if cur, ok := pointerGet(value, r.from); ok && jsonEqual(cur, r.value) {
			f.Kind = FaultRenamedKey
		}
		return
	}
}

// needsRelabel reports whether any fault may be a shape fault.
func needsRelabel(faults []ContentFault) bool {
	return slices.ContainsFunc(faults, func(f ContentFault) bool {
		switch f.Kind {
		case FaultWrongType, FaultEnumViolation, FaultMissingRequired, FaultExtraProperty:
			return true
		}
		return false
	})
}
