package extract

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
)

// MaxDepth is the deepest nesting of objects and arrays the repairer follows.
// A deeper value is refused with a SyntaxError instead of growing the stack.
const MaxDepth = 512

// MaxRepairs is how many repairs one value may need; past it the value is
// not read (a reply of commas or quotes made millions, and gigabytes).
const MaxRepairs = 100_000

// Repair kinds. They are stable names: they are stored in the ledger.
const (
	KindTrailingComma = "trailing_comma"
	KindLeadingComma  = "leading_comma"
	// KindEmptyElement is an array element with nothing in it (["a",,"b"],
	// [,"b"]): dropping it may drop a value the model left out. Lossy.
	KindEmptyElement   = "empty_element"
	KindComment        = "comment"
	KindSingleQuotes   = "single_quotes"
	KindSmartQuotes    = "smart_quotes"
	KindUnquotedKey    = "unquoted_key"
	KindUnquotedString = "unquoted_string"
	KindPythonLiteral  = "python_literal"
	KindJSLiteral      = "js_literal"
	KindMissingComma   = "missing_comma"
	KindMissingColon   = "missing_colon"
	KindMissingValue   = "missing_value"
	KindMissingQuote   = "missing_quote"
	KindControlChar    = "control_char"
	KindUnescapedQuote = "unescaped_quote"
	KindInvalidEscape  = "invalid_escape"
	KindTruncated      = "truncated"
	KindUnclosed       = "unclosed_bracket"
	KindExtraBracket   = "extra_bracket"
	KindMismatched     = "mismatched_bracket"
	KindNumberFormat   = "number_format"
	KindEllipsis       = "ellipsis"
	KindConcat         = "string_concat"
	KindFunctionCall   = "function_call"
	// KindFunctionResult: a call of a function that computes a value
	// (abs(-5), round(2.5), len("abcd")) read as its argument: not the
	// value the call means. A JSONP callback around the whole reply and
	// the data wrappers of database shells and Python (ObjectId("1"),
	// NumberLong("2"), ISODate(...), Decimal("1.5")) are function_call.
	KindFunctionResult = "function_result"
	KindTuple          = "tuple"
	KindTripleQuoted   = "triple_quoted"
	KindEscapedJSON    = "escaped_json"
	KindWhitespace     = "special_whitespace"
	KindExtraText      = "extra_text"
	// KindNumberIncomplete: a number with no digits (-) or an exponent with
	// none (1e): read as -0 or 1, a guess.
	KindNumberIncomplete = "number_incomplete"
	// KindNumberSplit: digits after a number with no comma between them
	// (1 500): a thousands separator or two values, a guess either way.
	KindNumberSplit = "number_split"
	// KindNonFinite: NaN or Infinity, which JSON cannot hold, read as null:
	// not the number the model wrote.
	KindNonFinite = "non_finite"
	// KindQuoteUnbalanced: a double-quoted string whose last quote read as
	// text opens a quoted word, and whose end quote follows that word
	// ({"s": "say "hi"} read as `say "hi`): the end quote may close the
	// word, the string's own end missing. Which was meant is a guess. An
	// inner quote that closes (24" screen, "v"alue) is not one.
	KindQuoteUnbalanced = "unbalanced_quote"
)

// Lossy reports whether a repair of this kind dropped text of the reply
// that may belong to the value, or made up what the reply did not say:
// text after a value (extra_text: "Bob" Smith, 12.50 USD), an ellipsis in
// place of items, a key with no value read as null, a number completed
// (number_incomplete) or split (number_split), an empty array element
// dropped (empty_element). The value such a repair
// gives may not be what the model meant; package validate never accepts
// it as valid. Every other repair only changes how the value is written.
func Lossy(kind string) bool {
	switch kind {
	case KindExtraText, KindEllipsis, KindMissingValue, KindNumberIncomplete, KindNumberSplit, KindNonFinite, KindEmptyElement,
		KindFunctionResult, KindQuoteUnbalanced:
		return true
	}
	return false
}

// parser is a lenient, single-pass JSON parser. It reads src[i:end] and writes
// strict, compact JSON to out, recording each repair. Nesting is bounded by
// MaxDepth; strings are re-read at most twice, and a shared work budget turns
// every re-read off once it is spent, so the total work stays linear.
type parser struct {
	src      string
	i        int
	end      int  // region end, exclusive
	atEOF    bool // end is the end of the reply: running out means truncated
	fence    bool // a ``` or ~~~ run in a structural position ends the region
	out      []byte
	repairs  []fixpoint.Repair
	depth    int
	stack    []byte // closers of the open containers, innermost last
	paren    int    // open tuples and function calls
	mergeTop bool   // raw reply: members after an early '}' rejoin the object
	inKey    bool   // the string being read is an object key
	truncAt  int    // 1 + index of the truncated repair, 0 for none
	tooDeep  bool   // nesting passed MaxDepth
	tooMany  bool   // repairs passed MaxRepairs
	// closeFrom, closeAt memoize the next "*/": none in [closeFrom, closeAt).
	closeFrom, closeAt int
	trunc              bool
	stopped            bool // the region ended early (fence, EOF) while parsing
	err                *SyntaxError
	work               *int // bytes re-read by string retries, shared across attempts
	limit              int
	offmap             []int // when src is an unescaped copy: offsets into the reply
}

func (p *parser) off(i int) int {
	if p.offmap != nil {
		if i < len(p.offmap) {
			return p.offmap[i]
		}
		if len(p.offmap) > 0 {
			return p.offmap[len(p.offmap)-1] + 1
		}
	}
	return i
}

func (p *parser) repair(kind string, at int) {
	if len(p.repairs) >= MaxRepairs {
		// Garbage, not a value to repair: four million commas made as
		// many repairs, 1.4 GB of them. The parse fails (finishParse).
		p.tooMany = true
		p.fail(at, "the value needs over %d repairs: it is not JSON to repair", MaxRepairs)
		return
	}
	p.repairs = append(p.repairs, fixpoint.Repair{Kind: kind, Offset: p.off(at)})
}

func (p *parser) fail(at int, format string, args ...any) bool {
	if p.err == nil {
		p.err = newSyntaxError(p.off(at), format, args...)
	}
	return false
}

// ended reports whether the region has ended at p.i.
func (p *parser) ended() bool {
	if p.i >= p.end {
		return true
	}
	if p.fence && isFenceAt(p.src, p.i) {
		return true
	}
	return false
}

// closeRepair records that an open container or value was closed because the
// region ended: truncated at the end of the reply, unclosed otherwise.
func (p *parser) closeRepair(kind string) {
	if p.atEOF && p.i >= p.end {
		p.truncate(p.i)
		return
	}
	p.repair(kind, p.i)
}

// truncate marks the value cut off at the end of the reply, once.
func (p *parser) truncate(at int) {
	p.trunc = true
	// truncAt remembers where the repair went, so the check stays O(1)
	// however deep the value; a retry that cut the repairs back drops it.
	if k := p.truncAt; k > 0 && k <= len(p.repairs) && p.repairs[k-1].Kind == KindTruncated {
		return
	}
	p.repair(KindTruncated, at)
	p.truncAt = len(p.repairs)
}

func isFenceAt(s string, i int) bool {
	if i+3 > len(s) {
		return false
	}
	c := s[i]
	return (c == '`' || c == '~') && s[i+1] == c && s[i+2] == c
}

// skip skips whitespace and comments, recording repairs for comments and
// non-ASCII whitespace.
func (p *parser) skip() {
	for p.i < p.end {
		c := p.src[p.i]
		switch c {
		case ' ', '\t', '\n', '\r':
			p.i++
			continue
		case '/':
			if p.i+1 < p.end && p.src[p.i+1] == '/' {
				p.repair(KindComment, p.i)
				p.i = lineEnd(p.src, p.i, p.end)
				continue
			}
			if p.i+1 < p.end && p.src[p.i+1] == '*' {
				p.repair(KindComment, p.i)
				if j := p.commentEnd(p.i + 2); j < 0 {
					p.i = p.end
				} else {
					p.i = j + 2
				}
				continue
			}
		case '#':
			p.repair(KindComment, p.i)
			p.i = lineEnd(p.src, p.i, p.end)
			continue
		}
		if c >= 0x80 {
			if n := specialSpace(p.src, p.i); n > 0 {
				p.repair(KindWhitespace, p.i)
				p.i += n
				continue
			}
		}
		return
	}
}

func lineEnd(s string, i, end int) int {
	j := strings.IndexByte(s[i:end], '\n')
	if j < 0 {
		return end
	}
	return i + j
}

// specialSpace returns the byte length of a non-ASCII space at s[i], or 0.
func specialSpace(s string, i int) int {
	r, n := utf8.DecodeRuneInString(s[i:])
	switch r {
	case 0xa0, 0x180e, 0x200b, 0x202f, 0x205f, 0x3000, 0xfeff:
		return n
	}
	if r >= 0x2000 && r <= 0x200a {
		return n
	}
	return 0
}

// quote kinds
const (
	qNone = iota
	qDouble
	qSingle
	qBacktick
	qSmartDouble
	qSmartSingle
	qAcute
)

// quoteAt reports the quote at s[i] and its byte length.
func quoteAt(s string, i int) (int, int) {
	if i >= len(s) {
		return qNone, 0
	}
	switch s[i] {
	case '"':
		return qDouble, 1
	case '\'':
		return qSingle, 1
	case '`':
		return qBacktick, 1
	case 0xe2:
		if i+2 < len(s) && s[i+1] == 0x80 {
			switch s[i+2] {
			case 0x9c, 0x9d:
				return qSmartDouble, 3
			case 0x98, 0x99:
				return qSmartSingle, 3
			}
		}
	case 0xc2:
		if i+1 < len(s) && s[i+1] == 0xb4 {
			return qAcute, 2
		}
	}
	return qNone, 0
}

// endsQuote reports whether quote kind q closes a string opened with start.
func endsQuote(start, q int) bool {
	switch start {
	case qDouble:
		return q == qDouble
	case qSingle:
		return q == qSingle
	case qSmartDouble:
		return q == qDouble || q == qSmartDouble
	case qSmartSingle:
		return q == qSingle || q == qSmartSingle || q == qBacktick || q == qAcute
	case qBacktick, qAcute:
		return q == qBacktick || q == qAcute || q == qSingle
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isDelim(c byte) bool {
	switch c {
	case ',', ':', '[', ']', '{', '}', '\n', '+', '/':
		return true
	}
	return false
}

// endDelim reports whether c after a quote shows the quote ended the string.
func (p *parser) endDelim(c byte) bool {
	return isDelim(c) || (p.paren > 0 && c == ')')
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}

func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }

// value parses one value at p.i (after whitespace).
func (p *parser) value() bool {
	p.skip()
	if p.i >= p.end {
		return p.fail(p.i, "unexpected end of text")
	}
	c := p.src[p.i]
	switch {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '(':
		return p.tuple()
	case c == '"' && strings.HasPrefix(p.src[p.i:p.end], `"""`):
		return p.tripleQuoted()
	case c == '`' && strings.HasPrefix(p.src[p.i:p.end], "```"):
		return p.fencedString()
	}
	if q, _ := quoteAt(p.src, p.i); q != qNone {
		return p.str(false, -1)
	}
	if c == '-' {
		// -Infinity, -NaN: non-finite, like Infinity (it was read as the
		// unquoted string "-Infinity", valid wherever a string is).
		for _, w := range [...]string{"-Infinity", "-NaN", "-infinity", "-inf", "-nan", "-Inf", "-INF", "-NAN", "-INFINITY"} {
			if j := p.i + len(w); strings.HasPrefix(p.src[p.i:p.end], w) && (j >= p.end || !isIdent(p.src[j])) {
				p.repair(KindNonFinite, p.i)
				p.out = append(p.out, "null"...)
				p.i = j
				return true
			}
		}
	}
	if c == '-' || c == '.' || isDigit(c) {
		return p.number()
	}
	if c == '/' {
		return p.regex()
	}
	if c == '\\' && p.i+1 < p.end && p.src[p.i+1] == '"' {
		return p.fail(p.i, "unexpected '\\'")
	}
	if isIdentStart(c) {
		return p.symbol()
	}
	return p.fail(p.i, "unexpected %s", describe(p.src, p.i))
}

func describe(s string, i int) string {
	if i >= len(s) {
		return "end of text"
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return strconv.QuoteRune(r)
}

func (p *parser) push(at int, closer byte) bool {
	p.depth++
	p.stack = append(p.stack, closer)
	if p.depth > MaxDepth {
		p.tooDeep = true
		return p.fail(at, "nesting deeper than %d", MaxDepth)
	}
	return true
}

func (p *parser) pop() {
	p.depth--
	p.stack = p.stack[:len(p.stack)-1]
}

// closesOuter reports whether closer c matches a container enclosing the
// innermost one.
func (p *parser) closesOuter(c byte) bool {
	for k := len(p.stack) - 2; k >= 0; k-- {
		if p.stack[k] == c {
			return true
		}
	}
	return false
}

// memberStep is what reading one object member tells object to do next.
type memberStep int

const (
	memberRead  memberStep = iota // a member was read: look for the next
	memberNext                    // nothing was added: look again
	memberEnd                     // the object ends here (unclosed or cut off)
	memberFail                    // the reply cannot be read: return false
	memberWhole                   // the object was read whole as something else: return true
)

// object parses an object at '{'.
func (p *parser) object() bool {
	open := p.i
	if !p.push(open, '}') {
		return false
	}
	defer p.pop()
	p.i++
	outOpen := len(p.out)
	p.out = append(p.out, '{')
	first := true
	comma := -1 // the separator after the last member, once seen
loop:
	for {
		p.skip()
		if p.ended() {
			p.stopped = true
			p.closeRepair(KindUnclosed)
			break
		}
		c := p.src[p.i]
		if (c == '}' || c == ']' || c == ')') && comma >= 0 {
			p.repair(KindTrailingComma, comma)
			comma = -1
		}
		switch {
		case c == '}':
			if p.mergeTop && p.depth == 1 && p.keyFollows(p.i+1) {
				// {"a": 1}, "b": 2}: the object was closed too early.
				p.repair(KindExtraBracket, p.i)
				p.i++
				continue
			}
			p.i++
			break loop
		case c == ']' || c == ')':
			if p.closesOuter(c) && !p.keyFollows(p.i+1) {
				p.repair(KindMismatched, p.i)
				break loop
			}
			p.repair(KindExtraBracket, p.i)
			p.i++
			continue
		case c == ',':
			p.separator(first, &comma, false)
			continue
		case p.ellipsis():
			continue
		}
		switch p.member(open, outOpen, first, comma) {
		case memberRead:
			first, comma = false, -1
		case memberEnd:
			break loop
		case memberFail:
			return false
		case memberWhole:
			return true
		}
	}
	p.out = append(p.out, '}')
	return true
}

// member reads one member of the object opened at open (written to out
// from outOpen): its key, colon and value.
func (p *parser) member(open, outOpen int, first bool, comma int) memberStep {
	c := p.src[p.i]
	// A key is expected here.
	if q, _ := quoteAt(p.src, p.i); q == qNone && !isIdentStart(c) && !isDigit(c) && c != '-' {
		// Not a key: the object is missing its closing brace.
		p.repair(KindUnclosed, p.i)
		return memberEnd
	}
	if !first && comma < 0 {
		p.missingComma()
	}
	memberOut, memberRep := len(p.out), len(p.repairs)
	if !first {
		p.out = append(p.out, ',')
	}
	keyAt := p.i
	kq, _ := quoteAt(p.src, keyAt)
	if !p.key() {
		return memberFail
	}
	p.skip()
	if first && kq != qNone && !p.ended() && p.src[p.i] == ',' {
		// {'a', 'b'}: a Python set, read as an array.
		p.out, p.repairs = p.out[:outOpen], p.repairs[:memberRep]
		if !p.set(open, keyAt) {
			return memberFail
		}
		return memberWhole
	}
	drop := func() { p.out, p.repairs = p.out[:memberOut], p.repairs[:memberRep] }
	if kq == qNone && !p.ended() {
		// A stray word before a key or the end: {"a": 1, COMMENT "b": 2}.
		if c := p.src[p.i]; c == '}' || (c != ':' && p.quoteStartsKey(p.i)) {
			drop()
			p.repair(KindExtraText, keyAt)
			return memberNext
		}
	}
	if p.ended() {
		// Cut off after a key: drop the incomplete member.
		drop()
		p.stopped = true
		p.closeRepair(KindUnclosed)
		return memberEnd
	}
	if !p.colon(kq, keyAt) {
		return memberFail
	}
	p.out = append(p.out, ':')
	p.skip()
	if p.i >= p.end || (p.fence && isFenceAt(p.src, p.i) && !p.fencedValueAhead()) {
		drop()
		p.stopped = true
		p.closeRepair(KindUnclosed)
		return memberEnd
	}
	if c := p.src[p.i]; c == ',' || c == '}' || c == ']' {
		p.repair(KindMissingValue, p.i)
		p.out = append(p.out, "null"...)
	} else if !p.memberValue() {
		return memberFail
	}
	return memberRead
}

// set reads the object opened at open, whose first key at keyAt is
// followed by a comma, as a Python set: an array of its elements.
func (p *parser) set(open, keyAt int) bool {
	p.i = open + 1
	p.repair(KindTuple, open)
	p.out = append(p.out, '[')
	p.stack[len(p.stack)-1] = '}'
	wasTrunc := p.trunc
	if !p.elements('}') {
		return false
	}
	if p.trunc && !wasTrunc {
		return p.fail(keyAt, "expected ':' after the key at offset %d", p.off(keyAt))
	}
	p.out = append(p.out, ']')
	return true
}

// colon reads what separates the key at keyAt (quoted unless kq is qNone)
// from its value: a colon, an '=' or nothing before a value.
func (p *parser) colon(kq, keyAt int) bool {
	switch c := p.src[p.i]; {
	case c == ':':
		p.i++
	case c == '=':
		p.repair(KindMissingColon, p.i)
		p.i++
	case p.valueStart(p.i):
		if kq == qNone {
			// Neither quotes nor a colon: words after a member, not
			// a member ({"height": "5" 6", "name": "Bob"} gave a key
			// "6" with the value "").
			p.repair(KindExtraText, keyAt)
		} else {
			p.repair(KindMissingColon, p.i)
		}
	default:
		return p.fail(p.i, "expected ':' after the key at offset %d, found %s", p.off(keyAt), describe(p.src, p.i))
	}
	return true
}

// missingComma records the comma missing before the member at p.i: a
// number_split when digits follow a number (1 500), else missing_comma.
func (p *parser) missingComma() {
	if p.digitGroup() {
		p.repair(KindNumberSplit, p.i)
		return
	}
	p.repair(KindMissingComma, p.i)
}

// digitGroup reports whether three digits at p.i follow an integer on the
// same line with only spaces between: 1 500 may be one number with a
// thousands separator. 1 2, 1.5 2.5, 1e5 2, or numbers on separate lines
// are two values.
func (p *parser) digitGroup() bool {
	if p.i >= p.end || !isDigit(p.src[p.i]) {
		return false
	}
	n := len(p.out)
	j := n
	for j > 0 && isDigit(p.out[j-1]) {
		j--
	}
	if j == n || (j > 0 && (p.out[j-1] == '.' || p.out[j-1] == 'e' || p.out[j-1] == 'E' || p.out[j-1] == '+' || p.out[j-1] == '"')) {
		return false // not an integer just written
	}
	k := p.i - 1
	for k >= 0 && (p.src[k] == ' ' || p.src[k] == '\t') {
		k--
	}
	if k < 0 || k == p.i-1 || !isDigit(p.src[k]) {
		return false // not only spaces back to a digit
	}
	// A group of exactly three digits, as a thousands separator makes.
	e := p.i
	for e < p.end && isDigit(p.src[e]) {
		e++
	}
	return e-p.i == 3 && (e >= p.end || p.src[e] != '.')
}

// memberValue parses a value in an object or array, treating `...` as nothing.
func (p *parser) memberValue() bool {
	return p.value()
}

// valueStart reports whether a value can start at s[i].
func (p *parser) valueStart(i int) bool {
	if i >= p.end {
		return false
	}
	c := p.src[i]
	if c == '{' || c == '[' || c == '-' || isDigit(c) || isIdentStart(c) {
		return true
	}
	q, _ := quoteAt(p.src, i)
	return q != qNone
}

// ellipsis skips a `...` placeholder member.
func (p *parser) ellipsis() bool {
	rest := p.src[p.i:p.end]
	n := 0
	switch {
	case strings.HasPrefix(rest, "..."):
		n = 3
	case strings.HasPrefix(rest, "\u2026"): // …
		n = len("\u2026")
	case strings.HasPrefix(rest, ".."):
		n = 2
	default:
		return false
	}
	for n < len(rest) && rest[n] == '.' {
		n++
	}
	p.repair(KindEllipsis, p.i)
	p.i += n
	return true
}

// key parses an object key: a string or an unquoted identifier.
func (p *parser) key() bool {
	if q, _ := quoteAt(p.src, p.i); q != qNone {
		p.inKey = true
		ok := p.str(false, -1)
		p.inKey = false
		return ok
	}
	start := p.i
	for p.i < p.end {
		c := p.src[p.i]
		if c == ':' || c == ',' || c == '}' || c == ']' || c == '{' || c == '[' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '=' {
			break
		}
		if q, _ := quoteAt(p.src, p.i); q != qNone {
			break
		}
		p.i++
	}
	k := p.src[start:p.i]
	if k == "" {
		return p.fail(start, "unexpected %s", describe(p.src, start))
	}
	p.repair(KindUnquotedKey, start)
	p.out = appendJSONString(p.out, k)
	// A stray end quote after an unquoted key: {a":1}.
	if q, n := quoteAt(p.src, p.i); q != qNone {
		j := p.i + n
		for j < p.end && (p.src[j] == ' ' || p.src[j] == '\t') {
			j++
		}
		if j < p.end && p.src[j] == ':' {
			p.repair(KindMissingQuote, p.i)
			p.i += n
		}
	}
	return true
}

// array parses an array at '['.
func (p *parser) array() bool {
	open := p.i
	if !p.push(open, ']') {
		return false
	}
	defer p.pop()
	p.i++
	p.out = append(p.out, '[')
	if !p.elements(']') {
		return false
	}
	p.out = append(p.out, ']')
	return true
}

// elements parses array elements up to the closer.
func (p *parser) elements(closer byte) bool {
	first := true
	comma := -1 // the separator after the last member, once seen
	for {
		p.skip()
		if p.ended() {
			p.stopped = true
			p.closeRepair(KindUnclosed)
			return true
		}
		c := p.src[p.i]
		if (c == ']' || c == '}' || c == ')') && comma >= 0 {
			p.repair(KindTrailingComma, comma)
			comma = -1
		}
		if c == closer {
			p.i++
			return true
		}
		if c == ']' || c == '}' || c == ')' {
			if p.closesOuter(c) {
				p.repair(KindMismatched, p.i)
				if c == '}' && p.keyFollows(p.i+1) {
					// ["a", "b"}, "k": ... : the brace was meant to close the array.
					p.i++
				}
				return true
			}
			p.repair(KindExtraBracket, p.i)
			p.i++
			continue
		}
		if c == ',' {
			p.separator(first, &comma, true)
			continue
		}
		if p.ellipsis() {
			continue
		}
		missing := -1
		if !first && comma < 0 {
			p.missingComma()
			missing = len(p.repairs) - 1
		}
		if !first {
			p.out = append(p.out, ',')
		}
		from := len(p.repairs)
		if !p.value() {
			return false
		}
		if missing >= 0 && p.repairs[missing].Kind == KindMissingComma && hasRepair(p.repairs[from:], KindUnquotedString) {
			// A bare word after an element with no comma: words after a
			// value, not an element (["a", "Bob" Smith] gave "Bob" and
			// "Smith"; [true love] gave true and "love").
			p.repairs[missing].Kind = KindExtraText
		}
		first = false
		comma = -1
	}
}

// tuple parses a Python tuple `(a, b)` as an array, `(a)` as a.
func (p *parser) tuple() bool {
	open := p.i
	if !p.push(open, ')') {
		return false
	}
	p.paren++
	defer func() { p.pop(); p.paren-- }()
	p.repair(KindTuple, open)
	p.i++
	outStart := len(p.out)
	p.out = append(p.out, '[')
	if !p.elements(')') {
		return false
	}
	p.out = append(p.out, ']')
	// (x) with a single element and no comma is just x.
	inner := p.src[open+1 : p.i]
	if !strings.Contains(inner, ",") && len(p.out)-outStart > 2 {
		body := append([]byte(nil), p.out[outStart+1:len(p.out)-1]...)
		p.out = append(p.out[:outStart], body...)
	}
	return true
}

// tripleQuoted parses a Python """...""" string, dedenting its lines.
func (p *parser) tripleQuoted() bool {
	start := p.i
	p.repair(KindTripleQuoted, start)
	p.i += 3
	j := strings.Index(p.src[p.i:p.end], `"""`)
	var body string
	if j < 0 {
		body = p.src[p.i:p.end]
		p.i = p.end
		p.closeRepair(KindMissingQuote)
	} else {
		body = p.src[p.i : p.i+j]
		p.i += j + 3
	}
	p.out = appendJSONString(p.out, dedent(body))
	return true
}

// dedent drops a leading newline, trailing blank space and common indentation.
func dedent(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if strings.HasPrefix(s, "\n") || strings.HasPrefix(s, "\r\n") {
		s = strings.TrimLeft(s, "\r")
		s = s[strings.IndexByte(s, '\n')+1:]
	} else {
		return s
	}
	lines := strings.Split(s, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for k, l := range lines {
		if strings.TrimSpace(l) == "" {
			// A line of spaces is blank, as textwrap.dedent has it.
			lines[k] = ""
		}
	}
	if indent > 0 {
		for k, l := range lines {
			if len(l) >= indent {
				lines[k] = l[indent:]
			} else {
				lines[k] = strings.TrimLeft(l, " \t")
			}
		}
	}
	return strings.Join(lines, "\n")
}

func appendJSONString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c < 0x20:
			out = appendControl(out, c)
		default:
			out = append(out, c)
		}
		i++
	}
	return append(out, '"')
}

func appendControl(out []byte, c byte) []byte {
	switch c {
	case '\n':
		return append(out, '\\', 'n')
	case '\r':
		return append(out, '\\', 'r')
	case '\t':
		return append(out, '\\', 't')
	case '\b':
		return append(out, '\\', 'b')
	case '\f':
		return append(out, '\\', 'f')
	}
	const hex = "0123456789abcdef"
	return append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

// str parses a quoted string at p.i. With stopAtDelim it ends at the first
// delimiter (an end quote is missing); with stopAt >= 0 it ends there.
func (p *parser) str(stopAtDelim bool, stopAt int) bool {
	s := p.openString(stopAtDelim, stopAt)
	for {
		if p.i >= p.end {
			return s.atEnd()
		}
		if p.i == s.stopAt {
			return s.missingQuote()
		}
		if q, n := quoteAt(p.src, p.i); q != qNone && endsQuote(s.qk, q) {
			if done, ok := s.quote(q, n); done {
				return ok
			}
			continue
		}
		if done, ok := s.char(p.src[p.i]); done {
			return ok
		}
	}
}

// strRead is the state of one read of a quoted string (parser.str): where
// it started, so that it can be read again in another mode, and what the
// text read so far says about the quotes inside it.
type strRead struct {
	p                  *parser
	start              int // the opening quote
	outStart, repStart int // len(p.out), len(p.repairs) at the start
	startTrunc         bool
	qk, qn             int  // the opening quote's kind and byte length
	stopAtDelim        bool // the end quote is missing: end at a delimiter
	stopAt             int  // >= 0: the string ends there
	canRetry           bool // may read the string again in another mode
	doubled            bool // a doubled opening quote (CSV-style quoting)
	block              bool // the text opens with a line break, as code does
	wsStart            int  // trailing run of raw whitespace in out, -1 for none
	wsNL               bool // that run holds a line break
	embed              int  // open braces of an object quoted inside the text
	inner              int  // quotes of the string's kind read as text, inch marks (6'2") aside
	// opened is set while the last quote read as text opened a quoted
	// word (a space, '=' or an opening bracket before it, a word after
	// it: say "hi, key="value): a double-quoted string that ends then may
	// have been meant to end after the word's own end quote (see
	// KindQuoteUnbalanced).
	opened bool
}

// openString reads the opening quote at p.i and sets up the read.
func (p *parser) openString(stopAtDelim bool, stopAt int) *strRead {
	s := &strRead{p: p, start: p.i, outStart: len(p.out), repStart: len(p.repairs), startTrunc: p.trunc,
		stopAtDelim: stopAtDelim, stopAt: stopAt, wsStart: -1}
	s.qk, s.qn = quoteAt(p.src, p.i)
	switch s.qk {
	case qSingle, qBacktick, qAcute:
		p.repair(KindSingleQuotes, s.start)
	case qSmartDouble, qSmartSingle:
		p.repair(KindSmartQuotes, s.start)
	}
	p.i += s.qn
	p.out = append(p.out, '"')
	// ""value" or ''text'': a doubled opening quote (CSV-style quoting)
	// when text, not a separator, follows it. Then a doubled quote closes.
	s.doubled = p.doubledOpen(s.qk)
	if s.doubled {
		p.repair(KindUnescapedQuote, p.i)
		p.i += s.qn
	}
	s.block = p.i < p.end && (p.src[p.i] == '\n' || p.src[p.i] == '\r')
	s.canRetry = !stopAtDelim && stopAt < 0 && (p.work == nil || *p.work < p.limit)
	if !s.canRetry && stopAt < 0 {
		// Budget spent: read in the mode that never re-reads.
		s.stopAtDelim = stopAtDelim || (p.work != nil && *p.work >= p.limit)
	}
	return s
}

// textQuote notes a quote at iq, n bytes long, read as text.
func (s *strRead) textQuote(iq, n int) {
	p := s.p
	if !isDigit(p.src[iq-1]) {
		s.inner++
	}
	before := iq == s.start+s.qn || strings.IndexByte(" \t\n=([<", p.src[iq-1]) >= 0
	after := iq+n < p.end && p.src[iq+n] != ' ' && p.src[iq+n] != '\t' && p.src[iq+n] != '\n' && p.src[iq+n] != '\r' && quoteKind(p.src, iq+n) == qNone
	s.opened = before && after
}

// writeTextQuote writes the quote at iq as text of the string and reads on
// after it.
func (s *strRead) writeTextQuote(q, iq, n int) {
	p := s.p
	p.out = append(p.out, textQuoteBytes(q, p.src[iq:iq+n])...)
	p.i = iq + n
	s.textQuote(iq, n)
}

// closed records what the quotes read as text say once the string ends.
func (s *strRead) closed() {
	p := s.p
	if s.opened && (s.qk == qDouble || s.qk == qSmartDouble) {
		p.repair(KindQuoteUnbalanced, s.start)
	}
	if s.doubled && s.inner%2 == 1 {
		// ""Hello" she said": the string ends at one quote and a
		// quote inside it is text, so the doubled opening quote was
		// that text quote's pair, not noise.
		p.out = slices.Insert(p.out, s.outStart+1, textQuoteBytes(s.qk, p.src[s.start+s.qn:s.start+2*s.qn])...)
	}
}

// retry reads the string again from its opening quote in another mode,
// charging the bytes read so far to the shared work budget.
func (s *strRead) retry(stopDelim bool, at int) bool {
	p := s.p
	if p.work != nil {
		*p.work += p.i - s.start
	}
	p.i = s.start
	p.out, p.repairs = p.out[:s.outStart], p.repairs[:s.repStart]
	p.trunc = s.startTrunc
	return p.str(stopDelim, at)
}

// missingQuote ends the string at p.i, its end quote missing.
func (s *strRead) missingQuote() bool {
	p := s.p
	s.closed()
	p.trimOutSpace(s.outStart)
	p.repair(KindMissingQuote, p.i)
	p.out = append(p.out, '"')
	return true
}

// atEnd ends the string at the end of the region: truncated, or its end
// quote missing before a delimiter or a closing fence, read again.
func (s *strRead) atEnd() bool {
	p := s.p
	e := p.i
	// A fence right before the end: the string ends before it.
	if k := strings.LastIndex(p.src[s.start:p.i], "```"); k > 0 && strings.TrimSpace(p.src[s.start+k+3:p.i]) == "" {
		e = s.start + k
	}
	iPrev := prevNonSpace(p.src, e-1, s.start)
	if s.canRetry && iPrev > s.start && isDelim(p.src[iPrev]) {
		return s.retry(true, -1)
	}
	if s.canRetry && e < p.i {
		return s.retry(false, e)
	}
	s.closed()
	p.closeRepair(KindMissingQuote)
	p.out = append(p.out, '"')
	return true
}

// quote reads a quote of the string's kind at p.i, n bytes long: the end
// of the string, a quote that is text, or a sign that the end quote is
// missing earlier (then the string is read again). done reports that the
// string ended, with ok its result.
func (s *strRead) quote(q, n int) (done, ok bool) {
	p := s.p
	iq := p.i
	if q2, n2 := quoteAt(p.src, iq+n); s.embed == 0 && q2 == q {
		if s.doubled {
			// ""value"": the doubled quote closes the doubled string.
			p.repair(KindUnescapedQuote, iq+n)
			p.i = iq + n + n2
			p.out = append(p.out, '"')
			return true, true
		}
		if iq > s.start+s.qn && p.valueEndsAt(iq+n+n2) {
			// "The TV is 72"": the first of two quotes before the
			// end of the value is text (an inch mark, a quote).
			p.repair(KindUnescapedQuote, iq)
			s.writeTextQuote(q, iq, n)
			s.wsStart, s.wsNL = -1, false
			return false, false
		}
	}
	j := p.peekSkipLine(iq + n)
	if !s.stopAtDelim && p.doubledEnd(j) {
		// "a"\n", : the second quote ends the string.
		p.repair(KindUnescapedQuote, iq)
		s.writeTextQuote(q, iq, n)
		if s.block {
			// In a block of text (the string opens with a line
			// break, as code does) the lone quote is content;
			// otherwise it is noise dropped with its line below.
			s.wsStart, s.wsNL = -1, false
		}
		return false, false
	}
	if s.embed == 0 && s.endsAt(j) {
		if s.wsNL {
			// The closing quote sat on its own line: drop the line break.
			p.repair(KindControlChar, iq)
			p.out = p.out[:s.wsStart]
		}
		p.i = iq
		s.closed()
		p.i = iq + n
		p.out = append(p.out, '"')
		p.concat()
		return true, true
	}
	if done, ok = s.quoteAfterDelim(iq); done {
		return done, ok
	}
	p.repair(KindUnescapedQuote, iq)
	s.writeTextQuote(q, iq, n)
	s.wsStart, s.wsNL = -1, false
	return false, false
}

// endsAt reports whether what follows a quote, at j, ends the string there.
func (s *strRead) endsAt(j int) bool {
	p := s.p
	return s.stopAtDelim || j >= p.end || p.src[j] == '\n' || p.src[j] == '\r' ||
		(p.endDelim(p.src[j]) && !p.strayCloser(p.src[j], j) && !p.commaThenText(j)) ||
		isFenceAt(p.src, j) || isDigit(p.src[j]) || quoteKind(p.src, j) != qNone
}

// quoteAfterDelim reads the string again when the quote at iq, which does
// not end it, follows a delimiter: the end quote is missing before it.
func (s *strRead) quoteAfterDelim(iq int) (done, ok bool) {
	p := s.p
	if s.embed != 0 || !s.canRetry {
		return false, false
	}
	iPrev := prevNonSpace(p.src, iq-1, s.start)
	if iPrev <= s.start {
		return false, false
	}
	prev := p.src[iPrev]
	// In an object value a comma before a quote ends the string only
	// when a key follows: "lorem, "ipsum" sic" is text.
	textComma := prev == ',' && p.inValue() && !p.quoteStartsKey(iq)
	switch {
	case prev == ',' && !textComma:
		return true, s.retry(false, iPrev)
	case p.inKey && prev == ':':
		// {"key:"value"}: the key's end quote is missing before the colon.
		return true, s.retry(false, iPrev)
	case !textComma && isDelim(prev) && prev != '\n' && prev != '/' && prev != ':' && !(prev == '{' && iPrev == iq-1):
		return true, s.retry(true, -1)
	}
	return false, false
}

// char reads one byte of the string's text at p.i that is not its quote.
func (s *strRead) char(c byte) (done, ok bool) {
	p := s.p
	switch c {
	case ' ', '\t', '\n', '\r':
		if s.wsStart < 0 {
			s.wsStart, s.wsNL = len(p.out), false
		}
		if c == '\n' || c == '\r' {
			s.wsNL = true
		}
	default:
		s.wsStart, s.wsNL = -1, false
	}
	if c == '\\' {
		if !p.escape() {
			return true, false
		}
		return false, false
	}
	if c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\b' && c != '\f' {
		return true, p.fail(p.i, "invalid control character %q in a string", c)
	}
	if c < 0x20 {
		if s.stopAtDelim && c == '\n' {
			return true, s.missingQuote()
		}
		p.repair(KindControlChar, p.i)
		p.out = appendControl(p.out, c)
		p.i++
		return false, false
	}
	if !s.stopAtDelim {
		// {"k": ...} quoted inside the text: its quotes are content
		// until its braces balance.
		if c == '{' && (s.embed > 0 || p.i+1 < p.end && p.src[p.i+1] == '"' && p.quoteStartsKey(p.i+1)) {
			s.embed++
		} else if c == '}' && s.embed > 0 {
			s.embed--
		}
	}
	if s.stopAtDelim && (c == ',' && !p.commaThenText(p.i) || c == '[' || c == ']' || c == '{' || c == '}' || c == ':' && p.inKey) {
		return true, s.missingQuote()
	}
	if c == '"' {
		p.out = append(p.out, '\\', '"')
	} else {
		p.out = append(p.out, c)
	}
	p.i++
	return false, false
}

// textQuoteBytes is how a quote of kind q, raw in the reply, is written
// inside a JSON string when it is text: a straight double quote escaped, any
// other quote (a curly one, an apostrophe) as the model wrote it.
func textQuoteBytes(q int, raw string) []byte {
	if q == qDouble {
		return []byte{'\\', '"'}
	}
	return []byte(raw)
}

// doubledOpen reports whether the quote at p.i repeats the opening quote of
// kind qk and is followed, on its line, by text that ends at another quote of
// that kind: ""value" or "" key". An empty string ("") is followed by a
// separator, a quote or the end instead.
func (p *parser) doubledOpen(qk int) bool {
	q, n := quoteAt(p.src, p.i)
	if q != qk || qk == qNone {
		return false
	}
	k := p.peekSkipLine(p.i + n)
	if k >= p.end || isDelim(p.src[k]) || quoteKind(p.src, k) != qNone || p.src[k] == '\r' || p.src[k] == ')' {
		return false
	}
	for limit := min(p.end, k+200); k < limit && p.src[k] != '\n'; k++ {
		if quoteKind(p.src, k) == qk {
			return true
		}
	}
	return false
}

// valueEndsAt reports whether only spaces and then the end of the text, a
// line break or a separator or closer follow i: the place a value ends.
func (p *parser) valueEndsAt(i int) bool {
	k := p.peekSkipLine(i)
	if k >= p.end {
		return true
	}
	switch p.src[k] {
	case ',', '}', ']', '\n', '\r':
		return true
	}
	return false
}

// inValue reports whether the string being read is a member value of an
// object, where a comma must be followed by the next key.
func (p *parser) inValue() bool {
	return !p.inKey && len(p.stack) > 0 && p.stack[len(p.stack)-1] == '}'
}

// commaThenText reports whether s[j] is a comma, in an object member value,
// followed on its line by a word that is not a key: `"xxx", xxx` or
// `fox, quick brown`. Then the comma is text, not a separator.
func (p *parser) commaThenText(j int) bool {
	if j >= p.end || p.src[j] != ',' || !p.inValue() {
		return false
	}
	k := p.peekSkipLine(j + 1)
	if k >= p.end || !isIdentStart(p.src[k]) || p.src[k] >= 0x80 {
		return false
	}
	e := k
	for e < p.end && isIdent(p.src[e]) && p.src[e] < 0x80 {
		e++
	}
	e = p.peekSkipLine(e)
	return e < p.end && p.src[e] != ':' && p.src[e] != '=' && p.src[e] != '(' && p.src[e] != '"'
}

// strayCloser reports whether c is a closing bracket that closes no open
// container: after a quote it shows the quote is text, as in
// "the list [1, 2"] more" or a regex class ['"].
func (p *parser) strayCloser(c byte, j int) bool {
	if c != ']' && c != '}' {
		return false
	}
	if len(p.stack) == 0 || p.stack[len(p.stack)-1] == c {
		return len(p.stack) == 0
	}
	if !p.closesOuter(c) {
		return true
	}
	// It closes an outer container, the usual wrong-closer slip, unless
	// what follows cannot follow a closed value: "['"]([^'"]+)".
	k := p.peekSkipLine(j + 1)
	if k >= p.end {
		return false
	}
	switch p.src[k] {
	case ',', '}', ']', ')', ':', '\n', '\r', '`', '~':
		return false
	}
	return true
}

// quoteStartsKey reports whether a quote at j begins a `"key":` pattern, which
// means the quote before it closed a string and a comma is missing.
func (p *parser) quoteStartsKey(j int) bool {
	q, n := quoteAt(p.src, j)
	if q == qNone {
		return false
	}
	k := j + n
	limit := min(p.end, k+200)
	for k < limit {
		c := p.src[k]
		if c == '\n' {
			return false
		}
		if qq, m := quoteAt(p.src, k); qq != qNone && endsQuote(q, qq) {
			k += m
			for k < p.end && (p.src[k] == ' ' || p.src[k] == '\t') {
				k++
			}
			return k < p.end && p.src[k] == ':'
		}
		if c == '\\' {
			k++
		}
		k++
	}
	return false
}

// trimOutSpace drops trailing whitespace from the string being written, so
// a missing end quote goes before it.
func (p *parser) trimOutSpace(outStart int) {
	n := len(p.out)
	for n > outStart+1 {
		c := p.out[n-1]
		if c == ' ' || c == '\t' {
			n--
			continue
		}
		if n-2 > outStart && p.out[n-2] == '\\' && (c == 'n' || c == 'r' || c == 't') && (n-3 <= outStart || p.out[n-3] != '\\') {
			n -= 2
			continue
		}
		break
	}
	p.out = p.out[:n]
}

// separator consumes the comma at p.i between members or elements: one
// before the first is a leading comma, a second one in a row a trailing
// comma; otherwise its offset is kept in *comma.
func (p *parser) separator(first bool, comma *int, array bool) {
	switch {
	case array && (first || *comma >= 0):
		p.repair(KindEmptyElement, p.i)
	case first:
		p.repair(KindLeadingComma, p.i)
	case *comma >= 0:
		p.repair(KindTrailingComma, p.i)
	default:
		*comma = p.i
	}
	p.i++
}

// peekSkip returns the index of the next non-whitespace byte after i,
// skipping comments, without recording anything.
func (p *parser) peekSkip(i int) int { return p.skipBlank(i, true) }

// skipBlank skips whitespace (newlines too when newlines is set) and block
// comments from i, without recording anything.
func (p *parser) skipBlank(i int, newlines bool) int {
	for i < p.end {
		c := p.src[i]
		if c == ' ' || c == '\t' || newlines && (c == '\r' || c == '\n') {
			i++
			continue
		}
		if c == '/' && i+1 < p.end && p.src[i+1] == '*' {
			j := p.commentEnd(i + 2)
			if j < 0 {
				return p.end
			}
			i = j + 2
			continue
		}
		if c >= 0x80 {
			if n := specialSpace(p.src, i); n > 0 {
				i += n
				continue
			}
		}
		break
	}
	return i
}

func prevNonSpace(s string, i, floor int) int {
	for i > floor {
		c := s[i]
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return i
		}
		i--
	}
	return i
}

// escape handles a backslash inside a string.
func (p *parser) escape() bool {
	at := p.i
	if p.i+1 >= p.end {
		// A backslash cut off at the end: drop it.
		p.i = p.end
		return true
	}
	c := p.src[p.i+1]
	switch c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		p.out = append(p.out, '\\', c)
		p.i += 2
		return true
	case 'u':
		j := p.i + 2
		for j < p.end && j < p.i+6 && isHex(p.src[j]) {
			j++
		}
		if j == p.i+6 {
			p.out = append(p.out, p.src[p.i:j]...)
			p.i = j
			return true
		}
		if j >= p.end && p.atEOF {
			// Cut off inside the escape: drop it.
			p.i = p.end
			return true
		}
		return p.fail(at, "invalid unicode escape %q", p.src[at:min(at+6, p.end)])
	case '\n':
		p.repair(KindInvalidEscape, at)
		p.out = append(p.out, '\\', 'n')
		p.i += 2
		return true
	}
	p.repair(KindInvalidEscape, at)
	if c == '\'' || c == '`' {
		// \' is a JavaScript escape: keep the quote.
		p.out = append(p.out, c)
		p.i += 2
		return true
	}
	if c >= 0x80 {
		// \„ : drop the backslash before a non-ASCII character.
		p.i++
		return true
	}
	// An unknown escape such as \d in a regex: keep the backslash as text.
	p.out = append(p.out, '\\', '\\')
	p.i++
	return true
}

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// concat joins "a" + "b" into one string.
func (p *parser) concat() {
	for {
		j := p.peekSkip(p.i)
		if j >= p.end || p.src[j] != '+' {
			return
		}
		k := p.peekSkip(j + 1)
		if q, _ := quoteAt(p.src, k); q == qNone {
			if k >= p.end {
				// "a" + at the end: drop the dangling operator.
				p.repair(KindConcat, j)
				p.i = k
			}
			return
		}
		p.repair(KindConcat, j)
		p.out = p.out[:len(p.out)-1] // drop the closing quote
		inner := len(p.out)
		p.i = k
		if !p.str(false, -1) {
			return
		}
		// remove the opening quote of the joined string
		p.out = append(p.out[:inner], p.out[inner+1:]...)
	}
}

// numScan is where the parts of a number written at start lie: its integer
// digits [intStart, intEnd), the '.' at frac and the 'e' at exp (-1 for
// none), and its end.
type numScan struct {
	start, intStart, intEnd, frac, exp, end int
}

// scanNumber finds the parts of a number at p.i ('_' allowed in digits).
func (p *parser) scanNumber() numScan {
	n := numScan{start: p.i, frac: -1, exp: -1}
	i := p.i
	if i < p.end && p.src[i] == '-' {
		i++
	}
	n.intStart = i
	for i < p.end && (isDigit(p.src[i]) || p.src[i] == '_') {
		i++
	}
	n.intEnd = i
	if i < p.end && p.src[i] == '.' {
		n.frac = i
		i++
		for i < p.end && (isDigit(p.src[i]) || p.src[i] == '_') {
			i++
		}
	}
	if i < p.end && (p.src[i] == 'e' || p.src[i] == 'E') && i > n.intStart {
		n.exp = i
		i++
		if i < p.end && (p.src[i] == '+' || p.src[i] == '-') {
			i++
		}
		for i < p.end && isDigit(p.src[i]) {
			i++
		}
	}
	n.end = i
	return n
}

// number parses a number, or a number-like token as an unquoted string.
func (p *parser) number() bool {
	n := p.scanNumber()
	start, i := n.start, n.end
	// A number followed by more word characters is a string: 2024-10-18, 0.0.1, 1/3.
	if i < p.end && (isIdent(p.src[i]) || p.src[i] == '.' || p.src[i] == '-' || p.src[i] == ':' || (p.src[i] == '/' && i+1 < p.end && p.src[i+1] != '/' && p.src[i+1] != '*')) {
		return p.unquoted(start, false)
	}
	tok := p.src[start:i]
	if tok == "." || tok == "-." {
		return p.fail(start, "unexpected %s", describe(p.src, start))
	}
	ip := p.src[n.intStart:n.intEnd]
	if len(ip) > 1 && ip[0] == '0' && isDigit(ip[1]) {
		// Leading zeros: keep the text.
		p.repair(KindNumberFormat, start)
		p.out = appendJSONString(p.out, tok)
		p.i = i
		return true
	}
	text, changed, truncEnd, guessed := p.normNumber(n)
	if changed {
		switch {
		case truncEnd && p.atEOF && i >= p.end:
			p.truncate(start)
		case guessed:
			p.repair(KindNumberIncomplete, start)
		default:
			p.repair(KindNumberFormat, start)
		}
	}
	p.out = append(p.out, text...)
	p.i = i
	return true
}

// normNumber writes the number n as JSON: '_' dropped, a missing integer
// part 0, an empty fraction or exponent left out. changed reports that the
// text differs from what was written, truncEnd that a part is missing at
// the end of the region (cut off), guessed that a part is made up (a sign
// alone read as 0, 1e read as 1).
func (p *parser) normNumber(n numScan) (text string, changed, truncEnd, guessed bool) {
	var b strings.Builder
	i := n.end
	ip := p.src[n.intStart:n.intEnd]
	if n.start < n.intStart {
		b.WriteByte('-')
	}
	digits := strings.ReplaceAll(ip, "_", "")
	if digits != ip {
		changed = true
	}
	if digits == "" {
		digits = "0"
		changed = true
		// {"a": - at the end of the reply: a number cut off after its sign.
		truncEnd = n.frac < 0 && n.exp < 0 && i == p.end
		// A sign alone (or before an exponent) has no digits at all: .5 is
		// 0.5, but - is not -0.
		guessed = n.frac < 0 || i == n.frac+1 || (n.exp >= 0 && n.exp == n.frac+1)
	}
	b.WriteString(digits)
	if n.frac >= 0 {
		fend := i
		if n.exp >= 0 {
			fend = n.exp
		}
		fd := strings.ReplaceAll(p.src[n.frac+1:fend], "_", "")
		if fd != p.src[n.frac+1:fend] {
			changed = true
		}
		if fd == "" {
			changed = true
			truncEnd = fend == p.end
		} else {
			b.WriteByte('.')
			b.WriteString(fd)
		}
	}
	if n.exp >= 0 {
		ed := p.src[n.exp+1 : i]
		sign := ""
		if ed != "" && (ed[0] == '+' || ed[0] == '-') {
			sign, ed = ed[:1], ed[1:]
		}
		if ed == "" {
			changed = true
			truncEnd = i == p.end
			guessed = true // 1e: the exponent is missing, not 0
		} else {
			b.WriteByte(p.src[n.exp]) // e or E, as written
			b.WriteString(sign)
			b.WriteString(ed)
		}
	}
	return b.String(), changed, truncEnd, guessed
}

// literals maps lenient literal spellings to JSON.
var literals = map[string]struct{ json, kind string }{
	"true": {"true", ""}, "false": {"false", ""}, "null": {"null", ""},
	"True": {"true", KindPythonLiteral}, "False": {"false", KindPythonLiteral}, "None": {"null", KindPythonLiteral},
	"TRUE": {"true", KindPythonLiteral}, "FALSE": {"false", KindPythonLiteral}, "NULL": {"null", KindPythonLiteral},
	"Null": {"null", KindPythonLiteral}, "NONE": {"null", KindPythonLiteral}, "nil": {"null", KindJSLiteral},
	"undefined": {"null", KindJSLiteral}, "NaN": {"null", KindNonFinite},
	"Infinity": {"null", KindNonFinite}, "-Infinity": {"null", KindNonFinite},
	// Python's and C's spellings (float('nan') prints nan): they were read
	// as the strings "nan" and "inf", valid wherever a string is.
	"nan": {"null", KindNonFinite}, "inf": {"null", KindNonFinite}, "infinity": {"null", KindNonFinite},
	"Inf": {"null", KindNonFinite}, "INF": {"null", KindNonFinite}, "NAN": {"null", KindNonFinite}, "INFINITY": {"null", KindNonFinite},
}

// symbol parses a literal, a function call wrapper or an unquoted string.
func (p *parser) symbol() bool {
	start := p.i
	i := p.i
	for i < p.end && isIdent(p.src[i]) && p.src[i] < 0x80 {
		i++
	}
	word := p.src[start:i]
	if lit, ok := literals[word]; ok && (i >= p.end || !isIdent(p.src[i])) {
		if lit.kind != "" {
			p.repair(lit.kind, start)
		}
		p.out = append(p.out, lit.json...)
		p.i = i
		return true
	}
	// Partial literal at the very end of the reply: tru, fals, nul.
	if i >= p.end && p.atEOF && word != "" {
		for _, full := range [...]string{"true", "false", "null"} {
			if strings.HasPrefix(full, word) && len(word) < len(full) {
				p.truncate(start)
				p.out = append(p.out, full...)
				p.i = i
				return true
			}
		}
	}
	// Function call wrapper: callback({...}), ObjectId("1"), NumberLong("2").
	j := i
	for j < p.end {
		if p.src[j] == ' ' || p.src[j] == '\t' {
			j++
		} else if n := specialSpace(p.src, j); n > 0 && p.src[j] >= 0x80 {
			j += n
		} else {
			break
		}
	}
	if word != "" && j < p.end && p.src[j] == '(' {
		if len(p.stack) == 0 || dataWrappers[word] {
			p.repair(KindFunctionCall, start)
		} else {
			p.repair(KindFunctionResult, start)
		}
		p.i = j + 1
		if !p.push(j, ')') {
			return false
		}
		p.paren++
		ok := p.value()
		p.paren--
		p.pop()
		if !ok {
			return false
		}
		p.skip()
		if p.i < p.end && p.src[p.i] == ')' {
			p.i++
		}
		if p.i < p.end && p.src[p.i] == ';' {
			p.i++
		}
		return true
	}
	return p.unquoted(start, true)
}

// dataWrappers are the functions that only say how a value is stored:
// MongoDB shell and BSON types, and Python's Decimal. A call of one inside
// a value is read as its argument without loss; a call of any other
// function is a function_result. A call around the whole reply is a JSONP
// callback, whatever its name.
var dataWrappers = map[string]bool{
	"ObjectId": true, "ObjectID": true, "ISODate": true, "NumberLong": true, "NumberInt": true,
	"NumberDecimal": true, "NumberDouble": true, "Decimal128": true, "Long": true, "Int32": true,
	"Int64": true, "Double": true, "UUID": true, "Decimal": true,
}

// unquoted reads an unquoted string value up to a delimiter.
func (p *parser) unquoted(start int, allowSpace bool) bool {
	i := start
	parens := 0
	for i < p.end {
		c := p.src[i]
		if c == '(' {
			parens++
		}
		if c == ')' {
			if parens == 0 {
				break
			}
			parens--
		}
		if c == ',' || c == '}' || c == ']' || c == '\n' || c == '\r' || c == '[' || c == '{' {
			break
		}
		if c == ':' && !(i+2 < p.end && p.src[i+1] == '/' && p.src[i+2] == '/') && i > start && !isDigit(p.src[i-1]) {
			break
		}
		if c == '"' {
			break
		}
		if c == '/' && i+1 < p.end && (p.src[i+1] == '*' || (p.src[i+1] == '/' && (i == start || p.src[i-1] != ':'))) {
			break
		}
		if !allowSpace && (c == ' ' || c == '\t') {
			break
		}
		i++
	}
	s := strings.TrimRight(p.src[start:i], " \t")
	if s == "" {
		return p.fail(start, "unexpected %s", describe(p.src, start))
	}
	p.repair(KindUnquotedString, start)
	p.i = start + len(s)
	if p.i == p.end && p.atEOF {
		// An unquoted value running into the end of the reply may be cut off.
	}
	p.out = appendJSONString(p.out, s)
	// A stray end quote: {"a":foo","b":1}.
	if p.i < p.end && p.src[p.i] == '"' {
		j := p.peekSkip(p.i + 1)
		if j >= p.end || p.src[j] == ',' || p.src[j] == '}' || p.src[j] == ']' {
			p.repair(KindMissingQuote, p.i)
			p.i++
		}
	}
	return true
}

// regex reads a /regex/flags literal as a string.
func (p *parser) regex() bool {
	start := p.i
	i := p.i + 1
	inClass := false
	for i < p.end {
		c := p.src[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '\n' {
			return p.fail(start, "unexpected '/'")
		}
		if c == '[' {
			inClass = true
		} else if c == ']' {
			inClass = false
		} else if c == '/' && !inClass {
			i++
			for i < p.end && isIdent(p.src[i]) {
				i++
			}
			p.repair(KindUnquotedString, start)
			p.out = appendJSONString(p.out, p.src[start:min(i, p.end)])
			p.i = i
			return true
		}
		i++
	}
	return p.fail(start, "unexpected '/'")
}

// quoteKind returns the kind of the quote at s[i], or qNone.
func quoteKind(s string, i int) int {
	q, _ := quoteAt(s, i)
	return q
}

// peekSkipLine skips spaces, tabs and block comments after i, stopping at a
// newline.
func (p *parser) peekSkipLine(i int) int { return p.skipBlank(i, false) }

// doubledEnd reports whether, after a candidate end quote, the next thing
// (past whitespace and newlines) is a lone `"` followed by , } or ]: then the
// first quote is part of the text.
func (p *parser) doubledEnd(j int) bool {
	k := p.peekSkip(j)
	if k >= p.end || k == j && p.src[k] != '\n' || p.src[k] != '"' {
		return false
	}
	if k == j {
		return false
	}
	m := p.peekSkip(k + 1)
	return m < p.end && (p.src[m] == ',' || p.src[m] == '}' || p.src[m] == ']') && strings.Contains(p.src[j:k], "\n")
}

// fencedString reads a ```lang ... ``` block in a value position as a string.
func (p *parser) fencedString() bool {
	start := p.i
	i := p.i
	for i < p.end && p.src[i] == '`' {
		i++
	}
	run := p.src[start:i]
	// The info string runs to the end of the line.
	nl := strings.IndexByte(p.src[i:p.end], '\n')
	if nl < 0 {
		return p.fail(start, "unexpected code fence")
	}
	body := i + nl + 1
	k := strings.Index(p.src[body:p.end], "\n"+run)
	// A closing fence may also follow text on the same line.
	if k < 0 {
		if k2 := strings.Index(p.src[body:p.end], run); k2 >= 0 {
			k = k2
		}
	}
	p.repair(KindTripleQuoted, start)
	if k < 0 {
		p.out = appendJSONString(p.out, dedent("\n"+p.src[body:p.end]))
		p.i = p.end
		p.closeRepair(KindMissingQuote)
		return true
	}
	text := p.src[body : body+k]
	p.i = body + k
	if p.src[p.i] == '\n' {
		p.i++
	}
	p.i += len(run)
	for p.i < p.end && p.src[p.i] == '`' {
		p.i++
	}
	p.out = appendJSONString(p.out, dedent("\n"+text))
	return true
}

// fencedValueAhead reports whether the fence at p.i opens a fenced block that
// is closed later: a code value such as "code": ```py ... ```.
func (p *parser) fencedValueAhead() bool {
	nl := strings.IndexByte(p.src[p.i:p.end], '\n')
	if nl < 0 {
		return false
	}
	return strings.Contains(p.src[p.i+nl:p.end], "```")
}

// keyFollows reports whether `, "key":` follows i.
func (p *parser) keyFollows(i int) bool {
	j := p.peekSkip(i)
	if j >= p.end || p.src[j] != ',' {
		return false
	}
	return p.quoteStartsKey(p.peekSkip(j + 1))
}

// commentEnd returns the index of the first "*/" at or after i, or -1. Lookups
// reuse the last answer, so repeated peeks past "/*" stay linear.
func (p *parser) commentEnd(i int) int {
	if p.closeAt != 0 && i >= p.closeFrom && i <= p.closeAt {
		if p.closeAt >= p.end {
			return -1
		}
		return p.closeAt
	}
	j := strings.Index(p.src[i:p.end], "*/")
	p.closeFrom = i
	if j < 0 {
		p.closeAt = p.end
		return -1
	}
	p.closeAt = i + j
	return p.closeAt
}
