package web

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// A document job's values are graded against its document (the evidence
// source "document"), which the ledger keeps once by hash. Its page shows
// the document with each graded value's span marked and linked to the
// value's row in a table of fields (and back), and says which chunk each
// span lies in: values from different chunks keep their own spans. A
// long document is shown clipped around the spans, with a link to the
// whole text.

// Bounds of the document as the page shows it.
const (
	// docClipMin is the length (code points) from which a document is
	// shown clipped: docContext characters either side of each span, the
	// rest left out (the whole text a click away).
	docClipMin = 6000
	docContext = 240
	// docHeadChars is how much of a clipped document's start is shown
	// when no span is on it.
	docHeadChars = 1200
	// docFieldsOpen is how many fields the table shows unfolded.
	docFieldsOpen = 40
)

// documentView is a document job's document with its value's spans.
type documentView struct {
	Hash string
	// Chars is the document's length in code points; Check names the
	// check whose grades are shown ("attempt 31").
	Chars int
	Check string
	// Segments are the text cut at every span's ends (and, clipped, at
	// the gaps); Clipped says parts are left out, Long that the document
	// is shown clipped unless the page asks for it whole (Full).
	Segments      []docSegment
	Clipped, Long bool
	Full          bool
	// Links says the page offers the whole text and the clipped one by
	// links (the job page; the playground's run is a part of its page).
	Links bool
	// Fields are the graded strings and numbers of the value, in the
	// check's order; Found counts those with a span.
	Fields []fieldRow
	Found  int
	// Note says what could not be shown ("" when all is well).
	Note string
}

// docSegment is a run of the document: plain text, a span (Grade, Field
// the field row it links to, Anchor set on the segment a span starts at)
// or, with Gap > 0, that many characters left out.
type docSegment struct {
	Text, Grade, Title string
	Field              int
	Anchor             string
	Gap                int
}

// fieldRow is one graded string or number of the value: ID anchors its
// row ("field-ID") and its span ("span-ID").
type fieldRow struct {
	ID                 int
	Path, Value, Grade string
	Start, End         int
	// Chunks names the chunks whose text holds the span ("" when the job
	// has no chunk step or the span is outside every chunk).
	Chunks string
	Quote  string
}

// newDocumentView shows doc with the grades of the job's final check;
// chunks are the chunks the job's steps read. full asks for the whole
// text of a long document.
func newDocumentView(d store.JobDetail, doc string, chunks []fixpoint.ChunkRef, full bool) *documentView {
	var check string
	var grades json.RawMessage
	if c, ok := finalCheckOf(d); ok && c.Evidence != nil {
		check, grades = c.What, c.Evidence
	}
	v := gradedDocument(doc, d.Job.Value, check, grades, chunks, full)
	v.Hash, v.Links = d.Job.DocumentHash, true
	return v
}

// gradedDocument shows doc with the grades (JSON, nil for none) that the
// check named check gave value's strings and numbers.
func gradedDocument(doc string, value json.RawMessage, check string, grades json.RawMessage, chunks []fixpoint.ChunkRef, full bool) *documentView {
	src := newSourceText(doc)
	v := &documentView{Chars: src.len(), Long: src.len() >= docClipMin, Check: check}
	v.Full = full || !v.Long
	var gs []fixpoint.Grounding
	if grades != nil {
		if err := json.Unmarshal(grades, &gs); err != nil {
			v.Note = "the grades of " + check + " do not read: " + err.Error()
			gs = nil
		}
	}
	var val any
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	_ = dec.Decode(&val) // no value: the fields are listed by path alone
	outside := 0
	for i, g := range gs {
		f := fieldRow{ID: i, Path: g.Path, Value: valueAt(val, g.Path), Grade: string(g.Grade), Start: g.Start, End: g.End}
		switch {
		case src.has(g):
			v.Found++
			f.Quote = src.slice(g.Start, g.End)
			f.Chunks = spanChunks(chunks, g)
		case g.Grade != fixpoint.GradeNone:
			outside++
		}
		v.Fields = append(v.Fields, f)
	}
	if outside > 0 {
		v.Note = fmt.Sprintf("%d span(s) fall outside the document: it is not the text they were found in", outside)
	}
	v.Segments = docSegments(src, gs)
	if !v.Full {
		v.Segments, v.Clipped = clipSegments(v.Segments)
	}
	return v
}

// FoldFields says the table of fields is long enough to fold (a list of
// hundreds of items): a span's link unfolds it.
func (v *documentView) FoldFields() bool { return len(v.Fields) > docFieldsOpen }

// docSegments are highlight's segments with each span linked to its
// field: a segment links to the first of its spans in gs's order, and
// the segment where that span starts carries its anchor.
func docSegments(src *sourceText, gs []fixpoint.Grounding) []docSegment {
	segs, _ := highlight(src, gs)
	out := make([]docSegment, len(segs))
	anchored := map[int]bool{}
	at := 0
	for i, s := range segs {
		n := utf8.RuneCountInString(s.Text)
		out[i] = docSegment{Text: s.Text, Grade: s.Grade, Title: s.Title, Field: -1}
		if s.Grade != "" {
			for k, g := range gs {
				if src.has(g) && g.Start <= at && at+n <= g.End {
					out[i].Field = k
					break
				}
			}
			if k := out[i].Field; k >= 0 && gs[k].Start == at && !anchored[k] {
				anchored[k] = true
				out[i].Anchor = "span-" + strconv.Itoa(k)
			}
		}
		at += n
	}
	return out
}

// clipSegments leaves out the plain text far from every span: each plain
// segment keeps docContext characters next to a span on either side (the
// document's start when no span is near it), the rest becomes a gap.
func clipSegments(segs []docSegment) ([]docSegment, bool) {
	var out []docSegment
	clipped := false
	for i, s := range segs {
		if s.Grade != "" {
			out = append(out, s)
			continue
		}
		n := utf8.RuneCountInString(s.Text)
		head, tail := 0, 0 // characters kept at the start and the end
		if i > 0 {
			head = docContext
		}
		if i+1 < len(segs) {
			tail = docContext
		}
		if i == 0 && tail == 0 {
			head = docHeadChars // no span at all: the document's start
		}
		if head+tail+docContext >= n {
			out = append(out, s)
			continue
		}
		clipped = true
		h, t := wordPrefix(s.Text, head), wordSuffix(s.Text, tail)
		if h != "" {
			out = append(out, docSegment{Text: h, Field: -1})
		}
		out = append(out, docSegment{Gap: n - utf8.RuneCountInString(h) - utf8.RuneCountInString(t), Field: -1})
		if t != "" {
			out = append(out, docSegment{Text: t, Field: -1})
		}
	}
	return out, clipped
}

// wordSnap is how far a cut moves back to end (or start) at white space
// rather than inside a word; a text without any that near is cut as is
// (a script written without spaces).
const wordSnap = 40

// wordPrefix is s's first n code points, less the word the cut would
// split.
func wordPrefix(s string, n int) string {
	p := runePrefix(s, n)
	if len(p) == len(s) || n == 0 {
		return p
	}
	if r, _ := utf8.DecodeRuneInString(s[len(p):]); unicode.IsSpace(r) {
		return p
	}
	if i := strings.LastIndexFunc(p, unicode.IsSpace); i >= 0 && utf8.RuneCountInString(p[i:]) <= wordSnap {
		return p[:i+1]
	}
	return p
}

// wordSuffix is s's last n code points, less the word the cut would
// split.
func wordSuffix(s string, n int) string {
	t := runeSuffix(s, n)
	if len(t) == len(s) || n == 0 {
		return t
	}
	if r, _ := utf8.DecodeLastRuneInString(s[:len(s)-len(t)]); unicode.IsSpace(r) {
		return t
	}
	if i := strings.IndexFunc(t, unicode.IsSpace); i >= 0 && utf8.RuneCountInString(t[:i]) <= wordSnap {
		return t[i:]
	}
	return t
}

// runePrefix is s's first n code points; runeSuffix its last n.
func runePrefix(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

func runeSuffix(s string, n int) string {
	return s[len(runePrefix(s, utf8.RuneCountInString(s)-n)):]
}

// spanChunks names the chunks whose text holds all of g's span.
func spanChunks(chunks []fixpoint.ChunkRef, g fixpoint.Grounding) string {
	var ns []int
	for _, c := range chunks {
		if c.Start <= g.Start && g.End <= c.End && !slices.Contains(ns, c.N) {
			ns = append(ns, c.N)
		}
	}
	if len(ns) == 0 {
		return ""
	}
	slices.Sort(ns)
	return chunkList(ns)
}

// stepChunks are the distinct chunks the cards' steps read, by number.
func stepChunks(cards []card) []fixpoint.ChunkRef {
	var out []fixpoint.ChunkRef
	for _, c := range cards {
		if c.Doc != nil && c.Doc.Chunk != nil && !slices.ContainsFunc(out, func(r fixpoint.ChunkRef) bool { return r.N == c.Doc.Chunk.N }) {
			out = append(out, *c.Doc.Chunk)
		}
	}
	slices.SortFunc(out, func(a, b fixpoint.ChunkRef) int { return cmp.Compare(a.N, b.N) })
	return out
}

// gapText says how much a gap leaves out.
func gapText(n int) string {
	s := strconv.Itoa(n)
	// Thousands grouped: a gap is often tens of thousands long.
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if n == 1 {
		return "1 character left out"
	}
	return b.String() + " characters left out"
}
