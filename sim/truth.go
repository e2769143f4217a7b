package sim

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/rules"
)

// Bounds of the truth and of the truth faults.
const (
	// truthTries bounds the truths drawn for a schema with rules until one
	// keeps them all.
	truthTries = 32
	// inventTries bounds the values tried for an invention at one place.
	inventTries = 8
	// faultTries bounds the places tried for an invented value.
	faultTries = 16
	// breakTries bounds the changes tried for a rule break: a change of a
	// leaf the rule does not read, or one it reads that keeps it, is
	// drawn again.
	breakTries = 64
)

// checks are what a schema says beyond its shape: its rules (nil when it
// has none, or they do not compile) and the places evidence exempts.
type checks struct {
	rules *rules.Set
	// isExempt is evidence's predicate; exempt remembers its answers for
	// up to exemptCacheMax places (the places of a schema's values repeat
	// from reply to reply).
	isExempt func(ptr string) bool
	exempted sync.Map
	cached   atomic.Int64
}

const exemptCacheMax = 1 << 14

// exempt reports whether evidence exempts the value at ptr.
func (c *checks) exempt(ptr string) bool {
	if v, ok := c.exempted.Load(ptr); ok {
		return v.(bool)
	}
	e := c.isExempt(ptr)
	if c.cached.Add(1) <= exemptCacheMax {
		c.exempted.Store(ptr, e)
	}
	return e
}

// checks compiles the schema's rules and exemptions once.
func (d *schemaDoc) checks() *checks {
	d.checksOnce.Do(func() {
		c := &checks{isExempt: evidence.Exempt(d.root)}
		if set, err := rules.Compile([]byte(d.src)); err == nil && set.Len() > 0 {
			c.rules = set
		}
		d.checked = c
	})
	return d.checked
}

// errorFindings are the findings of severity error of the rules on v.
func (c *checks) errorFindings(v any) []rules.Finding {
	if c.rules == nil {
		return nil
	}
	fs, _ := c.rules.Check(context.Background(), v)
	return slices.DeleteFunc(fs, func(f rules.Finding) bool { return f.Severity != rules.SeverityError })
}

// task is one request's task: its schema, key and text, and the truth
// drawn for them, with the inventions found so far.
type task struct {
	s     *Server
	doc   *schemaDoc
	key   string
	text  string
	truth any
	src   *evidence.Source
	inv   map[string]invention
}

type invention struct {
	v  any
	ok bool
}

// newTask draws the truth of a task (see Server.truth).
func (s *Server) newTask(doc *schemaDoc, key, text string) *task {
	t := &task{s: s, doc: doc, key: key, text: text, inv: map[string]invention{}}
	t.truth = s.truth(doc, key, text)
	return t
}

// truth is the ground truth for a task and schema: a generated instance
// whose extractive leaves are spans of the task's text (grounder), drawn
// again, up to truthTries times, until the schema's error rules hold. A
// request over a long document is not drawn: its truth is what its text
// holds (readDocument), its list cut to Config.MaxListItems.
func (s *Server) truth(doc *schemaDoc, key, text string) any {
	if doc.isDocument() {
		return readDocument(text).value(s.cfg.MaxListItems)
	}
	c := doc.checks()
	var sp *spans
	var v any
	for try := range truthTries {
		seed := []string{"truth", key, doc.src}
		if try > 0 {
			seed = append(seed, strconv.Itoa(try))
		}
		g := generator{doc: doc, rng: s.rng(seed...)}
		v = g.gen(doc.root, "", 0)
		if sp == nil {
			sp = newSpans(text)
		}
		gr := grounder{doc: doc, exempt: c.exempt, sp: sp, rng: s.rng("ground", key, doc.src, text, strconv.Itoa(try))}
		v, _ = gr.walk(doc.root, v, "", "", nil, nil, 0)
		if c.rules == nil || len(c.errorFindings(v)) == 0 {
			break
		}
	}
	return v
}

// source is the task's text indexed for evidence.
func (t *task) source() *evidence.Source {
	if t.src == nil {
		t.src = evidence.New(t.text)
	}
	return t.src
}

// grounded reports whether the task's text holds v, as package evidence
// grades it.
func (t *task) grounded(v any) bool {
	res := t.source().Align(v, nil)
	return len(res.Leaves) == 1 && res.Leaves[0].Grade != fixpoint.GradeNone
}

// leaves lists the pointers of the strings and numbers of v, in order
// (keys sorted); with extractive, only those evidence does not exempt.
func (t *task) leaves(v any, extractive, bools bool) []string {
	var out []string
	n := 0
	var walk func(v any, ptr string, depth int)
	walk = func(v any, ptr string, depth int) {
		n++
		if depth > 64 || n > maxCheckNodes || extractive && t.doc.checks().exempt(ptr) {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k], ptr+"/"+escapeToken(k), depth+1)
			}
		case []any:
			for i, e := range x {
				walk(e, ptr+"/"+strconv.Itoa(i), depth+1)
			}
		case string, json.Number:
			if ptr != "" {
				out = append(out, ptr)
			}
		case bool:
			if bools && ptr != "" {
				out = append(out, ptr)
			}
		}
	}
	walk(v, "", 0)
	return out
}

// inventedAt is the value the simulator invents at ptr, an extractive
// leaf of the truth the text grounds: a value of the leaf's schema, of the
// same kind (a number near the truth's, a date near it, a name for a
// name), that the text does not hold; false when it finds none. It is a
// function of the task and the place alone, so every reply that invents
// there invents the same value.
func (t *task) inventedAt(ptr string) (any, bool) {
	if m, ok := t.inv[ptr]; ok {
		return m.v, m.ok
	}
	v, ok := t.invent(ptr)
	t.inv[ptr] = invention{v, ok}
	return v, ok
}

func (t *task) invent(ptr string) (any, bool) {
	tv, ok := pointerGet(t.truth, ptr)
	m := t.doc.nodeAt(ptr)
	if !ok || m == nil || t.doc.checks().exempt(ptr) || !t.grounded(tv) {
		return nil, false
	}
	if f := docField(ptr); f != "" && t.doc.isDocument() {
		// A document's field gets what the simulator invents for it when
		// absent: plausible, and in no document.
		if c := t.absentAt(f); c != nil && !jsonEqual(c, tv) && fits(m, c) && !t.grounded(c) {
			return c, true
		}
	}
	r := t.s.rng("invent", t.key, t.doc.src, ptr)
	g := generator{doc: t.doc, rng: r}
	name := unescapeToken(ptr[strings.LastIndexByte(ptr, '/')+1:])
	for i := range inventTries {
		c := inventValue(m, tv, name, i, r, &g)
		if c != nil && !jsonEqual(c, tv) && fits(m, c) && !t.grounded(c) {
			return c, true
		}
	}
	return nil, false
}

// inventedNames are the names the simulator invents for a name.
var inventedNames = []string{"Dana Whitfield", "Marcus Ellery", "Priya Raman", "Tomas Brandt", "Elena Voss",
	"Globex Corporation", "Initech Ltd", "Vandelay Industries", "Hooli Group", "Soylent Partners"}

// inventValue is the try'th value tried for an invention in place of tv,
// a leaf of node m named name: a number 5% to 60% off, a date 1 to 90 days
// off, an invented name, or (and from the fifth try on) a new value of
// the node.
func inventValue(m map[string]any, tv any, name string, try int, r *rand.Rand, g *generator) any {
	if try < inventTries/2 {
		switch x := tv.(type) {
		case json.Number:
			return nearNumber(m, x, r)
		case string:
			if d, err := time.Parse(time.DateOnly, x); err == nil {
				return d.AddDate(0, 0, (1+r.IntN(90))*(1-2*r.IntN(2))).Format(time.DateOnly)
			}
			if nameField(name) {
				return inventedNames[r.IntN(len(inventedNames))]
			}
		}
	}
	return g.gen(m, name, 1)
}

// nearNumber is n moved by 5% to 60% (at least one unit of its last
// digit), written with as many decimals.
func nearNumber(m map[string]any, n json.Number, r *rand.Rand) any {
	f, err := n.Float64()
	if err != nil {
		return nil
	}
	_, frac, _ := strings.Cut(string(n), ".")
	decimals := len(frac)
	if types, _ := typesOf(m); slices.Contains(types, "integer") {
		decimals = 0
	}
	unit := math.Pow10(-decimals)
	step := math.Max(math.Abs(f)*(0.05+0.55*r.Float64()), unit)
	if r.IntN(2) == 0 && f-step >= 0 {
		step = -step
	}
	return json.Number(strconv.FormatFloat(math.Round((f+step)/unit)*unit, 'f', decimals, 64))
}

// write is one leaf a truth fault writes.
type write struct {
	ptr string
	v   any
	// del removes the property at ptr instead (an invented_absent fixed).
	del bool
}

// apply writes w into value.
func (w write) apply(value any) {
	if w.del {
		pointerDelete(value, w.ptr)
		return
	}
	pointerSet(value, w.ptr, w.v)
}

// injectTruth draws the truth faults of a first attempt from a seed
// stream of their own and puts the drawn ones into value at places none
// of used took: an invented value (Mix.Invented), then a rule break
// (Mix.RuleBreak). Both are chosen on the truth, so that the rules judge
// them alone: the invention keeps every rule, the break makes an error
// rule fail at a path that holds every leaf it changed.
func (t *task) injectTruth(value any, key string, used []string) {
	mix := t.s.cfg.Mix
	if mix.Invented == 0 && mix.RuleBreak == 0 {
		return
	}
	r := t.s.rng("truthfault", key, t.doc.src)
	invent, breakRule := r.Float64() < mix.Invented, r.Float64() < mix.RuleBreak
	base := deepCopy(t.truth)
	if invent {
		if w, ok := t.pickInvention(base, used, r); ok {
			pointerSet(base, w.ptr, w.v)
			pointerSet(value, w.ptr, w.v)
			used = append(used, w.ptr)
		}
	}
	if breakRule {
		for _, w := range t.pickBreak(base, used, r) {
			pointerSet(value, w.ptr, w.v)
		}
	}
}

// free keeps the pointers that overlap none of used.
func free(ptrs, used []string) []string {
	return slices.DeleteFunc(ptrs, func(p string) bool {
		return slices.ContainsFunc(used, func(u string) bool { return overlaps(u, p) })
	})
}

// pickInvention chooses an extractive leaf of base and its invention,
// one that keeps the error rules.
func (t *task) pickInvention(base any, used []string, r *rand.Rand) (write, bool) {
	sites := free(t.leaves(base, true, false), used)
	c := t.doc.checks()
	for n, i := range r.Perm(len(sites)) {
		if n == faultTries {
			break
		}
		v, ok := t.inventedAt(sites[i])
		if !ok {
			continue
		}
		if c.rules != nil {
			tmp := deepCopy(base)
			pointerSet(tmp, sites[i], v)
			if len(c.errorFindings(tmp)) > 0 {
				continue
			}
		}
		return write{ptr: sites[i], v: v}, true
	}
	return write{}, false
}

// pickBreak chooses a change of base that breaks an error rule: a boolean
// negated, two leaves of one schema swapped (start and end), or a leaf
// given another value of its schema; the failing rule's path must hold
// every leaf changed, so that the change is what its error names.
func (t *task) pickBreak(base any, used []string, r *rand.Rand) []write {
	c := t.doc.checks()
	if c.rules == nil {
		return nil
	}
	leaves := free(t.leaves(base, false, true), used)
	if len(leaves) == 0 {
		return nil
	}
	g := generator{doc: t.doc, rng: r}
	for range breakTries {
		ws := t.change(base, leaves, r, &g)
		if len(ws) == 0 {
			continue
		}
		tmp := deepCopy(base)
		for _, w := range ws {
			pointerSet(tmp, w.ptr, w.v)
		}
		for _, f := range c.errorFindings(tmp) {
			if !slices.ContainsFunc(ws, func(w write) bool { return !under(w.ptr, f.Path) }) {
				return ws
			}
		}
	}
	return nil
}

// change draws one change of a leaf of base for pickBreak.
func (t *task) change(base any, leaves []string, r *rand.Rand, g *generator) []write {
	p := leaves[r.IntN(len(leaves))]
	cur, _ := pointerGet(base, p)
	if b, ok := cur.(bool); ok {
		return []write{{ptr: p, v: !b}}
	}
	m := t.doc.nodeAt(p)
	if m == nil {
		return nil
	}
	if r.IntN(2) == 0 {
		var twins []string
		for _, q := range leaves {
			qv, _ := pointerGet(base, q)
			if q != p && !jsonEqual(qv, cur) && jsonEqual(t.doc.nodeAt(q), m) {
				twins = append(twins, q)
			}
		}
		if len(twins) > 0 {
			q := twins[r.IntN(len(twins))]
			qv, _ := pointerGet(base, q)
			return []write{{ptr: p, v: qv}, {ptr: q, v: cur}}
		}
	}
	name := unescapeToken(p[strings.LastIndexByte(p, '/')+1:])
	for range 4 {
		if v := g.gen(m, name, 1); !jsonEqual(v, cur) {
			return []write{{ptr: p, v: v}}
		}
	}
	return nil
}

// truthFaults finds the truth faults of value, whose schema faults (the
// checker's) are schemaFaults: each extractive leaf that holds the value
// the simulator invents there (inventedAt; with Mix.Invented only), and
// each error rule that fails once the schema faults are set right (a
// rule sees a value of the right shape: the worker checks the schema
// first).
func (t *task) truthFaults(value any, schemaFaults []ContentFault) []ContentFault {
	var out []ContentFault
	if t.s.cfg.Mix.Invented > 0 {
		t.differing(value, t.truth, "", 0, func(p string, v any) {
			if inv, ok := t.inventedAt(p); ok && jsonEqual(v, inv) {
				out = append(out, ContentFault{Kind: FaultInvented, Pointer: p})
			}
		})
	}
	out = append(out, t.absentFaults(value)...)
	c := t.doc.checks()
	if c.rules == nil {
		return out
	}
	fixed := deepCopy(value)
	for _, f := range schemaFaults {
		if tv, ok := pointerGet(t.truth, f.Pointer); ok && f.Kind != FaultExtraProperty {
			pointerSet(fixed, f.Pointer, deepCopy(tv))
		} else {
			pointerDelete(fixed, f.Pointer)
		}
	}
	for _, f := range c.errorFindings(fixed) {
		note := f.Message
		if note == "" {
			note = f.Rule
		}
		rb := ContentFault{Kind: FaultRuleBreak, Pointer: f.Path, note: note}
		if !slices.ContainsFunc(out, func(o ContentFault) bool { return o.Kind == rb.Kind && o.Pointer == rb.Pointer && o.note == rb.note }) {
			out = append(out, rb)
		}
	}
	return out
}

// differing calls fn with each extractive string or number of v (at ptr)
// that the truth tv has a different leaf for, in order (keys sorted).
func (t *task) differing(v, tv any, ptr string, depth int, fn func(ptr string, v any)) {
	if depth > 64 || t.doc.checks().exempt(ptr) {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		tm, ok := tv.(map[string]any)
		if !ok {
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			if _, inTruth := tm[k]; inTruth {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			t.differing(x[k], tm[k], ptr+"/"+escapeToken(k), depth+1, fn)
		}
	case []any:
		ta, ok := tv.([]any)
		for i := 0; ok && i < len(x) && i < len(ta); i++ {
			t.differing(x[i], ta[i], ptr+"/"+strconv.Itoa(i), depth+1, fn)
		}
	case string, json.Number:
		switch tv.(type) {
		case string, json.Number:
			if ptr != "" && !jsonEqual(v, tv) {
				fn(ptr, v)
			}
		}
	}
}

// fixWrites are what fixing truth fault f of value writes: the truth's
// value at an invented leaf; for a rule break, the truth's value at every
// leaf under the rule's path that differs from it, but for those at fault
// otherwise (schemaFaults, an invention), which their own errors name.
func (t *task) fixWrites(value any, f ContentFault, schemaFaults []ContentFault) []write {
	switch f.Kind {
	case FaultInvented:
		tv, _ := pointerGet(t.truth, f.Pointer)
		return []write{{ptr: f.Pointer, v: deepCopy(tv)}}
	case FaultInventedAbsent:
		return []write{{ptr: f.Pointer, del: true}}
	}
	sub, ok := pointerGet(value, f.Pointer)
	if !ok {
		return nil
	}
	ptrs := []string{f.Pointer}
	switch sub.(type) {
	case map[string]any, []any:
		ptrs = t.leaves(sub, false, true)
		for i := range ptrs {
			ptrs[i] = f.Pointer + ptrs[i]
		}
	}
	var ws []write
	for _, p := range ptrs {
		v, _ := pointerGet(value, p)
		tv, inTruth := pointerGet(t.truth, p)
		if !inTruth || jsonEqual(v, tv) || slices.ContainsFunc(schemaFaults, func(s ContentFault) bool { return overlaps(s.Pointer, p) }) {
			continue
		}
		if inv, ok := t.inventedAt(p); ok && t.s.cfg.Mix.Invented > 0 && jsonEqual(v, inv) {
			continue
		}
		ws = append(ws, write{ptr: p, v: deepCopy(tv)})
	}
	return ws
}

// under reports whether ptr is root or a place inside it.
func under(ptr, root string) bool { return ptr == root || strings.HasPrefix(ptr, root+"/") }
