package extract

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	sjson "github.com/segmentio/encoding/json"
)

// Limits that keep Extract linear on adversarial replies.
const (
	// maxScanAttempts caps how many '{' or '[' in prose are tried as value starts.
	maxScanAttempts = 256
	// maxStructured caps the values taken from fences and tags: a 4.6 MB
	// reply of 190,000 fenced objects took 3.8 s and 320 MB to decode them
	// all, where the first thousand decide the choice between them.
	maxStructured = 1024
	// workFactor bounds the bytes all parse attempts may read, as a multiple of
	// the reply's length (plus workSlack).
	workFactor = 8
	workSlack  = 1 << 14
)

// span is a byte range [a, b) of the reply.
type span struct{ a, b int }

type extractor struct {
	src      string
	work     int // bytes read by parse attempts
	limit    int
	masked   []span // reasoning blocks
	claimed  []span // fences, tags and inline code already looked at
	firstErr *SyntaxError
	fatal    bool // a value nested deeper than MaxDepth: stop looking
	scanning bool // parse attempts come from scan: rejected fragments are not decoded
}

// found is a candidate plus what the locator needs to rank it.
type found struct {
	Candidate
	dubious bool // looks like a sentence fragment ({x: 1})
	empty   bool // {} or []
}

// Extract returns the candidate JSON values in reply, in the order they appear.
// It looks at the whole reply, then wrapper tags and fenced blocks, then inline
// code and objects or arrays inside prose; it skips reasoning blocks and
// placeholder fragments. Each candidate records where it was found and every
// repair applied. When the reply holds no value the error is a *SyntaxError
// that wraps ErrNoJSON and says what was seen.
func Extract(reply string) ([]Candidate, error) {
	e := &extractor{src: reply, limit: workFactor*len(reply) + workSlack}
	e.maskReasoning()
	cands := e.run()
	if len(cands) == 0 {
		return nil, e.noJSON()
	}
	out := make([]Candidate, 0, len(cands))
	for _, f := range cands {
		out = append(out, f.Candidate)
	}
	return out, nil
}

// RepairText repairs text that is meant to be one JSON value. It does not
// search: the value must start the text (after whitespace and comments), and
// only whitespace, comments and stray closing brackets may follow it.
func RepairText(text string) (Candidate, error) {
	e := &extractor{src: text, limit: workFactor*len(text) + workSlack}
	a, b := trimSpan(text, 0, len(text))
	if a == b {
		return Candidate{}, wholeError("text is empty")
	}
	if !e.rawStart(a, b) {
		return Candidate{}, newSyntaxError(a, "unexpected %s", describe(text, a))
	}
	f, next, err := e.parse(a, b, true, false)
	if err != nil {
		return Candidate{}, err
	}
	if rest := skipTrailer(text, next, b, &f.Repairs); rest < b {
		return Candidate{}, newSyntaxError(rest, "unexpected %s after the value", describe(text, rest))
	}
	f.Source = fixpoint.SourceRaw
	return f.Candidate, nil
}

func (e *extractor) run() []found {
	if c := e.raw(); len(c) > 0 || e.fatal {
		return e.finish(c)
	}
	var structured []found
	structured = append(structured, e.tags()...)
	structured = append(structured, e.fences()...)
	if len(structured) > 0 || e.fatal {
		if lead, ok := e.leading(structured); ok {
			structured = append(structured, lead)
		}
		return e.finish(structured)
	}
	loose := e.inline()
	loose = append(loose, e.scan()...)
	return e.finish(loose)
}

// afterReasoning returns where the reply starts once the reasoning blocks
// that open it (with only white space between them) are skipped.
func (e *extractor) afterReasoning() int {
	a := 0
	for _, m := range e.masked {
		if strings.TrimSpace(e.src[a:m.a]) == "" && m.b > a {
			a = m.b
		}
	}
	return a
}

// maskedIn reports whether a reasoning block starts within src[a:b].
func (e *extractor) maskedIn(a, b int) bool {
	for _, m := range e.masked {
		if m.a >= a && m.a < b {
			return true
		}
	}
	return false
}

// leading returns the object or array that opens the reply before its
// first fence or tag, if one does: it is a candidate too. Without it a
// fenced value after a bare answer ({"price": 5} then a fenced format
// example) was taken alone, where two values that both fit are ambiguous.
func (e *extractor) leading(structured []found) (found, bool) {
	first := len(e.src)
	for _, f := range structured {
		first = min(first, f.Start)
	}
	for _, c := range e.claimed { // where a fence or tag opens, before its value
		first = min(first, c.a)
	}
	a, b := trimSpan(e.src, e.afterReasoning(), first)
	if a >= b || (e.src[a] != '{' && e.src[a] != '[') || e.maskedIn(a, b) {
		return found{}, false
	}
	f, next, err := e.parse(a, b, false, false)
	if err != nil || f.Truncated {
		return found{}, false
	}
	// It stands alone on its lines: "[1] is the most relevant" opens with
	// a citation, not an answer.
	if eol := strings.IndexByte(e.src[next:b]+"\n", '\n'); strings.TrimSpace(e.src[next:next+min(eol, b-next)]) != "" {
		return found{}, false
	}
	f.Source = fixpoint.SourceRaw
	return f, true
}

// finish orders candidates, drops weak ones when strong ones exist and adds
// values that were encoded a second time inside strings.
func (e *extractor) finish(c []found) []found {
	slices.SortStableFunc(c, func(x, y found) int { return x.Start - y.Start })
	c = dropIf(c, func(f found) bool { return f.dubious })
	c = dropIf(c, func(f found) bool { return f.empty })
	out := make([]found, 0, len(c))
	for _, f := range c {
		if inner, ok := decodeInner(f.Candidate); ok {
			out = append(out, inner)
		}
		out = append(out, f)
	}
	return out
}

// dropIf removes the candidates that match weak, unless all of them do.
func dropIf(c []found, weak func(found) bool) []found {
	strong := 0
	for _, f := range c {
		if !weak(f) {
			strong++
		}
	}
	if strong == 0 || strong == len(c) {
		return c
	}
	out := c[:0]
	for _, f := range c {
		if !weak(f) {
			out = append(out, f)
		}
	}
	return out
}

// decodeInner returns the value inside a string candidate that holds strict
// JSON object or array text.
func decodeInner(c Candidate) (found, bool) {
	s, ok := c.Value.(string)
	if !ok {
		return found{}, false
	}
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[') || !json.Valid([]byte(t)) {
		return found{}, false
	}
	v, ok := decode([]byte(t))
	if !ok {
		return found{}, false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(t)) != nil {
		return found{}, false
	}
	reps := append(slices.Clone(c.Repairs), fixpoint.Repair{Kind: KindEscapedJSON, Offset: c.Start})
	return found{Candidate: Candidate{
		Value: v, JSON: buf.Bytes(), Source: fixpoint.SourceString,
		Start: c.Start, End: c.End, Repairs: reps, Truncated: c.Truncated,
	}}, true
}

func (e *extractor) noJSON() error {
	a, b := trimSpan(e.src, 0, len(e.src))
	if a == b {
		return wholeError("reply is empty")
	}
	if e.firstErr != nil {
		return e.firstErr
	}
	if e.onlyMasked(a, b) {
		return wholeError("reasoning only")
	}
	return wholeError("prose only (" + quoteSnippet(e.src[a:b]) + ")")
}

func (e *extractor) onlyMasked(a, b int) bool {
	for _, m := range e.masked {
		if m.a <= a && m.b >= b {
			return true
		}
	}
	return false
}

// quoteSnippet quotes the first few words of s.
func quoteSnippet(s string) string {
	const n = 40
	if len(s) > n {
		k := n
		for k > 0 && !utf8.RuneStart(s[k]) {
			k--
		}
		s = s[:k] + "..."
	}
	return `"` + strings.ReplaceAll(s, "\n", " ") + `"`
}

// parse runs the lenient parser on src[a:end] and decodes the result.
func (e *extractor) parse(a, end int, atEOF, fence bool) (found, int, *SyntaxError) {
	return e.parseMerge(a, end, atEOF, fence, false)
}

// parseMerge is parse; with merge, members that follow an object closed too
// early are read into it.
func (e *extractor) parseMerge(a, end int, atEOF, fence, merge bool) (found, int, *SyntaxError) {
	p := &parser{src: e.src, i: a, end: end, atEOF: atEOF, fence: fence, work: &e.work, limit: e.limit, mergeTop: merge}
	return e.finishParse(p, a)
}

func (e *extractor) finishParse(p *parser, a int) (found, int, *SyntaxError) {
	p.skip()
	start := p.i
	ok := p.value() && !p.tooMany
	e.work += p.i - a
	if !ok {
		if p.tooDeep || p.tooMany {
			e.fatal = true
			e.firstErr = p.err
		}
		if e.firstErr == nil {
			e.firstErr = p.err
		}
		return found{}, p.i, p.err
	}
	if e.scanning {
		// A fragment in prose that scan will reject: skip decoding it, so
		// the attempts scan may make stay cheap.
		reps := p.repairs
		f := found{Candidate: Candidate{Repairs: reps, Truncated: hasRepair(reps, KindTruncated)}}
		f.empty = string(p.out) == "{}" || string(p.out) == "[]"
		if rejectScan(f) {
			return f, p.i, nil
		}
	}
	v, good := decode(p.out)
	if !good {
		err := newSyntaxError(p.off(start), "unrepairable value")
		if e.firstErr == nil {
			e.firstErr = err
		}
		return found{}, p.i, err
	}
	f := found{Candidate: Candidate{
		Value: v, JSON: p.out, Start: p.off(start), End: p.off(p.i),
		Repairs: p.repairs, Truncated: hasRepair(p.repairs, KindTruncated),
	}}
	slices.SortStableFunc(f.Repairs, func(x, y fixpoint.Repair) int { return x.Offset - y.Offset })
	switch x := v.(type) {
	case map[string]any:
		f.empty = len(x) == 0
	case []any:
		f.empty = len(x) == 0
	}
	return f, p.i, nil
}

// decode reads the one strict JSON value in b, numbers as json.Number. It
// goes through segmentio/encoding/json, which decodes in one pass where
// encoding/json validates and then decodes: with the parser's own pass, a
// reply was read three times.
func decode(b []byte) (any, bool) {
	var v any
	rest, err := sjson.Parse(b, &v, sjson.UseNumber)
	if err != nil || len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
		return nil, false
	}
	return v, true
}

func trimSpan(s string, a, b int) (int, int) {
	for a < b {
		if c := s[a]; c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			a++
		} else if n := specialSpace(s, a); n > 0 && s[a] >= 0x80 {
			a += n
		} else {
			break
		}
	}
	for b > a {
		if c := s[b-1]; c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			b--
		} else {
			break
		}
	}
	return a, b
}

// maskReasoning finds <think>...</think> style blocks.
func (e *extractor) maskReasoning() {
	if t := strings.TrimSpace(e.src); t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		// A reply that is strict JSON has no reasoning block: a tag is
		// inside one of its strings ({"name": "</think>", ...}), and
		// masking up to it threw away the start of a correct reply.
		return
	}
	closers := strings.Contains(e.src, "</") // else no closing tag to look for
	for _, name := range [...]string{"think", "thinking", "reasoning", "reflection"} {
		open, closeTag := "<"+name+">", "</"+name+">"
		// A closing tag before any opening one closes reasoning that began
		// with the reply (some models' templates write the opening tag in
		// the prompt): everything up to it is reasoning, whose drafts
		// were taken as answers.
		if closers {
			if k := indexFold(e.src, closeTag, 0); k >= 0 {
				if j := indexFold(e.src, open, 0); (j < 0 || j > k) && !inJSONString(e.src[:k]) {
					e.masked = addSpan(e.masked, span{0, k + len(closeTag)})
				}
			}
		}

		for i := 0; ; {
			j := indexFold(e.src, open, i)
			if j < 0 {
				break
			}
			k := indexFold(e.src, closeTag, j+len(open))
			if k < 0 {
				// An unclosed reasoning block at the start hides everything after it.
				if strings.TrimSpace(e.src[:j]) == "" {
					e.masked = addSpan(e.masked, span{j, len(e.src)})
				}
				break
			}
			end := k + len(closeTag)
			e.masked = addSpan(e.masked, span{j, end})
			i = end
		}
	}
}

// inJSONString reports whether the end of before is inside a string of a
// JSON value that before opens: it starts with '{' or '[' and holds an odd
// number of unescaped double quotes. A closing tag there is text of the
// value ({"note": "see </reasoning>", ...} was taken for a reply whose
// reasoning ends at the tag), where reasoning rarely opens with a bracket.
func inJSONString(before string) bool {
	t := strings.TrimSpace(before)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return false
	}
	n := 0
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '\\':
			i++
		case '"':
			n++
		}
	}
	return n%2 == 1
}

// indexFold returns the index of the ASCII tag sub in s at or after from,
// ignoring case, or -1. sub starts with '<'.
func indexFold(s, sub string, from int) int {
	for i := from; i < len(s); {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return -1
		}
		i += j
		if i+len(sub) <= len(s) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
		i++
	}
	return -1
}

func inSpans(spans []span, i int) (span, bool) {
	// spans is sorted and its spans apart (addSpan): their ends ascend.
	k := sort.Search(len(spans), func(k int) bool { return spans[k].b > i })
	if k < len(spans) && spans[k].a <= i {
		return spans[k], true
	}
	return span{}, false
}

// addSpan adds s to spans, kept sorted with no two overlapping: s is merged
// with the spans it overlaps. A reply of 250,000 fences made 250,000 spans,
// each looked up by a scan of all: seconds per megabyte, quadratic.
func addSpan(spans []span, s span) []span {
	i := sort.Search(len(spans), func(k int) bool { return spans[k].b > s.a })
	j := i
	for j < len(spans) && spans[j].a < s.b {
		s.a, s.b = min(s.a, spans[j].a), max(s.b, spans[j].b)
		j++
	}
	return slices.Replace(spans, i, j, s)
}

// raw tries the whole reply (minus leading reasoning) as one or more values.
func (e *extractor) raw() []found {
	a, b := trimSpan(e.src, e.afterReasoning(), len(e.src))
	if a == b || e.maskedIn(a, b) {
		return nil
	}
	if esc := e.escapedRaw(a, b); esc != nil {
		return esc
	}
	if !e.rawStart(a, b) {
		return nil
	}
	var out []found
	i := a
	for i < b {
		f, next, err := e.parseMerge(i, b, b == len(e.src) || strings.TrimSpace(e.src[b:]) == "", true, true)
		if err != nil {
			return nil
		}
		f.Source = fixpoint.SourceRaw
		out = append(out, f)
		var trail []fixpoint.Repair
		i = skipTrailer(e.src, next, b, &trail)
		out[len(out)-1].Repairs = append(out[len(out)-1].Repairs, trail...)
		if i < b && !e.rawNext(i, b) {
			return nil
		}
		if len(out) > 64 {
			return nil
		}
	}
	return out
}

// rawStart reports whether the trimmed reply src[a:b] starts like a JSON value.
func (e *extractor) rawStart(a, b int) bool {
	c := e.src[a]
	switch {
	case c == '{' || c == '[' || c == '(':
		return true
	case c == '-' || isDigit(c) || c == '.':
		return a+1 < b && (isDigit(e.src[a+1]) || (c == '.' && false)) || isDigit(c) || (c == '.' && a+1 < b && isDigit(e.src[a+1]))
	case c == '/':
		return a+1 < b && (e.src[a+1] == '*' || e.src[a+1] == '/')
	case c == '#':
		return true
	}
	if isFenceAt(e.src, a) {
		return false
	}
	if q, _ := quoteAt(e.src, a); q != qNone {
		// A lone quote is not a value.
		return b-a > 1
	}
	if isIdentStart(c) {
		j := a
		for j < b && isIdent(e.src[j]) && e.src[j] < 0x80 {
			j++
		}
		word := e.src[a:j]
		if _, ok := literals[word]; ok && strings.TrimSpace(e.src[j:b]) == "" {
			return true
		}
		if j == b && word != "" {
			for _, full := range [...]string{"true", "false", "null"} {
				if strings.HasPrefix(full, word) {
					return true
				}
			}
		}
		k := j
		for k < b && (e.src[k] == ' ' || e.src[k] == '\t' || e.src[k] == 0xc2 || e.src[k] == 0xa0) {
			k++
		}
		return word != "" && k < b && e.src[k] == '('
	}
	return false
}

// rawNext reports whether another value follows at i in a raw reply.
func (e *extractor) rawNext(i, b int) bool {
	c := e.src[i]
	if c == '{' || c == '[' || c == '-' || isDigit(c) {
		return true
	}
	q, _ := quoteAt(e.src, i)
	return q != qNone
}

// skipTrailer skips what may follow a value: whitespace, comments, commas,
// semicolons, stray closing brackets and fence markers.
func skipTrailer(s string, i, b int, reps *[]fixpoint.Repair) int {
	p := &parser{src: s, i: i, end: b}
	for {
		p.skip()
		if p.i >= b {
			break
		}
		c := s[p.i]
		switch {
		case c == ',' || c == ';':
			p.i++
		case c == '}' || c == ']' || c == ')':
			p.repair(KindExtraBracket, p.i)
			p.i++
		case isFenceAt(s, p.i):
			for p.i < b && (s[p.i] == '`' || s[p.i] == '~') {
				p.i++
			}
		default:
			*reps = append(*reps, p.repairs...)
			return p.i
		}
	}
	*reps = append(*reps, p.repairs...)
	return p.i
}

// escapedRaw handles a reply that is JSON escaped once: {\"a\": \"b\"}.
func (e *extractor) escapedRaw(a, b int) []found {
	s := e.src[a:b]
	if !(strings.HasPrefix(s, `\"`) || strings.HasPrefix(s, `{\"`) || strings.HasPrefix(s, `[\"`) || strings.HasPrefix(s, `[{\"`)) {
		return nil
	}
	var buf []byte
	offs := make([]int, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
			buf = append(buf, s[i+1])
			offs = append(offs, a+i)
			i++
			continue
		}
		buf = append(buf, s[i])
		offs = append(offs, a+i)
	}
	sub := &extractor{src: string(buf), limit: e.limit}
	p := &parser{src: sub.src, end: len(buf), atEOF: true, work: &sub.work, limit: sub.limit, offmap: offs}
	f, next, err := sub.finishParse(p, 0)
	if err != nil {
		return nil
	}
	var trail []fixpoint.Repair
	if skipTrailer(sub.src, next, len(buf), &trail) < len(buf) {
		return nil
	}
	f.Source = fixpoint.SourceString
	f.Repairs = append([]fixpoint.Repair{{Kind: KindEscapedJSON, Offset: a}}, f.Repairs...)
	return []found{f}
}

// tagNames are the wrapper tags models put JSON in.
var tagNames = [...]string{"json", "output", "answer", "result", "response", "final_answer"}

// tags finds <json>...</json> style wrappers whose content starts with a value.
func (e *extractor) tags() []found {
	if strings.IndexByte(e.src, '<') < 0 {
		return nil
	}
	var out []found
	for _, name := range tagNames {
		open, closeTag := "<"+name+">", "</"+name+">"
		nextClose := -2 // memo: the first close tag at or after the last lookup; -1 none
		for i := 0; len(out) < maxStructured; {
			j := indexFold(e.src, open, i)
			if j < 0 {
				break
			}
			if _, in := inSpans(e.masked, j); in {
				i = j + len(open)
				continue
			}
			cs := j + len(open)
			if nextClose == -2 || (nextClose >= 0 && nextClose < cs) {
				nextClose = indexFold(e.src, closeTag, cs)
			}
			k := nextClose
			ce, end := len(e.src), len(e.src)
			if k >= 0 {
				ce = k
				end = ce + len(closeTag)
			}
			i = end
			a, _ := trimSpan(e.src, cs, ce)
			if a >= ce || isFenceAt(e.src, a) || !e.valueStartHere(a) || e.work >= e.limit {
				continue
			}
			f, after, err := e.parse(a, ce, k < 0, true)
			if err != nil {
				continue
			}
			f.Source = fixpoint.SourceTag
			out = append(out, f)
			e.claimed = addSpan(e.claimed, span{j, end})
			// Values after the first in the tag are candidates too
			// (<answer>1 500</answer> was read as 1, the rest dropped).
			for next := after; e.work < e.limit && len(out) < maxStructured; {
				for next < ce && (e.src[next] == ',' || e.src[next] == ' ' || e.src[next] == '\t' || e.src[next] == '\n' || e.src[next] == '\r') {
					next++
				}
				if next >= ce || isFenceAt(e.src, next) || !e.valueStartHere(next) {
					break
				}
				g, more, err := e.parse(next, ce, k < 0, true)
				if err != nil || more <= next || (!endsLine(e.src, more, ce) && !isObjectOrArray(e.src, next)) {
					break
				}
				g.Source = fixpoint.SourceTag
				out = append(out, g)
				next = more
			}
		}
	}
	return out
}

// endsLine reports whether only blanks or commas follow i on its line
// (before end): a scalar after the first value in a fence or tag is a
// second value only so ("1 500", "42\n43"), not when words follow it
// ("2 issues found", "1. counted rows").
func endsLine(s string, i, end int) bool {
	for ; i < end; i++ {
		switch s[i] {
		case ' ', '\t', ',':
		case '\n', '\r':
			return true
		default:
			return isFenceAt(s, i)
		}
	}
	return true
}

func isObjectOrArray(s string, i int) bool { return i < len(s) && (s[i] == '{' || s[i] == '[') }

// valueStartHere reports whether a value plausibly starts at i.
func (e *extractor) valueStartHere(i int) bool {
	c := e.src[i]
	if c == '{' || c == '[' || c == '(' || c == '-' || isDigit(c) {
		return true
	}
	if q, _ := quoteAt(e.src, i); q != qNone {
		return true
	}
	j := i
	for j < len(e.src) && isIdent(e.src[j]) && e.src[j] < 0x80 {
		j++
	}
	_, ok := literals[e.src[i:j]]
	return ok
}

// fences finds ``` and ~~~ blocks whose content starts with a value.
func (e *extractor) fences() []found {
	var out []found
	s := e.src
	ff := fenceFinder{s: s, tick: -2, tilde: -2}
	for i := 0; i < len(s) && len(out) < maxStructured; {
		f := ff.next(i)
		if f < 0 {
			break
		}
		if after, skip := e.notFence(f); skip {
			i = after
			continue
		}
		got, end := e.fence(f)
		out = append(out, got...)
		i = end
	}
	return out
}

// fenceFinder finds the next ``` or ~~~ of a text. Each marker is
// searched for again only once the search has passed it: searching both
// from every place was quadratic in a reply of one kind of fence only.
type fenceFinder struct {
	s           string
	tick, tilde int // the next ``` and ~~~ found (-1: none, -2: not searched)
}

// next is the first fence marker at or after i, -1 for none.
func (ff *fenceFinder) next(i int) int {
	j, k := ff.after(i, &ff.tick, "```"), ff.after(i, &ff.tilde, "~~~")
	if j < 0 || (k >= 0 && k < j) {
		j = k
	}
	return j
}

func (ff *fenceFinder) after(i int, at *int, marker string) int {
	if *at == -1 || *at >= i {
		return *at
	}
	if j := strings.Index(ff.s[i:], marker); j >= 0 {
		*at = i + j
	} else {
		*at = -1
	}
	return *at
}

// notFence reports whether the marker at f opens no fence to read (it is
// in a masked or claimed span, or is a value inside JSON), and where to
// go on from then.
func (e *extractor) notFence(f int) (after int, skip bool) {
	s := e.src
	if m, in := inSpans(e.masked, f); in {
		return m.b, true
	}
	if m, in := inSpans(e.claimed, f); in {
		return m.b, true
	}
	if valuePosition(s, f) {
		// "code": ```...``` is a value inside JSON, not a fence: skip
		// to its closing fence.
		after = f + 3
		if nl := strings.IndexByte(s[f:], '\n'); nl >= 0 {
			if c := closingFence(s, f+nl, s[f], 3); c >= 0 {
				after = c + 3
			}
		}
		return after, true
	}
	return 0, false
}

// fence reads the fenced block opening at f: the values in it, and where
// the block ends (after its closing fence, or the end of the reply).
func (e *extractor) fence(f int) (got []found, end int) {
	s := e.src
	ch := s[f]
	n := f
	for n < len(s) && s[n] == ch {
		n++
	}
	run := n - f
	a := e.fenceContent(n)
	got, next := e.fenceValues(a)
	// Find the closing fence.
	from := a
	if len(got) > 0 {
		from = next
	}
	end = len(s)
	if c := closingFence(s, from, ch, run); c >= 0 {
		end = c
		for end < len(s) && s[end] == ch {
			end++
		}
	} else if len(got) == 0 {
		// An opening fence with no JSON and no close: nothing to skip.
		end = n
	}
	if len(got) > 0 || end > n {
		e.claimed = addSpan(e.claimed, span{f, end})
	}
	return got, end
}

// fenceContent is where the content of a fence whose marker ends at n
// starts: after its info string (a language tag, then the rest of the
// line) and blank space.
func (e *extractor) fenceContent(n int) int {
	s := e.src
	cs := n
	for cs < len(s) && (isIdent(s[cs]) && s[cs] < 0x80 || s[cs] == '-' || s[cs] == '+' || s[cs] == '.') {
		cs++
	}
	a := cs
	for a < len(s) && (s[a] == ' ' || s[a] == '\t' || specialSpace(s, a) > 0 && s[a] >= 0x80) {
		if s[a] >= 0x80 {
			a += specialSpace(s, a)
		} else {
			a++
		}
	}
	if a < len(s) && s[a] != '\n' && s[a] != '\r' && !e.valueStartHere(a) {
		// e.g. "```typescript main.ts": skip the rest of the line.
		a = lineEnd(s, a, len(s))
	}
	a, _ = trimSpan(s, a, len(s))
	return a
}

// fenceValues reads the values of a fence's content from a, and where
// reading stopped.
func (e *extractor) fenceValues(a int) (got []found, next int) {
	s := e.src
	next = a
	for next < len(s) && !isFenceAt(s, next) && e.valueStartHere(next) && e.work < e.limit {
		fd, after, err := e.parse(next, len(s), true, true)
		if err != nil {
			break
		}
		if len(got) > 0 && !endsLine(s, after, len(s)) && !isObjectOrArray(s, next) {
			break // "2 issues found": words, not a second value
		}
		fd.Source = fixpoint.SourceFence
		got = append(got, fd)
		next = after
		for next < len(s) && (s[next] == ',' || s[next] == ' ' || s[next] == '\t' || s[next] == '\n' || s[next] == '\r') {
			next++
		}
		// Another value after the first ("1 500", "42\n43") is a
		// candidate too, so the choice between them is seen.
		if next < len(s) && !e.valueStartHere(next) {
			break
		}
	}
	return got, next
}

// closingFence returns the index of the next run of at least n ch from i.
func closingFence(s string, i int, ch byte, n int) int {
	fence := strings.Repeat(string(ch), 3)
	for i < len(s) {
		j := strings.Index(s[i:], fence)
		if j < 0 {
			return -1
		}
		j += i
		k := j
		for k < len(s) && s[k] == ch {
			k++
		}
		if k-j >= n {
			return j
		}
		i = k
	}
	return -1
}

// inline finds `{...}` inline code spans.
func (e *extractor) inline() []found {
	s := e.src
	var out []found
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '`')
		if j < 0 {
			break
		}
		o := i + j
		if o+1 < len(s) && s[o+1] == '`' {
			i = o + 2
			for i < len(s) && s[i] == '`' {
				i++
			}
			continue
		}
		if _, in := inSpans(e.masked, o); in {
			i = o + 1
			continue
		}
		if _, in := inSpans(e.claimed, o); in {
			i = o + 1
			continue
		}
		k := strings.IndexByte(s[o+1:], '`')
		if k < 0 {
			break
		}
		c := o + 1 + k
		a, b := trimSpan(s, o+1, c)
		if a < b && (s[a] == '{' || s[a] == '[') {
			f, next, err := e.parse(a, b, false, false)
			if err == nil && next >= b {
				f.Source = fixpoint.SourceInline
				f.dubious = hasRepair(f.Repairs, KindUnquotedKey, KindUnquotedString)
				out = append(out, f)
				e.claimed = addSpan(e.claimed, span{o, c + 1})
			}
		}
		i = c + 1
	}
	return out
}

func hasRepair(reps []fixpoint.Repair, kinds ...string) bool {
	for _, r := range reps {
		if slices.Contains(kinds, r.Kind) {
			return true
		}
	}
	return false
}

// scan tries each '{' and '[' in prose as the start of a value.
func (e *extractor) scan() []found {
	s := e.src
	var out []found
	attempts := 0
	for i := 0; i < len(s); {
		j := strings.IndexAny(s[i:], "{[")
		if j < 0 {
			break
		}
		o := i + j
		if m, in := inSpans(e.masked, o); in {
			i = m.b
			continue
		}
		if m, in := inSpans(e.claimed, o); in {
			i = m.b
			continue
		}
		attempts++
		if attempts > maxScanAttempts || e.work >= e.limit {
			break
		}
		e.scanning = true
		f, next, err := e.parse(o, len(s), true, true)
		e.scanning = false
		if err != nil && e.fatal {
			break
		}
		if err == nil && rejectScan(f) {
			if e.firstErr == nil {
				e.firstErr = newSyntaxError(o, "fragment %s is not JSON", quoteSnippet(s[o:max(next, o+1)]))
			}
		}
		if err != nil || rejectScan(f) {
			i = o + 1
			continue
		}
		f.Source = fixpoint.SourceScan
		f.dubious = hasRepair(f.Repairs, KindUnquotedKey)
		out = append(out, f)
		i = max(next, o+1)
	}
	return out
}

// rejectScan reports whether a value found in prose is a fragment, not JSON:
// a placeholder closed by something other than its bracket, or a value built
// from unquoted words.
func rejectScan(f found) bool {
	if f.empty && f.Truncated {
		return true
	}
	return hasRepair(f.Repairs, KindUnclosed, KindMismatched, KindExtraBracket, KindUnquotedString, KindFunctionCall, KindFunctionResult, KindTuple, KindMissingValue, KindExtraText)
}

// valuePosition reports whether the fence at f follows `":` on its line, where
// a JSON value is expected.
func valuePosition(s string, f int) bool {
	j := f - 1
	for j >= 0 && (s[j] == ' ' || s[j] == '\t') {
		j--
	}
	if j < 0 || s[j] != ':' {
		return false
	}
	j--
	for j >= 0 && (s[j] == ' ' || s[j] == '\t') {
		j--
	}
	if j < 0 {
		return false
	}
	q, _ := quoteAt(s, j)
	if q == qNone && j >= 2 {
		q, _ = quoteAt(s, j-2)
	}
	return q != qNone
}
