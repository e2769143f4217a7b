package evidence

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A number is written as digit groups with separators between them:
// "1,249.99", "1.249,99", "3 450,00", "1'249.99". The two conventions read
// it:
//
//   - English: ",", a space or an apostrophe groups thousands; "." is the
//     decimal point.
//   - Continental: ".", a space or an apostrophe groups thousands; "," is
//     the decimal comma.
//
// A written number is read under each convention it is valid under (one
// kind of grouping separator, first group of 1 to 3 digits, every later
// group of exactly 3, then at most one decimal separator), and grounds a
// value equal to any of its readings: "1.249" grounds both 1.249 and 1249,
// "1,5" grounds 1.5. A number valid under neither ("15.01.2027",
// "192.168.0.1") is read as each of its digit groups. Spaces also separate
// numbers ("pages 3 450"), so each space-separated part is read on its own
// too. A "-" or "−" right before the digits (not after a letter or digit)
// makes the number negative and is part of its span; a currency symbol or
// code next to it is not part of either.

// groupSeparators are the characters that may separate digit groups.
var groupSeparators = []string{",", ".", " ", "'", "\u2019"}

// currencyCodes are the ISO 4217 codes read as currencies next to a number:
// "USD18,500" is 18500, where "A123" is no number. The list is the
// currencies most traded, not all of them.
var currencyCodes = map[string]bool{
	"usd": true, "eur": true, "gbp": true, "jpy": true, "chf": true, "cny": true, "rmb": true,
	"cad": true, "aud": true, "nzd": true, "hkd": true, "sgd": true, "inr": true, "krw": true,
	"sek": true, "nok": true, "dkk": true, "pln": true, "czk": true, "huf": true, "brl": true,
	"mxn": true, "zar": true, "try": true, "rub": true, "ils": true, "aed": true, "sar": true,
	"thb": true, "twd": true,
}

type span struct{ start, end int }

// numberChain is a run of digit groups in normalised text: groups[i] is a
// digit group, seps[i] the separator before groups[i] (seps[0] is "").
type numberChain struct {
	neg    bool
	sign   int // the byte offset of the sign, when neg
	groups []span
	seps   []string
}

// scan reads into c the digit groups starting at t[i], a digit that
// follows no digit, and returns the offset past them. c keeps its slices'
// memory from one scan to the next.
func (c *numberChain) scan(t string, i int) int {
	c.neg, c.sign = false, 0
	c.groups, c.seps = c.groups[:0], c.seps[:0]
	j := digitsEnd(t, i)
	c.groups = append(c.groups, span{i, j})
	c.seps = append(c.seps, "")
	for {
		sep := ""
		for _, s := range groupSeparators {
			if strings.HasPrefix(t[j:], s) {
				sep = s
				break
			}
		}
		k := j + len(sep)
		if sep == "" || k >= len(t) || !isDigit(t[k]) {
			return j
		}
		j = digitsEnd(t, k)
		c.groups = append(c.groups, span{k, j})
		c.seps = append(c.seps, sep)
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digitsEnd(t string, i int) int {
	for i < len(t) && isDigit(t[i]) {
		i++
	}
	return i
}

// numberStart reports whether a number may start at t[i] (a digit that
// follows no digit) and whether a minus sign before it makes it negative:
// not when a letter of a spaced script is glued to it ("A123", "v2"),
// unless those letters are a currency code ("USD18,500").
func numberStart(t string, i int) (ok, neg bool, sign int) {
	if i == 0 {
		return true, false, 0
	}
	before, w := utf8.DecodeLastRuneInString(t[:i])
	if before == '-' || before == '\u2212' {
		s := i - w
		if s == 0 {
			return true, true, s
		}
		prev, _ := utf8.DecodeLastRuneInString(t[:s])
		return true, !isWordRune(prev), s
	}
	if !isWordRune(before) {
		return true, false, 0
	}
	k := i
	for k > 0 && 'a' <= t[k-1] && t[k-1] <= 'z' {
		k--
	}
	if i-k != 3 || !currencyCodes[t[k:i]] {
		return false, false, 0
	}
	if k > 0 {
		prev, _ := utf8.DecodeLastRuneInString(t[:k])
		if isWordRune(prev) {
			return false, false, 0
		}
	}
	return true, false, 0
}

// convention is one way of writing numbers: which separators group
// thousands and which one marks the decimals.
type convention struct {
	group   func(string) bool
	decimal string
}

var conventions = []convention{
	{group: func(s string) bool { return s == "," || s == " " || s == "'" || s == "\u2019" }, decimal: "."},
	{group: func(s string) bool { return s == "." || s == " " || s == "'" || s == "\u2019" }, decimal: ","},
}

// readings returns the canonical values of the chain's groups [from, to)
// under each convention it is valid under: at most two.
func (c numberChain) readings(t string, from, to int, neg bool) (out [2]string, n int) {
	for _, conv := range conventions {
		intEnd := to
		if to-from > 1 && c.seps[to-1] == conv.decimal {
			intEnd = to - 1
		}
		if !c.grouped(from, intEnd, conv) {
			continue
		}
		digits := t[c.groups[from].start:c.groups[from].end]
		if intEnd-from > 1 {
			var b strings.Builder
			for g := from; g < intEnd; g++ {
				b.WriteString(t[c.groups[g].start:c.groups[g].end])
			}
			digits = b.String()
		}
		frac := ""
		if intEnd < to {
			frac = t[c.groups[to-1].start:c.groups[to-1].end]
		}
		if k := decimalKey(neg, digits, frac); n == 0 || out[0] != k {
			out[n] = k
			n++
		}
	}
	return out, n
}

// grouped reports whether groups [from, to) are one integer written with
// thousands grouped under conv.
func (c numberChain) grouped(from, to int, conv convention) bool {
	if to-from == 1 {
		return true
	}
	if l := c.groups[from].end - c.groups[from].start; l > 3 {
		return false
	}
	for g := from + 1; g < to; g++ {
		if c.seps[g] != c.seps[from+1] || !conv.group(c.seps[g]) || c.groups[g].end-c.groups[g].start != 3 {
			return false
		}
	}
	return true
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// each calls add with each value the chain is read as and the byte range
// of normalised text that wrote it (see the comment at the top).
func (c numberChain) each(t string, add func(key string, start, end int)) {
	if !containsString(c.seps, " ") {
		c.readPart(t, 0, len(c.groups), true, add)
		return
	}
	c.readPart(t, 0, len(c.groups), false, add)
	from := 0
	for g := 1; g <= len(c.groups); g++ {
		if g == len(c.groups) || c.seps[g] == " " {
			c.readPart(t, from, g, true, add)
			from = g
		}
	}
}

// readPart reads groups [from, to) under the conventions, or when valid
// under neither and split is set, each group on its own.
func (c numberChain) readPart(t string, from, to int, split bool, add func(string, int, int)) {
	neg := c.neg && from == 0
	start := c.groups[from].start
	if neg {
		start = c.sign
	}
	keys, n := c.readings(t, from, to, neg)
	for _, k := range keys[:n] {
		add(k, start, c.groups[to-1].end)
	}
	if n > 0 || !split {
		return
	}
	for g := from; g < to; g++ {
		s := c.groups[g].start
		if g == 0 && neg {
			s = c.sign
		}
		add(decimalKey(g == 0 && neg, t[c.groups[g].start:c.groups[g].end], ""), s, c.groups[g].end)
	}
}

// decimalKey is the canonical text of a decimal number: no leading zeros
// in its integer part, no trailing zeros in its fraction, no "-0".
func decimalKey(neg bool, intDigits, frac string) string {
	intDigits = strings.TrimLeft(intDigits, "0")
	frac = strings.TrimRight(frac, "0")
	if intDigits == "" {
		intDigits = "0"
	}
	if frac == "" && (!neg || intDigits == "0") {
		return intDigits // most numbers: no copy
	}
	var b strings.Builder
	if neg && (intDigits != "0" || frac != "") {
		b.WriteByte('-')
	}
	b.WriteString(intDigits)
	if frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}

// maxExponent bounds the exponent of a JSON number this package reads: a
// number past it is written in no source.
const maxExponent = 400

// numberLiteral returns the JSON text of a number value and its canonical
// decimal (decimalKey); ok is false for a value that is no number.
func numberLiteral(v any) (lit, key string, ok bool) {
	switch n := v.(type) {
	case json.Number:
		lit = string(n)
	case float64:
		if math.IsInf(n, 0) || math.IsNaN(n) {
			return "", "", false
		}
		lit = strconv.FormatFloat(n, 'f', -1, 64)
	case float32:
		lit = strconv.FormatFloat(float64(n), 'f', -1, 32)
	case int:
		lit = strconv.Itoa(n)
	case int64:
		lit = strconv.FormatInt(n, 10)
	default:
		return "", "", false
	}
	key, ok = jsonNumberKey(lit)
	return lit, key, ok
}

// jsonNumberKey returns the canonical decimal of a JSON number literal
// (-?int(.frac)?([eE][+-]?exp)?).
func jsonNumberKey(lit string) (string, bool) {
	s := lit
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expText := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expText = s[:i], s[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return "", false
	}
	exp := 0
	if expText != "" {
		e, err := strconv.Atoi(expText)
		if err != nil || e > maxExponent || e < -maxExponent {
			return "", false
		}
		exp = e
	}
	digits := intPart + frac
	point := len(intPart) + exp
	switch {
	case point <= 0:
		return decimalKey(neg, "0", strings.Repeat("0", -point)+digits), true
	case point >= len(digits):
		return decimalKey(neg, digits+strings.Repeat("0", point-len(digits)), ""), true
	default:
		return decimalKey(neg, digits[:point], digits[point:]), true
	}
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// textNumberKeys returns the values a string value reads as when all of it
// (normalised) is one written number, with an optional sign and a currency
// symbol or code before or after it: "$1,249.99", "1.249,99 €",
// "USD 18,500", "1.249" (two readings). It returns nil for any other text.
func textNumberKeys(t string) []string {
	t = trimCurrency(t)
	neg := false
	for _, m := range []string{"-", "\u2212"} {
		if strings.HasPrefix(t, m) {
			neg, t = true, strings.TrimSpace(trimCurrency(t[len(m):]))
			break
		}
	}
	if t == "" || !isDigit(t[0]) {
		return nil
	}
	var c numberChain
	if c.scan(t, 0) != len(t) {
		return nil
	}
	keys, n := c.readings(t, 0, len(c.groups), neg)
	return keys[:n]
}

// trimCurrency removes a currency symbol or code, and the space next to
// it, from either end of a normalised text.
func trimCurrency(t string) string {
	t = strings.TrimSpace(t)
	if r, w := utf8.DecodeRuneInString(t); unicode.Is(unicode.Sc, r) {
		t = t[w:]
	} else if len(t) > 3 && currencyCodes[t[:3]] && !isWordRune(firstRune(t[3:])) {
		t = t[3:]
	}
	t = strings.TrimSpace(t)
	if r, w := utf8.DecodeLastRuneInString(t); unicode.Is(unicode.Sc, r) || r == '円' || r == '元' {
		t = t[:len(t)-w]
	} else if n := len(t); n > 3 && currencyCodes[t[n-3:]] && !isWordRune(lastRune(t[:n-3])) {
		t = t[:n-3]
	}
	return strings.TrimSpace(t)
}
