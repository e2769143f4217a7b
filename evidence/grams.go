package evidence

import "strings"

// gramLen is the length in bytes of the substrings gramIndex indexes.
const gramLen = 4

// gramIndex finds a substring of a text without reading the whole text:
// it lists the offsets of the text's 4-byte substrings by hash, so a
// search reads only the offsets of the rarest 4 bytes of what it looks
// for. It takes about 5 bytes per byte of text; one search of a value in a
// megabyte costs microseconds where a scan costs a millisecond, which is
// what keeps a value of many leaves against a long source fast.
type gramIndex struct {
	text  string
	shift uint
	// pos holds the offsets of the text's 4-byte substrings grouped by
	// hash, each group in ascending order; start[h] is where group h
	// begins in pos and start[h+1] where it ends.
	start []int32
	pos   []int32
}

func newGramIndex(text string) *gramIndex {
	n := len(text) - gramLen + 1
	// 2^16 groups at most: the table stays in cache while it is built, and
	// a search verifies a few more offsets that share a hash.
	bits := 10
	for 1<<bits < n/4 && bits < 16 {
		bits++
	}
	g := &gramIndex{text: text, shift: 32 - uint(bits)}
	if n <= 0 {
		return g
	}
	g.start = make([]int32, 1<<bits+1)
	for i := range n {
		g.start[g.hash(text[i:])+1]++
	}
	for h := 1; h < len(g.start); h++ {
		g.start[h] += g.start[h-1]
	}
	g.pos = make([]int32, n)
	for i := range n {
		h := g.hash(text[i:])
		g.pos[g.start[h]] = int32(i)
		g.start[h]++
	}
	// each start[h] now holds the end of group h, the start of group h+1
	copy(g.start[1:], g.start[:len(g.start)-1])
	g.start[0] = 0
	return g
}

// hash hashes the first 4 bytes of s.
func (g *gramIndex) hash(s string) uint32 {
	v := uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
	return (v * 0x9e3779b1) >> g.shift
}

// each calls fn with each offset at or after from where needle occurs in
// the text, in ascending order, until fn returns false.
func (g *gramIndex) each(needle string, from int, fn func(int) bool) {
	if len(needle) < gramLen || g.pos == nil {
		for from <= len(g.text)-len(needle) && needle != "" {
			i := strings.Index(g.text[from:], needle)
			if i < 0 || !fn(from+i) {
				return
			}
			from += i + 1
		}
		return
	}
	best, fewest := 0, int32(len(g.pos)+1)
	for k := 0; k+gramLen <= len(needle); k++ {
		h := g.hash(needle[k:])
		if c := g.start[h+1] - g.start[h]; c < fewest {
			best, fewest = k, c
		}
		if fewest == 0 {
			return
		}
	}
	h := g.hash(needle[best:])
	for _, p := range g.pos[g.start[h]:g.start[h+1]] {
		c := int(p) - best
		if c >= from && strings.HasPrefix(g.text[c:], needle) && !fn(c) {
			return
		}
	}
}

// index returns the first offset at or after from where needle occurs in
// the text at word boundaries, or -1.
func (g *gramIndex) index(needle string, from int) int {
	found := -1
	g.each(needle, from, func(i int) bool {
		if atBoundary(g.text, i, i+len(needle)) {
			found = i
			return false
		}
		return true
	})
	return found
}
