package repair

import (
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/chunk"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/merge"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// A model asked for a long list in one call gives its first few tens of
// items and stops, and a chunk of a few thousand tokens can hold more
// than that. A list pass asks again over the rest of a chunk whose
// value's list looks cut, from the last item the value gave, and its
// value is merged after the chunk's. A list looks cut when
//
//   - the value (a valid one, or what an invalid one contributes) has a
//     list, an array of objects, with at least one item;
//   - the list's last item is written in the text the value was read
//     from (its strings and numbers aligned by package evidence, as the
//     evidence stage grounds a list item); and
//   - after the line of that item the text still holds, before the
//     place the next chunk starts at (the overlap: what lies after it is
//     read again there), or before the end of the document for the last
//     chunk, at least listPassMinTokens tokens.
//
// The pass starts at the start of the line the last item is written on
// (or at the item, when the line starts more than evidence.ItemWindow
// code points before it): an item cut in the middle is read again whole,
// and the merge's key makes the two copies one. Passes follow one another
// while the last one added items the values before it did not have (by
// the merge's key), at least as many as the call before it less the one
// it read again, and its own list looks cut, up to Limits.ListPasses
// passes a chunk.

// listPassMinTokens is the least text, in estimated tokens, a list pass
// is sent for: about one short item written as a line ("- Acme Ltd,
// United Kingdom, 100%" is 8). Less cannot hold an item whole, and a
// call over it would pay for the task again to read nothing.
const listPassMinTokens = 8

// passChain is the list passes of a chunk's unit.
type passChain struct {
	units []*unit // in order, pass 1 first
	// done: no pass follows the last one (or the chunk, with none).
	done bool
}

// tail is the last conversation over chunk unit u: its last list pass,
// else u.
func (u *unit) tail() *unit {
	if n := len(u.passes.units); n > 0 {
		return u.passes.units[n-1]
	}
	return u
}

// chainEnded reports whether chunk unit u's conversations are over: its
// own and its list passes', and no pass is to follow.
func (u *unit) chainEnded() bool {
	return u.tail().ended && u.passes.done
}

// readers are the conversations over the chunks, each chunk's followed
// by its list passes.
func (m *chunked) readers() []*unit {
	out := make([]*unit, 0, len(m.units))
	for _, u := range m.units {
		out = append(out, u)
		out = append(out, u.passes.units...)
	}
	return out
}

// addPasses starts, under the parallel strategy, the next list pass of
// each chunk whose last conversation has ended, when one is to follow
// (see nextPass), and reports whether it started any. The sequential
// strategy starts its passes as it moves on (nextPhase).
func (m *chunked) addPasses() bool {
	if m.lim.Strategy != fixpoint.StrategyParallel || m.repair != nil {
		return false
	}
	added := false
	for _, u := range m.units {
		added = m.nextPass(u) || added
	}
	return added
}

// nextPass starts the next list pass of chunk unit cu, once its last
// conversation has ended, when one is to follow; else it marks cu's
// passes done. It reports whether it started one.
func (m *chunked) nextPass(cu *unit) bool {
	if cu.passes.done || !cu.tail().ended {
		return false
	}
	from, ok := m.passFrom(cu)
	if !ok {
		cu.passes.done = true
		return false
	}
	cu.passes.units = append(cu.passes.units, m.passUnit(cu, from, nil))
	return true
}

// passFrom is the code point of the document the next list pass of
// chunk unit cu starts at, and whether one is to follow: the job sends
// new requests, ListPasses allows one more, the last pass (if any) added
// items, about as many as the call before it, and the list of the last
// value looks cut past its start.
func (m *chunked) passFrom(cu *unit) (int, bool) {
	k := len(cu.passes.units)
	if m.halt != nil || k >= m.lim.ListPasses {
		return 0, false
	}
	t := cu.tail()
	v, ok := m.contribution(t)
	if !ok {
		return 0, false
	}
	if k > 0 {
		// A pass that added nothing read nothing new; one that added
		// fewer items than the call before it, less the item it read
		// again, stopped because the list did, not where the model
		// stops listing.
		if n := m.added(cu, k); n == 0 || n+1 < m.added(cu, k-1) {
			return 0, false
		}
	}
	from, ok := m.cutAt(t, v)
	return from, ok && from > t.ref.Start
}

// added is how many list items conversation i of chunk unit cu (0 the
// chunk's own, k its k-th list pass) added, by the merge's key, to the
// values before it: those of the chunk and its earlier passes, and under
// sequential the value so far the chunk was given. 0 when it gave
// nothing.
func (m *chunked) added(cu *unit, i int) int {
	chain := append([]*unit{cu}, cu.passes.units...)
	v, ok := m.contribution(chain[i])
	if !ok {
		return 0
	}
	var values []merge.ChunkValue
	if cu.before != nil {
		values = append(values, merge.ChunkValue{Chunk: max(cu.ref.N-1, 0), Value: cu.before})
	}
	for _, u := range chain[:i] {
		if w, ok := m.contribution(u); ok {
			values = append(values, merge.ChunkValue{Chunk: u.ref.N, Pass: u.ref.Pass + 1, Value: w})
		}
	}
	before, _, err1 := merge.Values(m.job.Schema, values, merge.Options{})
	after, _, err2 := merge.Values(m.job.Schema, append(values, merge.ChunkValue{Chunk: cu.ref.N, Pass: i + 1, Value: v}), merge.Options{})
	if err1 != nil || err2 != nil {
		return 0
	}
	had := map[string]int{}
	for _, l := range itemLists(before, nil) {
		had[validate.Pointer(l.path)] = len(l.items)
	}
	n := 0
	for _, l := range itemLists(after, nil) {
		n += max(len(l.items)-had[validate.Pointer(l.path)], 0)
	}
	return n
}

// itemList is a list of a value: an array with an object among its
// items, at path.
type itemList struct {
	path  []string
	items []any
}

// itemLists are the lists of v, found through its objects (a list inside
// a list's item is the item's, read with it).
func itemLists(v any, path []string) []itemList {
	switch x := v.(type) {
	case map[string]any:
		var out []itemList
		for _, k := range slices.Sorted(maps.Keys(x)) {
			out = append(out, itemLists(x[k], append(slices.Clip(path), k))...)
		}
		return out
	case []any:
		if slices.ContainsFunc(x, func(it any) bool { _, ok := it.(map[string]any); return ok }) {
			return []itemList{{path: path, items: x}}
		}
	}
	return nil
}

// cutAt is where the next list pass after t, a chunk's or a pass's
// conversation that ended with value v, starts (a code point of the
// document), and whether a list of v looks cut (see the rule above);
// with several cut lists, the earliest start.
func (m *chunked) cutAt(t *unit, v any) (int, bool) {
	lists := itemLists(v, nil)
	if len(lists) == 0 {
		return 0, false
	}
	text := []rune(t.text)
	src := evidence.New(t.text)
	c := m.chunks[t.ref.N]
	unreadEnd := len(text) // the last chunk: the document's end
	if c.N+1 < len(m.chunks) {
		unreadEnd = min(m.chunks[c.N+1].Start-t.ref.Start, len(text))
	}
	best, found := 0, false
	for _, l := range lists {
		last, ok := l.items[len(l.items)-1].(map[string]any)
		if !ok {
			continue
		}
		start, end, ok := itemSpan(src, last)
		end = lineEnd(text, end)
		if !ok || end >= unreadEnd || chunk.Tokens(string(text[end:unreadEnd])) < listPassMinTokens {
			continue
		}
		from := lineStart(text, start)
		if !found || from < best {
			best, found = from, true
		}
	}
	return t.ref.Start + best, found
}

// itemSpan is where item, a list's last item, is written in src: the
// span of its anchor, the longest of its strings src grounds (a number
// when it has none; the name, usually, which a list writes once where a
// country or a share recurs from item to item), code points; false when
// src grounds none of them. The item is aligned as an item of a list, so
// that in a long text its fields are looked up near one another.
func itemSpan(src *evidence.Source, item map[string]any) (start, end int, ok bool) {
	var anchor *fixpoint.Grounding
	weight := func(g *fixpoint.Grounding) int {
		if _, isString := valueAt(item, validate.SplitPointer(g.Path)[1:]).(string); isString {
			return 1<<20 + g.End - g.Start
		}
		return g.End - g.Start
	}
	leaves := src.Align([]any{item}, nil).Leaves
	for i := range leaves {
		l := &leaves[i]
		if l.Grade == fixpoint.GradeNone || l.Grade == "" {
			continue
		}
		if anchor == nil || weight(l) > weight(anchor) {
			anchor = l
		}
	}
	if anchor == nil {
		return 0, 0, false
	}
	return anchor.Start, anchor.End, true
}

// lineStart is the start of the line of text holding code point at, or
// at itself when that line starts more than evidence.ItemWindow code
// points before it (an item in a long paragraph of prose).
func lineStart(text []rune, at int) int {
	for i := at - 1; i >= 0 && at-i <= evidence.ItemWindow; i-- {
		if text[i] == '\n' {
			return i + 1
		}
	}
	if at <= evidence.ItemWindow {
		return 0
	}
	return at
}

// lineEnd is the end of the line of text holding the code point before
// at (after its line break), or at itself when that line ends more than
// evidence.ItemWindow code points after it.
func lineEnd(text []rune, at int) int {
	for i := at; i < len(text) && i-at < evidence.ItemWindow; i++ {
		if text[i] == '\n' {
			return i + 1
		}
	}
	if len(text)-at < evidence.ItemWindow {
		return len(text)
	}
	return at
}

// passUnit starts the next list pass of chunk unit cu, over the rest of
// its chunk from code point from of the document, from its attempts so
// far.
func (m *chunked) passUnit(cu *unit, from int, atts []fixpoint.Attempt) *unit {
	c := m.chunks[cu.ref.N]
	ref := &fixpoint.ChunkRef{N: c.N, Start: from, End: c.End, Pass: len(cu.passes.units) + 1}
	return m.readUnit(ref, c.Text[byteOffset(c.Text, from-c.Start):], atts)
}

// byteOffset is the byte offset of code point cp of s.
func byteOffset(s string, cp int) int {
	i := 0
	for n := 0; n < cp && i < len(s); n++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// partName names the text a chunk's or a list pass's request holds:
// "part 2 of 7", or "the rest of part 2 of 7".
func (m *chunked) partName(ref *fixpoint.ChunkRef) string {
	name := fmt.Sprintf("part %d of %d", ref.N+1, len(m.chunks))
	if ref.Pass > 0 {
		return "the rest of " + name
	}
	return name
}

// numberPasses gives each list pass's attempt its pass number, which the
// ledger does not keep: the attempts over chunk n that start after the
// chunk are its passes, numbered in the order of their starts.
func (m *chunked) numberPasses() {
	starts := map[int][]int{} // by chunk, the passes' starts
	for _, a := range m.res.Attempts {
		if c := a.Chunk; a.Step == fixpoint.StepChunk && c != nil && c.N < len(m.chunks) && c.Start > m.chunks[c.N].Start {
			if !slices.Contains(starts[c.N], c.Start) {
				starts[c.N] = append(starts[c.N], c.Start)
			}
		}
	}
	for n := range starts {
		slices.Sort(starts[n])
	}
	for i := range m.res.Attempts {
		a := &m.res.Attempts[i]
		if a.Step != fixpoint.StepChunk || a.Chunk == nil {
			continue
		}
		ref := *a.Chunk
		ref.Pass = 0
		if k := slices.Index(starts[ref.N], ref.Start); k >= 0 {
			ref.Pass = k + 1
		}
		a.Chunk = &ref
	}
}

// replayPasses rebuilds the list passes of chunk unit cu from rows, the
// attempts of each pass in order. Under the sequential strategy, where a
// pass is given the value so far, it folds each conversation that ended
// into the value so far before the next, and starts the next pass when
// one is to follow; it reports whether cu's conversations are all over.
// The parallel strategy decides its next passes as it advances
// (addPasses).
func (m *chunked) replayPasses(cu *unit, rows [][]fixpoint.Attempt) bool {
	seq := m.lim.Strategy == fixpoint.StrategySequential
	for _, atts := range rows {
		if !cu.tail().ended {
			break
		}
		if seq {
			m.fold(cu.tail())
		}
		cu.passes.units = append(cu.passes.units, m.passUnit(cu, atts[0].Chunk.Start, atts))
	}
	if !seq {
		return cu.chainEnded()
	}
	for cu.tail().ended {
		m.fold(cu.tail())
		if !m.nextPass(cu) {
			return true
		}
	}
	return false
}

// passRows splits the attempts over one chunk into the chunk's own and
// each of its list passes', in pass order.
func passRows(atts []fixpoint.Attempt) (own []fixpoint.Attempt, passes [][]fixpoint.Attempt) {
	byPass := map[int][]fixpoint.Attempt{}
	for _, a := range atts {
		if a.Chunk.Pass == 0 {
			own = append(own, a)
			continue
		}
		byPass[a.Chunk.Pass] = append(byPass[a.Chunk.Pass], a)
	}
	for _, k := range slices.Sorted(maps.Keys(byPass)) {
		passes = append(passes, byPass[k])
	}
	return own, passes
}
