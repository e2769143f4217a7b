package web

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/evidence"
	"github.com/fixpoint-dev/fixpoint/store"
)

// sourceView is a job's source text as its page shows it: the text its
// final check graded the value's strings and numbers against, the spans
// they were found at highlighted, and the ones not found listed.
type sourceView struct {
	// Setting is the evidence source the job's run names (row, prompt,
	// field:NAME); Check names the final check ("attempt 2").
	Setting string
	Check   string
	// Segments are the source text cut at every span's ends, in order.
	Segments []segment
	// Found counts the highlighted strings and numbers; Ungrounded are
	// those the source does not hold (grade none).
	Found      int
	Ungrounded []ungrounded
	// Note says what could not be shown ("" when all is well).
	Note string
}

// segment is a run of the source text, and the spans covering it: Grade
// ("" for none) is the best of their grades, Title names each one.
type segment struct {
	Text, Grade, Title string
}

// ungrounded is a string or number of the value its source does not hold.
type ungrounded struct {
	Path, Value string
}

// gradeRow is one graded string or number on an attempt's card; Quote is
// the source text at its span ("" when unknown or for grade none).
type gradeRow struct {
	fixpoint.Grounding
	Quote string
}

// gradeRank orders the grades from the best.
var gradeRank = map[fixpoint.Grade]int{fixpoint.GradeExact: 0, fixpoint.GradeNormalized: 1, fixpoint.GradeFuzzy: 2, fixpoint.GradeNone: 3}

// finalCheck is what last checked a job's value (the ledger's views
// count the same one): its latest run's revalidation, else that run's
// final attempt. What names it; Evidence is its grades.
type finalCheck struct {
	What     string
	Evidence json.RawMessage
}

// finalCheckOf is the job's final check; ok is false when it has none.
func finalCheckOf(d store.JobDetail) (c finalCheck, ok bool) {
	if rv := d.Revalidation; rv != nil {
		return finalCheck{What: fmt.Sprintf("the revalidation of run %d", rv.Run), Evidence: rv.Evidence}, true
	}
	i := finalAttempt(d.Attempts)
	if i < 0 {
		return c, false
	}
	return finalCheck{What: "attempt " + strconv.Itoa(d.Attempts[i].No), Evidence: d.Attempts[i].Evidence}, true
}

// finalAttempt is the index of a run's final attempt: its valid attempt,
// else its last (the one whose value is the job's); -1 for none.
func finalAttempt(attempts []store.Attempt) int {
	best := -1
	for i, a := range attempts {
		if best < 0 || a.Valid && !attempts[best].Valid ||
			a.Valid == attempts[best].Valid && a.No > attempts[best].No {
			best = i
		}
	}
	return best
}

// jobSource is the text the job's latest run checked its values against,
// as the worker made it (evidence.JobSource of the run's setting).
func jobSource(d store.JobDetail) (string, string, error) {
	setting := cmp.Or(d.EvidenceSource, fixpoint.EvidenceSourceRow)
	src, err := evidence.JobSource(d.Job.Metadata, d.Job.Prompt, setting)
	return setting, src, err
}

// newSourceView shows the source of the job's final check and its
// grades; nil when that check has none (the evidence stage did not grade
// it). src is nil when the source cannot be made (srcErr says why).
func newSourceView(d store.JobDetail, setting string, src *sourceText, srcErr error) *sourceView {
	c, ok := finalCheckOf(d)
	if !ok || c.Evidence == nil {
		return nil
	}
	v := &sourceView{Setting: setting, Check: c.What}
	var gs []fixpoint.Grounding
	if err := json.Unmarshal(c.Evidence, &gs); err != nil {
		v.Note = "the grades of " + c.What + " do not read: " + err.Error()
		return v
	}
	var value any
	dec := json.NewDecoder(bytes.NewReader(d.Job.Value))
	dec.UseNumber()
	_ = dec.Decode(&value) // no value: the ungrounded are listed by path alone
	for _, g := range gs {
		if g.Grade == fixpoint.GradeNone {
			v.Ungrounded = append(v.Ungrounded, ungrounded{Path: g.Path, Value: valueAt(value, g.Path)})
		} else {
			v.Found++
		}
	}
	if src == nil {
		v.Note = fmt.Sprintf("the source text cannot be made again from the job's input row: %v", srcErr)
		return v
	}
	var outside int
	v.Segments, outside = highlight(src, gs)
	if outside > 0 {
		v.Note = fmt.Sprintf("%d span(s) fall outside the source text: the job's source is not the text they were found in", outside)
	}
	return v
}

// sourceText is a job's source text with the byte offset of each of its
// code points, and its length last: code point offset k starts at byte
// off[k]. A byte that is not UTF-8 counts as one code point, as package
// evidence counts it. Made once per page, for every span on it.
type sourceText struct {
	text string
	off  []int
}

func newSourceText(s string) *sourceText {
	off := make([]int, 0, len(s)+1)
	for i := range s {
		off = append(off, i)
	}
	return &sourceText{text: s, off: append(off, len(s))}
}

// len is the text's length in code points.
func (s *sourceText) len() int { return len(s.off) - 1 }

// has reports whether g's span is a span of the text.
func (s *sourceText) has(g fixpoint.Grounding) bool {
	return g.Grade != fixpoint.GradeNone && 0 <= g.Start && g.Start < g.End && g.End <= s.len()
}

// slice is the text from code point from to code point to.
func (s *sourceText) slice(from, to int) string { return s.text[s.off[from]:s.off[to]] }

// highlight cuts source at the ends of the spans of gs (code point
// offsets, converted to byte offsets here: the source may hold any
// character) into segments, each with the spans covering it; outside
// counts the spans that are not in the source.
func highlight(source *sourceText, gs []fixpoint.Grounding) (segs []segment, outside int) {
	cuts := []int{0, source.len()}
	var spans []fixpoint.Grounding
	for _, g := range gs {
		switch {
		case source.has(g):
			spans = append(spans, g)
			cuts = append(cuts, g.Start, g.End)
		case g.Grade != fixpoint.GradeNone:
			outside++
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	slices.SortStableFunc(spans, func(a, b fixpoint.Grounding) int { return cmp.Compare(a.Start, b.Start) })
	var open []fixpoint.Grounding // the spans covering the current segment
	next := 0
	for k := 0; k+1 < len(cuts); k++ {
		from, to := cuts[k], cuts[k+1]
		open = slices.DeleteFunc(open, func(g fixpoint.Grounding) bool { return g.End <= from })
		for ; next < len(spans) && spans[next].Start <= from; next++ {
			open = append(open, spans[next])
		}
		seg := segment{Text: source.slice(from, to)}
		if len(open) > 0 {
			seg.Grade, seg.Title = covering(open)
		}
		segs = append(segs, seg)
	}
	return segs, outside
}

// covering is the best grade of spans, and a title naming each.
func covering(spans []fixpoint.Grounding) (string, string) {
	best := spans[0].Grade
	titles := make([]string, len(spans))
	for i, g := range spans {
		if gradeRank[g.Grade] < gradeRank[best] {
			best = g.Grade
		}
		titles[i] = cmp.Or(g.Path, "(root)") + ": " + string(g.Grade)
	}
	return string(best), strings.Join(titles, "\n")
}

// gradeRows are an attempt's grades for its card, each with the source
// text at its span when src is known (not nil).
func gradeRows(raw json.RawMessage, src *sourceText) []gradeRow {
	var gs []fixpoint.Grounding
	if json.Unmarshal(raw, &gs) != nil {
		return nil
	}
	rows := make([]gradeRow, len(gs))
	for i, g := range gs {
		rows[i] = gradeRow{Grounding: g}
		if src != nil && src.has(g) {
			rows[i].Quote = src.slice(g.Start, g.End)
		}
	}
	return rows
}

// pointerToken unescapes a JSON pointer's token (RFC 6901).
var pointerToken = strings.NewReplacer("~1", "/", "~0", "~")

// valueAt is the value at JSON pointer ptr in v as compact JSON (a string
// as its text), "" when there is none.
func valueAt(v any, ptr string) string {
	if ptr != "" {
		for _, tok := range strings.Split(ptr[1:], "/") {
			tok = pointerToken.Replace(tok)
			switch x := v.(type) {
			case map[string]any:
				v = x[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(x) {
					return ""
				}
				v = x[i]
			default:
				return ""
			}
		}
	}
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// revalidationView is the check of a revalidated job's value (enqueue
// revalidate) that made its latest run, shown as a card.
type revalidationView struct {
	store.Revalidation
	// Checked says what was checked: the prior run's value or a reply.
	Checked string
	// Errors, Warnings and Grades are as an attempt card's.
	Errors, Warnings []attemptError
	Grades           []gradeRow
}

func newRevalidationView(rv store.Revalidation, src *sourceText) *revalidationView {
	v := &revalidationView{Revalidation: rv, Checked: fmt.Sprintf("the value of run %d", rv.PriorRun)}
	if rv.AttemptNo > 0 {
		v.Checked = fmt.Sprintf("the reply of attempt %d of run %d", rv.AttemptNo, rv.PriorRun)
	}
	_ = json.Unmarshal(rv.Errors, &v.Errors)
	_ = json.Unmarshal(rv.Warnings, &v.Warnings)
	v.Grades = gradeRows(rv.Evidence, src)
	return v
}
