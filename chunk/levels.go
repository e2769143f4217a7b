package chunk

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// level is the strength of a break before a code point: how good a place
// it is for a chunk to end. The strongest break at an offset is its level.
type level int8

const (
	breakNone     level = -1 // inside a grapheme cluster: never
	breakCluster  level = 0  // between two grapheme clusters
	breakWord     level = 1  // before a word, or between two code points of a script without spaces
	breakSentence level = 2  // before a sentence
	breakLine     level = 3  // before a line
	breakPara     level = 4  // before a paragraph
	breakHeading  level = 5  // before a Markdown heading
)

// levels returns the strength of a break before each code point of runes
// and at its end: out[i] is that before runes[i], out[0] and out[len] are
// the document's ends, where a chunk may always start or end.
func levels(runes []rune) []level {
	out := make([]level, len(runes)+1)
	out[0], out[len(runes)] = breakHeading, breakHeading
	// Within lines: clusters, words and sentences.
	// ended is the code point that ended a sentence the text up to prev
	// ends (white space after it aside), 0 when it ends none.
	var ended rune
	ris := 0 // regional indicators in a row ending with prev
	for i := 1; i < len(runes); i++ {
		prev, r := runes[i-1], runes[i]
		if !unicode.IsSpace(prev) {
			ended = endOf(prev, ended)
		}
		if regional(prev) {
			ris++
		} else {
			ris = 0
		}
		switch {
		case !clusterBreak(prev, r, ris):
			out[i] = breakNone
		case unicode.IsSpace(r):
			out[i] = breakCluster
		case unicode.IsSpace(prev) && ended != 0:
			out[i] = breakSentence
		case unicode.IsSpace(prev):
			out[i] = breakWord
		case closesSentence(ended) && !closer(r):
			// 。！？ end a sentence with no space after them.
			out[i] = breakSentence
		case (noSpaces(prev) || noSpaces(r)) && !unicode.IsPunct(r):
			out[i] = breakWord
		default:
			out[i] = breakCluster
		}
	}
	markLines(runes, out)
	return out
}

// markLines raises the breaks at line starts: a line, a paragraph (after a
// blank line), a heading (an ATX heading line, or the title line of a
// setext underline), none of them inside fenced code but the line.
func markLines(runes []rune, out []level) {
	fence := ""         // the fence of the code block the line is in, "" outside
	prevBlank := true   // the previous line was blank (or there was none)
	prevStart := -1     // where the previous line started
	prevInFence := true // the previous line was inside fenced code (or there was none)
	for start := 0; start < len(runes); {
		end := start
		for end < len(runes) && runes[end] != '\n' {
			end++
		}
		line := strings.TrimRight(string(runes[start:end]), "\r")
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		blank := strings.TrimSpace(line) == ""
		inFence := fence != ""
		lvl := breakLine
		switch {
		case blank:
			lvl = breakCluster
		case inFence:
		case indent <= 3 && atxHeading(trimmed):
			lvl = breakHeading
		case prevBlank:
			lvl = breakPara
		}
		if !inFence && !prevBlank && !prevInFence && indent <= 3 && underline(trimmed) && prevStart > 0 {
			out[prevStart] = max(out[prevStart], breakHeading)
		}
		if start > 0 && out[start] != breakNone {
			out[start] = max(out[start], lvl)
		}
		if indent <= 3 {
			if f := fenceOf(trimmed); f != "" {
				switch {
				case fence == "":
					fence = f
				case strings.HasPrefix(f, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, f[:1])) == "":
					fence = ""
				}
			}
		}
		prevBlank, prevStart, prevInFence = blank, start, inFence
		start = end + 1
	}
}

// atxHeading reports whether line (without its indent) is an ATX heading:
// 1 to 6 "#" and then a space, a tab or nothing.
func atxHeading(line string) bool {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	return n >= 1 && n <= 6 && (n == len(line) || line[n] == ' ' || line[n] == '\t')
}

// underline reports whether line (without its indent) underlines a setext
// heading: only "=" or only "-", and trailing spaces.
func underline(line string) bool {
	line = strings.TrimRight(line, " \t")
	return line != "" && (strings.Trim(line, "=") == "" || strings.Trim(line, "-") == "")
}

// fenceOf returns the fence line opens or closes (three or more "`" or
// "~"), "" when it is no fence.
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		f := line[:len(line)-len(strings.TrimLeft(line, c))]
		if len(f) >= 3 {
			return f
		}
	}
	return ""
}

// endOf returns the code point that ended the sentence the text read so
// far ends, after r (not white space), 0 when it ends none: r when it ends
// a sentence, ended (the code point that ended one before r) when r closes
// a quote or a bracket.
func endOf(r, ended rune) rune {
	if r < utf8.RuneSelf {
		switch r {
		case '.', '!', '?':
			return r
		case ')', ']', '}', '"', '\'':
			return ended
		}
		return 0
	}
	switch {
	case strings.ContainsRune(".!?…‼⁇⁈⁉", r) || closesSentence(r):
		return r
	case closer(r):
		return ended
	}
	return 0
}

// closesSentence reports whether r ends a sentence without a space after
// it: the full stops, exclamation and question marks of Chinese and
// Japanese (full width and half width), and the danda of the Indic
// scripts, the Arabic question mark and the Urdu full stop, which a space
// usually follows, but not always.
func closesSentence(r rune) bool {
	return r != 0 && strings.ContainsRune("。！？｡．।॥؟۔", r)
}

// closer reports whether r closes a quote or a bracket.
func closer(r rune) bool {
	return unicode.Is(unicode.Pe, r) || unicode.Is(unicode.Pf, r) || strings.ContainsRune("\"'", r)
}

// clusterBreak reports whether a grapheme cluster may end between prev and
// r (ris: the regional indicators in a row ending with prev), after the
// rules of Unicode's extended grapheme clusters (UAX #29) a chunk could
// break: not between "\r" and "\n", not before a combining mark, a
// zero-width joiner or non-joiner, a variation selector, an emoji modifier
// or a tag, not after a zero-width joiner or a prepended mark, not inside
// a Hangul syllable written in jamo, and not inside a pair of regional
// indicators.
func clusterBreak(prev, r rune, ris int) bool {
	switch {
	case prev == '\r' && r == '\n':
		return false
	case extends(r):
		return false
	case prev == '\u200d' || prepends(prev):
		return false
	case hangulLead(prev) && (hangulLead(r) || hangulVowelOrTail(r) || hangulSyllable(r)):
		return false
	case hangulVowelOrTail(r) && (hangulVowelOrTail(prev) || hangulSyllable(prev)):
		return false
	case regional(r) && ris%2 == 1:
		return false
	}
	return true
}

// regional reports whether r is a regional indicator, half a flag.
func regional(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }

// extends reports whether r continues the cluster before it.
func extends(r rune) bool {
	if r < 0x0300 {
		return false
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc, unicode.Other_Grapheme_Extend, unicode.Variation_Selector) ||
		r == '\u200c' || r == '\u200d' ||
		r >= 0x1F3FB && r <= 0x1F3FF || // emoji modifiers (skin tones)
		r >= 0xE0020 && r <= 0xE007F // tags (subdivision flags)
}

// prepends reports whether r is a prepended concatenation mark, which
// belongs to the cluster after it (the Arabic number signs and their
// kind).
func prepends(r rune) bool {
	return r >= 0x0600 && r <= 0x0605 || r == 0x06DD || r == 0x070F || r == 0x0890 || r == 0x0891 || r == 0x08E2 || r == 0x110BD || r == 0x110CD
}

// hangulLead reports whether r is a leading consonant jamo.
func hangulLead(r rune) bool {
	return r >= 0x1100 && r <= 0x115F || r >= 0xA960 && r <= 0xA97C
}

// hangulSyllable reports whether r is a precomposed Hangul syllable.
func hangulSyllable(r rune) bool { return r >= 0xAC00 && r <= 0xD7A3 }

// hangulVowelOrTail reports whether r is a vowel or trailing consonant
// jamo.
func hangulVowelOrTail(r rune) bool {
	return r >= 0x1160 && r <= 0x11FF || r >= 0xD7B0 && r <= 0xD7FB
}
