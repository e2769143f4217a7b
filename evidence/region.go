package evidence

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// ItemWindow is how far, in code points, a list item's field may be
// written from the item's anchor and still be grounded: its nearest
// mention must start or end within ItemWindow code points of the anchor's
// span, with no blank line (a paragraph break) between them.
//
// 200 code points holds an item written as a table row or a bullet (well
// under 200 characters) and a field stated a sentence or two away in
// prose, and in a table a few rows either side, where a model copies a
// neighbour's value by misreading the row rather than by inventing it.
// What it excludes is the field of another item written pages away, the
// error a long document makes likely: every value is found somewhere.
const ItemWindow = 200

// ItemMinSource is the length in code points a source must exceed for
// list items to be grounded as a whole (see Source.Align). A shorter
// source, such as a row's prompt, holds little more than one window: its
// values are graded leaf by leaf.
const ItemMinSource = 2000

// maxAnchorMentions bounds the anchor's mentions tried as the item's
// place: an anchor written more often than this is no landmark.
const maxAnchorMentions = 64

// itemLeaf is a string or number of a list item, before it is graded.
type itemLeaf struct {
	slot int    // its index in aligner.leaves
	rel  string // its pointer from the item, "/name"
	str  string
	num  bool // a number: lit, key and ok are numberLiteral's
	lit  string
	key  string
	ok   bool
	m    match // its grade leaf by leaf, as a scalar
}

// grouped reports whether list items are grounded as a whole: a long
// source of one text. A source of segments is a row's fields, short and
// already split by field.
func (a *aligner) grouped() bool {
	return a.src.segs == nil && a.src.runes > ItemMinSource
}

// item grades the leaves of a list item, an object in an array, together:
// its anchor is its best-grounded leaf (exact over normalized over fuzzy,
// a string over a number, then the longest), placed at the mention of it
// near which most of the other leaves are written; each other leaf is
// graded by its mention nearest that place, and none when it has no
// mention within the window (ItemWindow), with a Reason naming where it
// is written. A list nested in the item is grouped on its own.
func (a *aligner) item(v map[string]any, ptr string, exempt bool) {
	exempt = exempt || a.exempt != nil && a.exempt(ptr)
	var leaves []itemLeaf
	for _, k := range slices.Sorted(maps.Keys(v)) {
		a.collect(v[k], ptr+"/"+escapeToken(k), len(ptr), exempt, &leaves)
	}
	for i := range leaves {
		leaves[i].m = a.gradeLeaf(&leaves[i])
	}
	an := a.anchorOf(leaves)
	if an < 0 || len(leaves) == 1 {
		for _, l := range leaves {
			a.set(l.slot, l.m, "")
		}
		return
	}
	place := a.place(leaves, an)
	for i, l := range leaves {
		switch {
		case i == an:
			a.set(l.slot, place, "")
		case l.m.grade == fixpoint.GradeNone:
			a.set(l.slot, l.m, "")
		default:
			if m, ok := a.src.nearest(a.src.mentionsNear(&l, place, a.norm), place); ok {
				a.set(l.slot, m, "")
				continue
			}
			a.set(l.slot, match{grade: fixpoint.GradeNone}, fmt.Sprintf(
				"is written only at offset %d, far from the item's %s %s (offset %d)",
				a.src.cpOf(l.m.start), strings.TrimPrefix(leaves[an].rel, "/"),
				quote(leaves[an].value()), a.src.cpOf(place.start)))
		}
	}
}

// collect reserves a slot for each string and number of v, as walk grades
// them, and lists them in out; an object in a list is an item of its own.
func (a *aligner) collect(v any, ptr string, base int, exempt bool, out *[]itemLeaf) {
	exempt = exempt || a.exempt != nil && a.exempt(ptr)
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			a.collect(v[k], ptr+"/"+escapeToken(k), base, exempt, out)
		}
	case []any:
		for i, x := range v {
			p := ptr + "/" + strconv.Itoa(i)
			if o, ok := x.(map[string]any); ok {
				a.item(o, p, exempt)
				continue
			}
			a.collect(x, p, base, exempt, out)
		}
	case string:
		if strings.TrimSpace(v) == "" {
			return
		}
		if exempt {
			a.sum.Exempt++
			return
		}
		*out = append(*out, itemLeaf{slot: a.reserve(ptr), rel: ptr[base:], str: v})
	default:
		lit, key, ok := numberLiteral(v)
		if !ok && !isNumber(v) {
			return
		}
		if exempt {
			a.sum.Exempt++
			return
		}
		*out = append(*out, itemLeaf{slot: a.reserve(ptr), rel: ptr[base:], num: true, lit: lit, key: key, ok: ok})
	}
}

func (a *aligner) gradeLeaf(l *itemLeaf) match {
	if l.num {
		return a.src.gradeNumber(l.lit, l.key, l.ok)
	}
	return a.src.gradeString(l.str, a.norm)
}

func (l *itemLeaf) value() any {
	if l.num {
		return json.Number(l.lit)
	}
	return l.str
}

// anchorOf returns the index of the item's anchor, -1 when no leaf is
// found in the source. The anchor is the leaf that best marks the item's
// place: a string of text (a name) over a date or number, which another
// item may share; then the best graded; then the one written fewest
// times; then the longest.
func (a *aligner) anchorOf(leaves []itemLeaf) int {
	type key struct{ text, grade, rare, long int }
	keyOf := func(l *itemLeaf) key {
		k := key{grade: rank(l.m.grade), long: len(l.str)}
		if !l.num {
			nv := a.norm.normalize(l.str)
			if textDateKeys(nv) == nil && textNumberKeys(nv) == nil {
				k.text = 1
			}
			k.rare = -a.src.count(nv, maxAnchorMentions+1)
		}
		return k
	}
	best, bk := -1, key{}
	for i := range leaves {
		if leaves[i].m.grade == fixpoint.GradeNone {
			continue
		}
		k := keyOf(&leaves[i])
		if best < 0 || cmpKey(k.text, bk.text, k.grade, bk.grade, k.rare, bk.rare, k.long, bk.long) > 0 {
			best, bk = i, k
		}
	}
	return best
}

// cmpKey compares two keys given as pairs, most significant first.
func cmpKey(pairs ...int) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i] != pairs[i+1] {
			if pairs[i] > pairs[i+1] {
				return 1
			}
			return -1
		}
	}
	return 0
}

// count returns how many times the normalised text nv is written at word
// boundaries, counting to at most limit.
func (s *Source) count(nv string, limit int) int {
	n := 0
	s.grams.each(nv, 0, func(i int) bool {
		if atBoundary(s.norm, i, i+len(nv)) {
			n++
		}
		return n < limit
	})
	return n
}

// place returns the mention of the anchor, of its best grade, near which
// most of the item's other leaves are written; the first of those tied.
func (a *aligner) place(leaves []itemLeaf, an int) match {
	l := &leaves[an]
	whole := match{grade: l.m.grade, start: 0, end: len(a.src.text)}
	best, most := l.m, -1
	n := 0
	for _, o := range a.src.mentionsNear(l, whole, a.norm) {
		if o.grade != l.m.grade {
			continue
		}
		if n++; n > maxAnchorMentions {
			break
		}
		near := 0
		for i := range leaves {
			if i == an || leaves[i].m.grade == fixpoint.GradeNone {
				continue
			}
			if _, ok := a.src.nearest(a.src.mentionsNear(&leaves[i], o, a.norm), o); ok {
				near++
			}
		}
		if near > most {
			best, most = o, near
		}
	}
	return best
}

// mentionsNear lists the mentions of a leaf that may lie within the
// window around at (more, when at spans the whole text), at the stage of
// its scalar grade: written as a string, else as a date or number.
func (s *Source) mentionsNear(l *itemLeaf, at match, n *normalizer) []match {
	if l.m.grade == fixpoint.GradeFuzzy {
		return []match{l.m} // the fuzzy search finds one
	}
	// A code point is at most 4 bytes: this byte range holds the window.
	lo, hi := max(at.start-4*ItemWindow, 0), min(at.end+4*ItemWindow, len(s.text))
	var out []match
	inRange := func(ms []mention) {
		for _, m := range within(ms, lo, hi) {
			out = append(out, match{fixpoint.GradeNormalized, int(m.start), int(m.end)})
		}
	}
	if l.num {
		for _, m := range within(s.numbers[l.key], lo, hi) {
			g := fixpoint.GradeNormalized
			if s.text[m.start:m.end] == l.lit {
				g = fixpoint.GradeExact
			}
			out = append(out, match{g, int(m.start), int(m.end)})
		}
		return out
	}
	nv := n.normalize(l.str)
	from := sort.Search(len(s.normAt), func(i int) bool { return int(s.normAt[i]) >= lo })
	s.grams.each(nv, from, func(i int) bool {
		a := s.rawStart(i)
		if a > hi {
			return false
		}
		j := i + len(nv)
		if !atBoundary(s.norm, i, j) {
			return true
		}
		if strings.HasPrefix(s.text[a:], l.str) && atBoundary(s.text, a, a+len(l.str)) {
			out = append(out, match{fixpoint.GradeExact, a, a + len(l.str)})
		} else {
			out = append(out, match{fixpoint.GradeNormalized, a, s.rawEnd(j)})
		}
		return true
	})
	if len(out) > 0 {
		return out
	}
	// Written as is elsewhere, it may be written another way here: a date
	// or number in another form.
	for _, k := range textDateKeys(nv) {
		inRange(s.dates[k])
	}
	if len(out) == 0 {
		for _, k := range textNumberKeys(nv) {
			inRange(s.numbers[k])
		}
	}
	return out
}

// within returns the mentions of ms, a list in source order, from the
// first that may reach the byte range [lo, hi] to the last starting in
// it. A mention is a number or date of a few dozen bytes: one starting
// 64 bytes before lo ends before it.
func within(ms []mention, lo, hi int) []mention {
	i := sort.Search(len(ms), func(i int) bool { return int(ms[i].start) >= lo-64 })
	j := i
	for j < len(ms) && int(ms[j].start) <= hi {
		j++
	}
	return ms[i:j]
}

// nearest returns the mention of ms nearest at, within the window; of
// those as near, the best graded, then the first.
func (s *Source) nearest(ms []match, at match) (match, bool) {
	as, ae := s.cpOf(at.start), s.cpOf(at.end)
	best, gap := match{}, -1
	for _, m := range ms {
		bs, be := s.cpOf(m.start), s.cpOf(m.end)
		g := max(bs-ae, as-be, 0)
		if g > ItemWindow || s.paragraphBreak(min(m.end, at.end), max(m.start, at.start)) {
			continue
		}
		if gap < 0 || g < gap || g == gap && rank(m.grade) > rank(best.grade) {
			best, gap = m, g
		}
	}
	return best, gap >= 0
}

// paragraphBreak reports whether text[i:j] holds a blank line.
func (s *Source) paragraphBreak(i, j int) bool {
	if i >= j {
		return false
	}
	t := s.text[i:j]
	for {
		k := strings.IndexByte(t, '\n')
		if k < 0 {
			return false
		}
		t = t[k+1:]
		if r := strings.TrimLeft(t, " \t\r"); strings.HasPrefix(r, "\n") {
			return true
		}
	}
}

// rank orders the grades, none lowest.
func rank(g fixpoint.Grade) int {
	switch g {
	case fixpoint.GradeExact:
		return 3
	case fixpoint.GradeNormalized:
		return 2
	case fixpoint.GradeFuzzy:
		return 1
	}
	return 0
}
