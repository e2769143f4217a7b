// Package chunk splits a long document into chunks of about a given
// number of tokens, each ending where the text allows a break, for the
// strategies that extract from a document one chunk at a time.
//
// A chunk ends at the strongest break in the second half of its budget,
// trying in turn:
//
//  1. the start of a Markdown heading (a line "# ..." to "###### ...", or
//     the title line of a "===" or "---" underline), outside fenced code;
//  2. the start of a paragraph (a line after a blank line);
//  3. the start of a line;
//  4. the start of a sentence (after ".", "!", "?" and a space, or after
//     "。", "！", "？" and the other sentence ends of the scripts that use
//     them, closing quotes and brackets included);
//  5. the start of a word (after white space), or, in a script written
//     without spaces between words (Chinese, Japanese, Thai, ...), between
//     two of its code points;
//
// and the latest of the strongest it finds. When the second half holds
// none of these, the whole budget is searched; when a single word is
// longer than the budget (a URL, an encoded blob), it is cut between two
// code points, the only place left. A chunk never ends inside a UTF-8
// sequence or a grapheme cluster: not before a combining mark, a joiner,
// a variation selector or an emoji modifier, not after a zero-width
// joiner, not between "\r" and "\n" nor inside a pair of regional
// indicators (a flag). A cluster longer than the whole budget makes a
// chunk of its own, larger than asked.
//
// With an overlap, each chunk after the first starts up to Overlap tokens
// before the previous one ended, on a break too: the earliest sentence
// start within that reach, else the earliest word start, else the
// earliest code point boundary, else where the previous chunk ended. A
// chunk that ends before a heading is not overlapped: the next starts at
// the heading, a new section whose chunk the end of the last one would
// only crowd.
//
// Offsets are Unicode code point offsets into the document, half open,
// the spans of package evidence: a Python str slice doc[Start:End] is the
// chunk's text. Byte offsets are given too, for Go's slicing.
//
// Sizes are estimates ([Tokens]), not a tokenizer's counts.
//
// It is a pure package: values in, values out. It does no I/O and never
// logs.
package chunk

import (
	"errors"
	"fmt"
	"sort"
	"unicode/utf8"
)

// Options are how Split sizes its chunks.
type Options struct {
	// Tokens is the size of a chunk, in tokens as Tokens estimates them: a
	// chunk holds at most this many, unless a single grapheme cluster is
	// larger. It must be positive.
	Tokens int
	// Overlap is how many tokens of the end of a chunk the next one
	// repeats, at most: 0 for none. It must be less than Tokens.
	Overlap int
}

// Chunk is one chunk of a document.
type Chunk struct {
	// N is the chunk's number: 0 for the first, in document order.
	N int
	// Text is the chunk's text, the document's code points [Start, End).
	Text string
	// Start and End are code point offsets into the document: the chunk is
	// its code points Start to End-1.
	Start, End int
	// StartByte and EndByte are the same offsets in bytes: Text is
	// doc[StartByte:EndByte].
	StartByte, EndByte int
}

// MaxBytes is the longest document Split takes: 256 MiB.
const MaxBytes = 256 << 20

// ErrOptions is matched (errors.Is) by the error of options Split cannot
// use.
var ErrOptions = errors.New("invalid chunk options")

// ErrDocument is matched (errors.Is) by the error of a document Split
// cannot take: not UTF-8, or longer than MaxBytes.
var ErrDocument = errors.New("invalid document")

// Split splits doc into chunks of at most opt.Tokens tokens each, the
// next repeating up to opt.Overlap tokens of the previous one, each ending
// at the strongest break the text offers (see the package comment). The
// chunks cover the document in order: the first starts at 0, the last
// ends at its end, and each starts at or before the end of the previous
// one and ends after it. An empty document has no chunks.
//
// The error names what is wrong: a size or an overlap out of range
// (matching ErrOptions), or a document that is not UTF-8, with the byte
// offset of the first invalid byte, or too long (matching ErrDocument).
func Split(doc string, opt Options) ([]Chunk, error) {
	switch {
	case opt.Tokens <= 0:
		return nil, fmt.Errorf("%w: chunk size %d tokens: it must be at least 1", ErrOptions, opt.Tokens)
	case opt.Overlap < 0:
		return nil, fmt.Errorf("%w: overlap %d tokens: it must be 0 or more", ErrOptions, opt.Overlap)
	case opt.Overlap >= opt.Tokens:
		return nil, fmt.Errorf("%w: overlap %d tokens is not less than the chunk size %d: each chunk would repeat the whole of the previous one", ErrOptions, opt.Overlap, opt.Tokens)
	case opt.Tokens > MaxBytes:
		return nil, fmt.Errorf("%w: chunk size %d tokens: it must be at most %d", ErrOptions, opt.Tokens, MaxBytes)
	case len(doc) > MaxBytes:
		return nil, fmt.Errorf("%w: %d bytes, more than the %d Split takes", ErrDocument, len(doc), MaxBytes)
	}
	if !utf8.ValidString(doc) {
		return nil, fmt.Errorf("%w: not UTF-8: byte offset %d (0x%02x) starts no valid UTF-8 sequence", ErrDocument, invalidAt(doc), doc[invalidAt(doc)])
	}
	if doc == "" {
		return []Chunk{}, nil
	}
	s := newSplitter(doc)
	budget, reach := int32(opt.Tokens*unitsPerToken), int32(opt.Overlap*unitsPerToken)
	var out []Chunk
	start, prevEnd := 0, 0
	for {
		end := s.end(start, prevEnd, budget)
		if start < prevEnd && s.cum[end]-s.cum[start] > budget {
			// A cluster past the previous end leaves no break within the
			// budget: this chunk repeats nothing.
			start = prevEnd
			end = s.end(start, prevEnd, budget)
		}
		out = append(out, Chunk{N: len(out), Text: doc[s.off[start]:s.off[end]], Start: start, End: end,
			StartByte: int(s.off[start]), EndByte: int(s.off[end])})
		if end == s.n {
			return out, nil
		}
		next := end
		if s.lvl[end] < breakHeading {
			next = s.overlapStart(start, end, reach)
		}
		start, prevEnd = next, end
	}
}

// invalidAt returns the byte offset of the first byte of doc that starts
// no valid UTF-8 sequence.
func invalidAt(doc string) int {
	for i, r := range doc {
		if r == utf8.RuneError {
			if _, w := utf8.DecodeRuneInString(doc[i:]); w == 1 {
				return i
			}
		}
	}
	return len(doc)
}

// splitter holds a document read for splitting, by code point: for each
// code point offset i (0 to n), off[i] is its byte offset, cum[i] the
// weight in quarter tokens of the code points before it, and lvl[i] the
// strength of a break there (see level).
type splitter struct {
	n   int
	off []int32
	cum []int32
	lvl []level
}

func newSplitter(doc string) *splitter {
	n := utf8.RuneCountInString(doc)
	s := &splitter{n: n, off: make([]int32, n+1), cum: make([]int32, n+1)}
	runes := make([]rune, 0, n)
	i := 0
	for b, r := range doc {
		s.off[i] = int32(b)
		s.cum[i+1] = s.cum[i] + int32(runeUnits(r))
		runes = append(runes, r)
		i++
	}
	s.off[n] = int32(len(doc))
	s.lvl = levels(runes)
	return s
}

// end returns where the chunk starting at start ends: the strongest break
// of at least word strength in the second half of the budget, else in the
// whole budget, else the latest code point boundary in it, else (a
// cluster longer than the budget) the first boundary past it. It is past
// prevEnd, the end of the previous chunk, so that every chunk adds text.
func (s *splitter) end(start, prevEnd int, budget int32) int {
	if s.cum[s.n]-s.cum[start] <= budget {
		return s.n
	}
	// limit: the last offset within the budget.
	limit := start + sort.Search(s.n-start+1, func(k int) bool { return s.cum[start+k]-s.cum[start] > budget }) - 1
	lo := max(start, prevEnd) + 1
	half := start + sort.Search(s.n-start+1, func(k int) bool { return s.cum[start+k]-s.cum[start] >= budget/2 })
	if b := s.strongest(max(half, lo), limit, breakWord); b > 0 {
		return b
	}
	if b := s.strongest(lo, limit, breakWord); b > 0 {
		return b
	}
	if b := s.strongest(lo, limit, breakCluster); b > 0 {
		return b
	}
	for b := max(limit+1, lo); b < s.n; b++ {
		if s.lvl[b] >= breakCluster {
			return b
		}
	}
	return s.n
}

// strongest returns the latest offset in [lo, hi] with the strongest
// break there of at least min, or -1 when there is none.
func (s *splitter) strongest(lo, hi int, least level) int {
	best, at := least-1, -1
	for i := hi; i >= lo; i-- {
		if l := s.lvl[i]; l > best {
			best, at = l, i
			if l == breakHeading {
				break
			}
		}
	}
	return at
}

// overlapStart returns where the chunk after the one [start, end) starts:
// the earliest sentence start, else word start, else code point boundary
// at most reach quarter tokens before end and after start; end when there
// is none.
func (s *splitter) overlapStart(start, end int, reach int32) int {
	if reach == 0 {
		return end
	}
	from := start + 1 + sort.Search(end-start-1, func(k int) bool { return s.cum[end]-s.cum[start+1+k] <= reach })
	for _, least := range []level{breakSentence, breakWord, breakCluster} {
		for i := from; i < end; i++ {
			if s.lvl[i] >= least {
				return i
			}
		}
	}
	return end
}
