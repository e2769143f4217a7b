package chunk

import (
	"unicode"
	"unicode/utf8"
)

// Tokens estimates how many tokens a model's tokenizer makes of s, without
// any tokenizer: one token for every 4 bytes of UTF-8 (about right for
// English and other Latin text, which runs 3.5 to 4.5 characters a token;
// a Cyrillic, Greek, Arabic or Hebrew letter, 2 bytes, counts half a
// token), and one token for each code point of a script written without
// spaces or with a syllable a character ([Wide]: Chinese, Japanese,
// Korean, Thai and their neighbours), where tokenizers give about one a
// character. The two parts are added, and the sum rounded up.
//
// It is an estimate: a provider's count of the same text differs by a few
// tens of percent either way. It is what Split sizes chunks by, so that
// the strategies that send chunks and a dry run that prices them agree.
func Tokens(s string) int {
	units := 0
	for _, r := range s {
		units += runeUnits(r)
	}
	return (units + unitsPerToken - 1) / unitsPerToken
}

// unitsPerToken: Tokens counts in quarter tokens, so that a byte of Latin
// text and a wide code point add up exactly.
const unitsPerToken = 4

// runeUnits is r's weight in quarter tokens: 4 for a wide code point, its
// UTF-8 length for any other (utf8.RuneError counts 1: Split refuses
// invalid UTF-8, and a Go string ranged over reads one such byte as it).
func runeUnits(r rune) int {
	if Wide(r) {
		return unitsPerToken
	}
	if r == utf8.RuneError {
		return 1
	}
	return utf8.RuneLen(r)
}

// Wide reports whether Tokens counts r as a token of its own: a code point
// of the Han, Hiragana, Katakana, Hangul, Bopomofo, Thai, Lao, Khmer or
// Myanmar scripts, or of the CJK symbols and punctuation or the full-width
// forms.
func Wide(r rune) bool {
	if r < 0x0E00 {
		return false
	}
	return noSpaces(r) || unicode.Is(unicode.Hangul, r) ||
		r >= 0x3000 && r <= 0x303F || r >= 0xFF00 && r <= 0xFFEF
}

// noSpaces reports whether r belongs to a script written without spaces
// between words: a chunk may end between two of its code points.
func noSpaces(r rune) bool {
	if r < 0x0E00 {
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Bopomofo,
		unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar)
}
