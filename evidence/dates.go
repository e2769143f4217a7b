package evidence

import (
	"slices"
	"strings"
	"time"

	"golang.org/x/text/unicode/norm"
)

// Dates are read from the normalised text (lower case, without
// diacritics, full-width digits as ASCII) in these forms:
//
//   - numeric, year first: 2027-01-15, 2027/01/15, 2027.1.15;
//   - numeric, year last: 15.01.2027 is day first; 01/15/2027 and
//     01-15-2027 are read both ways, day first and month first, and ground
//     a date equal under either reading (01/02/2027 grounds 2027-01-02 and
//     2027-02-01; 01/15/2027 only 2027-01-15);
//   - day, month name, year: 1 January 2027, 1st of January, 2027,
//     15-Jan-2027, 3. März 2027, 1er mars 2027, 3 de marzo de 2027;
//   - month name, day, year: January 1, 2027, March 3rd, 2027, Jan. 15 2027;
//   - year 年 month 月 day 日 (Japanese, Chinese; 号 for 日 too) and year 년
//     month 월 day 일 (Korean), with or without spaces.
//
// Years have four digits. Month names are English, German, French,
// Spanish and Italian, in full or abbreviated.

// monthNames maps a normalised month name or abbreviation to its month.
var monthNames = map[string]time.Month{}

func init() {
	for m, names := range [12]string{
		"january jan januar janner janvier janv enero gennaio gen",
		"february feb februar feber fevrier fevr fev febrero febbraio",
		"march mar marz maerz mars marzo",
		"april apr avril avr abril aprile",
		"may mai mayo maggio mag",
		"june jun juni juin junio giugno giu",
		"july jul juli juillet juil julio luglio lug",
		"august aug aout agosto ago",
		"september sep sept septembre septiembre setiembre settembre set",
		"october oct oktober okt octobre octubre ottobre ott",
		"november nov novembre noviembre",
		"december dec dezember dez decembre diciembre dicembre dic",
	} {
		for _, n := range strings.Fields(names) {
			monthNames[n] = time.Month(m + 1)
		}
	}
}

// dateKey is a date as the number yyyymmdd.
type dateKey int32

// dateHit is a date read at some offset of a text and the offset past it.
type dateHit struct {
	key dateKey
	end int
}

// datesAt returns the dates written from t[i], a digit that follows no
// digit or a letter that follows no letter.
func datesAt(t string, i int, out []dateHit) []dateHit {
	if isDigit(t[i]) {
		out = numericDate(t, i, out)
		out = dayFirstDate(t, i, out)
		return cjkDate(t, i, out)
	}
	return monthFirstDate(t, i, out)
}

// dateOf returns the key of a date, or 0 when there is no such day.
func dateOf(y, m, d int) dateKey {
	if y < 1000 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31 {
		return 0
	}
	if t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC); t.Day() != d {
		return 0
	}
	return dateKey(y*10000 + m*100 + d)
}

// number reads the digits at t[i], at most maxLen of them: their value,
// count and the offset past them (n is 0 when there are none or too many).
func number(t string, i, maxLen int) (v, n, end int) {
	end = digitsEnd(t, i)
	n = end - i
	if n == 0 || n > maxLen {
		return 0, 0, i
	}
	for _, c := range t[i:end] {
		v = v*10 + int(c-'0')
	}
	return v, n, end
}

// numericDate reads 2027-01-15, 15.01.2027, 01/15/2027 and their kin.
func numericDate(t string, i int, out []dateHit) []dateHit {
	a, na, j := number(t, i, 4)
	if na == 0 || j >= len(t) || !strings.ContainsRune("-/.", rune(t[j])) {
		return out
	}
	sep := t[j]
	if i >= 2 && t[i-1] == sep && isDigit(t[i-2]) {
		return out // the middle of 1.15.01.2027 or 2027-01-15-3
	}
	b, nb, k := number(t, j+1, 2)
	if nb == 0 || k >= len(t) || t[k] != sep {
		return out
	}
	c, nc, end := number(t, k+1, 4)
	if nc == 0 || end+1 < len(t) && t[end] == sep && isDigit(t[end+1]) {
		return out
	}
	add := func(y, m, d int) {
		if key := dateOf(y, m, d); key != 0 {
			out = append(out, dateHit{key, end})
		}
	}
	switch {
	case na == 4 && nc <= 2:
		add(a, b, c)
	case na <= 2 && nc == 4 && sep == '.':
		add(c, b, a)
	case na <= 2 && nc == 4:
		add(c, b, a)
		if a != b {
			add(c, a, b)
		}
	}
	return out
}

// ordinal suffixes after a day: 1st, 2nd, 3rd, 4th, 1er, 1re, 1º (read as
// "o" once normalised).
var ordinals = []string{"st", "nd", "rd", "th", "er", "re", "o"}

// dayFirstDate reads 1 January 2027, 3. März 2027, 1er mars 2027, 15-Jan-2027,
// 3 de marzo de 2027.
func dayFirstDate(t string, i int, out []dateHit) []dateHit {
	d, nd, j := number(t, i, 2)
	if nd == 0 {
		return out
	}
	j = skipOrdinal(t, j)
	if j < len(t) && t[j] == '.' {
		j++
	}
	j = skipGap(t, j, " -/", "de", "of")
	m, j, ok := monthAt(t, j)
	if !ok {
		return out
	}
	y, end, ok := yearAfter(t, j, " -/,", "de", "del")
	if !ok {
		return out
	}
	if key := dateOf(y, int(m), d); key != 0 {
		out = append(out, dateHit{key, end})
	}
	return out
}

// monthFirstDate reads January 1, 2027, March 3rd, 2027, Jan. 15 2027.
func monthFirstDate(t string, i int, out []dateHit) []dateHit {
	m, j, ok := monthAt(t, i)
	if !ok {
		return out
	}
	k := skipGap(t, j, " -")
	if k == j {
		return out
	}
	d, nd, j := number(t, k, 2)
	if nd == 0 {
		return out
	}
	y, end, ok := yearAfter(t, skipOrdinal(t, j), " ,")
	if !ok {
		return out
	}
	if key := dateOf(y, int(m), d); key != 0 {
		out = append(out, dateHit{key, end})
	}
	return out
}

// cjkDate reads 2026年12月1日, 2026 年 12 月 1 日, 2026년 12월 1일.
func cjkDate(t string, i int, out []dateHit) []dateHit {
	y, ny, j := number(t, i, 4)
	if ny != 4 {
		return out
	}
	var parts [2]int
	j, ok := cjkMark(t, j, "年", koYear)
	for p := range parts {
		if !ok {
			return out
		}
		v, n, k := number(t, skipGap(t, j, " "), 2)
		if n == 0 {
			return out
		}
		parts[p] = v
		if p == 0 {
			j, ok = cjkMark(t, k, "月", koMonth)
		} else {
			j, ok = cjkMark(t, k, "日", "号", koDay)
		}
	}
	if !ok {
		return out
	}
	if key := dateOf(y, parts[0], parts[1]); key != 0 {
		out = append(out, dateHit{key, j})
	}
	return out
}

// The Korean marks as the normalised text has them: Hangul syllables
// decompose into their letters (jamo).
var (
	koYear  = norm.NFKD.String("년")
	koMonth = norm.NFKD.String("월")
	koDay   = norm.NFKD.String("일")
)

// cjkMark reads one of marks at t[i], after optional spaces, and returns
// the offset past it.
func cjkMark(t string, i int, marks ...string) (int, bool) {
	i = skipGap(t, i, " ")
	for _, m := range marks {
		if strings.HasPrefix(t[i:], m) {
			return i + len(m), true
		}
	}
	return i, false
}

func skipOrdinal(t string, j int) int {
	for _, o := range ordinals {
		if strings.HasPrefix(t[j:], o) && !isWordRune(firstRune(t[j+len(o):])) {
			return j + len(o)
		}
	}
	return j
}

// skipGap skips separators (any of chars) and connecting words ("de",
// "of") at t[i], up to a few characters, and returns the offset past them.
func skipGap(t string, i int, chars string, words ...string) int {
	start := i
	for i < len(t) && i-start < 8 {
		if strings.IndexByte(chars, t[i]) >= 0 {
			i++
			continue
		}
		w := wordAt(t, i)
		if i > start && t[i-1] == ' ' && containsString(words, w) && i+len(w) < len(t) && t[i+len(w)] == ' ' {
			i += len(w) + 1
			continue
		}
		break
	}
	return i
}

// wordAt returns the run of ASCII letters at t[i].
func wordAt(t string, i int) string {
	j := i
	for j < len(t) && 'a' <= t[j] && t[j] <= 'z' {
		j++
	}
	return t[i:j]
}

// monthAt reads a month name at t[i], a whole word, with an optional
// period after it.
func monthAt(t string, i int) (time.Month, int, bool) {
	if i > 0 && isWordRune(lastRune(t[:i])) {
		return 0, i, false
	}
	w := wordAt(t, i)
	if len(w) < 3 || len(w) > 9 {
		return 0, i, false
	}
	m, ok := monthNames[w]
	if !ok || isWordRune(firstRune(t[i+len(w):])) {
		return 0, i, false
	}
	j := i + len(w)
	if j < len(t) && t[j] == '.' {
		j++
	}
	return m, j, true
}

// yearAfter reads a gap (chars, connecting words) and then four digits
// that no digit follows.
func yearAfter(t string, j int, chars string, words ...string) (year, end int, ok bool) {
	k := skipGap(t, j, chars, words...)
	if k == j {
		return 0, j, false
	}
	y, n, end := number(t, k, 4)
	if n != 4 {
		return 0, j, false
	}
	return y, end, true
}

// textDateKeys returns the dates a string value reads as when all of it
// (normalised) is one written date, nil otherwise.
func textDateKeys(t string) []dateKey {
	if t == "" {
		return nil
	}
	var keys []dateKey
	for _, h := range datesAt(t, 0, nil) {
		if h.end == len(t) && !slices.Contains(keys, h.key) {
			keys = append(keys, h.key)
		}
	}
	return keys
}
