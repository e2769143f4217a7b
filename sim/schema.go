package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fixpoint-dev/fixpoint/subschema"
)

// schemaDoc is a parsed JSON Schema, indexed to resolve its references as
// the validator does. It is read-only once parsed, and shared by concurrent
// requests.
type schemaDoc struct {
	root any
	doc  *subschema.Doc
	src  string // the schema's text, part of the seeds drawn for it
	// resolved memoizes resolve for the nodes that need merging ($ref,
	// allOf, oneOf, anyOf), keyed by the node's map: a recursive schema
	// resolves the same few nodes for every value of a reply.
	mu       sync.RWMutex
	resolved map[uintptr]map[string]any
	// checked is the schema's rules and evidence exemptions (checks),
	// read once.
	checksOnce sync.Once
	checked    *checks
}

// parseSchema decodes a JSON Schema, keeping numbers as json.Number.
func parseSchema(b []byte) (*schemaDoc, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode schema: %w", err)
	}
	switch v.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("decode schema: %w", errNotSchema)
	}
	return &schemaDoc{root: v, doc: subschema.NewDoc(v), src: string(b)}, nil
}

// resolve follows $ref, merges allOf and picks the first non-null branch of
// oneOf/anyOf, so that the generator and the fault walker see one flat node.
// It returns nil for the false schema and an empty map for true. A schema
// may refer to itself ({"$ref": "#"}) or fan out (allOf of several
// references back to itself): resolution stops maxResolve references deep
// and after maxResolveSteps nodes, treating what is left as true.
func (d *schemaDoc) resolve(s any) map[string]any {
	m, ok := s.(map[string]any)
	if !ok {
		steps := maxResolveSteps
		return d.resolveDepth(s, 0, &steps)
	}
	if !needsMerge(m) {
		return m
	}
	// The node is part of d, which keeps it alive: its address is stable.
	key := reflect.ValueOf(m).Pointer()
	d.mu.RLock()
	r, ok := d.resolved[key]
	d.mu.RUnlock()
	if ok {
		return r
	}
	steps := maxResolveSteps
	r = d.resolveDepth(m, 0, &steps)
	d.mu.Lock()
	if d.resolved == nil {
		d.resolved = make(map[uintptr]map[string]any)
	}
	d.resolved[key] = r
	d.mu.Unlock()
	return r
}

// needsMerge reports whether resolving m does more than return it.
func needsMerge(m map[string]any) bool {
	_, hasRef := m["$ref"]
	_, hasAll := m["allOf"]
	return hasRef || hasAll || firstBranch(m) != nil
}

// Bounds of the walks over a schema and the values made from it; each walk
// also stops at a depth. They keep self-referent schemas (a required
// property whose schema is the root, an array of at least 5 of itself)
// finite: no finite value satisfies those, and the simulator answers with a
// bounded one that does not.
const (
	// maxResolve bounds the nesting of $ref, allOf, oneOf and anyOf that one
	// resolution follows.
	maxResolve = 16
	// maxResolveSteps bounds the nodes one resolution merges.
	maxResolveSteps = 64
	// maxGenNodes bounds the values (of any type) in one generated value,
	// far more than a model's reply holds.
	maxGenNodes = 8192
	// maxGenBytes bounds the bytes of the strings and constants in one
	// generated value.
	maxGenBytes = 128 << 10
	// maxGenItems bounds one generated array, whatever its minItems.
	maxGenItems = 256
	// maxGenString bounds one generated string, whatever its minLength.
	maxGenString = 4096
	// maxCheckNodes bounds the values the fault checker visits in a reply.
	maxCheckNodes = 1 << 16
	// maxFaults bounds the content faults found in one reply.
	maxFaults = 64
)

func (d *schemaDoc) resolveDepth(s any, depth int, steps *int) map[string]any {
	if depth > maxResolve || *steps <= 0 {
		return map[string]any{}
	}
	*steps--
	for range 32 {
		m, ok := s.(map[string]any)
		if !ok {
			if b, ok := s.(bool); ok && b {
				return map[string]any{}
			}
			return nil
		}
		ref, hasRef := m["$ref"].(string)
		allOf, hasAll := m["allOf"].([]any)
		branch := firstBranch(m)
		if !hasRef && !hasAll && branch == nil {
			return m
		}
		out := make(map[string]any, len(m))
		for k, v := range m {
			switch k {
			case "$ref", "allOf", "oneOf", "anyOf":
				continue
			}
			out[k] = v
		}
		if hasRef {
			if t := d.resolveDepth(d.lookup(m, ref), depth+1, steps); t != nil {
				mergeSchema(out, t)
			}
		}
		for _, sub := range allOf {
			if t := d.resolveDepth(sub, depth+1, steps); t != nil {
				mergeSchema(out, t)
			}
		}
		if branch != nil {
			if t := d.resolveDepth(branch, depth+1, steps); t != nil {
				mergeSchema(out, t)
			}
		}
		s = out
	}
	return map[string]any{}
}

// firstBranch returns the oneOf/anyOf branch the generator uses: the first
// one that is not just {"type":"null"}.
func firstBranch(m map[string]any) any {
	for _, k := range []string{"oneOf", "anyOf"} {
		bs, ok := m[k].([]any)
		if !ok || len(bs) == 0 {
			continue
		}
		for _, b := range bs {
			if bm, ok := b.(map[string]any); ok && bm["type"] == "null" {
				continue
			}
			return b
		}
		return bs[0]
	}
	return nil
}

// mergeSchema merges src into dst: properties and required are unioned, any
// other keyword keeps dst's value when both set it.
func mergeSchema(dst, src map[string]any) {
	for k, v := range src {
		switch k {
		case "properties":
			dp, _ := dst[k].(map[string]any)
			np := make(map[string]any, len(dp))
			for pk, pv := range dp {
				np[pk] = pv
			}
			if sp, ok := v.(map[string]any); ok {
				for pk, pv := range sp {
					if _, ok := np[pk]; !ok {
						np[pk] = pv
					}
				}
			}
			dst[k] = np
		case "required":
			dr, _ := dst[k].([]any)
			nr := slices.Clone(dr)
			if sr, ok := v.([]any); ok {
				for _, r := range sr {
					if !slices.Contains(nr, r) {
						nr = append(nr, r)
					}
				}
			}
			dst[k] = nr
		default:
			if _, ok := dst[k]; !ok {
				dst[k] = v
			}
		}
	}
}

// lookup returns the schema the reference ref of the schema object m
// names, resolved as the validator resolves it: "#", a JSON pointer such as
// "#/$defs/x", an "$id" of the document, an anchor. A reference that names
// nothing in the document resolves to the true schema.
func (d *schemaDoc) lookup(m map[string]any, ref string) any {
	n, err := d.doc.Resolve(ref, d.doc.BaseOf(m))
	if err != nil {
		return true
	}
	return n.Value
}

// typesOf returns the declared types of a resolved node, inferring one from
// other keywords when "type" is absent (inferred is then true).
func typesOf(m map[string]any) (types []string, inferred bool) {
	switch t := m["type"].(type) {
	case string:
		if ts, ok := singleTypes[t]; ok {
			return ts, false
		}
		return []string{t}, false
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
		return types, false
	}
	switch {
	case m["properties"] != nil || m["required"] != nil || m["additionalProperties"] != nil:
		return []string{"object"}, true
	case m["items"] != nil || m["prefixItems"] != nil:
		return []string{"array"}, true
	case m["minimum"] != nil || m["maximum"] != nil || m["multipleOf"] != nil:
		return []string{"number"}, true
	case m["pattern"] != nil || m["format"] != nil || m["minLength"] != nil || m["maxLength"] != nil:
		return []string{"string"}, true
	}
	return nil, true
}

// singleTypes are shared, read-only results of typesOf for a plain "type".
var singleTypes = map[string][]string{
	"object": {"object"}, "array": {"array"}, "string": {"string"}, "integer": {"integer"},
	"number": {"number"}, "boolean": {"boolean"}, "null": {"null"},
}

// num reads a numeric keyword.
func num(m map[string]any, k string) (float64, bool) {
	switch v := m[k].(type) {
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case float64:
		return v, true
	}
	return 0, false
}

func intKw(m map[string]any, k string) (int, bool) {
	f, ok := num(m, k)
	if !ok || f < 0 {
		return 0, false
	}
	return int(f), true
}

// bounds returns the numeric range of a node; lo/hi are -Inf/+Inf when unset.
func bounds(m map[string]any) (lo, hi float64, loEx, hiEx bool) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if v, ok := num(m, "minimum"); ok {
		lo = v
		if b, ok := m["exclusiveMinimum"].(bool); ok && b {
			loEx = true
		}
	}
	if v, ok := num(m, "maximum"); ok {
		hi = v
		if b, ok := m["exclusiveMaximum"].(bool); ok && b {
			hiEx = true
		}
	}
	if v, ok := num(m, "exclusiveMinimum"); ok && v >= lo {
		lo, loEx = v, true
	}
	if v, ok := num(m, "exclusiveMaximum"); ok && v <= hi {
		hi, hiEx = v, true
	}
	return lo, hi, loEx, hiEx
}

// generator builds schema-valid instances from a seeded source. One
// generator makes values of at most maxGenNodes nodes and maxGenBytes
// bytes of text in all; past that it adds no more members or items and
// makes the smallest value of each type (empty objects, arrays and
// strings), which a schema asking for more then rejects.
type generator struct {
	doc   *schemaDoc
	rng   *rand.Rand
	nodes int // values made
	bytes int // bytes of strings and constants made
}

// maxDepth bounds recursion through recursive $refs.
const maxDepth = 12

// spent reports whether the generator's budget is used up.
func (g *generator) spent() bool { return g.nodes >= maxGenNodes || g.bytes >= maxGenBytes }

func (g *generator) gen(s any, name string, depth int) any {
	g.nodes++
	if depth > 2*maxDepth {
		return nil // a schema that requires infinite nesting: give up here
	}
	m := g.doc.resolve(s)
	if m == nil {
		return nil
	}
	if c, ok := m["const"]; ok {
		return g.constant(c)
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return g.constant(e[g.rng.IntN(len(e))])
	}
	types, _ := typesOf(m)
	t := "string"
	if len(types) > 0 {
		t = types[0]
		for _, x := range types {
			if x != "null" {
				t = x
				break
			}
		}
	}
	if g.spent() {
		switch t {
		case "object":
			return map[string]any{}
		case "array":
			return []any{}
		case "string":
			return ""
		}
	}
	switch t {
	case "object":
		return g.genObject(m, depth)
	case "array":
		return g.genArray(m, name, depth)
	case "integer":
		return g.genInteger(m)
	case "number":
		return g.genNumber(m)
	case "boolean":
		return g.rng.IntN(2) == 0
	case "null":
		return nil
	default:
		return g.genString(m, name)
	}
}

// constant returns a copy of a const or enum value, charged to the budget;
// past it, the empty value of its type.
func (g *generator) constant(c any) any {
	n := valueBytes(c, maxGenBytes-g.bytes+1)
	g.bytes += n
	if g.bytes > maxGenBytes {
		switch c.(type) {
		case map[string]any:
			return map[string]any{}
		case []any:
			return []any{}
		case string:
			return ""
		}
	}
	return deepCopy(c)
}

// valueBytes is about the size of v's JSON text, counted up to limit.
func valueBytes(v any, limit int) int {
	switch x := v.(type) {
	case string:
		return len(x) + 2
	case map[string]any:
		n := 2
		for k, e := range x {
			if n > limit {
				break
			}
			n += len(k) + 4 + valueBytes(e, limit-n)
		}
		return n
	case []any:
		n := 2
		for _, e := range x {
			if n > limit {
				break
			}
			n += 1 + valueBytes(e, limit-n)
		}
		return n
	case json.Number:
		return len(x)
	}
	return 4
}

func (g *generator) genObject(m map[string]any, depth int) any {
	props, _ := m["properties"].(map[string]any)
	req := map[string]bool{}
	if r, ok := m["required"].([]any); ok {
		for _, x := range r {
			if s, ok := x.(string); ok {
				req[s] = true
			}
		}
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		if g.spent() {
			break
		}
		optional := g.rng.Float64() < 0.6
		if !req[k] && (!optional || depth >= 4) {
			continue
		}
		if depth >= maxDepth && !req[k] {
			continue
		}
		out[k] = g.gen(props[k], k, depth+1)
	}
	// Required properties not listed in properties still have to be there.
	reqKeys := make([]string, 0, len(req))
	for k := range req {
		reqKeys = append(reqKeys, k)
	}
	slices.Sort(reqKeys)
	for _, k := range reqKeys {
		if g.spent() {
			break
		}
		if _, ok := out[k]; !ok {
			var sub any = true
			if ap, ok := m["additionalProperties"].(map[string]any); ok {
				sub = ap
			}
			out[k] = g.gen(sub, k, depth+1)
		}
	}
	return out
}

func (g *generator) genArray(m map[string]any, name string, depth int) any {
	minI, _ := intKw(m, "minItems")
	maxI, hasMax := intKw(m, "maxItems")
	prefix, _ := m["prefixItems"].([]any)
	items := m["items"]
	if arr, ok := items.([]any); ok { // draft 4-7 tuple form
		prefix, items = arr, m["additionalItems"]
	}
	if items == nil {
		items = true
	}
	var n int
	if len(prefix) > 0 {
		n = len(prefix)
	} else {
		hi := max(minI, 3)
		switch {
		case depth >= 4:
			hi = minI
		case minI >= 3 && hasMax && maxI > minI:
			// A long list with both bounds (an invoice's 30 to 60 line
			// items): anywhere between them. Shorter bounds keep the
			// small arrays above, and the replies of existing seeds.
			hi = min(maxI, maxGenItems)
		}
		if hasMax {
			hi = min(hi, maxI)
		}
		lo := min(max(minI, 1), hi)
		n = lo + g.rng.IntN(hi-lo+1)
	}
	n = max(n, minI)
	if hasMax {
		n = min(n, maxI)
	}
	n = min(n, maxGenItems)
	unique, _ := m["uniqueItems"].(bool)
	out := make([]any, 0, n)
	seen := map[string]bool{}
	for tries := 0; len(out) < n && tries < n*10+10 && !g.spent(); tries++ {
		var sub any = items
		if i := len(out); i < len(prefix) {
			sub = prefix[i]
		}
		v := g.gen(sub, singular(name), depth+1)
		if unique {
			k := string(mustJSON(v))
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		out = append(out, v)
	}
	return out
}

func singular(name string) string {
	if strings.HasSuffix(name, "ies") {
		return name[:len(name)-3] + "y"
	}
	return strings.TrimSuffix(name, "s")
}

func (g *generator) genInteger(m map[string]any) any {
	lo, hi, loEx, hiEx := bounds(m)
	ilo, ihi := int64(1), int64(100)
	switch {
	case !math.IsInf(lo, 0) && !math.IsInf(hi, 0):
		ilo, ihi = intLo(lo, loEx), intHi(hi, hiEx)
	case !math.IsInf(lo, 0):
		ilo = intLo(lo, loEx)
		ihi = ilo + 100
	case !math.IsInf(hi, 0):
		ihi = intHi(hi, hiEx)
		ilo = ihi - 100
	}
	step := int64(1)
	if mo, ok := num(m, "multipleOf"); ok && mo >= 1 && mo == math.Trunc(mo) {
		step = int64(mo)
	}
	kLo, kHi := ceilDiv(ilo, step), floorDiv(ihi, step)
	if kHi < kLo {
		return json.Number(strconv.FormatInt(ilo, 10))
	}
	k := kLo + g.rng.Int64N(kHi-kLo+1)
	return json.Number(strconv.FormatInt(k*step, 10))
}

func intLo(lo float64, ex bool) int64 {
	v := math.Ceil(lo)
	if ex && v == lo {
		v++
	}
	return int64(v)
}

func intHi(hi float64, ex bool) int64 {
	v := math.Floor(hi)
	if ex && v == hi {
		v--
	}
	return int64(v)
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a > 0) == (b > 0) {
		q++
	}
	return q
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (g *generator) genNumber(m map[string]any) any {
	lo, hi, loEx, hiEx := bounds(m)
	switch {
	case math.IsInf(lo, 0) && math.IsInf(hi, 0):
		lo, hi = 0, 1000
	case math.IsInf(hi, 0):
		hi = lo + 1000
	case math.IsInf(lo, 0):
		lo = hi - 1000
	}
	if mo, ok := m["multipleOf"].(json.Number); ok {
		if v, ok := g.decimalMultiple(string(mo), lo, hi, loEx, hiEx); ok {
			return v
		}
		step, _ := new(big.Rat).SetString(string(mo))
		if step != nil && step.Sign() > 0 {
			f, _ := step.Float64()
			kLo := int64(math.Ceil(lo / f))
			kHi := int64(math.Floor(hi / f))
			if loEx && float64(kLo)*f <= lo {
				kLo++
			}
			if hiEx && float64(kHi)*f >= hi {
				kHi--
			}
			if kHi < kLo {
				kHi = kLo
			}
			k := kLo + g.rng.Int64N(kHi-kLo+1)
			r := new(big.Rat).Mul(step, new(big.Rat).SetInt64(k))
			return json.Number(ratString(r))
		}
	}
	v := math.Round((lo+g.rng.Float64()*(hi-lo))*100) / 100
	if v < lo || (loEx && v == lo) {
		v = lo + (hi-lo)/2
	}
	if v > hi || (hiEx && v == hi) {
		v = lo + (hi-lo)/2
	}
	return json.Number(strconv.FormatFloat(v, 'f', -1, 64))
}

// decimalMultiple handles the common multipleOf written as a plain decimal
// ("0.01", "5", "2.5") with integer arithmetic.
func (g *generator) decimalMultiple(mo string, lo, hi float64, loEx, hiEx bool) (json.Number, bool) {
	intPart, frac, _ := strings.Cut(mo, ".")
	digits := intPart + frac
	if len(digits) == 0 || len(digits) > 15 || len(frac) > 12 {
		return "", false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return "", false
		}
	}
	stepInt, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || stepInt == 0 {
		return "", false
	}
	scale := math.Pow10(len(frac))
	step := float64(stepInt) / scale
	kLo, kHi := int64(math.Ceil(lo/step)), int64(math.Floor(hi/step))
	if loEx && float64(kLo)*step <= lo {
		kLo++
	}
	if hiEx && float64(kHi)*step >= hi {
		kHi--
	}
	if kHi < kLo {
		kHi = kLo
	}
	units := (kLo + g.rng.Int64N(kHi-kLo+1)) * stepInt // in 10^-len(frac)
	if len(frac) == 0 {
		return json.Number(strconv.FormatInt(units, 10)), true
	}
	neg := units < 0
	if neg {
		units = -units
	}
	str := strconv.FormatInt(units, 10)
	for len(str) <= len(frac) {
		str = "0" + str
	}
	str = str[:len(str)-len(frac)] + "." + str[len(str)-len(frac):]
	str = strings.TrimRight(strings.TrimRight(str, "0"), ".")
	if neg {
		str = "-" + str
	}
	return json.Number(str), true
}

// ratString formats an exact rational as a short decimal.
func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	for prec := 1; prec <= 12; prec++ {
		s := r.FloatString(prec)
		if back, ok := new(big.Rat).SetString(s); ok && back.Cmp(r) == 0 {
			return s
		}
	}
	return r.FloatString(12)
}

func (g *generator) genString(m map[string]any, name string) any {
	if f, ok := m["format"].(string); ok {
		if s, ok := g.genFormat(f, name); ok {
			return s
		}
	}
	minL, _ := intKw(m, "minLength")
	maxL, hasMax := intKw(m, "maxLength")
	if p, ok := m["pattern"].(string); ok {
		for range 8 {
			s, ok := genPattern(g.rng, p)
			if !ok {
				break
			}
			if n := runeLen(s); n >= minL && (!hasMax || n <= maxL) {
				return s
			}
		}
		// Give up gracefully: fall through to words, which may not match.
	}
	minL = min(minL, maxGenString)
	s := g.words(name)
	if n := runeLen(s); n < minL {
		var b strings.Builder
		b.WriteString(s)
		for n < minL {
			w := wordList[g.rng.IntN(len(wordList))]
			b.WriteByte(' ')
			b.WriteString(w)
			n += 1 + len(w)
		}
		s = b.String()
	}
	if hasMax && runeLen(s) > maxL {
		s = strings.TrimSpace(string([]rune(s)[:maxL]))
		if n := runeLen(s); n < minL {
			s += strings.Repeat("x", minL-n)
		}
	}
	g.bytes += len(s)
	return s
}

func runeLen(s string) int { return len([]rune(s)) }

func (g *generator) pick(list []string) string { return list[g.rng.IntN(len(list))] }

// words returns a realistic-ish string, using the property name as a hint.
func (g *generator) words(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.Contains(n, "email"):
		s, _ := g.genFormat("email", name)
		return s
	case n == "name" || strings.HasSuffix(n, "_name") || strings.HasSuffix(n, "name") && len(n) > 4:
		return g.pick(firstNames) + " " + g.pick(lastNames)
	case strings.Contains(n, "city"):
		return g.pick(cities)
	case strings.Contains(n, "country"):
		return g.pick(countries)
	case strings.Contains(n, "currency"):
		return g.pick([]string{"EUR", "USD", "GBP", "JPY", "CHF"})
	case n == "id" || strings.HasSuffix(n, "_id") || strings.HasSuffix(n, "id") && len(n) > 3 && !strings.HasSuffix(n, "aid"):
		return fmt.Sprintf("%s-%04d", g.pick(wordList), g.rng.IntN(10000))
	case strings.Contains(n, "url") || strings.Contains(n, "link"):
		s, _ := g.genFormat("uri", name)
		return s
	case strings.Contains(n, "description") || strings.Contains(n, "summary") || strings.Contains(n, "note"):
		k := 4 + g.rng.IntN(5)
		w := make([]string, k)
		for i := range w {
			w[i] = g.pick(wordList)
		}
		s := strings.Join(w, " ")
		return strings.ToUpper(s[:1]) + s[1:] + "."
	}
	k := 1 + g.rng.IntN(2)
	w := make([]string, k)
	for i := range w {
		w[i] = g.pick(wordList)
	}
	return strings.Join(w, " ")
}

func (g *generator) genFormat(f, name string) (string, bool) {
	r := g.rng
	switch f {
	case "email", "idn-email":
		return strings.ToLower(g.pick(firstNames)+"."+g.pick(lastNames)) + "@example.com", true
	case "date":
		return fmt.Sprintf("%04d-%02d-%02d", 2019+r.IntN(7), 1+r.IntN(12), 1+r.IntN(28)), true
	case "date-time":
		return fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02dZ", 2019+r.IntN(7), 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60)), true
	case "time":
		return fmt.Sprintf("%02d:%02d:%02dZ", r.IntN(24), r.IntN(60), r.IntN(60)), true
	case "uri", "url", "iri", "uri-reference", "iri-reference":
		return "https://example.com/" + strings.ReplaceAll(g.pick(wordList), " ", "-"), true
	case "uuid":
		var b [16]byte
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), true
	case "hostname", "idn-hostname":
		return g.pick(wordList) + ".example.com", true
	case "ipv4":
		return fmt.Sprintf("10.%d.%d.%d", r.IntN(256), r.IntN(256), 1+r.IntN(254)), true
	case "ipv6":
		return fmt.Sprintf("2001:db8::%x", 1+r.IntN(0xfffe)), true
	}
	return "", false
}

var (
	wordList = []string{
		"amber", "harbor", "lantern", "meadow", "copper", "river", "summit", "willow",
		"granite", "orchard", "falcon", "cedar", "velvet", "beacon", "prairie", "quartz",
		"saffron", "timber", "canyon", "glacier", "juniper", "marble", "nectar", "pebble",
		"ripple", "spruce", "thistle", "walnut", "zephyr", "basil", "clover", "dune",
		"ember", "fern", "grove", "hazel", "iris", "jasper", "kelp", "lilac",
	}
	firstNames = []string{"Ada", "Grace", "Alan", "Linus", "Margaret", "Ken", "Barbara", "Dennis", "Radia", "Edsger", "Frances", "John"}
	lastNames  = []string{"Lovelace", "Hopper", "Turing", "Torvalds", "Hamilton", "Thompson", "Liskov", "Ritchie", "Perlman", "Dijkstra", "Allen", "Backus"}
	cities     = []string{"Lisbon", "Osaka", "Toronto", "Nairobi", "Oslo", "Lima", "Hanoi", "Perth", "Krakow", "Quito"}
	countries  = []string{"Portugal", "Japan", "Canada", "Kenya", "Norway", "Peru", "Vietnam", "Australia", "Poland", "Ecuador"}
)

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprint(v))
	}
	return b
}
