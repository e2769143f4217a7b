package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint/extract"
)

// Bounds of a simulated document.
const (
	// DocumentMinChars and DocumentMaxChars bound a document's length, in
	// characters (code points).
	DocumentMinChars = 50_000
	DocumentMaxChars = 500_000
	// DocumentItems is the number of subsidiaries every document lists.
	DocumentItems = 500
	// docSectionChars is about how long a section runs: it sets how many
	// sections a document has, and so how many lists its items come in.
	docSectionChars = 4_000
	// docMaxSections keeps the section numbers below every number a model
	// invents for an absent notice period (150 days and more), so that a
	// heading never grounds an invention.
	docMaxSections = 120
)

// ErrDocument is matched by the errors of NewDocument.
var ErrDocument = errors.New("invalid document request")

// The document schema's properties (DocumentSchema).
const (
	docProvider = "provider"
	docCustomer = "customer"
	docDate     = "effective_date"
	docLaw      = "governing_law"
	docNotice   = "termination_notice_days"
	docAmount   = "total_amount"
	docCurrency = "currency"
	docList     = "subsidiaries"
)

// docScalars are the document's scalar fields, in the schema's order.
var docScalars = []string{docProvider, docCustomer, docDate, docLaw, docNotice, docAmount, docCurrency}

// DocumentSchema is the JSON Schema of what a simulated document holds:
// the agreement's parties, effective date, governing law, termination
// notice period, total amount and currency, and its list of subsidiaries,
// keyed by name ("x-fixpoint-key"). The simulator answers a request over
// a document's text (see "Long documents" in the package documentation)
// when its schema declares every one of these root properties.
const DocumentSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "group_framework_agreement",
  "type": "object",
  "properties": {
    "provider": {"type": "string", "minLength": 1, "description": "the company providing the services"},
    "customer": {"type": "string", "minLength": 1, "description": "the company receiving the services"},
    "effective_date": {"type": "string", "format": "date"},
    "governing_law": {"type": "string", "minLength": 1, "description": "the jurisdiction whose law governs the agreement, as the document writes it"},
    "termination_notice_days": {"type": "integer", "minimum": 1},
    "total_amount": {"type": "number", "minimum": 0},
    "currency": {"enum": ["EUR", "USD", "GBP", "CHF", "JPY"]},
    "subsidiaries": {
      "type": "array",
      "x-fixpoint-key": "name",
      "items": {
        "type": "object",
        "properties": {
          "name": {"type": "string", "minLength": 1},
          "country": {"type": "string", "minLength": 1},
          "ownership_percent": {"type": "number", "minimum": 0, "maximum": 100}
        },
        "required": ["name", "country", "ownership_percent"],
        "additionalProperties": false
      }
    }
  },
  "required": ["provider", "customer", "effective_date", "governing_law", "termination_notice_days", "total_amount", "currency", "subsidiaries"],
  "additionalProperties": false
}
`

// DocumentTemplate is a prompt template for the documents: the document
// itself is not in it (the worker sends a job's document beside the
// prompt).
const DocumentTemplate = `Extract from the framework agreement {{.id}} (the document given with this message): the provider and the customer (the two parties), the effective date, the governing law as the document writes it, the termination notice period in days, the total amount and its currency, and every subsidiary the document lists with its country and ownership percent. Copy names and countries exactly as written. Leave out a field the text does not state.
`

// Subsidiary is one item of a document's list.
type Subsidiary struct {
	Name             string  `json:"name"`
	Country          string  `json:"country"`
	OwnershipPercent float64 `json:"ownership_percent"`
}

// DocumentTruth is what a document holds, an instance of DocumentSchema.
type DocumentTruth struct {
	Provider              string       `json:"provider"`
	Customer              string       `json:"customer"`
	EffectiveDate         string       `json:"effective_date"`
	GoverningLaw          string       `json:"governing_law"`
	TerminationNoticeDays int          `json:"termination_notice_days"`
	TotalAmount           float64      `json:"total_amount"`
	Currency              string       `json:"currency"`
	Subsidiaries          []Subsidiary `json:"subsidiaries"`
}

// Place is where a planted value is written in a document: the JSON
// pointer of the value in DocumentTruth, and the span of its text in
// Unicode code points (what package evidence's spans count), end
// exclusive. The currency is written as a code or, in Japanese, a word.
type Place struct {
	Pointer string `json:"pointer"`
	Start   int    `json:"start"`
	End     int    `json:"end"`
}

// Document is a simulated long document: a framework agreement between
// two companies with a list of subsidiaries, in Markdown.
type Document struct {
	Lang  string        `json:"lang"`
	Text  string        `json:"-"`
	Truth DocumentTruth `json:"truth"`
	// Places lists where each planted value is written, in text order.
	Places []Place `json:"places"`
}

// NewDocument writes document n of a seed in a language (DocumentLangs)
// with about chars characters: within one paragraph of it, and at least
// chars. It is a function of (seed, n, lang, chars). The parties and the
// effective date are on its first page, the total amount between a fifth
// and half of the way, the notice period between 55% and 85%, the
// governing law in its last paragraph; its DocumentItems subsidiaries
// come in lists (bullets or Markdown tables) spread evenly over its
// sections, so that any split into chunks cuts the list. The filler is
// numbered sections of paragraphs. The error matches ErrDocument.
func NewDocument(seed uint64, n int, lang string, chars int) (Document, error) {
	l, ok := docLangs[lang]
	if !ok {
		return Document{}, fmt.Errorf("%w: language %q, want one of %v", ErrDocument, lang, DocumentLangs())
	}
	if chars < DocumentMinChars || chars > DocumentMaxChars {
		return Document{}, fmt.Errorf("%w: %d characters, want %d to %d", ErrDocument, chars, DocumentMinChars, DocumentMaxChars)
	}
	if n < 0 {
		return Document{}, fmt.Errorf("%w: document number %d, want >= 0", ErrDocument, n)
	}
	r := rand.New(rand.NewPCG(seed, hashStrings("document", lang, strconv.Itoa(n), strconv.Itoa(chars))))
	w := docWriter{l: l, r: r, seen: map[string]bool{}}
	d := w.write(chars)
	got := readDocument(d.Text)
	if !got.matches(d.Truth) {
		return Document{}, fmt.Errorf("document %d (%s, seed %d) does not read back as its truth", n, lang, seed)
	}
	d.Places = got.places(d.Text)
	return d, nil
}

// docWriter writes one document.
type docWriter struct {
	l    *docLang
	r    *rand.Rand
	seen map[string]bool
	b    strings.Builder
	n    int // code points written
}

func (w *docWriter) add(s string) {
	w.b.WriteString(s)
	w.n += utf8.RuneCountInString(s)
}

// company is a company name not drawn before in this document.
func (w *docWriter) company() string {
	l := w.l
	for {
		name := l.firstParts[w.r.IntN(len(l.firstParts))] + l.nameJoin + l.sectors[w.r.IntN(len(l.sectors))] +
			l.nameJoin + l.suffixes[w.r.IntN(len(l.suffixes))]
		if !w.seen[name] {
			w.seen[name] = true
			return name
		}
	}
}

// number writes tenths (or hundredths, with cents) in the language's way.
func (w *docWriter) number(units int64, decimals int, group bool) string {
	scale := int64(1)
	for range decimals {
		scale *= 10
	}
	whole, frac := units/scale, units%scale
	digits := strconv.FormatInt(whole, 10)
	if group {
		var g strings.Builder
		for i, c := range digits {
			if i > 0 && (len(digits)-i)%3 == 0 {
				g.WriteString(w.l.group)
			}
			g.WriteRune(c)
		}
		digits = g.String()
	}
	if decimals == 0 {
		return digits
	}
	point := "."
	if w.l.decimalComma {
		point = ","
	}
	return digits + point + fmt.Sprintf("%0*d", decimals, frac)
}

// percent is an ownership share in tenths of a percent: 45% of them whole
// ownership, the others 20.0% to 99.9%.
func (w *docWriter) percent() int64 {
	if w.r.IntN(100) < 45 {
		return 1000
	}
	return 200 + w.r.Int64N(800)
}

func (w *docWriter) percentText(tenths int64) string {
	if tenths%10 == 0 {
		return w.number(tenths/10, 0, false)
	}
	return w.number(tenths, 1, false)
}

// sentence is one filler sentence.
func (w *docWriter) sentence() string {
	l := w.l
	s := l.sentences[w.r.IntN(len(l.sentences))]
	a := l.nouns[w.r.IntN(len(l.nouns))]
	b := l.nouns[w.r.IntN(len(l.nouns))]
	for b == a {
		b = l.nouns[w.r.IntN(len(l.nouns))]
	}
	return strings.NewReplacer("{A}", upperFirst(a), "{a}", a, "{b}", b).Replace(s)
}

func upperFirst(s string) string {
	c, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(c)) + s[size:]
}

func (w *docWriter) paragraph() string {
	n := 3 + w.r.IntN(4)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = w.sentence()
	}
	return strings.Join(parts, w.l.sep) + "\n\n"
}

// items writes a list of subsidiaries, as bullets or a table.
func (w *docWriter) items(list []Subsidiary, tenths []int64) string {
	var b strings.Builder
	b.WriteString(w.l.listIntro + "\n\n")
	table := w.r.IntN(3) == 0
	if table {
		b.WriteString(w.l.tableHead + "\n| --- | --- | --- |\n")
	}
	for i, s := range list {
		p := w.percentText(tenths[i])
		if table {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", s.Name, s.Country, p)
		} else {
			fmt.Fprintf(&b, w.l.bullet+"\n", s.Name, s.Country, p)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func (w *docWriter) write(chars int) Document {
	l, r := w.l, w.r
	t := DocumentTruth{
		Provider: w.company(),
		Customer: w.company(),
	}
	date := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.IntN(4*365))
	t.EffectiveDate = date.Format(time.DateOnly)
	t.GoverningLaw = l.laws[r.IntN(len(l.laws))]
	t.TerminationNoticeDays = []int{30, 60, 90, 120, 180}[r.IntN(5)]
	t.Currency = docCurrencies[r.IntN(len(docCurrencies))]
	amount := (25 + r.Int64N(9000)) * 10_000 // whole units, so the cents are 00
	t.TotalAmount = float64(amount)
	tenths := make([]int64, DocumentItems)
	t.Subsidiaries = make([]Subsidiary, DocumentItems)
	for i := range t.Subsidiaries {
		tenths[i] = w.percent()
		t.Subsidiaries[i] = Subsidiary{Name: w.company(), Country: l.countries[r.IntN(len(l.countries))], OwnershipPercent: float64(tenths[i]) / 10}
	}

	w.add(l.title + "\n\n")
	w.add(fmt.Sprintf(l.preamble, t.Provider, t.Customer, l.date(date, r.IntN(2))) + w.l.sep + w.sentence() + "\n\n")
	amountText := w.number(amount*100, 2, true)
	if t.Currency == "JPY" {
		amountText = w.number(amount, 0, true)
	}
	planted := map[int][]string{}
	sections := min(max((chars-w.n)/docSectionChars, 6), docMaxSections)
	at := func(lo, hi float64) int { return int(float64(sections) * (lo + (hi-lo)*r.Float64())) }
	planted[at(0.2, 0.5)] = append(planted[at(0.2, 0.5)], fmt.Sprintf(l.amount, amountText, l.currency(t.Currency)))
	planted[at(0.55, 0.85)] = append(planted[at(0.55, 0.85)], fmt.Sprintf(l.notice, t.TerminationNoticeDays))
	law := fmt.Sprintf(l.law, t.GoverningLaw)
	start := w.n
	// The law's paragraph closes the document: the last section's
	// filler stops short of the target by about its length.
	end := chars - utf8.RuneCountInString(law) - 1
	for k := range sections {
		w.add(l.heading(k+1, l.headings[k%len(l.headings)]) + "\n\n")
		w.add(w.paragraph())
		lo, hi := k*DocumentItems/sections, (k+1)*DocumentItems/sections
		if hi > lo {
			w.add(w.items(t.Subsidiaries[lo:hi], tenths[lo:hi]))
		}
		for _, p := range planted[k] {
			w.add(w.sentence() + l.sep + p + l.sep + w.sentence() + "\n\n")
		}
		target := start + (end-start)*(k+1)/sections
		for w.n < target {
			w.add(w.paragraph())
		}
	}
	w.add(law + "\n")
	return Document{Lang: l.code, Text: w.b.String(), Truth: t}
}

// docRead is what readDocument finds in a text: the planted fields and
// the list items whose phrases it holds whole, with the byte spans of
// their values.
type docRead struct {
	lang   *docLang
	fields map[string]docHit
	items  []docItem
}

type docHit struct {
	value      any
	start, end int
}

type docItem struct {
	name, country, pct docHit
}

// detectDocLang is the language of a text: Japanese when it has kana,
// else the language whose common words it has most of.
func detectDocLang(text string) *docLang {
	// Hiragana and katakana are U+3040 to U+30FF.
	if strings.ContainsFunc(text, func(c rune) bool { return c >= 0x3040 && c <= 0x30ff }) {
		return docLangs["ja"]
	}
	score := map[string]int{
		"en": strings.Count(text, " the ") + strings.Count(text, " and "),
		"de": strings.Count(text, " der ") + strings.Count(text, " die ") + strings.Count(text, " und "),
		"fr": strings.Count(text, " le ") + strings.Count(text, " les ") + strings.Count(text, " des "),
	}
	best := "en"
	for _, c := range []string{"de", "fr"} {
		if score[c] > score[best] {
			best = c
		}
	}
	return docLangs[best]
}

// readDocument reads back the planted phrases a text holds whole, in the
// text's language: a phrase cut by the text's start or end is not read.
func readDocument(text string) docRead {
	l := detectDocLang(text)
	d := docRead{lang: l, fields: map[string]docHit{}}
	hit := func(m []int, i int, v any) docHit { return docHit{value: v, start: m[2*i], end: m[2*i+1]} }
	if m := l.reParties.FindStringSubmatchIndex(text); m != nil {
		d.fields[docProvider] = hit(m, 1, text[m[2]:m[3]])
		d.fields[docCustomer] = hit(m, 2, text[m[4]:m[5]])
	}
	if m := l.reEffective.FindStringSubmatchIndex(text); m != nil {
		if iso, ok := l.parseDate(text[m[2]:m[3]]); ok {
			d.fields[docDate] = hit(m, 1, iso)
		}
	}
	if m := l.reAmount.FindStringSubmatchIndex(text); m != nil {
		ni, ci := 1, 2
		if _, ok := l.parseCur(text[m[2]:m[3]]); ok {
			ni, ci = 2, 1
		}
		num, okN := readNumber(text[m[2*ni]:m[2*ni+1]], l)
		cur, okC := l.parseCur(text[m[2*ci]:m[2*ci+1]])
		if okN && okC {
			d.fields[docAmount] = hit(m, ni, num)
			d.fields[docCurrency] = hit(m, ci, cur)
		}
	}
	if m := l.reNotice.FindStringSubmatchIndex(text); m != nil {
		d.fields[docNotice] = hit(m, 1, json.Number(text[m[2]:m[3]]))
	}
	if m := l.reLaw.FindStringSubmatchIndex(text); m != nil {
		d.fields[docLaw] = hit(m, 1, text[m[2]:m[3]])
	}
	// The list's lines, read one by one: only a line that begins like
	// one of them goes through a pattern.
	seen := map[string]bool{}
	bullet, _, _ := strings.Cut(l.bullet, "%s")
	for at := 0; at < len(text); {
		end := strings.IndexByte(text[at:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += at
		}
		line := text[at:end]
		var m []int
		switch {
		case strings.HasPrefix(line, "| "):
			m = l.reRow.FindStringSubmatchIndex(line)
		case strings.HasPrefix(line, bullet):
			m = l.reBullet.FindStringSubmatchIndex(line)
		}
		if m != nil {
			for i := range m {
				m[i] += at
			}
			pct, ok := readNumber(text[m[6]:m[7]], l)
			if name := text[m[2]:m[3]]; ok && !seen[name] {
				seen[name] = true
				d.items = append(d.items, docItem{name: hit(m, 1, name), country: hit(m, 2, text[m[4]:m[5]]), pct: hit(m, 3, pct)})
			}
		}
		at = end + 1
	}
	return d
}

// readNumber reads a number as the language writes it (group separators,
// a decimal point or comma) into its shortest JSON text.
func readNumber(s string, l *docLang) (json.Number, bool) {
	s = strings.ReplaceAll(s, l.group, "")
	if l.decimalComma {
		s = strings.ReplaceAll(s, ",", ".")
	} else {
		s = strings.ReplaceAll(s, ",", "")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "", false
	}
	return json.Number(strconv.FormatFloat(f, 'f', -1, 64)), true
}

// value is what the text holds as an instance of DocumentSchema: the
// fields it states and, when it lists any, the first maxItems
// subsidiaries (all of them when maxItems is 0 or less).
func (d docRead) value(maxItems int) map[string]any {
	out := make(map[string]any, len(d.fields)+1)
	for k, h := range d.fields {
		out[k] = h.value
	}
	items := d.items
	if maxItems > 0 && len(items) > maxItems {
		items = items[:maxItems]
	}
	if len(items) > 0 {
		list := make([]any, len(items))
		for i, it := range items {
			list[i] = map[string]any{"name": it.name.value, "country": it.country.value, "ownership_percent": it.pct.value}
		}
		out[docList] = list
	}
	return out
}

// matches reports whether the read is exactly the truth.
func (d docRead) matches(t DocumentTruth) bool {
	b, err := json.Marshal(t)
	if err != nil {
		return false
	}
	want := decodeNumbers(b)
	return extract.SameValue(d.value(0), want)
}

// places lists the spans of the values read, in code points, in text order.
func (d docRead) places(text string) []Place {
	type span struct {
		ptr        string
		start, end int
	}
	var spans []span
	for k, h := range d.fields {
		spans = append(spans, span{"/" + k, h.start, h.end})
	}
	for i, it := range d.items {
		p := "/" + docList + "/" + strconv.Itoa(i)
		spans = append(spans, span{p + "/name", it.name.start, it.name.end},
			span{p + "/country", it.country.start, it.country.end}, span{p + "/ownership_percent", it.pct.start, it.pct.end})
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	out := make([]Place, len(spans))
	at, cp := 0, 0 // byte offset, its code point offset
	toCP := func(b int) int {
		cp += utf8.RuneCountInString(text[at:b])
		at = b
		return cp
	}
	for i, s := range spans {
		start := toCP(s.start)
		out[i] = Place{Pointer: s.ptr, Start: start, End: start + utf8.RuneCountInString(text[s.start:s.end])}
	}
	return out
}

// decodeNumbers decodes JSON with numbers as json.Number.
func decodeNumbers(b []byte) any {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}
