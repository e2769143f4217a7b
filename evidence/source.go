package evidence

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// barrier stands in the normalised text for a segment separator (and a NUL
// of the source): nothing a value normalises to contains it, so no match
// crosses it.
const barrier = 0

// cpBlock is the spacing in bytes of the byte-to-code-point checkpoints.
const cpBlock = 256

// Source is a source text indexed for alignment. It is built once (New,
// NewSegments) and is safe for concurrent use by Align.
//
// The index holds the text; one normalised copy of it with, for each of
// its bytes, the offset of the source character it came from, and an index
// of its substrings (gramIndex); and the number and date mentions of the
// text keyed by value. It takes about ten times the text's size in memory,
// twenty once a value needs fuzzy matching (see fuzzy.go), built then.
type Source struct {
	text string
	// norm is the normalised text (see normalizer) and normAt[i] the byte
	// offset in text of the character norm[i] came from.
	norm   string
	normAt []int32
	// marks[k] is the first character at or after byte k*cpBlock: its byte
	// offset and code point offset.
	marks []cpMark
	runes int // the text's length in code points
	// segs are the segments' names and byte ranges, nil for New.
	segs []segmentRange

	// grams finds substrings of norm.
	grams *gramIndex
	// numbers and dates are the mentions of each number, by its canonical
	// decimal (decimalKey), and of each date, by dateKey; each list in
	// source order.
	numbers map[string][]mention
	dates   map[dateKey][]mention

	skelOnce sync.Once
	skel     *skeleton
}

// Segment is one named part of a source, such as one field of a row as
// the template rendered it.
type Segment struct {
	Name string
	Text string
}

type segmentRange struct {
	name       string
	start, end int // byte offsets in Source.text
}

type cpMark struct{ b, cp int }

// mention is a number or date written in the source: its byte range in the
// text.
type mention struct{ start, end int32 }

// New indexes text as one source.
func New(text string) *Source {
	return build(text, nil)
}

// NewSegments indexes the segments as one source whose text (Text) is
// theirs joined by "\n". Spans are offsets into that text; no match
// crosses from one segment into the next. Segment maps an offset back to
// its segment.
func NewSegments(segs []Segment) *Source {
	var sb strings.Builder
	ranges := make([]segmentRange, len(segs))
	for i, s := range segs {
		if i > 0 {
			sb.WriteByte('\n')
		}
		ranges[i] = segmentRange{name: s.Name, start: sb.Len()}
		sb.WriteString(s.Text)
		ranges[i].end = sb.Len()
	}
	return build(sb.String(), ranges)
}

// Text returns the text spans index: the source, or the segments joined by
// "\n".
func (s *Source) Text() string { return s.text }

// Len returns the length of Text in code points.
func (s *Source) Len() int { return s.runes }

// Segment returns the name of the segment holding the code point offset
// cp, and cp as an offset into that segment's text. For a source made by
// New, or an offset past the text, it returns "" and cp.
func (s *Source) Segment(cp int) (name string, offset int) {
	for _, r := range s.segs {
		start, end := s.cpOf(r.start), s.cpOf(r.end)
		if cp >= start && cp <= end {
			return r.name, cp - start
		}
	}
	return "", cp
}

func build(text string, segs []segmentRange) *Source {
	s := &Source{text: text, segs: segs}
	n := newNormalizer()
	b := normBuilder{norm: make([]byte, 0, len(text)+len(text)/8), at: make([]int32, 0, len(text)+len(text)/8)}
	s.marks = make([]cpMark, 0, len(text)/cpBlock+1)
	next, cp, seg := 0, 0, 0
	for i, r := range text {
		if i >= next {
			s.marks = append(s.marks, cpMark{b: i, cp: cp})
			next = (i/cpBlock + 1) * cpBlock
		}
		cp++
		if segs != nil && seg+1 < len(segs) && i == segs[seg].end {
			seg++
			b.barrier(i) // the "\n" joining two segments
			continue
		}
		if r < utf8.RuneSelf {
			b.ascii(byte(r), i)
			continue
		}
		if r == utf8.RuneError {
			if _, w := utf8.DecodeRuneInString(text[i:]); w == 1 {
				b.add("\ufffd", i) // a byte that is no UTF-8: one character, as range reads it
				continue
			}
		}
		b.add(n.rune(r), i)
	}
	s.runes = cp
	s.norm = string(b.norm)
	s.normAt = b.at
	s.grams = newGramIndex(s.norm)
	s.numbers, s.dates = scanMentions(s)
	return s
}

// cpOf returns the code point offset of byte offset b, which is the start
// of a character or len(text).
func (s *Source) cpOf(b int) int {
	if b >= len(s.text) {
		return s.runes
	}
	k := b / cpBlock
	if k >= len(s.marks) {
		k = len(s.marks) - 1
	}
	for k > 0 && s.marks[k].b > b {
		k--
	}
	m := s.marks[k]
	cp := m.cp
	for range s.text[m.b:b] {
		cp++
	}
	return cp
}

// rawStart returns the byte offset in text of the character that normalised
// byte i came from; rawEnd the offset just past the character normalised
// byte e-1 came from, so [rawStart(i), rawEnd(e)) is the source of
// norm[i:e].
func (s *Source) rawStart(i int) int {
	if i >= len(s.normAt) {
		return len(s.text)
	}
	return int(s.normAt[i])
}

func (s *Source) rawEnd(e int) int {
	if e <= 0 {
		return 0
	}
	b := int(s.normAt[e-1])
	_, w := utf8.DecodeRuneInString(s.text[b:])
	return b + w
}

// crossesSegment reports whether the byte range [start, end) of the text
// runs from one segment into the next.
func (s *Source) crossesSegment(start, end int) bool {
	for _, r := range s.segs {
		if start >= r.start && start <= r.end {
			return end > r.end
		}
	}
	return false
}

// normBuilder writes a normalised text, collapsing each run of white space
// to one space and noting where each byte came from (at is nil for a
// value's text, where no one asks).
type normBuilder struct {
	norm  []byte
	at    []int32
	space bool // the last byte written is a space
}

func (b *normBuilder) put(c byte, from int) {
	if c == ' ' {
		if b.space {
			return
		}
		b.space = true
	} else {
		b.space = false
	}
	b.norm = append(b.norm, c)
	if b.at != nil {
		b.at = append(b.at, int32(from))
	}
}

func (b *normBuilder) ascii(c byte, from int) {
	switch {
	case 'A' <= c && c <= 'Z':
		b.put(c+'a'-'A', from)
	case c == ' ' || '\t' <= c && c <= '\r':
		b.put(' ', from)
	case c == 0:
		b.barrier(from)
	case c < ' ' || c == 0x7f:
		// other control characters carry no text
	default:
		b.put(c, from)
	}
}

func (b *normBuilder) add(s string, from int) {
	for i := 0; i < len(s); i++ {
		b.put(s[i], from)
	}
}

func (b *normBuilder) barrier(from int) {
	if b.at == nil {
		b.put(' ', from) // a value's NUL matches no barrier of the source
		return
	}
	b.norm = append(b.norm, barrier)
	b.at = append(b.at, int32(from))
	b.space = false
}

// normalizer maps a character outside ASCII to its normalised form:
// compatibility decomposition (NFKD), without diacritics, case-folded, any
// white space as a space, format characters (soft hyphen, zero-width
// space, byte order mark) and controls dropped. It caches each character's
// form; a text has few distinct characters.
//
// The form stays decomposed: comparing decomposed texts is comparing their
// NFKC forms, and a character's decomposition does not depend on its
// neighbours, so the source can be normalised one character at a time and
// each normalised byte traced back to one source character.
type normalizer struct {
	chain transform.Transformer
	cache map[rune]string
}

func newNormalizer() *normalizer {
	return &normalizer{
		chain: transform.Chain(norm.NFKD, runes.Remove(runes.Predicate(isDiacritic)), cases.Fold()),
		cache: map[rune]string{},
	}
}

// isDiacritic reports whether r is a nonspacing mark to drop. The kana
// voicing marks stay: が and か are different syllables, not one letter
// with and without an accent.
func isDiacritic(r rune) bool {
	return unicode.Is(unicode.Mn, r) && r != 0x3099 && r != 0x309a
}

func (n *normalizer) rune(r rune) string {
	if f, ok := n.cache[r]; ok {
		return f
	}
	var f string
	switch {
	case unicode.IsSpace(r):
		f = " "
	case unicode.Is(unicode.Cf, r) || unicode.IsControl(r):
		f = ""
	default:
		n.chain.Reset()
		f, _, _ = transform.String(n.chain, string(r))
		if strings.ContainsFunc(f, unicode.IsSpace) {
			f = strings.Map(func(c rune) rune {
				if unicode.IsSpace(c) {
					return ' '
				}
				return c
			}, f)
		}
	}
	n.cache[r] = f
	return f
}

// normalize returns the normalised form of a value's text, without white
// space at either end.
func (n *normalizer) normalize(v string) string {
	b := normBuilder{norm: make([]byte, 0, len(v))}
	for _, r := range v {
		if r < utf8.RuneSelf {
			b.ascii(byte(r), 0)
			continue
		}
		b.add(n.rune(r), 0)
	}
	return strings.TrimSpace(string(b.norm))
}

// isWordRune reports whether r is part of a word of a script that puts
// spaces between words: a match may not start or end next to one. Letters
// of scripts written without spaces (Han, kana, Thai, ...) are not: there
// any character boundary is a word boundary.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r) {
		return false
	}
	return !unspaced(r)
}

// unspacedScripts are the scripts written without spaces between words,
// and Hangul, whose words take their particles without a space (서울에서,
// "in Seoul", holds 서울).
var unspacedScripts = []*unicode.RangeTable{unicode.Han, unicode.Hiragana, unicode.Katakana,
	unicode.Hangul, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar, unicode.Tibetan}

func unspaced(r rune) bool {
	return r == 0x30fc || r == 0x3099 || r == 0x309a || unicode.In(r, unspacedScripts...)
}

// atBoundary reports whether text[i:j], which holds needle, starts and ends
// at word boundaries: not inside a word of a spaced script on either side.
func atBoundary(text string, i, j int) bool {
	if i > 0 {
		before, _ := utf8.DecodeLastRuneInString(text[:i])
		first, _ := utf8.DecodeRuneInString(text[i:j])
		if isWordRune(before) && isWordRune(first) {
			return false
		}
	}
	if j < len(text) {
		after, _ := utf8.DecodeRuneInString(text[j:])
		last, _ := utf8.DecodeLastRuneInString(text[i:j])
		if isWordRune(last) && (isWordRune(after) || unicode.IsMark(after) && !unspaced(after)) {
			return false
		}
	}
	return true
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

// scanMentions reads the numbers and dates written in the normalised text,
// keyed by value. It reads the text once, front to back, and each mention
// starts at or after the ones before it, so each list is in source order.
func scanMentions(s *Source) (nums map[string][]mention, dates map[dateKey][]mention) {
	t := s.norm
	nums, dates = map[string][]mention{}, map[dateKey][]mention{}
	addNum := func(key string, a, b int) { nums[key] = append(nums[key], s.mention(a, b)) }
	var hits []dateHit
	var ch numberChain
	chainEnd := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case isDigit(c):
			if i > 0 && isDigit(t[i-1]) {
				continue
			}
			hits = datesAt(t, i, hits[:0])
			for _, h := range hits {
				dates[h.key] = append(dates[h.key], s.mention(i, h.end))
			}
			if i < chainEnd {
				continue
			}
			ok, neg, sign := numberStart(t, i)
			chainEnd = ch.scan(t, i)
			if ok {
				ch.neg, ch.sign = neg, sign
				ch.each(t, addNum)
			}
		case 'a' <= c && c <= 'z':
			if i > 0 && ('a' <= t[i-1] && t[i-1] <= 'z' || isWordRune(lastRune(t[:i]))) {
				continue
			}
			hits = monthFirstDate(t, i, hits[:0])
			for _, h := range hits {
				dates[h.key] = append(dates[h.key], s.mention(i, h.end))
			}
		}
	}
	return nums, dates
}

// mention returns the source range of normalised bytes [a, b).
func (s *Source) mention(a, b int) mention {
	return mention{start: int32(s.rawStart(a)), end: int32(s.rawEnd(b))}
}
