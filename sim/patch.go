package sim

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// PatchMarker is the phrase that makes a correction request a patch
// request: a correction (a previous reply as an assistant message, or
// quoted between PreviousReplyOpen and PreviousReplyClose) whose
// correction text, everything after the last assistant message or the last
// user message outside the quoted reply, contains it, case and spacing
// exact, gets a JSON Patch (RFC 6902) reply. See "Patch replies" in the
// package documentation.
const PatchMarker = "JSON Patch"

// isPatchRequest reports whether a correction text asks for a patch.
func isPatchRequest(feedback string) bool { return strings.Contains(feedback, PatchMarker) }

// patchOp is one JSON Patch operation the simulator writes: add, remove
// or replace.
type patchOp struct {
	op    string
	path  string
	value any
}

func (o patchOp) json() map[string]any {
	m := map[string]any{"op": o.op, "path": o.path}
	if o.op != "remove" {
		m["value"] = o.value
	}
	return m
}

var errPatch = errors.New("patch does not apply")

// applyPatch applies ops to a copy of doc, all or nothing (RFC 6902 add,
// remove and replace; the simulator writes no others).
func applyPatch(doc any, ops []patchOp) (any, error) {
	doc = deepCopy(doc)
	for _, op := range ops {
		var err error
		if doc, err = applyOp(doc, op); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

func applyOp(doc any, op patchOp) (any, error) {
	if op.path == "" {
		if op.op == "remove" {
			return nil, errPatch
		}
		return deepCopy(op.value), nil
	}
	if op.path[0] != '/' {
		return nil, errPatch
	}
	i := strings.LastIndexByte(op.path, '/')
	parentPtr, tok := op.path[:i], unescapeToken(op.path[i+1:])
	parent, ok := pointerGet(doc, parentPtr)
	if !ok {
		return nil, errPatch
	}
	switch x := parent.(type) {
	case map[string]any:
		_, exists := x[tok]
		if op.op != "add" && !exists {
			return nil, errPatch
		}
		if op.op == "remove" {
			delete(x, tok)
		} else {
			x[tok] = deepCopy(op.value)
		}
		return doc, nil
	case []any:
		j, ok := arrayIndex(tok)
		if tok == "-" && op.op == "add" {
			j, ok = len(x), true
		}
		if !ok || j > len(x) || j == len(x) && op.op != "add" {
			return nil, errPatch
		}
		var nx []any
		switch op.op {
		case "add":
			nx = slices.Insert(slices.Clone(x), j, deepCopy(op.value))
		case "remove":
			nx = slices.Delete(slices.Clone(x), j, j+1)
		default:
			x[j] = deepCopy(op.value)
			return doc, nil
		}
		if parentPtr == "" {
			return nx, nil
		}
		pointerSet(doc, parentPtr, nx)
		return doc, nil
	}
	return nil, errPatch
}

// arrayIndex parses an RFC 6901 array index: digits, no leading zero.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	j, err := strconv.Atoi(tok)
	return j, err == nil
}

// absentOptional reports whether ptr names a member the truth lacks in an
// object it has: an optional property left out, which a fix removes.
func absentOptional(truth any, ptr string) bool {
	i := strings.LastIndexByte(ptr, '/')
	if i < 0 {
		return false
	}
	parent, ok := pointerGet(truth, ptr[:i])
	if !ok {
		return false
	}
	m, ok := parent.(map[string]any)
	if !ok {
		return false
	}
	_, has := m[unescapeToken(ptr[i+1:])]
	return !has
}

// nodeAt returns the resolved schema node of the value at ptr, following
// properties, additionalProperties, prefixItems and items; nil when the
// schema says nothing of it.
func (d *schemaDoc) nodeAt(ptr string) map[string]any {
	var cur any = d.root
	for _, tok := range splitPointer(ptr) {
		m := d.resolve(cur)
		if m == nil {
			return nil
		}
		props, _ := m["properties"].(map[string]any)
		if sub, ok := props[tok]; ok {
			cur = sub
			continue
		}
		prefix, items := itemSchemas(m)
		if j, ok := arrayIndex(tok); ok && (j < len(prefix) || items != nil) {
			if j < len(prefix) {
				cur = prefix[j]
			} else {
				cur = items
			}
			continue
		}
		if ap, ok := m["additionalProperties"].(map[string]any); ok {
			cur = ap
			continue
		}
		return nil
	}
	return d.resolve(cur)
}

// patchPlan answers a patch request: a JSON Patch that fixes the content
// faults of the previous value the request names (each with FixProb, as a
// correction does), with the patch faults of Config.Mix. It reports false
// when the previous value cannot be patched (no JSON value in it, or the
// root itself is at fault): the caller answers with the full value.
func (s *Server) patchPlan(t *task, key, prev, feedback string, turn int) (plan, bool) {
	doc := t.doc
	value, ok := parseReply(prev)
	if !ok {
		return plan{}, false
	}
	c := checker{doc: doc}
	c.walk(doc.root, value, "", 0)
	for _, f := range c.out {
		if f.Pointer == "" {
			return plan{}, false
		}
	}
	r := s.rng("patch", key, strconv.Itoa(turn), prev, feedback)
	g := generator{doc: doc, rng: r}
	ops := s.fixOps(t, value, feedback, c.out, r, &g)
	ops = append(ops, s.truthOps(t, value, feedback, c.out, r)...)
	fixed, err := applyPatch(value, ops)
	if err != nil {
		fixed = value // not expected: every op above targets what the checker found
	}
	ops, pf := s.spoilPatch(doc, value, fixed, ops, c.out, r, &g)
	result, err := applyPatch(value, ops)
	if err != nil {
		result = value // a patch that does not apply changes nothing
	}
	c = checker{doc: doc}
	c.walk(doc.root, result, "", 0)
	if s.cfg.Mix.shapeOn() && needsRelabel(c.out) {
		_, _, recs := s.firstAttempt(t, key, false)
		relabel(c.out, recs, result)
	}
	c.out = append(c.out, t.truthFaults(result, c.out)...)
	arr := make([]any, len(ops))
	for i, op := range ops {
		arr[i] = op.json()
	}
	fr := s.rng("format", key, strconv.Itoa(turn), feedback)
	text := string(encode(arr, encOpts{indent: fr.IntN(3) == 0}))
	var formats []FaultKind
	if fr.Float64() < s.cfg.Mix.Fence {
		text = "```json\n" + text + "\n```"
		formats = append(formats, FaultFence)
	}
	if fr.Float64() < s.cfg.Mix.Prose {
		text = "Here is the JSON Patch that fixes those errors:\n\n" + text + "\n\nApply it to your previous value."
		formats = append(formats, FaultProse)
	}
	return plan{text: text, faults: append(pf, c.out...), formats: formats, patch: true}, true
}

// fixOps are the ops of a patch that fixes each fault found the feedback
// names, each with probability FixProb (a removal of a renamed optional
// property adds it back under its name).
func (s *Server) fixOps(t *task, value any, feedback string, found []ContentFault, r *rand.Rand, g *generator) []patchOp {
	doc, truth := t.doc, t.truth
	var ops []patchOp
	for _, f := range found {
		u := r.Float64()
		if !names(feedback, f) || u >= s.cfg.FixProb {
			continue
		}
		tv, remove := fixFor(f, t, g)
		if remove {
			ops = append(ops, patchOp{op: "remove", path: f.Pointer})
			if rp, rv, ok := renamedOptional(doc, truth, value, f); ok {
				ops = append(ops, patchOp{op: "add", path: rp, value: rv})
			}
			continue
		}
		op := "replace"
		if f.Kind == FaultMissingRequired {
			op = "add"
		}
		ops = append(ops, patchOp{op: op, path: f.Pointer, value: tv})
	}
	return ops
}

// truthOps are the ops of a patch that fix the truth faults of value the
// feedback names, each with probability FixProb: a replace of each leaf
// the fix writes.
func (s *Server) truthOps(t *task, value any, feedback string, schemaFaults []ContentFault, r *rand.Rand) []patchOp {
	var ops []patchOp
	for _, f := range t.truthFaults(value, schemaFaults) {
		u := r.Float64()
		if !names(feedback, f) || u >= s.cfg.FixProb {
			continue
		}
		for _, w := range t.fixWrites(value, f, schemaFaults) {
			if w.del {
				ops = append(ops, patchOp{op: "remove", path: w.ptr})
				continue
			}
			ops = append(ops, patchOp{op: "replace", path: w.ptr, value: w.v})
		}
	}
	return ops
}

// spoilPatch draws the patch faults of the mix into ops: a wrong op, a
// pointer to a wrong place, an op that was not asked for.
func (s *Server) spoilPatch(doc *schemaDoc, value, fixed any, ops []patchOp, found []ContentFault, r *rand.Rand, g *generator) ([]patchOp, []ContentFault) {
	var drawn [3]bool
	for i, k := range patchKinds {
		drawn[i] = r.Float64() < s.cfg.Mix.Prob(k)
	}
	var pf []ContentFault
	spoiled := -1
	if drawn[0] {
		var cands []int
		for i, op := range ops {
			if doc.wrongOp(op, value) != "" {
				cands = append(cands, i)
			}
		}
		if len(cands) > 0 {
			spoiled = cands[r.IntN(len(cands))]
			ops[spoiled].op = doc.wrongOp(ops[spoiled], value)
			pf = append(pf, ContentFault{Kind: FaultPatchWrongOp, Pointer: ops[spoiled].path})
		}
	}
	if drawn[1] {
		var cands []int
		var paths []string
		for i, op := range ops {
			if i == spoiled && len(ops) > 1 {
				continue
			}
			if p, ok := badPath(op, value, fixed); ok {
				cands, paths = append(cands, i), append(paths, p)
			}
		}
		if len(cands) > 0 {
			k := r.IntN(len(cands))
			ops[cands[k]].path = paths[k]
			pf = append(pf, ContentFault{Kind: FaultPatchBadPointer, Pointer: paths[k]})
		}
	}
	if drawn[2] {
		if op, ok := s.extraOp(doc, value, found, ops, g); ok {
			at := r.IntN(len(ops) + 1)
			ops = slices.Insert(ops, at, op)
			pf = append(pf, ContentFault{Kind: FaultPatchExtraOp, Pointer: op.path})
		}
	}
	return ops, pf
}

// wrongOp returns the op patch_wrong_op writes for op, "" when it has
// none: add for a replace at an array index (the item is inserted, the
// others move up), remove for a replace of a required property, replace
// for an add (of a missing property: the target does not exist).
func (d *schemaDoc) wrongOp(op patchOp, value any) string {
	i := strings.LastIndexByte(op.path, '/')
	if i < 0 {
		return ""
	}
	switch op.op {
	case "add":
		return "replace"
	case "replace":
		parent, _ := pointerGet(value, op.path[:i])
		if _, ok := parent.([]any); ok {
			return "add"
		}
		if m := d.nodeAt(op.path[:i]); m != nil && requiredSet(m)[unescapeToken(op.path[i+1:])] {
			return "remove"
		}
	}
	return ""
}

// badPath returns a path for op that does not exist in the previous value
// nor in the fixed one (for an add: whose parent does not), so that the
// patch does not apply. It tries, in order: dropping an array index that
// is not the last token ("/items/0/qty": "/items/qty"), the first token
// with an "s" added or removed ("/customer/email": "/customers/email"),
// and "/data" put in front ("/total": "/data/total").
func badPath(op patchOp, value, fixed any) (string, bool) {
	toks := splitPointer(op.path)
	if len(toks) == 0 {
		return "", false
	}
	join := func(ts []string) string {
		var b strings.Builder
		for _, t := range ts {
			b.WriteString("/" + escapeToken(t))
		}
		return b.String()
	}
	resolves := func(p string, doc any) bool {
		if op.op != "add" {
			_, ok := pointerGet(doc, p)
			return ok
		}
		i := strings.LastIndexByte(p, '/')
		parent, ok := pointerGet(doc, p[:i])
		if arr, isArr := parent.([]any); ok && isArr {
			j, isIdx := arrayIndex(p[i+1:])
			return isIdx && j <= len(arr) || p[i+1:] == "-"
		}
		_, isObj := parent.(map[string]any)
		return ok && isObj
	}
	var cands []string
	for i := 0; i < len(toks)-1; i++ {
		if _, ok := arrayIndex(toks[i]); ok {
			cands = append(cands, join(slices.Delete(slices.Clone(toks), i, i+1)))
			break
		}
	}
	alt := toks[0] + "s"
	if strings.HasSuffix(toks[0], "s") && len(toks[0]) > 1 {
		alt = strings.TrimSuffix(toks[0], "s")
	}
	cands = append(cands, join(append([]string{alt}, toks[1:]...)), join(append([]string{"data"}, toks...)))
	for _, p := range cands {
		if p != op.path && !resolves(p, value) && !resolves(p, fixed) {
			return p, true
		}
	}
	return "", false
}

// extraOp returns patch_extra_op's operation: a replace of a value with a
// declared type that has no error and no operation on it (nor above or
// below it), by a new value of its schema (a different one when the
// generator finds one in a few tries).
func (s *Server) extraOp(doc *schemaDoc, value any, faults []ContentFault, ops []patchOp, g *generator) (patchOp, bool) {
	c := checker{doc: doc}
	sites := map[FaultKind][]site{}
	c.sites(doc.root, value, "", 0, sites)
	var free []site
	for _, st := range sites[FaultWrongType] {
		hit := slices.ContainsFunc(faults, func(f ContentFault) bool { return overlaps(f.Pointer, st.ptr) }) ||
			slices.ContainsFunc(ops, func(o patchOp) bool { return overlaps(o.path, st.ptr) })
		if !hit {
			free = append(free, st)
		}
	}
	if len(free) == 0 {
		return patchOp{}, false
	}
	st := free[g.rng.IntN(len(free))]
	name := unescapeToken(st.ptr[strings.LastIndexByte(st.ptr, '/')+1:])
	var v any
	for range 4 {
		v = g.gen(st.schema, name, 1)
		if !jsonEqual(v, st.value) {
			break
		}
	}
	return patchOp{op: "replace", path: st.ptr, value: v}, true
}
