package evidence

import (
	"github.com/fixpoint-dev/fixpoint"

	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Grades and leaves are the root package's (fixpoint.Grade,
// fixpoint.Grounding): an attempt records them as this package makes them.

// Summary counts a value's leaves by grade. Exempt counts the strings and
// numbers the exemption predicate left ungraded.
type Summary struct {
	Exact      int `json:"exact"`
	Normalized int `json:"normalized"`
	Fuzzy      int `json:"fuzzy"`
	None       int `json:"none"`
	Exempt     int `json:"exempt"`
}

// Result is the alignment of a value to a source.
type Result struct {
	// Leaves are the graded leaves in document order (object keys sorted).
	Leaves  []fixpoint.Grounding `json:"leaves"`
	Summary Summary              `json:"summary"`
}

// Align indexes source and aligns value to it; see Source.Align. To align
// several values to one source, index it once with New.
func Align(source string, value any, exempt func(ptr string) bool) Result {
	return New(source).Align(value, exempt)
}

// Align grades each string and number of value, a decoded JSON value
// (map[string]any, []any, string, json.Number or float64, bool, nil), and
// finds its span: the first match in source order of the best grade
// found. In a long source the fields of a list item are graded together,
// near the item's anchor (see ItemWindow and docs/evidence.md, "List
// items"). Booleans, nulls, empty and blank strings are not graded. exempt,
// when not nil, is asked about each location (a JSON pointer, "" for the
// root) before its contents: a location it names is not graded, nor
// anything in it.
func (s *Source) Align(value any, exempt func(ptr string) bool) Result {
	a := aligner{src: s, norm: newNormalizer(), exempt: exempt}
	a.walk(value, "", false)
	return Result{Leaves: a.leaves, Summary: a.sum}
}

type aligner struct {
	src    *Source
	norm   *normalizer
	exempt func(string) bool
	leaves []fixpoint.Grounding
	sum    Summary
}

func (a *aligner) walk(v any, ptr string, exempt bool) {
	exempt = exempt || a.exempt != nil && a.exempt(ptr)
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			a.walk(v[k], ptr+"/"+escapeToken(k), exempt)
		}
	case []any:
		for i, x := range v {
			p := ptr + "/" + strconv.Itoa(i)
			if o, ok := x.(map[string]any); ok && a.grouped() {
				a.item(o, p, exempt)
				continue
			}
			a.walk(x, p, exempt)
		}
	case string:
		if strings.TrimSpace(v) == "" {
			return
		}
		if exempt {
			a.sum.Exempt++
			return
		}
		a.add(ptr, a.src.gradeString(v, a.norm))
	default:
		lit, key, ok := numberLiteral(v)
		if !ok && !isNumber(v) {
			return // a boolean, null or no JSON value
		}
		if exempt {
			a.sum.Exempt++
			return
		}
		a.add(ptr, a.src.gradeNumber(lit, key, ok))
	}
}

func isNumber(v any) bool {
	switch v.(type) {
	case json.Number, float64, float32, int, int64:
		return true
	}
	return false
}

// match is a grade and its byte range in the source's text.
type match struct {
	grade      fixpoint.Grade
	start, end int
}

func (a *aligner) add(ptr string, m match) {
	a.set(a.reserve(ptr), m, "")
}

// reserve appends an ungraded leaf at ptr, for set to grade, and returns
// its index: a list item's leaves keep their order though graded after.
func (a *aligner) reserve(ptr string) int {
	a.leaves = append(a.leaves, fixpoint.Grounding{Path: ptr})
	return len(a.leaves) - 1
}

// set grades the leaf at index i and counts it; reason is its
// Grounding.Reason.
func (a *aligner) set(i int, m match, reason string) {
	l := &a.leaves[i]
	l.Grade, l.Reason = m.grade, reason
	if m.grade != fixpoint.GradeNone {
		l.Start, l.End = a.src.cpOf(m.start), a.src.cpOf(m.end)
	}
	switch m.grade {
	case fixpoint.GradeExact:
		a.sum.Exact++
	case fixpoint.GradeNormalized:
		a.sum.Normalized++
	case fixpoint.GradeFuzzy:
		a.sum.Fuzzy++
	default:
		a.sum.None++
	}
}

// gradeString grades a string: as is, normalised, as a date or number
// written another way, then fuzzy.
func (s *Source) gradeString(v string, n *normalizer) match {
	nv := n.normalize(v)
	if nv == "" {
		return match{grade: fixpoint.GradeNone}
	}
	// Where the value is in the source as is, it is there normalised too:
	// look through its normalised matches for the first that is exact.
	best := match{grade: fixpoint.GradeNone}
	s.grams.each(nv, 0, func(i int) bool {
		j := i + len(nv)
		if !atBoundary(s.norm, i, j) {
			return true
		}
		if best.grade == fixpoint.GradeNone {
			best = match{fixpoint.GradeNormalized, s.rawStart(i), s.rawEnd(j)}
		}
		a := s.rawStart(i)
		if strings.HasPrefix(s.text[a:], v) && atBoundary(s.text, a, a+len(v)) && !s.crossesSegment(a, a+len(v)) {
			best = match{fixpoint.GradeExact, a, a + len(v)}
			return false
		}
		return true
	})
	if best.grade != fixpoint.GradeNone {
		return best
	}
	if m, ok := first(s.dates, textDateKeys(nv)); ok {
		return match{fixpoint.GradeNormalized, int(m.start), int(m.end)}
	}
	if m, ok := first(s.numbers, textNumberKeys(nv)); ok {
		return match{fixpoint.GradeNormalized, int(m.start), int(m.end)}
	}
	if i, j, ok := s.fuzzy(nv); ok {
		return match{fixpoint.GradeFuzzy, i, j}
	}
	return match{grade: fixpoint.GradeNone}
}

// first returns the earliest mention of any of keys.
func first[K comparable](m map[K][]mention, keys []K) (mention, bool) {
	var best mention
	found := false
	for _, k := range keys {
		if l := m[k]; len(l) > 0 && (!found || l[0].start < best.start) {
			best, found = l[0], true
		}
	}
	return best, found
}

// gradeNumber grades a number by the numbers the source writes: exact when
// one of them is written as its JSON text, normalised when written
// another way. Numbers are never fuzzy.
func (s *Source) gradeNumber(lit, key string, ok bool) match {
	if !ok {
		return match{grade: fixpoint.GradeNone}
	}
	l := s.numbers[key]
	for _, m := range l {
		if s.text[m.start:m.end] == lit {
			return match{fixpoint.GradeExact, int(m.start), int(m.end)}
		}
	}
	if len(l) > 0 {
		return match{fixpoint.GradeNormalized, int(l[0].start), int(l[0].end)}
	}
	return match{grade: fixpoint.GradeNone}
}

// escapeToken escapes a key as a JSON pointer token (RFC 6901).
func escapeToken(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// unescapeToken undoes escapeToken.
func unescapeToken(t string) string {
	if !strings.Contains(t, "~") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
}

// splitPointer returns the unescaped tokens of a JSON pointer.
func splitPointer(ptr string) []string {
	if ptr == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range toks {
		toks[i] = unescapeToken(t)
	}
	return toks
}
