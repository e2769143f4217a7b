package web

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// highlight cuts a source at its spans' code point offsets, whatever the
// bytes of its characters: accents, emoji (one code point, two UTF-16
// units), a combining mark, a byte that is not UTF-8 (one code point, as
// package evidence counts it); overlapping spans cut each other, the
// segment they share taking the better grade.
func TestHighlight(t *testing.T) {
	t.Parallel()
	g := func(path string, grade fixpoint.Grade, start, end int) fixpoint.Grounding {
		return fixpoint.Grounding{Path: path, Grade: grade, Start: start, End: end}
	}
	for _, tc := range []struct {
		name    string
		source  string
		grades  []fixpoint.Grounding
		want    []segment
		outside int
	}{
		{name: "emoji and accents before the span", source: "🙂🙂 Zoë à Zürich",
			grades: []fixpoint.Grounding{g("/city", fixpoint.GradeNormalized, 9, 15), g("/who", fixpoint.GradeExact, 3, 6)},
			want: []segment{{Text: "🙂🙂 "}, {Text: "Zoë", Grade: "exact", Title: "/who: exact"}, {Text: " à "},
				{Text: "Zürich", Grade: "normalized", Title: "/city: normalized"}}},
		{name: "a combining mark is a code point", source: "Mu\u0308ller GmbH",
			grades: []fixpoint.Grounding{g("/v", fixpoint.GradeExact, 8, 12)},
			want:   []segment{{Text: "Mu\u0308ller "}, {Text: "GmbH", Grade: "exact", Title: "/v: exact"}}},
		{name: "a byte that is not UTF-8 is one", source: "a\xffbc",
			grades: []fixpoint.Grounding{g("/x", fixpoint.GradeFuzzy, 2, 4)},
			want:   []segment{{Text: "a\xff"}, {Text: "bc", Grade: "fuzzy", Title: "/x: fuzzy"}}},
		{name: "overlapping spans", source: "東京タワー店",
			grades: []fixpoint.Grounding{g("/a", fixpoint.GradeFuzzy, 0, 5), g("/b", fixpoint.GradeExact, 2, 6)},
			want: []segment{{Text: "東京", Grade: "fuzzy", Title: "/a: fuzzy"}, {Text: "タワー", Grade: "exact", Title: "/a: fuzzy\n/b: exact"},
				{Text: "店", Grade: "exact", Title: "/b: exact"}}},
		{name: "none, empty and outside spans mark nothing", source: "abc",
			grades: []fixpoint.Grounding{g("/n", fixpoint.GradeNone, 0, 0), g("/e", fixpoint.GradeExact, 1, 1), g("/o", fixpoint.GradeExact, 2, 9)},
			want:   []segment{{Text: "abc"}}, outside: 2},
	} {
		got, outside := highlight(newSourceText(tc.source), tc.grades)
		if !reflect.DeepEqual(got, tc.want) || outside != tc.outside {
			t.Errorf("%s: %q, %d outside;\nwant %q, %d", tc.name, got, outside, tc.want, tc.outside)
		}
	}
}

// The final attempt is the run's valid one, else its last: the one whose
// value is the job's.
func TestFinalAttempt(t *testing.T) {
	t.Parallel()
	as := func(valid ...bool) []store.Attempt {
		var out []store.Attempt
		for i, v := range valid {
			out = append(out, store.Attempt{No: i + 1, Valid: v})
		}
		return out
	}
	for _, tc := range []struct {
		attempts []store.Attempt
		want     int
	}{{nil, -1}, {as(false, false), 1}, {as(false, true), 1}, {as(true, false), 0}, {as(false, true, false), 1}} {
		if got := finalAttempt(tc.attempts); got != tc.want {
			t.Errorf("finalAttempt(%+v) = %d, want %d", tc.attempts, got, tc.want)
		}
	}
}

// The source view lists the ungrounded values with the job's value at
// their path, and says so when the source cannot be made again.
func TestSourceView(t *testing.T) {
	t.Parallel()
	d := store.JobDetail{Job: &store.JobRecord{Value: json.RawMessage(`{"a":{"b/c":["x","Globex"]},"n":320}`)},
		Attempts: []store.Attempt{{No: 1, Valid: true, Evidence: json.RawMessage(
			`[{"path":"/a/b~1c/0","grade":"exact","start":0,"end":1},{"path":"/a/b~1c/1","grade":"none","start":0,"end":0},{"path":"/n","grade":"none","start":0,"end":0}]`)}}}
	v := newSourceView(d, "row", newSourceText("x"), nil)
	want := []ungrounded{{Path: "/a/b~1c/1", Value: "Globex"}, {Path: "/n", Value: "320"}}
	if v == nil || v.Found != 1 || !reflect.DeepEqual(v.Ungrounded, want) || v.Note != "" || len(v.Segments) != 1 {
		t.Fatalf("source view %+v; want 1 found, %+v ungrounded", v, want)
	}
	if v := newSourceView(d, "field:text", nil, errNoField); v == nil || v.Segments != nil || v.Note == "" {
		t.Errorf("a source that cannot be made: %+v; want a note and no text", v)
	}
	d.Attempts[0].Evidence = nil
	if v := newSourceView(d, "row", newSourceText("x"), nil); v != nil {
		t.Errorf("an attempt without grades: %+v, want no source part", v)
	}
}

var errNoField = jsonError("the input row has no field \"text\"")

type jsonError string

func (e jsonError) Error() string { return string(e) }
