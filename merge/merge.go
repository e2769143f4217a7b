// Package merge merges the values extracted from the chunks of one
// document into one value, deterministically, and says where the chunks
// disagreed.
//
// The rules, applied from the root down:
//
//   - An absent member or a null never beats a value: a chunk that does
//     not mention the vendor does not erase the one another chunk found.
//     A place where every chunk that has it gave null is null.
//   - Objects merge by property: the merged object has every property any
//     chunk gave, each merged by these rules from the chunks that gave it.
//   - Arrays concatenate, in chunk order (a chunk's list passes after
//     it, ChunkValue.Pass) and then in each value's order, and lose their
//     duplicates, which overlapping chunks and list passes produce:
//   - when the array's items have a key (the fields "x-fixpoint-key" names
//     on the array's schema, or Options.Keys), items with the same key are
//     one item, at the place of its first, its fields merged by these
//     rules (their conflicts recorded under the item's path). Key values
//     compare as canonical JSON, strings after case folding and with
//     white space collapsed ("ACME  Corp" and "Acme Corp" are one key).
//     An item without every key field, or with one null, is not keyed;
//   - items without a key are duplicates when they are equal as canonical
//     JSON (members in any order, 1.0 equal to 1): each distinct item is
//     kept as many times as the one value (a chunk's or a pass's) that
//     gave it most gave it, the first of its copies, so that an overlap
//     repeating an item drops the repeat while an item a chunk itself
//     lists twice stays twice.
//   - An array whose schema checks items by position (prefixItems, a
//     draft-07 "items" list: coordinates, a range) is one value, as a
//     string is.
//   - Other values (strings, numbers, booleans, and values of different
//     kinds at one place) are equal when their canonical JSON is. When the
//     chunks disagree, the value the most chunks gave wins, ties going to
//     the value of the earliest chunk, and the disagreement is recorded as
//     a fixpoint.Conflict: the place, every value given (as JSON) with
//     the chunks that gave it, and the one chosen.
//   - Grounding comes before the count when the chunks' values carry
//     grades (ChunkValue.Grades, the evidence stage's grade of each leaf
//     against its own chunk): where they disagree, a value some chunk
//     grounds (exact, normalized, fuzzy) beats one graded none by every
//     chunk that gave it, however many gave that. A chunk that lacks a
//     field can invent one, which its own text then does not hold; a
//     count would let an invention in an earlier chunk win a one-to-one
//     tie against the real value. Values with no grade (evidence off,
//     exempt leaves) compare by count as before, and so do values all
//     graded none. The conflict says so (Conflict.By "grounding") when
//     the grounding changed the choice.
//
// The result depends on the chunks' and passes' numbers and values only,
// not on the order of the input: values of one chunk and pass are taken
// in the order of their canonical JSON.
//
// It is a pure package: values in, values out. It does no I/O and never
// logs.
package merge

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/subschema"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// ChunkValue is the value extracted from one chunk.
type ChunkValue struct {
	// Chunk is the chunk's number (chunk.Chunk.N): the order of the
	// chunks in the document.
	Chunk int
	// Pass is 0 for a value read from the whole chunk, k for one read by
	// the chunk's k-th list pass, over the rest of the chunk after the
	// items already read: a chunk's values merge in the order of their
	// passes, before the next chunk's. A conflict names chunks, not
	// passes.
	Pass int
	// Value is the value, as encoding/json decodes it with UseNumber
	// (map[string]any, []any, string, json.Number, bool, nil; float64 and
	// Go integers are taken too).
	Value any
	// Grades are the grades of Value's leaves against the chunk's own
	// text, by JSON pointer into Value (fixpoint.Grounding's Path and
	// Grade); nil when the chunk was not graded. A leaf with no entry has
	// no grade.
	Grades map[string]fixpoint.Grade
}

// Options are the user's choices for a merge.
type Options struct {
	// Keys names the fields that identify an item of an array, by the
	// array's place in the value: a JSON pointer in which the token "*"
	// stands for any array index ("/subsidiaries",
	// "/sections/*/clauses"; "" for an array that is the value). A key
	// given here replaces the one the schema names there.
	Keys map[string][]string
}

// Values merges the values of a document's chunks by the rules of the
// package comment. schema, which may be nil, names the arrays' keys and
// tuples; it is the document's schema, whose Partial checked each value.
// The conflicts are in the order of their paths in the merged value
// (depth first, members by name, items by index). merged shares no map
// or slice with the input; with no values, it is nil.
//
// The error names what cannot be merged: a value holding something that
// is no JSON value, an "x-fixpoint-key" of the schema or a key of
// Options.Keys that names no fields.
func Values(schema *validate.Schema, values []ChunkValue, opt Options) (merged any, conflicts []fixpoint.Conflict, err error) {
	keys, err := userKeys(opt.Keys)
	if err != nil {
		return nil, nil, err
	}
	if err := schemaKeys(schema); err != nil {
		return nil, nil, err
	}
	sorted := make([]part, 0, len(values))
	for i, cv := range values {
		if cv.Chunk < 0 {
			return nil, nil, fmt.Errorf("merge: value %d: chunk number %d: chunk numbers start at 0", i, cv.Chunk)
		}
		if cv.Pass < 0 {
			return nil, nil, fmt.Errorf("merge: value %d: chunk %d, pass -%d: pass numbers start at 0 (the chunk's own value)", i, cv.Chunk, -cv.Pass)
		}
		c, err := canonical(cv.Value, "")
		if err != nil {
			return nil, nil, fmt.Errorf("merge: chunk %d: %w", cv.Chunk, err)
		}
		sorted = append(sorted, part{chunk: cv.Chunk, pass: cv.Pass, v: cv.Value, canon: c, grades: cv.Grades})
	}
	slices.SortStableFunc(sorted, func(a, b part) int {
		return cmp.Or(cmp.Compare(a.chunk, b.chunk), cmp.Compare(a.pass, b.pass), strings.Compare(a.canon, b.canon))
	})
	c, release := schema.Begin()
	defer release()
	m := merger{keys: keys}
	for i := range sorted {
		sorted[i].reader = c.Reader(sorted[i].v)
	}
	out, _ := m.merge(sorted, nil, nil)
	return out, m.conflicts, nil
}

// part is one chunk's value at one place: its chunk, the value, the
// path to it in the chunk's value (for the schema's Reader of that
// value), and its canonical JSON when known.
type part struct {
	chunk  int
	pass   int
	v      any
	toks   []string
	reader *validate.Reader
	canon  string
	grades map[string]fixpoint.Grade
}

type merger struct {
	keys      map[string][]string
	conflicts []fixpoint.Conflict
}

// merge merges parts (in chunk order) found at path in the merged value
// (pattern: path with "*" for each index) and reports whether any has a
// value there.
func (m *merger) merge(parts []part, path, pattern []string) (any, bool) {
	if len(parts) == 0 {
		return nil, false
	}
	// Null never beats a value.
	var given []part
	for _, p := range parts {
		if p.v != nil {
			given = append(given, p)
		}
	}
	if len(given) == 0 {
		return nil, true
	}
	objects, arrays := 0, 0
	for _, p := range given {
		switch p.v.(type) {
		case map[string]any:
			objects++
		case []any:
			arrays++
		}
	}
	switch {
	case objects == len(given):
		return m.objects(given, path, pattern), true
	case arrays == len(given) && !m.tuple(given):
		return m.arrays(given, path, pattern), true
	}
	return m.choose(given, path), true
}

// objects merges objects by property.
func (m *merger) objects(parts []part, path, pattern []string) map[string]any {
	names := map[string]bool{}
	for _, p := range parts {
		for name := range p.v.(map[string]any) {
			names[name] = true
		}
	}
	out := make(map[string]any, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		var sub []part
		for _, p := range parts {
			if v, ok := p.v.(map[string]any)[name]; ok {
				sub = append(sub, p.at(v, name))
			}
		}
		if v, ok := m.merge(sub, append(slices.Clip(path), name), append(slices.Clip(pattern), name)); ok {
			out[name] = v
		}
	}
	return out
}

// at returns the part of p's value v found under the token tok.
func (p part) at(v any, tok string) part {
	return part{chunk: p.chunk, pass: p.pass, v: v, toks: append(slices.Clip(p.toks), tok), reader: p.reader, grades: p.grades}
}

// tuple reports whether the schema checks the arrays of parts by
// position.
func (m *merger) tuple(parts []part) bool {
	for _, p := range parts {
		if p.reader.At(p.toks).Tuple {
			return true
		}
	}
	return false
}

// key returns the fields that identify an item of the arrays of parts at
// pattern: the user's, else the first the schema names for one of them.
func (m *merger) key(parts []part, pattern []string) []string {
	if k, ok := m.keys[validate.Pointer(pattern)]; ok {
		return k
	}
	for _, p := range parts {
		if k := p.reader.At(p.toks).Key; k != nil {
			return k
		}
	}
	return nil
}

// arrays concatenates arrays in chunk order and drops their duplicates
// (see the package comment).
func (m *merger) arrays(parts []part, path, pattern []string) []any {
	key := m.key(parts, pattern)
	// groups are the distinct items, in the order of their first copy:
	// the copies of a keyed item, or of an unkeyed value.
	type group struct {
		copies []part
		keyed  bool
	}
	var groups []*group
	var order []*group // the group of each item, in concatenation order
	byID := map[string]*group{}
	for _, p := range parts {
		for i, item := range p.v.([]any) {
			ip := p.at(item, fmt.Sprint(i))
			id, keyed := itemKey(item, key)
			if !keyed {
				ip.canon = mustCanonical(item)
				id = "v" + ip.canon
			}
			g := byID[id]
			if g == nil {
				g = &group{keyed: keyed}
				byID[id] = g
				groups = append(groups, g)
			}
			g.copies = append(g.copies, ip)
			order = append(order, g)
		}
	}
	// An unkeyed item is kept as many times as one value (a chunk's, or
	// a pass's: a pass reads again the item its chunk's value ended on)
	// gave it most; a keyed one once, its copies merged.
	keep := map[*group]int{}
	for _, g := range groups {
		most, n := 0, 0
		for i, c := range g.copies {
			if i > 0 && (c.chunk != g.copies[i-1].chunk || c.pass != g.copies[i-1].pass) {
				n = 0
			}
			n++
			most = max(most, n)
		}
		if g.keyed {
			most = 1
		}
		keep[g] = most
	}
	// Empty, not nil: chunks that all gave an empty list merge to one,
	// which a schema's "type": "array" takes, not to null.
	out := []any{}
	itemPattern := append(slices.Clip(pattern), "*")
	seen := map[*group]int{}
	for _, g := range order {
		k := seen[g]
		seen[g]++
		if k >= keep[g] {
			continue
		}
		copies := []part{g.copies[k]}
		if g.keyed {
			copies = g.copies
		}
		v, _ := m.merge(copies, append(slices.Clip(path), fmt.Sprint(len(out))), itemPattern)
		out = append(out, v)
	}
	return out
}

// itemKey returns the identity of item under the key fields, and whether
// it has one: an object holding every field, none null.
func itemKey(item any, fields []string) (string, bool) {
	obj, ok := item.(map[string]any)
	if len(fields) == 0 || !ok {
		return "", false
	}
	var sb strings.Builder
	sb.WriteString("k")
	for _, f := range fields {
		v, ok := obj[f]
		if !ok || v == nil {
			return "", false
		}
		if s, ok := v.(string); ok {
			v = strings.Join(strings.Fields(strings.ToLower(s)), " ")
		}
		sb.WriteString(mustCanonical(v))
		sb.WriteByte(0)
	}
	return sb.String(), true
}

// choose picks among values that do not merge (see the package comment)
// and records the conflict when they differ.
func (m *merger) choose(parts []part, path []string) any {
	type choice struct {
		v        any
		chunks   []int
		grounded bool // a copy is grounded in its chunk
		refuted  bool // a copy is graded none, and none grounded
	}
	var choices []*choice
	byCanon := map[string]*choice{}
	for _, p := range parts {
		c := p.canon
		if c == "" {
			c = mustCanonical(p.v)
		}
		ch := byCanon[c]
		if ch == nil {
			ch = &choice{v: p.v}
			byCanon[c] = ch
			choices = append(choices, ch)
		}
		if !slices.Contains(ch.chunks, p.chunk) {
			ch.chunks = append(ch.chunks, p.chunk)
		}
		switch p.grounding() {
		case grounded:
			ch.grounded = true
		case ungrounded:
			ch.refuted = true
		}
	}
	if len(choices) == 1 {
		return clone(choices[0].v)
	}
	// By count, ties to the earliest chunk (choices are in chunk order).
	pick := func(ok func(*choice) bool) *choice {
		var best *choice
		for _, ch := range choices {
			if ok(ch) && (best == nil || len(ch.chunks) > len(best.chunks)) {
				best = ch
			}
		}
		return best
	}
	counted := pick(func(*choice) bool { return true })
	best := counted
	if slices.ContainsFunc(choices, func(ch *choice) bool { return ch.grounded }) {
		best = pick(func(ch *choice) bool { return ch.grounded || !ch.refuted })
	}
	cf := fixpoint.Conflict{Path: validate.Pointer(path), Chosen: rawJSON(best.v)}
	if best != counted {
		cf.By = fixpoint.ConflictByGrounding
	}
	for _, ch := range choices {
		cf.Values = append(cf.Values, rawJSON(ch.v))
		cf.Chunks = append(cf.Chunks, ch.chunks)
	}
	m.conflicts = append(m.conflicts, cf)
	return clone(best.v)
}

// The grounding of a value in its chunk.
const (
	ungraded = iota
	grounded
	ungrounded
)

// grounding is how p's chunk grades its value: ungrounded when a leaf at
// or under its place is graded none, grounded when every graded one is
// grounded, ungraded when none is graded.
func (p part) grounding() int {
	if len(p.grades) == 0 {
		return ungraded
	}
	at := validate.Pointer(p.toks)
	if g, ok := p.grades[at]; ok {
		return gradeGrounding(g)
	}
	switch p.v.(type) {
	case map[string]any, []any:
	default:
		return ungraded
	}
	out := ungraded
	for ptr, g := range p.grades {
		if !strings.HasPrefix(ptr, at+"/") {
			continue
		}
		if gradeGrounding(g) == ungrounded {
			return ungrounded
		}
		out = grounded
	}
	return out
}

func gradeGrounding(g fixpoint.Grade) int {
	switch g {
	case fixpoint.GradeNone:
		return ungrounded
	case "":
		return ungraded
	}
	return grounded
}

// rawJSON is v as JSON; v passed canonical, so it encodes.
func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// clone returns a copy of v that shares no map or slice with it.
func clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = clone(e)
		}
		return out
	}
	return v
}

// userKeys checks the user's keys and returns them by pattern.
func userKeys(keys map[string][]string) (map[string][]string, error) {
	out := make(map[string][]string, len(keys))
	for _, at := range slices.Sorted(maps.Keys(keys)) {
		if at != "" && !strings.HasPrefix(at, "/") {
			return nil, fmt.Errorf("merge: key at %q: the place of an array is a JSON pointer (\"/subsidiaries\", \"/sections/*/clauses\")", at)
		}
		names := make([]any, len(keys[at]))
		for i, n := range keys[at] {
			names[i] = n
		}
		fields, err := validate.ItemKey(names)
		if err != nil {
			return nil, fmt.Errorf("merge: key at %q: %w", at, err)
		}
		out[validate.Pointer(validate.SplitPointer(at))] = fields
	}
	return out, nil
}

// schemaKeys checks every "x-fixpoint-key" of the schema.
func schemaKeys(schema *validate.Schema) error {
	raw := schema.Raw()
	if !strings.Contains(string(raw), validate.KeyKeyword) {
		return nil
	}
	var doc any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("merge: read the schema: %w", err)
	}
	var bad error
	subschema.Walk(doc, func(n subschema.Node) bool {
		if k, ok := n.Object()[validate.KeyKeyword]; ok && bad == nil {
			if _, err := validate.ItemKey(k); err != nil {
				at := n.Ptr
				if at == "" {
					at = "(root)"
				}
				bad = fmt.Errorf("merge: the schema at %s: %w", at, err)
			}
		}
		return bad == nil
	})
	return bad
}
