package sim

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// genPattern generates a string matching the (unanchored, ECMA-ish) regular
// expression pat by walking its syntax tree. It handles literals, classes,
// repetition, alternation and groups; it reports false for a pattern it cannot
// parse or whose output does not match, and the caller falls back to words.
func genPattern(rng *rand.Rand, pat string) (string, bool) {
	cp := compilePattern(pat)
	if cp == nil {
		return "", false
	}
	var b strings.Builder
	if !emitRegexp(&b, cp.tree, rng, 0) {
		return "", false
	}
	s := b.String()
	return s, cp.re.MatchString(s)
}

// compiledPattern is a pattern parsed for generation and compiled for the
// check; both are read-only and shared.
type compiledPattern struct {
	tree *syntax.Regexp
	re   *regexp.Regexp
}

// patternCache holds compiled patterns (nil for ones that do not compile);
// it stops growing at patternCacheMax entries.
var (
	patternCache    sync.Map
	patternCacheLen atomic.Int64
)

const patternCacheMax = 4096

func compilePattern(pat string) *compiledPattern {
	if v, ok := patternCache.Load(pat); ok {
		return v.(*compiledPattern)
	}
	var cp *compiledPattern
	tree, err1 := syntax.Parse(pat, syntax.Perl)
	re, err2 := regexp.Compile(pat)
	if err1 == nil && err2 == nil {
		cp = &compiledPattern{tree: tree, re: re}
	}
	if patternCacheLen.Add(1) <= patternCacheMax {
		patternCache.Store(pat, cp)
	}
	return cp
}

func emitRegexp(b *strings.Builder, re *syntax.Regexp, rng *rand.Rand, depth int) bool {
	if depth > 64 || b.Len() > 4096 {
		return false
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			b.WriteRune(r)
		}
		return true
	case syntax.OpCharClass:
		r, ok := pickRune(re.Rune, rng)
		if ok {
			b.WriteRune(r)
		}
		return ok
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('x')
		return true
	case syntax.OpCapture:
		return emitRegexp(b, re.Sub[0], rng, depth+1)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, 2
		switch re.Op {
		case syntax.OpPlus:
			lo, hi = 1, 3
		case syntax.OpQuest:
			lo, hi = 0, 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
			if hi < 0 {
				hi = lo + 2
			}
		}
		n := lo
		if hi > lo {
			n += rng.IntN(hi - lo + 1)
		}
		for range n {
			if !emitRegexp(b, re.Sub[0], rng, depth+1) {
				return false
			}
		}
		return true
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !emitRegexp(b, s, rng, depth+1) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		return emitRegexp(b, re.Sub[rng.IntN(len(re.Sub))], rng, depth+1)
	}
	return false
}

// pickRune picks a rune from a class's range pairs, preferring printable
// ASCII so that generated identifiers look like the ones models write.
func pickRune(ranges []rune, rng *rand.Rand) (rune, bool) {
	type span struct{ lo, hi rune }
	var ascii, all []span
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		all = append(all, span{lo, hi})
		if l, h := max(lo, 0x21), min(hi, 0x7e); l <= h {
			ascii = append(ascii, span{l, h})
		}
	}
	pool := ascii
	if len(pool) == 0 {
		pool = all
	}
	if len(pool) == 0 {
		return 0, false
	}
	s := pool[rng.IntN(len(pool))]
	r := s.lo + rune(rng.IntN(int(s.hi-s.lo)+1))
	if !utf8.ValidRune(r) {
		r = s.lo
	}
	return r, utf8.ValidRune(r)
}
