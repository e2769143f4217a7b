package evidence

import (
	"unicode"
	"unicode/utf8"
)

// The fuzzy rule. A string value is graded fuzzy when its skeleton (its
// normalised text with only letters and digits kept: white space,
// punctuation and symbols dropped, except that the characters between two
// digits leave a mark, so "1.5" stays apart from "15") appears in the
// source's skeleton, from a word boundary to a word boundary, either
//
//   - exactly: the value differs from the source only in punctuation,
//     hyphenation and spacing ("e-mail" / "email", "Smith, John" / "Smith
//     John"), at any length; or
//   - with one edit (one letter inserted, deleted or replaced), when the
//     skeleton has at least FuzzyMinLength characters, the letters edited
//     belong to a script written with spaces between words (never a digit,
//     a Han character or kana), and every word of the value next to the
//     edit has at least FuzzyMinWord letters.
//
// So "Dana Cohen" never grounds "David Cohen" (three edits, and short),
// "Invoice 230" never grounds "Invoice 320" (digits), and "株式会社山本製作所
// 東京支店" never grounds "株式会社山田製作所東京支店" (a Han character is a word).
const (
	// FuzzyMinLength is the fewest letters and digits a value's skeleton
	// needs before one edit is forgiven.
	FuzzyMinLength = 12
	// FuzzyMinWord is the fewest letters of a word an edit may fall in:
	// "Smith" and "Smyth" are two names.
	FuzzyMinWord = 6
	// maxSeedHits bounds the places tried for each half of a value's
	// skeleton (see fuzzy), so a half that is everywhere cannot make one
	// value cost more than a few milliseconds.
	maxSeedHits = 2000
)

// skeleton is a text's letters and digits (see the rule above); at[i] is
// the offset in the normalised text of the character skeleton byte i came
// from.
type skeleton struct {
	text  string
	at    []int32
	grams *gramIndex // of the source's skeleton only
}

func skeletonOf(t string) *skeleton {
	text := make([]byte, 0, len(t))
	at := make([]int32, 0, len(t))
	lastDigit, gap := false, -1
	for i := 0; i < len(t); {
		c := t[i]
		r, w := rune(c), 1
		if c >= utf8.RuneSelf {
			r, w = utf8.DecodeRuneInString(t[i:])
		}
		keep := 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == barrier ||
			c >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r))
		if !keep {
			if gap < 0 {
				gap = i
			}
			i += w
			continue
		}
		digit := '0' <= c && c <= '9'
		if digit && lastDigit && gap >= 0 {
			text = append(text, '#')
			at = append(at, int32(gap))
		}
		text = append(text, t[i:i+w]...)
		for range w {
			at = append(at, int32(i))
		}
		lastDigit, gap = digit, -1
		i += w
	}
	return &skeleton{text: string(text), at: at}
}

// boundary reports whether skeleton offset i (a character start or the
// end) is a word boundary: an end of the text or a barrier, a place where
// characters were dropped, or next to a character of an unspaced script.
func (k *skeleton) boundary(i int) bool {
	if i <= 0 || i >= len(k.text) {
		return true
	}
	prev, w := utf8.DecodeLastRuneInString(k.text[:i])
	next, _ := utf8.DecodeRuneInString(k.text[i:])
	if prev == barrier || next == barrier || !isWordRune(prev) || !isWordRune(next) {
		return true
	}
	return k.at[i] != k.at[i-w]+int32(w)
}

// skeleton returns the source's skeleton, built on first use: most values
// never need it.
func (s *Source) skeleton() *skeleton {
	s.skelOnce.Do(func() {
		s.skel = skeletonOf(s.norm)
		s.skel.grams = newGramIndex(s.skel.text)
	})
	return s.skel
}

// fuzzy returns the byte range in the text of the first fuzzy match of a
// value's normalised text nv, by the rule above.
func (s *Source) fuzzy(nv string) (start, end int, ok bool) {
	nk := skeletonOf(nv)
	if nk.text == "" {
		return 0, 0, false
	}
	sk := s.skeleton()
	found := -1
	sk.grams.each(nk.text, 0, func(i int) bool {
		if sk.boundary(i) && sk.boundary(i+len(nk.text)) {
			found = i
			return false
		}
		return true
	})
	if found >= 0 {
		return s.skeletonRange(sk, found, found+len(nk.text))
	}
	needle := []rune(nk.text)
	if len(needle) < FuzzyMinLength {
		return 0, 0, false
	}
	words := wordLengths(nk, needle)
	half := len(needle) / 2
	best := [2]int{-1, -1}
	try := func(a, b int) {
		if best[0] < 0 || a < best[0] {
			best = [2]int{a, b}
		}
	}
	seeds(sk.grams, string(needle[:half]), func(p int) bool {
		a, b, ok := alignForward(sk, p, needle, words)
		if ok {
			try(a, b)
		}
		return !ok // the first hit of the first half is its earliest match
	})
	tail := string(needle[half:])
	seeds(sk.grams, tail, func(q int) bool {
		if best[0] >= 0 && q-len(string(needle[:half]))-utf8.UTFMax > best[0] {
			return false
		}
		if a, b, ok := alignBackward(sk, q+len(tail), needle, words); ok {
			try(a, b)
		}
		return true
	})
	if best[0] < 0 {
		return 0, 0, false
	}
	return s.skeletonRange(sk, best[0], best[1])
}

// seeds calls fn with each offset of seed in the skeleton, in order, at
// most maxSeedHits times, until fn returns false.
func seeds(g *gramIndex, seed string, fn func(int) bool) {
	n := 0
	g.each(seed, 0, func(i int) bool {
		n++
		return fn(i) && n < maxSeedHits
	})
}

// skeletonRange maps the skeleton range [i, j) to the text.
func (s *Source) skeletonRange(sk *skeleton, i, j int) (int, int, bool) {
	_, w := utf8.DecodeLastRuneInString(sk.text[:j])
	return s.rawStart(int(sk.at[i])), s.rawEnd(int(sk.at[j-w]) + w), true
}

// wordLengths returns, for each character of a value's skeleton, the length
// in characters of the word holding it.
func wordLengths(nk *skeleton, needle []rune) []int {
	out := make([]int, len(needle))
	start, off := 0, 0
	for i := range needle {
		if i > 0 && nk.boundary(off) {
			for j := start; j < i; j++ {
				out[j] = i - start
			}
			start = i
		}
		off += utf8.RuneLen(needle[i])
	}
	for j := start; j < len(needle); j++ {
		out[j] = len(needle) - start
	}
	return out
}

// edit is one difference between a value's skeleton and a window of the
// source's: kind 's' (a letter replaced), 'd' (a letter of the value
// missing from the source) or 'i' (a letter of the source not in the
// value), at needle position k (for 'i', before needle[k]); n is the
// window's length in characters; r the source letter of 's' and 'i'.
type edit struct {
	kind byte
	k, n int
	r    rune
	// joinPrev and joinNext say, for 'i', whether the source letter is in
	// one word with the letter before it and after it.
	joinPrev, joinNext bool
}

// oneEdit returns the alignments of needle against the start of src with
// exactly one edit.
func oneEdit(needle, src []rune) []edit {
	n := len(needle)
	k := 0
	for k < n && k < len(src) && needle[k] == src[k] {
		k++
	}
	var out []edit
	if k < len(src) && k < n && equalRunes(needle[k+1:], src, k+1) {
		out = append(out, edit{kind: 's', k: k, n: n, r: src[k]})
	}
	if k < n && equalRunes(needle[k+1:], src, k) {
		out = append(out, edit{kind: 'd', k: k, n: n - 1})
	}
	if k < len(src) && equalRunes(needle[k:], src, k+1) {
		out = append(out, edit{kind: 'i', k: k, n: n + 1, r: src[k]})
	}
	return out
}

// equalRunes reports whether src[at:] starts with want.
func equalRunes(want, src []rune, at int) bool {
	if at+len(want) > len(src) {
		return false
	}
	for i, r := range want {
		if src[at+i] != r {
			return false
		}
	}
	return true
}

// allowed reports whether an edit keeps a match fuzzy (the rule above).
func (e edit) allowed(needle []rune, words []int) bool {
	editable := func(r rune) bool { return unicode.IsLetter(r) && !unspaced(r) }
	switch e.kind {
	case 's':
		return editable(needle[e.k]) && editable(e.r) && words[e.k] >= FuzzyMinWord
	case 'd':
		return editable(needle[e.k]) && words[e.k] >= FuzzyMinWord
	}
	if !editable(e.r) || !e.joinPrev && !e.joinNext {
		return false // a letter on its own is a word, not a slip
	}
	if e.joinPrev && e.k > 0 && words[e.k-1] < FuzzyMinWord {
		return false
	}
	return !e.joinNext || e.k == len(needle) || words[e.k] >= FuzzyMinWord
}

// joins sets joinPrev and joinNext of an 'i' edit whose source letter is
// at skeleton offset off.
func (e *edit) joins(sk *skeleton, off int) {
	if e.kind == 'i' {
		e.joinPrev = !sk.boundary(off)
		e.joinNext = !sk.boundary(off + utf8.RuneLen(e.r))
	}
}

// alignForward tries the windows of the source skeleton starting at p.
func alignForward(sk *skeleton, p int, needle []rune, words []int) (int, int, bool) {
	if !sk.boundary(p) {
		return 0, 0, false
	}
	src := make([]rune, 0, len(needle)+1)
	for i := p; i < len(sk.text) && len(src) <= len(needle); {
		r, w := utf8.DecodeRuneInString(sk.text[i:])
		if r == barrier {
			break
		}
		src = append(src, r)
		i += w
	}
	for _, e := range oneEdit(needle, src) {
		e.joins(sk, p+len(string(src[:e.k])))
		end := p + len(string(src[:e.n]))
		if e.allowed(needle, words) && sk.boundary(end) {
			return p, end, true
		}
	}
	return 0, 0, false
}

// alignBackward tries the windows of the source skeleton ending at q.
func alignBackward(sk *skeleton, q int, needle []rune, words []int) (int, int, bool) {
	if !sk.boundary(q) {
		return 0, 0, false
	}
	src := make([]rune, 0, len(needle)+1)
	for i := q; i > 0 && len(src) <= len(needle); {
		r, w := utf8.DecodeLastRuneInString(sk.text[:i])
		if r == barrier {
			break
		}
		src = append(src, r)
		i -= w
	}
	rev := make([]rune, len(needle))
	for i, r := range needle {
		rev[len(needle)-1-i] = r
	}
	n := len(needle)
	for _, e := range oneEdit(rev, src) {
		fwd := edit{kind: e.kind, n: e.n, r: e.r, k: n - 1 - e.k}
		if e.kind == 'i' {
			fwd.k = n - e.k
			fwd.joins(sk, q-len(string(src[:e.k+1])))
		}
		start := q - len(string(src[:e.n]))
		if fwd.allowed(needle, words) && sk.boundary(start) {
			return start, q, true
		}
	}
	return 0, 0, false
}
