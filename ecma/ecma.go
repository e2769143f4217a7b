// Package ecma reads JSON Schema's "pattern" and "patternProperties" as
// what the specification says they are: ECMA-262 regular expressions, with
// the "u" flag's Unicode semantics. Go's regexp (RE2) reads the same text
// differently (\s missed U+00A0 and U+FEFF, "." matched "\r" and U+2028)
// and refuses valid patterns (\u0041, \cJ, [^]), so each pattern is parsed
// here as strict ECMA-262 and, when RE2 can express it, translated to the
// RE2 pattern that means the same, matched in linear time. What RE2 cannot
// express (lookahead, lookbehind, backreferences, repetition counts over
// 1000) is compiled as written for a backtracking engine (regexp2 in its
// ECMAScript and Unicode mode), each match bounded by [MatchTimeout] and
// [MaxStack]; package validate bounds all those of one check together. The
// translator still reads such a pattern to the end, so that every pattern
// accepted is ECMA-262, whichever engine matches it.
//
// The translation follows the u-flag grammar strictly, as ajv and other
// JavaScript validators compile patterns: an escape of a letter that is not
// an ECMA-262 escape (\a, \Z, \z, \A), a lone "]", "{" or "}", and an octal
// escape are errors rather than the letter itself (Annex B's lenient reading
// applies only without the u flag). ES2025's modifier groups (?i:...),
// (?s:...) and (?-i:...) are supported, and (?m:...) as long as no ^ or $
// is in it: RE2's multi-line ^ and $ know \n only as a line end.
//
// Unicode properties (\p{...}) are matched with Go's tables (Unicode
// 15.0 as of Go 1.26), which may lag a JavaScript engine's by a version or
// two. One difference remains: in a case-insensitive (?i:...) group,
// ECMA-262 counts U+017F (ſ) and U+212A (Kelvin sign) as word characters for
// \b and \B, RE2 does not.
//
// It is a pure package: no network, no file system, no logging.
package ecma

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// ecmaError is why a pattern is refused: the part at fault, the character
// it starts at (counting from 1, in characters, not bytes; 0 when no single
// part is at fault) and the reason.
type ecmaError struct {
	At     int
	Text   string
	Reason string
}

// Error implements error.
func (e *ecmaError) Error() string {
	if e.At == 0 {
		return e.Reason
	}
	return fmt.Sprintf("%q at character %d: %s", e.Text, e.At, e.Reason)
}

// re2Limit is in the reason of every error about a limit of RE2's rather
// than of ECMA-262's, so that the author knows the pattern is valid
// ECMA-262 and what to change.
const re2Limit = "Go's RE2 engine, which matches patterns here, allows at most 1000"

// ecmaMaxNesting bounds how deeply groups nest: RE2 refuses a pattern whose
// syntax tree is over 1000 deep, and the parser recurses once a level.
const ecmaMaxNesting = 1000

// The bounds of one match of the backtracking engine, which can take time
// exponential in the string's length: it stops after MatchTimeout, or once
// its backtracking state passes MaxStack slots of 8 bytes (8 MiB; a
// repeated capturing group takes a few slots a character, so strings of
// some 250,000 characters fit).
const (
	MatchTimeout = 100 * time.Millisecond
	MaxStack     = 1 << 20
)

// ecmaPattern translates the ECMA-262 pattern p into an RE2 pattern for
// Go's regexp with the same meaning: an unanchored search, as JSON Schema's
// "pattern" is. The result compiles with regexp.Compile; it is "" for a
// pattern only the backtracking engine can match (see Compile). An
// error is an *ecmaError naming what is wrong and where.
func ecmaPattern(p string) (string, error) {
	re, _, err := Compile(p)
	if err != nil {
		return "", err
	}
	if re != nil {
		return re.re.String(), nil
	}
	return "", nil
}

// Compile compiles the ECMA-262 pattern p. When RE2 can express it, re is
// its translation, matched in linear time, and bt is nil. When it has a
// lookahead, a lookbehind, a backreference or a repetition RE2 cannot
// count, bt is p compiled as written for the backtracking engine, each
// match bounded by MatchTimeout and MaxStack, and re is nil. An error says
// what is wrong in p and where (the character, counted from 1).
func Compile(p string) (re *Regexp, bt *regexp2.Regexp, err error) {
	src, needs, err := translateECMA(p)
	if err != nil {
		return nil, nil, err
	}
	if needs == "" {
		re, err := regexp.Compile(src)
		if err == nil {
			return &Regexp{re: re, src: p}, nil, nil
		}
		var se *syntax.Error
		if !errors.As(err, &se) || (se.Code != syntax.ErrInvalidRepeatSize && se.Code != syntax.ErrLarge && se.Code != syntax.ErrNestingDepth) {
			// Only RE2's size limits refuse a translation: anything else
			// is one the parser should not have made.
			return nil, nil, &ecmaError{Reason: fmt.Sprintf("Go's RE2 engine refused the translated pattern: %v", err)}
		}
		needs = "repetitions RE2 cannot expand (nested counts multiply past its limit of 1000)"
	}
	bt, err = regexp2.Compile(p, regexp2.ECMAScript|regexp2.Unicode, regexp2.OptionMaxBacktrackingStackSize(MaxStack))
	if err != nil {
		return nil, nil, &ecmaError{Reason: fmt.Sprintf("the pattern has %s, which Go's RE2 engine cannot match, and the backtracking engine that matches such patterns refused it: %v", needs, err)}
	}
	bt.MatchTimeout = MatchTimeout
	return nil, bt, nil
}

// Regexp is a pattern translated to RE2, as the schema library wants it
// (a jsonschema.Regexp): it matches with the translation but prints as the
// schema wrote it, so that a "does not match" error names the author's
// pattern.
type Regexp struct {
	re  *regexp.Regexp
	src string
}

// MatchString reports whether s contains a match of the pattern.
func (r *Regexp) MatchString(s string) bool { return r.re.MatchString(s) }

// String returns the pattern as written in the schema.
func (r *Regexp) String() string { return r.src }

// translateECMA translates the ECMA-262 pattern p into RE2 syntax, without
// checking RE2's size limits. needs is why RE2 cannot match it ("a
// lookahead", "a backreference"...), "" when it can: the whole pattern is
// checked all the same, and the translation is then of no use.
func translateECMA(p string) (src, needs string, err error) {
	if !utf8.ValidString(p) {
		return "", "", &ecmaError{Reason: "the pattern is not valid UTF-8"}
	}
	t := &ecmaParser{src: []rune(p)}
	if err := t.disjunction(); err != nil {
		return "", "", err
	}
	if t.pos < len(t.src) {
		// Only a ")" ends the outermost disjunction early.
		return "", "", t.fail(t.pos, 1, `no "(" opens this group: write \) to match a parenthesis`)
	}
	// A backreference may come before the group it names, so they are
	// checked once every group is known.
	for _, r := range t.refs {
		t.pos = r.end
		switch {
		case r.name != "":
			if _, ok := t.names[r.name]; !ok {
				return "", "", t.failTo(r.at, fmt.Sprintf("\\k<%s> refers to a group named %q, and no group has that name", r.name, r.name))
			}
		case r.n > t.groups:
			return "", "", t.failTo(r.at, fmt.Sprintf("a backreference to group %d, and the pattern has %d capturing groups (with the u flag JSON Schema uses, \\%d is not an octal escape)", r.n, t.groups, r.n))
		}
	}
	return t.out.String(), t.needs, nil
}

// ecmaFlags are the flags in force: JSON Schema gives none, modifier groups
// set them for their part.
type ecmaFlags struct{ i, m, s bool }

// altStep is one step of the path to a group: the alternative it is in, of
// one disjunction.
type altStep struct{ disj, alt int }

// ecmaParser translates by recursive descent over the u-flag grammar
// (ECMA-262 22.2.1), writing RE2 syntax as it goes.
type ecmaParser struct {
	src   []rune
	pos   int
	out   strings.Builder
	flags ecmaFlags
	depth int
	// path is the alternative being parsed in each enclosing disjunction,
	// outermost first; ndisj numbers the disjunctions.
	path  []altStep
	ndisj int
	// names holds the path of the last group of each name, to refuse a
	// duplicate name unless the two groups are in different alternatives.
	// The last suffices: if a group might match with an earlier one of
	// its name, it might with the last, as the earlier groups of a name
	// are in different alternatives from each other.
	names map[string][]altStep
	// needs is why the pattern needs the backtracking engine (the first
	// reason met), "" while RE2 can match it; groups counts the capturing
	// groups and refs holds the backreferences, checked at the end (a
	// backreference may come before its group).
	needs  string
	groups int
	refs   []backref
}

// backref is a backreference: \n (n > 0) or \k<name>, at [at, end).
type backref struct {
	at, end int
	n       int
	name    string
}

// need records that the pattern needs the backtracking engine, and why.
func (t *ecmaParser) need(why string) {
	if t.needs == "" {
		t.needs = why
	}
}

// fail returns the error for the n characters at from.
func (t *ecmaParser) fail(from, n int, reason string) error {
	end := min(from+n, len(t.src))
	return &ecmaError{At: from + 1, Text: string(t.src[from:end]), Reason: reason}
}

// failTo returns the error for the characters from from to the current
// position (at least one).
func (t *ecmaParser) failTo(from int, reason string) error {
	return t.fail(from, max(t.pos-from, 1), reason)
}

func (t *ecmaParser) more() bool { return t.pos < len(t.src) }

// peek returns the character n ahead of the current one, or -1.
func (t *ecmaParser) peek(n int) rune {
	if t.pos+n < len(t.src) {
		return t.src[t.pos+n]
	}
	return -1
}

// eat consumes s if it comes next.
func (t *ecmaParser) eat(s string) bool {
	i := t.pos
	for _, r := range s {
		if i >= len(t.src) || t.src[i] != r {
			return false
		}
		i++
	}
	t.pos = i
	return true
}

func (t *ecmaParser) disjunction() error {
	t.path = append(t.path, altStep{disj: t.ndisj})
	t.ndisj++
	for {
		if err := t.alternative(); err != nil {
			return err
		}
		if !t.eat("|") {
			break
		}
		t.out.WriteByte('|')
		t.path[len(t.path)-1].alt++
	}
	t.path = t.path[:len(t.path)-1]
	return nil
}

func (t *ecmaParser) alternative() error {
	for t.more() && t.peek(0) != '|' && t.peek(0) != ')' {
		if err := t.term(); err != nil {
			return err
		}
	}
	return nil
}

func (t *ecmaParser) term() error {
	start := t.pos
	switch c := t.peek(0); c {
	case '^', '$':
		if t.flags.m {
			return t.fail(start, 1, "^ and $ under the m modifier are not supported: ECMA-262 matches them at \\n, \\r, \\u2028 and \\u2029, and Go's RE2 engine, which matches patterns here, has multi-line ^ and $ for \\n only; drop the m")
		}
		t.pos++
		t.out.WriteRune(c)
		return t.noQuantifier(start)
	case '\\':
		if b := t.peek(1); b == 'b' || b == 'B' {
			t.pos += 2
			t.out.WriteByte('\\')
			t.out.WriteRune(b)
			return t.noQuantifier(start)
		}
		if err := t.atomEscape(); err != nil {
			return err
		}
	case '(':
		look, err := t.group()
		if err != nil {
			return err
		}
		if look {
			return t.noQuantifier(start)
		}
	case '[':
		if err := t.class(); err != nil {
			return err
		}
	case '.':
		t.pos++
		if t.flags.s {
			t.out.WriteString(`[\x00-\x{10FFFF}]`)
		} else {
			// ECMA-262's "." stops at every line terminator, RE2's
			// at \n only.
			t.out.WriteString(`[^\n\r\x{2028}\x{2029}]`)
		}
	case '*', '+', '?':
		return t.fail(start, 1, "nothing to repeat: a quantifier must follow a character, a class or a group; write \\"+string(c)+" to match it")
	case '{':
		if _, _, n, ok := t.braces(); ok {
			return t.fail(start, n, "nothing to repeat: a quantifier must follow a character, a class or a group")
		}
		return t.fail(start, 1, `a lone "{" is not allowed with the u flag JSON Schema uses: write \{ to match a brace`)
	case '}', ']':
		return t.fail(start, 1, fmt.Sprintf("a lone %q is not allowed with the u flag JSON Schema uses: write \\%c to match it", c, c))
	default:
		t.pos++
		t.literal(c)
	}
	return t.quantifier()
}

// noQuantifier refuses a quantifier after the assertion at start: with the
// u flag, an assertion cannot be repeated.
func (t *ecmaParser) noQuantifier(start int) error {
	switch t.peek(0) {
	case '*', '+', '?':
	case '{':
		if _, _, _, ok := t.braces(); !ok {
			return nil // term reports the lone brace
		}
	default:
		return nil
	}
	return t.fail(start, t.pos-start+1, "an assertion (^, $, \\b, \\B, a lookahead or a lookbehind) matches a place, not a character, and cannot be repeated")
}

// braces reads a {n}, {n,} or {n,m} quantifier at the current position,
// returning its bounds as decimal digits (max "" when open) and its length,
// without consuming it.
func (t *ecmaParser) braces() (lo, hi string, n int, ok bool) {
	i := t.pos + 1
	digits := func() string {
		from := i
		for i < len(t.src) && t.src[i] >= '0' && t.src[i] <= '9' {
			i++
		}
		return string(t.src[from:i])
	}
	if lo = digits(); lo == "" || i >= len(t.src) {
		return "", "", 0, false
	}
	hi = lo
	if t.src[i] == ',' {
		i++
		hi = digits()
	}
	if i >= len(t.src) || t.src[i] != '}' {
		return "", "", 0, false
	}
	return lo, hi, i + 1 - t.pos, true
}

// maxRepeat is the largest repetition count the backtracking engine
// takes.
const maxRepeat = math.MaxInt32

// decimal returns digits without leading zeros, whether its value is at
// most 1000, RE2's repetition limit, and whether it is at most maxRepeat.
func decimal(digits string) (d string, re2, fits bool) {
	d = strings.TrimLeft(digits, "0")
	if d == "" {
		d = "0"
	}
	if len(d) > 10 {
		return d, false, false
	}
	v, _ := strconv.Atoi(d)
	return d, v <= 1000, v <= maxRepeat
}

// quantifier translates the quantifier after an atom, if any.
func (t *ecmaParser) quantifier() error {
	start := t.pos
	switch c := t.peek(0); c {
	case '*', '+', '?':
		t.pos++
		t.out.WriteRune(c)
	case '{':
		lo, hi, n, ok := t.braces()
		if !ok {
			return t.fail(start, 1, `a lone "{" is not allowed with the u flag JSON Schema uses: write \{ to match a brace`)
		}
		t.pos += n
		l, lok, lfits := decimal(lo)
		if !lfits {
			return t.failTo(start, fmt.Sprintf("repeats at least %s times: the engine allows at most %d", l, maxRepeat))
		}
		if hi == "" {
			if !lok {
				// Over RE2's limit: the backtracking engine counts.
				t.need("a repetition count over 1000")
			}
			fmt.Fprintf(&t.out, "{%s,}", l)
			break
		}
		h, hok, hfits := decimal(hi)
		if len(l) > len(h) || len(l) == len(h) && l > h {
			return t.failTo(start, "numbers out of order in a {min,max} quantifier: the smaller comes first")
		}
		if !hfits {
			return t.failTo(start, fmt.Sprintf("repeats up to %s times: the engine allows at most %d", h, maxRepeat))
		}
		if !lok || !hok {
			t.need("a repetition count over 1000")
		}
		if l == h {
			fmt.Fprintf(&t.out, "{%s}", l)
		} else {
			fmt.Fprintf(&t.out, "{%s,%s}", l, h)
		}
	default:
		return nil
	}
	if t.eat("?") {
		t.out.WriteByte('?')
	}
	switch t.peek(0) {
	case '*', '+', '?', '{':
		if _, _, _, ok := t.braces(); t.peek(0) != '{' || ok {
			return t.fail(t.pos, 1, "nothing to repeat: a quantifier cannot follow a quantifier; group the repeated part, as in (?:a{2}){3}")
		}
	}
	return nil
}

// group translates a parenthesized group at the current position, and
// reports whether it is a lookahead or lookbehind: an assertion, which
// cannot be repeated.
func (t *ecmaParser) group() (look bool, err error) {
	start := t.pos
	t.pos++
	if t.depth >= ecmaMaxNesting {
		return false, t.fail(start, 1, fmt.Sprintf("groups nest too deeply: %s levels (RE2's limit, not ECMA-262's)", re2Limit))
	}
	outer := t.flags
	switch {
	case !t.eat("?"):
		t.groups++
		t.out.WriteByte('(')
	case t.eat(":"):
		t.out.WriteString("(?:")
	case t.eat("=") || t.eat("!"):
		// RE2 has none: the backtracking engine matches the pattern.
		// The translation goes on, to check the rest of the syntax.
		t.need("a lookahead")
		look = true
		t.out.WriteString("(?:")
	case t.eat("<=") || t.eat("<!"):
		t.need("a lookbehind")
		look = true
		t.out.WriteString("(?:")
	case t.eat("<"):
		if err := t.groupName(start); err != nil {
			return false, err
		}
		// ECMA-262 names need not be RE2 names, and RE2 needs none: it
		// has no backreferences. A plain group matches the same.
		t.groups++
		t.out.WriteByte('(')
	case t.peek(0) == 'P':
		return false, t.fail(start, 4, "(?P...) is Python syntax, not ECMA-262: a named group is (?<name>...)")
	case t.peek(0) == '#':
		return false, t.fail(start, 3, "(?#...) comments are not ECMA-262")
	default:
		if err := t.modifiers(start, outer); err != nil {
			return false, err
		}
	}
	t.depth++
	if err := t.disjunction(); err != nil {
		return false, err
	}
	t.depth--
	if !t.eat(")") {
		return false, t.fail(start, 1, `this group has no closing ")"`)
	}
	t.out.WriteByte(')')
	t.flags = outer
	return look, nil
}

// modifiers translates the (?ims-ims: opening of an ES2025 modifier group,
// after "(?", setting the flags for the group.
func (t *ecmaParser) modifiers(start int, outer ecmaFlags) error {
	read := func() (string, error) {
		from := t.pos
		for strings.ContainsRune("ims", t.peek(0)) {
			if strings.ContainsRune(string(t.src[from:t.pos]), t.peek(0)) {
				return "", t.fail(t.pos, 1, "a modifier appears twice")
			}
			t.pos++
		}
		return string(t.src[from:t.pos]), nil
	}
	on, err := read()
	if err != nil {
		return err
	}
	off := ""
	dash := t.eat("-")
	if dash {
		if off, err = read(); err != nil {
			return err
		}
	}
	switch {
	case t.peek(0) == ')':
		return t.fail(start, t.pos-start+1, "inline flags such as (?i) are not ECMA-262: a modifier applies to a group, as in (?i:abc)")
	case t.peek(0) != ':':
		return t.fail(start, t.pos-start+1, "not an ECMA-262 group: a group opens with (, (?:, (?<name>, (?=, (?!, (?<=, (?<!, or (?ims-ims: for modifiers")
	case dash && on == "" && off == "":
		return t.failTo(start, "(?-: names no modifier to add or remove")
	}
	for _, c := range off {
		if strings.ContainsRune(on, c) {
			return t.failTo(start, fmt.Sprintf("modifier %c is both added and removed", c))
		}
	}
	t.pos++ // ':'
	set := func(c rune, v bool) {
		switch c {
		case 'i':
			t.flags.i = v
		case 'm':
			t.flags.m = v
		case 's':
			t.flags.s = v
		}
	}
	for _, c := range on {
		set(c, true)
	}
	for _, c := range off {
		set(c, false)
	}
	// s and m are translated here (".", "^", "$"); RE2 needs to know i.
	switch {
	case t.flags.i == outer.i:
		t.out.WriteString("(?:")
	case t.flags.i:
		t.out.WriteString("(?i:")
	default:
		t.out.WriteString("(?-i:")
	}
	return nil
}

// groupName reads the name of a (?<name>...) group, after "(?<", and
// refuses a name that is not an identifier or that another group that
// might match with it has.
func (t *ecmaParser) groupName(start int) error {
	key, err := t.readName(start)
	if err != nil {
		return err
	}
	if t.names == nil {
		t.names = map[string][]altStep{}
	}
	if last, ok := t.names[key]; ok && bothMatch(t.path, last) {
		return t.failTo(start, fmt.Sprintf("two groups are named %q: names may repeat only in different alternatives of a |", key))
	}
	t.names[key] = slices.Clone(t.path)
	return nil
}

// readName reads a group name and its closing ">", after the "<" of the
// group or backreference at start.
func (t *ecmaParser) readName(start int) (string, error) {
	var name []rune
	for {
		if !t.more() {
			return "", t.failTo(start, `the group name has no closing ">"`)
		}
		at := t.pos
		c := t.src[t.pos]
		if c == '>' {
			t.pos++
			break
		}
		t.pos++
		if c == '\\' {
			if t.peek(0) != 'u' {
				return "", t.fail(at, 2, "a group name may hold only \\u escapes")
			}
			r, err := t.unicodeEscape(at)
			if err != nil {
				return "", err
			}
			c = r
		}
		ok := c == '$' || c == '_' || isIDStart(c)
		if len(name) > 0 {
			ok = ok || c == '\u200c' || c == '\u200d' || isIDContinue(c)
		}
		if !ok {
			return "", t.failTo(at, "a group name is an identifier: a letter, $ or _, then letters, digits, $ or _")
		}
		name = append(name, c)
	}
	if len(name) == 0 {
		return "", t.failTo(start, "the group name is empty")
	}
	return string(name), nil
}

// bothMatch reports whether groups at paths a and b might both take part in
// one match: unless some disjunction holds them in different alternatives.
func bothMatch(a, b []altStep) bool {
	for i := range min(len(a), len(b)) {
		if a[i].disj != b[i].disj {
			return true
		}
		if a[i].alt != b[i].alt {
			return false
		}
	}
	return true
}

// isIDStart and isIDContinue are Unicode's ID_Start and ID_Continue
// (DerivedCoreProperties.txt), which Go has no tables for.
func isIDStart(r rune) bool {
	return unicode.In(r, unicode.L, unicode.Nl, unicode.Other_ID_Start) &&
		!unicode.In(r, unicode.Pattern_Syntax, unicode.Pattern_White_Space)
}

func isIDContinue(r rune) bool {
	return unicode.In(r, unicode.L, unicode.Nl, unicode.Other_ID_Start, unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc, unicode.Other_ID_Continue) &&
		!unicode.In(r, unicode.Pattern_Syntax, unicode.Pattern_White_Space)
}

// atomEscape translates an escape outside a class, at the backslash.
func (t *ecmaParser) atomEscape() error {
	start := t.pos
	t.pos++
	switch c := t.peek(0); {
	case c == 'k':
		t.pos++
		if !t.eat("<") {
			return t.failTo(start, `\k is a backreference to a named group and must be followed by <name>`)
		}
		name, err := t.readName(start)
		if err != nil {
			return err
		}
		t.refs = append(t.refs, backref{at: start, end: t.pos, name: name})
		t.need("a backreference")
		t.out.WriteString("(?:)")
		return nil
	case c >= '1' && c <= '9':
		n := 0
		for t.more() && t.src[t.pos] >= '0' && t.src[t.pos] <= '9' {
			n = min(n*10+int(t.src[t.pos]-'0'), math.MaxInt32)
			t.pos++
		}
		t.refs = append(t.refs, backref{at: start, end: t.pos, n: n})
		t.need("a backreference")
		t.out.WriteString("(?:)")
		return nil
	case strings.ContainsRune("dDsSwWpP", c):
		it, err := t.classEscape(start)
		if err != nil {
			return err
		}
		t.writeClass(false, it)
		return nil
	}
	r, err := t.characterEscape(start, false)
	if err != nil {
		return err
	}
	t.literal(r)
	return nil
}

// escapeHints say what to write instead of an escape ECMA-262 lacks.
var escapeHints = map[rune]string{
	'A': `ECMA-262 has no \A: ^ matches the start of the input`,
	'Z': `ECMA-262 has no \Z: $ matches only the end of the input`,
	'z': `ECMA-262 has no \z: $ matches only the end of the input`,
	'a': `ECMA-262 has no \a: write \x07 for the bell character`,
	'e': `ECMA-262 has no \e: write \x1B for the escape character`,
	'h': `ECMA-262 has no \h: write [\t ] or \s`,
	'Q': `ECMA-262 has no \Q...\E quoting: escape each special character`,
	'E': `ECMA-262 has no \Q...\E quoting: escape each special character`,
}

// characterEscape reads the escape of one character, after the backslash
// at start: ECMA-262's CharacterEscape, with ClassEscape's "\-" in a class.
func (t *ecmaParser) characterEscape(start int, inClass bool) (rune, error) {
	if !t.more() {
		return 0, t.fail(start, 1, `a pattern cannot end with \: write \\ to match a backslash`)
	}
	c := t.src[t.pos]
	t.pos++
	switch c {
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'v':
		return '\v', nil
	case 'c':
		if l := t.peek(0); l >= 'a' && l <= 'z' || l >= 'A' && l <= 'Z' {
			t.pos++
			return l % 32, nil
		}
		return 0, t.failTo(start, `\c must be followed by a letter: \cJ is a line feed, \cA is U+0001`)
	case '0':
		if d := t.peek(0); d >= '0' && d <= '9' {
			return 0, t.fail(start, 3, `octal escapes are not allowed with the u flag JSON Schema uses: write \x00 or \u0000 and so on`)
		}
		return 0, nil
	case 'x':
		if h, ok := hexValue(t.src, t.pos, 2); ok {
			t.pos += 2
			return h, nil
		}
		return 0, t.failTo(start, `\x must be followed by two hex digits, as in \x41`)
	case 'u':
		t.pos--
		return t.unicodeEscape(start)
	case '^', '$', '\\', '.', '*', '+', '?', '(', ')', '[', ']', '{', '}', '|', '/':
		return c, nil
	}
	if c == '-' && inClass {
		return c, nil
	}
	if hint, ok := escapeHints[c]; ok {
		return 0, t.failTo(start, hint)
	}
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return 0, t.failTo(start, "not an ECMA-262 escape (a letter or digit after \\ must be one of ECMA-262's escapes)")
	}
	// Any other character escapes to itself, as ECMA-262 allows without
	// the u flag (Annex B) and Go's RE2 allowed for punctuation: \- \_ \@
	// \: \' \" are common in hand-written and generated schemas.
	return c, nil
}

// unicodeEscape reads \uXXXX, \u{X...} or a \uXXXX\uXXXX surrogate pair
// (one code point) at the "u", after the backslash at start.
func (t *ecmaParser) unicodeEscape(start int) (rune, error) {
	t.pos++ // 'u'
	if t.eat("{") {
		from, v := t.pos, rune(0)
		for t.more() && isHex(t.src[t.pos]) {
			if v <= unicode.MaxRune {
				v = v*16 + hexDigit(t.src[t.pos])
			}
			t.pos++
		}
		if t.pos == from || !t.eat("}") {
			return 0, t.failTo(start, `\u{ must be followed by hex digits and }, as in \u{1F600}`)
		}
		if v > unicode.MaxRune {
			return 0, t.failTo(start, `\u{...} is past U+10FFFF, the last code point`)
		}
		return v, nil
	}
	v, ok := hexValue(t.src, t.pos, 4)
	if !ok {
		return 0, t.failTo(start, `\u must be followed by four hex digits, as in \u0041, or by {hex}, as in \u{1F600}`)
	}
	t.pos += 4
	if v >= 0xD800 && v <= 0xDBFF && t.peek(0) == '\\' && t.peek(1) == 'u' {
		if lo, ok := hexValue(t.src, t.pos+2, 4); ok && lo >= 0xDC00 && lo <= 0xDFFF {
			t.pos += 6
			return utf16Pair(v, lo), nil
		}
	}
	// A lone surrogate stays one, and matches nothing: no Go string holds
	// it (JSON decoding makes one U+FFFD).
	return v, nil
}

func utf16Pair(hi, lo rune) rune { return (hi-0xD800)<<10 + (lo - 0xDC00) + 0x10000 }

func isHex(r rune) bool { return r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' }

func hexDigit(r rune) rune {
	switch {
	case r >= 'a':
		return r - 'a' + 10
	case r >= 'A':
		return r - 'A' + 10
	}
	return r - '0'
}

// hexValue reads n hex digits at src[i:].
func hexValue(src []rune, i, n int) (rune, bool) {
	if i+n > len(src) {
		return 0, false
	}
	v := rune(0)
	for _, r := range src[i : i+n] {
		if !isHex(r) {
			return 0, false
		}
		v = v*16 + hexDigit(r)
	}
	return v, true
}

// classItem is what a class escape (\d, \s, \p{...}) stands for: RE2
// syntax with the same meaning under the flags in force, or else the set
// written out.
type classItem struct {
	native string
	set    runeSet
}

// classEscape reads \d \D \s \S \w \W \p{...} \P{...}, after the backslash
// at start.
func (t *ecmaParser) classEscape(start int) (classItem, error) {
	c := t.src[t.pos]
	t.pos++
	switch c {
	case 'd', 'D', 'w', 'W':
		// ASCII in both dialects. Under (?i:...) RE2 folds \w to take in
		// U+017F and U+212A and leaves them out of \W, as ECMA-262's
		// WordCharacters does.
		return classItem{native: `\` + string(c)}, nil
	case 's':
		return classItem{set: ecmaSpace()}, nil
	case 'S':
		// RE2's \s is ASCII, and a class cannot hold a negated class:
		// the complement is written out.
		return classItem{set: ecmaSpace().complement()}, nil
	}
	// p or P
	if !t.eat("{") {
		return classItem{}, t.failTo(start, fmt.Sprintf(`\%c must be followed by {property}, as in \p{Letter} or \p{Script=Greek}`, c))
	}
	from := t.pos
	for t.more() && t.src[t.pos] != '}' {
		if r := t.src[t.pos]; !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '=') {
			return classItem{}, t.failTo(start, "a property name holds only letters, digits, _ and =")
		}
		t.pos++
	}
	if !t.eat("}") {
		return classItem{}, t.failTo(start, `the property has no closing "}"`)
	}
	prop, err := ecmaProperty(string(t.src[from : t.pos-1]))
	if err != nil {
		return classItem{}, t.failTo(start, err.Error())
	}
	neg := c == 'P'
	if prop.native != "" && !(neg && t.flags.i) {
		return classItem{native: `\` + string(c) + "{" + prop.native + "}"}, nil
	}
	// RE2 folds a negated property after negating it; ECMA-262 folds the
	// complement: \P{Lu} under i matches "A" through "a". Written out,
	// the complement folds as ECMA-262's does.
	s := prop.set()
	if neg {
		s = s.complement()
	}
	return classItem{set: s}, nil
}

// class translates a character class at the "[".
func (t *ecmaParser) class() error {
	start := t.pos
	t.pos++
	negate := t.eat("^")
	var items []classItem
	var set runeSet
	for {
		if !t.more() {
			return t.fail(start, 1, `this character class has no closing "]"`)
		}
		if t.eat("]") {
			break
		}
		from := t.pos
		lo, it, err := t.classAtom()
		if err != nil {
			return err
		}
		if t.peek(0) != '-' || t.peek(1) == ']' || t.peek(1) == -1 {
			if it != nil {
				items = append(items, *it)
			} else {
				set = append(set, runeRange{lo, lo})
			}
			continue
		}
		t.pos++ // '-'
		hi, it2, err := t.classAtom()
		if err != nil {
			return err
		}
		if it != nil || it2 != nil {
			return t.failTo(from, `a class escape such as \d or \s cannot bound a range: write - as \- to match a dash`)
		}
		if lo > hi {
			return t.failTo(from, "range out of order in a character class: the smaller character comes first")
		}
		set = append(set, runeRange{lo, hi})
	}
	items = append(items, classItem{set: set.norm()})
	t.writeClass(negate, items...)
	return nil
}

// classAtom reads one character of a class, or a class escape.
func (t *ecmaParser) classAtom() (rune, *classItem, error) {
	c := t.src[t.pos]
	if c != '\\' {
		t.pos++
		return c, nil, nil
	}
	start := t.pos
	t.pos++
	switch t.peek(0) {
	case 'b':
		t.pos++
		return '\b', nil, nil
	case 'd', 'D', 's', 'S', 'w', 'W', 'p', 'P':
		it, err := t.classEscape(start)
		return 0, &it, err
	case 'B':
		return 0, nil, t.fail(start, 2, `\B is not allowed in a character class`)
	}
	if d := t.peek(0); d >= '1' && d <= '9' || d == 'k' {
		return 0, nil, t.fail(start, 2, "a backreference is not allowed in a character class")
	}
	r, err := t.characterEscape(start, true)
	return r, nil, err
}

// writeClass writes the union of items, or its complement, as one RE2
// atom.
func (t *ecmaParser) writeClass(negate bool, items ...classItem) {
	var natives []string
	var set runeSet
	for _, it := range items {
		if it.native != "" {
			natives = append(natives, it.native)
		} else {
			set = append(set, it.set...)
		}
	}
	// No Go string holds a surrogate, and RE2 would write a lone one as
	// U+FFFD in a literal prefix: they are left out.
	set = minus(set, runeSet{{0xD800, 0xDFFF}})
	switch {
	case len(natives) == 0 && len(set) == 0 && negate:
		// [^]: any character, line terminators too.
		t.out.WriteString(`[\x00-\x{10FFFF}]`)
		return
	case len(natives) == 0 && len(set) == 0:
		// []: no character; RE2 has no empty class.
		t.out.WriteString(`[^\x00-\x{10FFFF}]`)
		return
	case !negate && len(natives) == 1 && len(set) == 0:
		t.out.WriteString(natives[0])
		return
	case !negate && len(natives) == 0 && len(set) == 1 && set[0].lo == set[0].hi:
		t.literal(set[0].lo)
		return
	}
	t.out.WriteByte('[')
	if negate {
		t.out.WriteByte('^')
	}
	for _, n := range natives {
		t.out.WriteString(n)
	}
	for _, r := range set {
		t.classRune(r.lo)
		if r.hi > r.lo {
			if r.hi > r.lo+1 {
				t.out.WriteByte('-')
			}
			t.classRune(r.hi)
		}
	}
	t.out.WriteByte(']')
}

// classRune writes r inside an RE2 class: printable ASCII as itself, the
// rest as \x{...}, as a written-out class spans every script.
func (t *ecmaParser) classRune(r rune) {
	if r > ' ' && r < 0x7F && !strings.ContainsRune(`\[]-^`, r) {
		t.out.WriteRune(r)
		return
	}
	fmt.Fprintf(&t.out, `\x{%X}`, r)
}

// literal writes r to match itself outside a class.
func (t *ecmaParser) literal(r rune) {
	switch {
	case r >= 0xD800 && r <= 0xDFFF:
		// A lone surrogate: see writeClass.
		t.out.WriteString(`[^\x00-\x{10FFFF}]`)
	case r < utf8.RuneSelf && strings.ContainsRune(`\.+*?()|[]{}^$`, r):
		t.out.WriteByte('\\')
		t.out.WriteRune(r)
	case r >= ' ' && r < 0x7F,
		r >= utf8.RuneSelf && unicode.IsGraphic(r) && !unicode.IsSpace(r) && !unicode.Is(unicode.Mn, r):
		t.out.WriteRune(r)
	default:
		fmt.Fprintf(&t.out, `\x{%X}`, r)
	}
}

// ecmaSpace is ECMA-262's \s: WhiteSpace and LineTerminator, which is
// Unicode's Zs with tab, vertical tab, form feed, U+FEFF and the four line
// terminators.
func ecmaSpace() runeSet {
	s := runeSet{{'\t', '\r'}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}}
	return append(s, tableSet(unicode.Zs)...).norm()
}

// runeRange is the characters lo to hi, both included.
type runeRange struct{ lo, hi rune }

// runeSet is a set of characters; norm sorts and merges its ranges.
type runeSet []runeRange

func (s runeSet) norm() runeSet {
	out := slices.Clone(s)
	slices.SortFunc(out, func(a, b runeRange) int { return cmp.Compare(a.lo, b.lo) })
	n := 0
	for _, r := range out {
		if n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out[n] = r
		n++
	}
	return out[:n]
}

// complement returns every code point s lacks; s must be normalized.
func (s runeSet) complement() runeSet {
	var out runeSet
	next := rune(0)
	for _, r := range s {
		if r.lo > next {
			out = append(out, runeRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= unicode.MaxRune {
		out = append(out, runeRange{next, unicode.MaxRune})
	}
	return out
}

// union returns the code points in any of sets.
func union(sets ...runeSet) runeSet {
	var out runeSet
	for _, s := range sets {
		out = append(out, s...)
	}
	return out.norm()
}

// minus returns the code points in s and not in u.
func minus(s, u runeSet) runeSet {
	return union(s.norm().complement(), u).complement()
}

// tableSet returns the code points of a Unicode table.
func tableSet(tab *unicode.RangeTable) runeSet {
	var s runeSet
	add := func(lo, hi, stride rune) {
		if stride == 1 {
			s = append(s, runeRange{lo, hi})
			return
		}
		for r := lo; r <= hi; r += stride {
			s = append(s, runeRange{r, r})
		}
	}
	for _, r := range tab.R16 {
		add(rune(r.Lo), rune(r.Hi), rune(r.Stride))
	}
	for _, r := range tab.R32 {
		add(rune(r.Lo), rune(r.Hi), rune(r.Stride))
	}
	return s.norm()
}

// tables returns the union of the named Unicode categories and properties.
func tables(names ...string) runeSet {
	var sets []runeSet
	for _, n := range names {
		tab := unicode.Categories[n]
		if tab == nil {
			tab = unicode.Properties[n]
		}
		sets = append(sets, tableSet(tab))
	}
	return union(sets...)
}

// ecmaProp is a Unicode property an ECMA-262 \p{...} names: native is its
// name in RE2's \p{...}, "" when RE2 has none; set computes its code points.
type ecmaProp struct {
	native string
	set    func() runeSet
}

// ecmaProperty resolves the inside of \p{...}: Name=Value for
// General_Category and Script, or a lone general category or binary
// property. ECMA-262 matches names exactly (no loose matching): \p{letter}
// is an error, \p{Letter} and \p{L} are the same.
func ecmaProperty(expr string) (ecmaProp, error) {
	name, value, eq := strings.Cut(expr, "=")
	if !eq {
		if gc, ok := ecmaCategories[expr]; ok {
			return categoryProp(gc), nil
		}
		if canon, ok := ecmaBinaryProps[expr]; ok {
			return binaryProp(canon)
		}
		if _, ok := scriptName(expr); ok {
			return ecmaProp{}, fmt.Errorf("a script is named with Script=: write \\p{Script=%s}", expr)
		}
		return ecmaProp{}, fmt.Errorf("%q is not a Unicode general category or binary property ECMA-262 knows (names are case-sensitive: \\p{Letter}, \\p{Lu}, \\p{White_Space})", expr)
	}
	switch name {
	case "General_Category", "gc":
		if gc, ok := ecmaCategories[value]; ok {
			return categoryProp(gc), nil
		}
		return ecmaProp{}, fmt.Errorf("%q is not a general category (names are case-sensitive: Letter or L, Decimal_Number or Nd)", value)
	case "Script", "sc", "Script_Extensions", "scx":
		long, ok := scriptName(value)
		if !ok {
			return ecmaProp{}, fmt.Errorf("%q is not a script (names are case-sensitive: Greek or Grek, Latin or Latn)", value)
		}
		if name == "Script_Extensions" || name == "scx" {
			return ecmaProp{}, fmt.Errorf("Script_Extensions is not supported: Go's Unicode tables have no Script_Extensions data; \\p{Script=%s} is the nearest, and matches fewer characters", value)
		}
		return scriptProp(long)
	}
	return ecmaProp{}, fmt.Errorf("%q is not a property ECMA-262 allows with a value: General_Category (gc), Script (sc) or Script_Extensions (scx)", name)
}

func categoryProp(gc string) ecmaProp {
	return ecmaProp{native: gc, set: func() runeSet { return tables(gc) }}
}

// scriptProp resolves a script's long name against Go's tables.
func scriptProp(long string) (ecmaProp, error) {
	switch long {
	case "Unknown":
		// Code points no script claims: Go has no table for them.
		return ecmaProp{set: func() runeSet {
			var sets []runeSet
			for _, tab := range unicode.Scripts {
				sets = append(sets, tableSet(tab))
			}
			return union(sets...).complement()
		}}, nil
	case "Katakana_Or_Hiragana":
		// A value no code point has as its Script (only as
		// Script_Extensions).
		return ecmaProp{set: func() runeSet { return nil }}, nil
	}
	tab := unicode.Scripts[long]
	if tab == nil {
		return ecmaProp{}, fmt.Errorf("the script %s is newer than Go's Unicode %s tables, which Go's RE2 engine matches with", long, unicode.Version)
	}
	return ecmaProp{native: long, set: func() runeSet { return tableSet(tab) }}, nil
}

// binaryProp resolves a binary property by its canonical name: from Go's
// tables, or derived from them as DerivedCoreProperties.txt defines it.
func binaryProp(canon string) (ecmaProp, error) {
	if tab := unicode.Properties[canon]; tab != nil {
		return ecmaProp{set: func() runeSet { return tableSet(tab) }}, nil
	}
	var set func() runeSet
	syntaxChars := func() runeSet { return tables("Pattern_Syntax", "Pattern_White_Space") }
	switch canon {
	case "Any":
		return ecmaProp{native: "Any", set: func() runeSet { return runeSet{{0, unicode.MaxRune}} }}, nil
	case "ASCII":
		set = func() runeSet { return runeSet{{0, 0x7F}} }
	case "Assigned":
		set = func() runeSet { return tables("Cn").complement() }
	case "Alphabetic":
		set = func() runeSet {
			return tables("Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Other_Alphabetic", "Other_Lowercase", "Other_Uppercase")
		}
	case "Lowercase":
		set = func() runeSet { return tables("Ll", "Other_Lowercase") }
	case "Uppercase":
		set = func() runeSet { return tables("Lu", "Other_Uppercase") }
	case "Cased":
		set = func() runeSet { return tables("Ll", "Other_Lowercase", "Lu", "Other_Uppercase", "Lt") }
	case "Math":
		set = func() runeSet { return tables("Sm", "Other_Math") }
	case "ID_Start":
		set = func() runeSet { return minus(tables("L", "Nl", "Other_ID_Start"), syntaxChars()) }
	case "ID_Continue":
		set = func() runeSet {
			return minus(tables("L", "Nl", "Other_ID_Start", "Mn", "Mc", "Nd", "Pc", "Other_ID_Continue"), syntaxChars())
		}
	case "Grapheme_Extend":
		set = func() runeSet { return tables("Me", "Mn", "Other_Grapheme_Extend") }
	case "Grapheme_Base":
		set = func() runeSet {
			return union(tables("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"), tables("Me", "Mn", "Other_Grapheme_Extend")).complement()
		}
	default:
		return ecmaProp{}, fmt.Errorf("the property %s is not supported: Go's Unicode tables, which Go's RE2 engine matches with, have no data for it", canon)
	}
	return ecmaProp{set: set}, nil
}

// ecmaCategories maps every General_Category value ECMA-262 accepts (long
// name, short name, alias) to Go's name for it.
var ecmaCategories = map[string]string{
	"Other": "C", "C": "C", "Control": "Cc", "Cc": "Cc", "cntrl": "Cc",
	"Format": "Cf", "Cf": "Cf", "Unassigned": "Cn", "Cn": "Cn",
	"Private_Use": "Co", "Co": "Co", "Surrogate": "Cs", "Cs": "Cs",
	"Letter": "L", "L": "L", "Cased_Letter": "LC", "LC": "LC",
	"Lowercase_Letter": "Ll", "Ll": "Ll", "Modifier_Letter": "Lm", "Lm": "Lm",
	"Other_Letter": "Lo", "Lo": "Lo", "Titlecase_Letter": "Lt", "Lt": "Lt",
	"Uppercase_Letter": "Lu", "Lu": "Lu",
	"Mark": "M", "M": "M", "Combining_Mark": "M", "Spacing_Mark": "Mc", "Mc": "Mc",
	"Enclosing_Mark": "Me", "Me": "Me", "Nonspacing_Mark": "Mn", "Mn": "Mn",
	"Number": "N", "N": "N", "Decimal_Number": "Nd", "Nd": "Nd", "digit": "Nd",
	"Letter_Number": "Nl", "Nl": "Nl", "Other_Number": "No", "No": "No",
	"Punctuation": "P", "P": "P", "punct": "P",
	"Connector_Punctuation": "Pc", "Pc": "Pc", "Dash_Punctuation": "Pd", "Pd": "Pd",
	"Close_Punctuation": "Pe", "Pe": "Pe", "Final_Punctuation": "Pf", "Pf": "Pf",
	"Initial_Punctuation": "Pi", "Pi": "Pi", "Other_Punctuation": "Po", "Po": "Po",
	"Open_Punctuation": "Ps", "Ps": "Ps",
	"Symbol": "S", "S": "S", "Currency_Symbol": "Sc", "Sc": "Sc",
	"Modifier_Symbol": "Sk", "Sk": "Sk", "Math_Symbol": "Sm", "Sm": "Sm",
	"Other_Symbol": "So", "So": "So",
	"Separator": "Z", "Z": "Z", "Line_Separator": "Zl", "Zl": "Zl",
	"Paragraph_Separator": "Zp", "Zp": "Zp", "Space_Separator": "Zs", "Zs": "Zs",
}

// ecmaBinaryProps maps every binary property name and alias ECMA-262
// accepts to its canonical name.
var ecmaBinaryProps = map[string]string{
	"ASCII": "ASCII", "ASCII_Hex_Digit": "ASCII_Hex_Digit", "AHex": "ASCII_Hex_Digit",
	"Alphabetic": "Alphabetic", "Alpha": "Alphabetic", "Any": "Any", "Assigned": "Assigned",
	"Bidi_Control": "Bidi_Control", "Bidi_C": "Bidi_Control",
	"Bidi_Mirrored": "Bidi_Mirrored", "Bidi_M": "Bidi_Mirrored",
	"Case_Ignorable": "Case_Ignorable", "CI": "Case_Ignorable", "Cased": "Cased",
	"Changes_When_Casefolded": "Changes_When_Casefolded", "CWCF": "Changes_When_Casefolded",
	"Changes_When_Casemapped": "Changes_When_Casemapped", "CWCM": "Changes_When_Casemapped",
	"Changes_When_Lowercased": "Changes_When_Lowercased", "CWL": "Changes_When_Lowercased",
	"Changes_When_NFKC_Casefolded": "Changes_When_NFKC_Casefolded", "CWKCF": "Changes_When_NFKC_Casefolded",
	"Changes_When_Titlecased": "Changes_When_Titlecased", "CWT": "Changes_When_Titlecased",
	"Changes_When_Uppercased": "Changes_When_Uppercased", "CWU": "Changes_When_Uppercased",
	"Dash": "Dash", "Default_Ignorable_Code_Point": "Default_Ignorable_Code_Point", "DI": "Default_Ignorable_Code_Point",
	"Deprecated": "Deprecated", "Dep": "Deprecated", "Diacritic": "Diacritic", "Dia": "Diacritic",
	"Emoji": "Emoji", "Emoji_Component": "Emoji_Component", "EComp": "Emoji_Component",
	"Emoji_Modifier": "Emoji_Modifier", "EMod": "Emoji_Modifier",
	"Emoji_Modifier_Base": "Emoji_Modifier_Base", "EBase": "Emoji_Modifier_Base",
	"Emoji_Presentation": "Emoji_Presentation", "EPres": "Emoji_Presentation",
	"Extended_Pictographic": "Extended_Pictographic", "ExtPict": "Extended_Pictographic",
	"Extender": "Extender", "Ext": "Extender",
	"Grapheme_Base": "Grapheme_Base", "Gr_Base": "Grapheme_Base",
	"Grapheme_Extend": "Grapheme_Extend", "Gr_Ext": "Grapheme_Extend",
	"Hex_Digit": "Hex_Digit", "Hex": "Hex_Digit",
	"IDS_Binary_Operator": "IDS_Binary_Operator", "IDSB": "IDS_Binary_Operator",
	"IDS_Trinary_Operator": "IDS_Trinary_Operator", "IDST": "IDS_Trinary_Operator",
	"ID_Continue": "ID_Continue", "IDC": "ID_Continue", "ID_Start": "ID_Start", "IDS": "ID_Start",
	"Ideographic": "Ideographic", "Ideo": "Ideographic",
	"Join_Control": "Join_Control", "Join_C": "Join_Control",
	"Logical_Order_Exception": "Logical_Order_Exception", "LOE": "Logical_Order_Exception",
	"Lowercase": "Lowercase", "Lower": "Lowercase", "Math": "Math",
	"Noncharacter_Code_Point": "Noncharacter_Code_Point", "NChar": "Noncharacter_Code_Point",
	"Pattern_Syntax": "Pattern_Syntax", "Pat_Syn": "Pattern_Syntax",
	"Pattern_White_Space": "Pattern_White_Space", "Pat_WS": "Pattern_White_Space",
	"Quotation_Mark": "Quotation_Mark", "QMark": "Quotation_Mark", "Radical": "Radical",
	"Regional_Indicator": "Regional_Indicator", "RI": "Regional_Indicator",
	"Sentence_Terminal": "Sentence_Terminal", "STerm": "Sentence_Terminal",
	"Soft_Dotted": "Soft_Dotted", "SD": "Soft_Dotted",
	"Terminal_Punctuation": "Terminal_Punctuation", "Term": "Terminal_Punctuation",
	"Unified_Ideograph": "Unified_Ideograph", "UIdeo": "Unified_Ideograph",
	"Uppercase": "Uppercase", "Upper": "Uppercase",
	"Variation_Selector": "Variation_Selector", "VS": "Variation_Selector",
	"White_Space": "White_Space", "WSpace": "White_Space", "space": "White_Space",
	"XID_Continue": "XID_Continue", "XIDC": "XID_Continue", "XID_Start": "XID_Start", "XIDS": "XID_Start",
}

// scriptName returns the long name of a Script value ECMA-262 accepts (a
// long name, or a short one from PropertyValueAliases.txt, Unicode 17).
func scriptName(v string) (string, bool) {
	if long, ok := ecmaScripts[v]; ok {
		return long, true
	}
	for _, long := range ecmaScripts {
		if long == v {
			return long, true
		}
	}
	return "", false
}

// ecmaScripts maps the short name of each script (and the aliases Qaac and
// Qaai) to its long name, from Unicode 17's PropertyValueAliases.txt.
var ecmaScripts = map[string]string{
	"Adlm": "Adlam", "Aghb": "Caucasian_Albanian", "Ahom": "Ahom", "Arab": "Arabic",
	"Armi": "Imperial_Aramaic", "Armn": "Armenian", "Avst": "Avestan", "Bali": "Balinese",
	"Bamu": "Bamum", "Bass": "Bassa_Vah", "Batk": "Batak", "Beng": "Bengali",
	"Berf": "Beria_Erfe", "Bhks": "Bhaiksuki", "Bopo": "Bopomofo", "Brah": "Brahmi",
	"Brai": "Braille", "Bugi": "Buginese", "Buhd": "Buhid", "Cakm": "Chakma",
	"Cans": "Canadian_Aboriginal", "Cari": "Carian", "Cham": "Cham", "Cher": "Cherokee",
	"Chrs": "Chorasmian", "Copt": "Coptic", "Qaac": "Coptic", "Cpmn": "Cypro_Minoan", "Cprt": "Cypriot",
	"Cyrl": "Cyrillic", "Deva": "Devanagari", "Diak": "Dives_Akuru", "Dogr": "Dogra",
	"Dsrt": "Deseret", "Dupl": "Duployan", "Egyp": "Egyptian_Hieroglyphs", "Elba": "Elbasan",
	"Elym": "Elymaic", "Ethi": "Ethiopic", "Gara": "Garay", "Geor": "Georgian",
	"Glag": "Glagolitic", "Gong": "Gunjala_Gondi", "Gonm": "Masaram_Gondi", "Goth": "Gothic",
	"Gran": "Grantha", "Grek": "Greek", "Gujr": "Gujarati", "Gukh": "Gurung_Khema",
	"Guru": "Gurmukhi", "Hang": "Hangul", "Hani": "Han", "Hano": "Hanunoo",
	"Hatr": "Hatran", "Hebr": "Hebrew", "Hira": "Hiragana", "Hluw": "Anatolian_Hieroglyphs",
	"Hmng": "Pahawh_Hmong", "Hmnp": "Nyiakeng_Puachue_Hmong", "Hrkt": "Katakana_Or_Hiragana", "Hung": "Old_Hungarian",
	"Ital": "Old_Italic", "Java": "Javanese", "Kali": "Kayah_Li", "Kana": "Katakana",
	"Kawi": "Kawi", "Khar": "Kharoshthi", "Khmr": "Khmer", "Khoj": "Khojki",
	"Kits": "Khitan_Small_Script", "Knda": "Kannada", "Krai": "Kirat_Rai", "Kthi": "Kaithi",
	"Lana": "Tai_Tham", "Laoo": "Lao", "Latn": "Latin", "Lepc": "Lepcha",
	"Limb": "Limbu", "Lina": "Linear_A", "Linb": "Linear_B", "Lisu": "Lisu",
	"Lyci": "Lycian", "Lydi": "Lydian", "Mahj": "Mahajani", "Maka": "Makasar",
	"Mand": "Mandaic", "Mani": "Manichaean", "Marc": "Marchen", "Medf": "Medefaidrin",
	"Mend": "Mende_Kikakui", "Merc": "Meroitic_Cursive", "Mero": "Meroitic_Hieroglyphs", "Mlym": "Malayalam",
	"Modi": "Modi", "Mong": "Mongolian", "Mroo": "Mro", "Mtei": "Meetei_Mayek",
	"Mult": "Multani", "Mymr": "Myanmar", "Nagm": "Nag_Mundari", "Nand": "Nandinagari",
	"Narb": "Old_North_Arabian", "Nbat": "Nabataean", "Newa": "Newa", "Nkoo": "Nko",
	"Nshu": "Nushu", "Ogam": "Ogham", "Olck": "Ol_Chiki", "Onao": "Ol_Onal",
	"Orkh": "Old_Turkic", "Orya": "Oriya", "Osge": "Osage", "Osma": "Osmanya",
	"Ougr": "Old_Uyghur", "Palm": "Palmyrene", "Pauc": "Pau_Cin_Hau", "Perm": "Old_Permic",
	"Phag": "Phags_Pa", "Phli": "Inscriptional_Pahlavi", "Phlp": "Psalter_Pahlavi", "Phnx": "Phoenician",
	"Plrd": "Miao", "Prti": "Inscriptional_Parthian", "Rjng": "Rejang", "Rohg": "Hanifi_Rohingya",
	"Runr": "Runic", "Samr": "Samaritan", "Sarb": "Old_South_Arabian", "Saur": "Saurashtra",
	"Sgnw": "SignWriting", "Shaw": "Shavian", "Shrd": "Sharada", "Sidd": "Siddham",
	"Sidt": "Sidetic", "Sind": "Khudawadi", "Sinh": "Sinhala", "Sogd": "Sogdian",
	"Sogo": "Old_Sogdian", "Sora": "Sora_Sompeng", "Soyo": "Soyombo", "Sund": "Sundanese",
	"Sunu": "Sunuwar", "Sylo": "Syloti_Nagri", "Syrc": "Syriac", "Tagb": "Tagbanwa",
	"Takr": "Takri", "Tale": "Tai_Le", "Talu": "New_Tai_Lue", "Taml": "Tamil",
	"Tang": "Tangut", "Tavt": "Tai_Viet", "Tayo": "Tai_Yo", "Telu": "Telugu",
	"Tfng": "Tifinagh", "Tglg": "Tagalog", "Thaa": "Thaana", "Thai": "Thai",
	"Tibt": "Tibetan", "Tirh": "Tirhuta", "Tnsa": "Tangsa", "Todr": "Todhri",
	"Tols": "Tolong_Siki", "Toto": "Toto", "Tutg": "Tulu_Tigalari", "Ugar": "Ugaritic",
	"Vaii": "Vai", "Vith": "Vithkuqi", "Wara": "Warang_Citi", "Wcho": "Wancho",
	"Xpeo": "Old_Persian", "Xsux": "Cuneiform", "Yezi": "Yezidi", "Yiii": "Yi",
	"Zanb": "Zanabazar_Square", "Zinh": "Inherited", "Qaai": "Inherited", "Zyyy": "Common", "Zzzz": "Unknown",
}
