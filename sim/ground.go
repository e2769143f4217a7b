package sim

import (
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
)

// keyText is the part of a first user message a task is keyed by: the
// text before a quoted previous reply, and of that the task between
// TaskOpen and TaskClose when a repair-strategy request repeats it there.
func keyText(first string) string {
	t, _, _ := strings.Cut(first, fixpoint.PreviousReplyOpen)
	if body, ok := strings.CutPrefix(t, fixpoint.TaskOpen+"\n"); ok {
		if i := strings.LastIndex(body, "\n"+fixpoint.TaskClose); i >= 0 {
			return body[:i]
		}
	}
	return t
}

// taskText is the text a task's values are copied from: its keyText
// without a schema block between the schema markers.
func taskText(first string) string {
	t := keyText(first)
	if i := strings.Index(t, fixpoint.SchemaMarkerOpen); i >= 0 {
		if j := strings.Index(t[i:], fixpoint.SchemaMarkerClose); j >= 0 {
			t = t[:i] + t[i+j+len(fixpoint.SchemaMarkerClose):]
		}
	}
	return t
}

// firstUser is the text of a request's first user message, "" for none.
func firstUser(r *chatReq) string {
	for _, m := range r.msgs {
		if m.role == "user" {
			return m.text
		}
	}
	return ""
}

// Gaps between two words of a task.
const (
	gapTight = iota // white space only, on one line
	gapLoose        // a comma, a dash or a quote too
	gapBreak        // a sentence's or a line's end, a bracket, a colon
)

// word is a word of a task's text: what stands between white space, less
// the punctuation around it. start and end are byte offsets; gap is what
// stands between it and the next word.
type word struct {
	start, end int
	gap        int
}

// spanMaxWords bounds the words of one span.
const spanMaxWords = 6

// spans are the pieces of a task's text of each kind a value can be
// copied as: runs of words (a name's are capitalized words), numbers as
// written (money: next to a currency), dates, e-mail addresses.
type spans struct {
	text  string
	words []word
	runs  [][2]int // byte ranges of runs of 1 to spanMaxWords words
	names []string
	nums  []numSpan
	dates []string
	mails []string
	// byNode caches the candidates of a node (see candidates).
	byNode map[nodeKind][]string
}

// nodeKind is a schema node and the kind of span its leaves take.
type nodeKind struct {
	node uintptr
	kind string
}

type numSpan struct {
	n     json.Number
	money bool
}

// newSpans reads the spans of text.
func newSpans(text string) *spans {
	sp := &spans{text: text, byNode: map[nodeKind][]string{}}
	sp.words = splitWords(text)
	for i := range sp.words {
		sp.addRuns(i)
		sp.addNumber(i)
		sp.addDate(i)
		if w := sp.word(i); strings.Contains(w, "@") && strings.Contains(w[strings.Index(w, "@"):], ".") {
			sp.mails = append(sp.mails, w)
		}
	}
	return sp
}

func (sp *spans) word(i int) string { return sp.text[sp.words[i].start:sp.words[i].end] }

// splitWords splits text at white space and trims each piece of what is
// not a letter or a digit; the gaps say what lies between the words.
func splitWords(text string) []word {
	var ws []word
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			i += n
			continue
		}
		j := i
		for j < len(text) {
			r, n := utf8.DecodeRuneInString(text[j:])
			if unicode.IsSpace(r) {
				break
			}
			j += n
		}
		s, e := i, j
		for s < e {
			r, n := utf8.DecodeRuneInString(text[s:e])
			if isWordRune(r) {
				break
			}
			s += n
		}
		for e > s {
			r, n := utf8.DecodeLastRuneInString(text[s:e])
			if isWordRune(r) {
				break
			}
			e -= n
		}
		if s < e {
			ws = append(ws, word{start: s, end: e})
		}
		i = j
	}
	for k := range ws {
		ws[k].gap = gapBreak
		if k+1 < len(ws) {
			ws[k].gap = gapKind(text[ws[k].end:ws[k+1].start])
		}
	}
	return ws
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func gapKind(g string) int {
	if strings.TrimSpace(g) == "" && !strings.Contains(g, "\n") {
		return gapTight
	}
	if strings.ContainsAny(g, "\n.!?:;()[]{}<>\"|") {
		return gapBreak
	}
	return gapLoose
}

// addRuns adds the runs of words starting at word i, and the names: runs
// of 2 to 4 capitalized words with nothing but spaces between them.
func (sp *spans) addRuns(i int) {
	name := true
	for j := i; j < len(sp.words) && j < i+spanMaxWords; j++ {
		sp.runs = append(sp.runs, [2]int{sp.words[i].start, sp.words[j].end})
		name = name && capitalized(sp.word(j))
		if name && j > i && j < i+4 {
			sp.names = append(sp.names, sp.text[sp.words[i].start:sp.words[j].end])
		}
		if sp.words[j].gap == gapBreak {
			break
		}
		name = name && sp.words[j].gap == gapTight
	}
}

// capitalized reports whether w is a capitalized word of letters.
func capitalized(w string) bool {
	for i, r := range w {
		if !unicode.IsLetter(r) || i == 0 && !unicode.IsUpper(r) {
			return false
		}
	}
	return w != ""
}

var (
	plainNum       = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	englishGrouped = regexp.MustCompile(`^[0-9]{1,3}(,[0-9]{3})+(\.[0-9]+)?$`)
	continentalNum = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{3})*,[0-9]+$`)
)

// currencies are the codes that make a number next to them an amount.
var currencies = []string{"EUR", "USD", "GBP", "CHF", "JPY", "CAD", "AUD"}

// addNumber adds word i when it is a number as written: plain (49.90),
// grouped in the English way (1,249.99) or with a decimal comma (49,90);
// a sign right before it belongs to it.
func (sp *spans) addNumber(i int) {
	w := sp.word(i)
	var text string
	switch {
	case plainNum.MatchString(w):
		text = w
	case englishGrouped.MatchString(w):
		text = strings.ReplaceAll(w, ",", "")
	case continentalNum.MatchString(w):
		text = strings.ReplaceAll(strings.ReplaceAll(w, ".", ""), ",", ".")
	default:
		return
	}
	intPart, frac, hasFrac := strings.Cut(text, ".")
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	text = intPart
	if hasFrac {
		text += "." + frac
	}
	before := sp.text[:sp.words[i].start]
	if b, ok := strings.CutSuffix(before, "-"); ok && !endsInWord(b) {
		text = "-" + text
	} else if b, ok := strings.CutSuffix(before, "−"); ok && !endsInWord(b) {
		text = "-" + text
	}
	sp.nums = append(sp.nums, numSpan{n: json.Number(text), money: sp.money(i)})
}

func endsInWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordRune(r)
}

// money reports whether word i stands next to a currency: a symbol, or a
// code with only a space between.
func (sp *spans) money(i int) bool {
	w := sp.words[i]
	lead := sp.text[:w.start]
	if i > 0 {
		lead = sp.text[sp.words[i-1].end:w.start]
		if sp.words[i-1].gap == gapTight && slices.Contains(currencies, sp.word(i-1)) {
			return true
		}
	}
	trail := sp.text[w.end:]
	if i+1 < len(sp.words) {
		trail = sp.text[w.end:sp.words[i+1].start]
		if w.gap == gapTight && slices.Contains(currencies, sp.word(i+1)) {
			return true
		}
	}
	return strings.ContainsAny(lead, "$€£¥") || strings.ContainsAny(strings.TrimSpace(trail), "€£")
}

var (
	isoDate    = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	dottedDate = regexp.MustCompile(`^([0-9]{1,2})\.([0-9]{1,2})\.([0-9]{4})$`)
	dayOrdinal = regexp.MustCompile(`^([0-9]{1,2})(st|nd|rd|th)?$`)
	yearWord   = regexp.MustCompile(`^[0-9]{4}$`)
)

var monthNames = []string{"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"}

// addDate adds the date that starts at word i, as an ISO date: 2026-11-03,
// 3.11.2026, 3 November 2026 or November 3, 2026.
func (sp *spans) addDate(i int) {
	w := sp.word(i)
	var y, m, d int
	switch {
	case isoDate.MatchString(w):
		y, _ = strconv.Atoi(w[:4])
		m, _ = strconv.Atoi(w[5:7])
		d, _ = strconv.Atoi(w[8:])
	case dottedDate.MatchString(w):
		p := dottedDate.FindStringSubmatch(w)
		d, _ = strconv.Atoi(p[1])
		m, _ = strconv.Atoi(p[2])
		y, _ = strconv.Atoi(p[3])
	case i+2 < len(sp.words):
		a, b, c := w, sp.word(i+1), sp.word(i+2)
		if !yearWord.MatchString(c) {
			return
		}
		y, _ = strconv.Atoi(c)
		if dm := dayOrdinal.FindStringSubmatch(a); dm != nil {
			d, _ = strconv.Atoi(dm[1])
			m = slices.Index(monthNames, strings.ToLower(b)) + 1
		} else if dm := dayOrdinal.FindStringSubmatch(b); dm != nil {
			d, _ = strconv.Atoi(dm[1])
			m = slices.Index(monthNames, strings.ToLower(a)) + 1
		}
	default:
		return
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if m < 1 || t.Day() != d || int(t.Month()) != m {
		return
	}
	sp.dates = append(sp.dates, t.Format(time.DateOnly))
}

// nameWords are the last words of a property's name that make its value a
// name: runs of capitalized words.
var nameWords = []string{"name", "customer", "vendor", "company", "merchant", "supplier", "person", "contact",
	"author", "client", "employee", "sender", "recipient", "payee", "payer", "seller", "buyer", "owner"}

// nameField reports whether a property's name says its value is a name:
// its last word ("customer_name", "vendorName", "customer") is one of
// nameWords.
func nameField(name string) bool {
	last := name
	for i, r := range name {
		switch {
		case r == '_' || r == '-' || r == ' ':
			last = name[i+1:]
		case unicode.IsUpper(r) && i > 0:
			last = name[i:]
		}
	}
	return slices.Contains(nameWords, strings.ToLower(last))
}

// candidates lists the spans a leaf of node m can be copied as, as their
// text: numbers (their JSON text) for a number, dates for a string of
// format date, e-mail addresses for format email, runs of words matching a
// pattern, names for a name (nameField), any run of words for another
// string; each one the node's bounds, length and pattern allow, once. ok
// is false for a leaf of a kind the simulator does not look for (another
// format, a pattern Go cannot read): it keeps its generated value.
func (sp *spans) candidates(m map[string]any, v any, name string) (out []string, ok bool) {
	kind, ok := leafKind(m, v, name)
	if !ok {
		return nil, false
	}
	// The node is part of the schema, which keeps it alive: its address
	// names it.
	key := nodeKind{reflect.ValueOf(m).Pointer(), kind}
	if c, hit := sp.byNode[key]; hit {
		return c, true
	}
	seen := map[string]bool{}
	add := func(s string, ok bool) {
		if ok && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	switch kind {
	case "money", "number":
		for _, n := range sp.nums {
			add(string(n.n), (kind == "number" || n.money) && fitsNumber(m, n.n))
		}
	case "date", "email", "name":
		pool := map[string][]string{"date": sp.dates, "email": sp.mails, "name": sp.names}[kind]
		for _, s := range pool {
			add(s, fitsString(m, s))
		}
	default:
		for _, r := range sp.runs {
			s := sp.text[r[0]:r[1]]
			add(s, !seen[s] && fitsString(m, s))
		}
	}
	sp.byNode[key] = out
	return out, true
}

// leafKind names the kind of span a leaf takes.
func leafKind(m map[string]any, v any, name string) (string, bool) {
	if _, isNum := v.(json.Number); isNum {
		if unitFor(name) == "EUR" {
			return "money", true
		}
		return "number", true
	}
	if _, isStr := v.(string); !isStr {
		return "", false
	}
	if f, has := m["format"].(string); has {
		switch f {
		case "date":
			return "date", true
		case "email", "idn-email":
			return "email", true
		}
		return "", false
	}
	if p, has := m["pattern"].(string); has {
		return "pattern", compilePattern(p) != nil
	}
	if nameField(name) {
		return "name", true
	}
	return "words", true
}

func containsJSON(list []any, v any) bool {
	return slices.ContainsFunc(list, func(x any) bool { return jsonEqual(x, v) })
}

// fitsNumber reports whether n is a number node m allows: its type, bounds
// and multipleOf.
func fitsNumber(m map[string]any, n json.Number) bool {
	types, inferred := typesOf(m)
	if !inferred && !typeMatches(n, types) || !inBounds(m, n) {
		return false
	}
	mo, ok := m["multipleOf"].(json.Number)
	if !ok {
		return true
	}
	step, ok1 := new(big.Rat).SetString(string(mo))
	x, ok2 := new(big.Rat).SetString(string(n))
	if !ok1 || !ok2 || step.Sign() <= 0 {
		return false
	}
	return new(big.Rat).Quo(x, step).IsInt()
}

// fitsString reports whether s is a string node m allows: its length,
// pattern and (for a date) format.
func fitsString(m map[string]any, s string) bool {
	n := utf8.RuneCountInString(s)
	if lo, ok := intKw(m, "minLength"); ok && n < lo {
		return false
	}
	if hi, ok := intKw(m, "maxLength"); ok && n > hi {
		return false
	}
	if p, ok := m["pattern"].(string); ok {
		cp := compilePattern(p)
		if cp == nil || !cp.re.MatchString(s) {
			return false
		}
	}
	if f, _ := m["format"].(string); f == "date" {
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return false
		}
	}
	return true
}

// fits reports whether v, a string or number, is a value node m allows.
func fits(m map[string]any, v any) bool {
	switch x := v.(type) {
	case json.Number:
		return fitsNumber(m, x)
	case string:
		types, inferred := typesOf(m)
		return (inferred || typeMatches(x, types)) && fitsString(m, x)
	}
	return false
}

// grounder puts spans of a task's text into a generated truth, in place:
// each string and number at a place the schema does not exempt from
// evidence becomes a span of its kind drawn from the text. A leaf with no
// span of its kind is left out when its property is optional (a faithful
// model leaves out what the text does not say) and kept otherwise.
type grounder struct {
	doc    *schemaDoc
	exempt func(string) bool
	sp     *spans
	rng    *rand.Rand
	visits int
}

// walk grounds v, an instance of s at ptr (the property name); it reports
// false for a leaf the text has no span for. A leaf takes none of the
// values of avoid (the other items of an array with uniqueItems), and
// none of prefer (its grounded siblings: two properties are rarely copied
// from one span) while it has others.
func (gr *grounder) walk(s, v any, ptr, name string, avoid, prefer []any, depth int) (any, bool) {
	gr.visits++
	if depth > 64 || gr.visits > maxCheckNodes || gr.exempt(ptr) {
		return v, true
	}
	m := gr.doc.resolve(s)
	if m == nil {
		return v, true
	}
	switch x := v.(type) {
	case map[string]any:
		gr.object(m, x, ptr, depth)
	case []any:
		prefix, items := itemSchemas(m)
		unique, _ := m["uniqueItems"].(bool)
		for i := range x {
			sub := items
			if i < len(prefix) {
				sub = prefix[i]
			}
			var others []any
			if unique {
				others = slices.Delete(slices.Clone(x), i, i+1)
			}
			if sub != nil {
				x[i], _ = gr.walk(sub, x[i], ptr+"/"+strconv.Itoa(i), singular(name), others, nil, depth+1)
			}
		}
	case string, json.Number:
		return gr.leaf(m, v, name, avoid, prefer)
	}
	return v, true
}

// object grounds the members of x, an instance of node m at ptr, leaving
// out an optional leaf the text has no span for.
func (gr *grounder) object(m, x map[string]any, ptr string, depth int) {
	props, _ := m["properties"].(map[string]any)
	req := requiredSet(m)
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var siblings []any
	for _, k := range keys {
		sub, declared := props[k]
		if !declared {
			if sub, declared = m["additionalProperties"].(map[string]any); !declared {
				continue
			}
		}
		nv, ok := gr.walk(sub, x[k], ptr+"/"+escapeToken(k), k, nil, siblings, depth+1)
		if !ok && !req[k] {
			delete(x, k)
			continue
		}
		x[k] = nv
		switch nv.(type) {
		case string, json.Number:
			siblings = append(siblings, nv)
		}
	}
}

// leaf draws the span of leaf v of node m (see walk).
func (gr *grounder) leaf(m map[string]any, v any, name string, avoid, prefer []any) (any, bool) {
	cands, ok := gr.sp.candidates(m, v, name)
	if !ok {
		return v, true
	}
	_, isNum := v.(json.Number)
	box := func(c string) any {
		if isNum {
			return json.Number(c)
		}
		return c
	}
	if len(avoid) > 0 {
		cands = slices.DeleteFunc(slices.Clone(cands), func(c string) bool { return containsJSON(avoid, box(c)) })
	}
	if len(cands) == 0 {
		return v, false
	}
	if fresh := slices.DeleteFunc(slices.Clone(cands), func(c string) bool { return containsJSON(prefer, box(c)) }); len(fresh) > 0 {
		cands = fresh
	}
	return box(cands[gr.rng.IntN(len(cands))]), true
}
