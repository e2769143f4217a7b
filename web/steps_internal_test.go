package web

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
)

func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, s string
		n       int
		want    string
		clipped bool
	}{
		{"short", "abc", 3, "abc", false},
		{"cut", "abcdef", 3, "abc…", true},
		// A cut counts characters, never splits one.
		{"multibyte", "日本語のテキスト", 3, "日本語…", true},
		{"emoji", "🙂🙂🙂🙂", 2, "🙂🙂…", true},
	} {
		got, clipped := clip(tc.s, tc.n)
		if got != tc.want || clipped != tc.clipped || !utf8.ValidString(got) {
			t.Errorf("%s: clip(%q, %d) = %q, %v; want %q, %v", tc.name, tc.s, tc.n, got, clipped, tc.want, tc.clipped)
		}
	}
}

// A turn's tool calls get their results from the later requests' tool
// turns, by call id; a call no later request answers has none.
func TestDocStepsToolResults(t *testing.T) {
	t.Parallel()
	calls := []fixpoint.ToolCall{{ID: "a", Name: "search", Arguments: `{ "text" : "x" }`}, {ID: "b", Name: "set_output", Arguments: `not json`}}
	req, _ := json.Marshal([]fixpoint.Message{{Role: fixpoint.RoleUser, Content: "go"}, {Role: fixpoint.RoleAssistant, ToolCalls: calls},
		{Role: fixpoint.RoleTool, ToolCallID: "a", Content: "found"}, {Role: fixpoint.RoleTool, ToolCallID: "b", IsError: true, Content: "refused"}})
	steps := docSteps([]stepInput{
		{Kind: fixpoint.StepAgent, ToolCalls: calls},
		{Kind: fixpoint.StepAgent, ToolCalls: []fixpoint.ToolCall{{ID: "c", Name: "finish", Arguments: "{}"}}, Request: req},
	})
	want := [][]toolView{
		{{Name: "search", Args: `{"text":"x"}`, Result: "ok", ResultText: "found"}, {Name: "set_output", Args: "not json", Result: "error", ResultText: "refused"}},
		{{Name: "finish", Args: "{}"}},
	}
	for i, st := range steps {
		if !reflect.DeepEqual(st.Tools, want[i]) || st.Label != []string{"Agent turn 1", "Agent turn 2"}[i] {
			t.Errorf("turn %d: %s %+v, want %+v", i+1, st.Label, st.Tools, want[i])
		}
	}
	if docSteps([]stepInput{{Request: req}}) != nil {
		t.Error("a job with no document step has steps")
	}
}

func TestConflictViews(t *testing.T) {
	t.Parallel()
	got := conflictViews([]fixpoint.Conflict{{Path: "/a", Values: []json.RawMessage{json.RawMessage(`{"x": 1}`), json.RawMessage(`"y"`)},
		Chunks: [][]int{{0, 2}, {1}}, Chosen: json.RawMessage(`{"x":1}`)},
		{Path: "/b", Values: []json.RawMessage{json.RawMessage(`1`), json.RawMessage(`2`)}, Chunks: [][]int{{0, 1}, {3}},
			Chosen: json.RawMessage(`2`), By: fixpoint.ConflictByGrounding}})
	want := []conflictView{{Path: "/a", Values: []conflictValue{{Value: `{"x":1}`, Chunks: "chunks 0, 2", Chosen: true}, {Value: `"y"`, Chunks: "chunk 1"}}},
		{Path: "/b", By: "grounding", Values: []conflictValue{{Value: `1`, Chunks: "chunks 0, 1"}, {Value: `2`, Chunks: "chunk 3", Chosen: true}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// Groups are runs of one kind; a group counts its calls (a merge with no
// call none), its valid attempts and its classes.
func TestStepGroups(t *testing.T) {
	t.Parallel()
	chunk := &docStep{Kind: "chunk"}
	merge := &docStep{Kind: "merge", NoCall: true}
	repair := &docStep{Kind: "repair"}
	rows := []stepRow{{Step: chunk, Valid: true, TokensIn: 10}, {Step: chunk, Class: "semantic", Badge: "semantic", TokensIn: 5},
		{Step: chunk, Valid: true}, {Step: merge, Class: "shape", Badge: "shape"}, {Step: repair, Valid: true, CostUSD: 0.5}}
	gs := stepGroups(rows)
	if len(gs) != 3 || gs[0].First != 0 || gs[0].Last != 2 || gs[1].First != 3 || gs[2].Last != 4 {
		t.Fatalf("groups %+v", gs)
	}
	for i, want := range []string{"3 calls · 2 valid · 1 semantic", "no call · 0 valid · 1 shape", "1 call · 1 valid"} {
		if got := gs[i].Summary(); got != want {
			t.Errorf("group %d: %q, want %q", i, got, want)
		}
	}
	if gs[0].TokensIn != 15 || gs[2].CostUSD != 0.5 {
		t.Errorf("the totals: %d tokens in, $%v", gs[0].TokensIn, gs[2].CostUSD)
	}
}

// A long document keeps the text near each span and its start, the rest
// left out as gaps that count what they leave out.
func TestClipSegments(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat("a", 3000) + "SPAN" + strings.Repeat("b", 5000) + "ÜBER" + strings.Repeat("c", 100)
	gs := []fixpoint.Grounding{{Path: "/x", Grade: fixpoint.GradeExact, Start: 3000, End: 3004}, {Path: "/y", Grade: fixpoint.GradeFuzzy, Start: 8004, End: 8008}}
	segs := docSegments(newSourceText(doc), gs)
	clipped, ok := clipSegments(segs)
	if !ok {
		t.Fatal("not clipped")
	}
	var shown, gaps int
	var marks []string
	for _, s := range clipped {
		shown += utf8.RuneCountInString(s.Text)
		gaps += s.Gap
		if s.Grade != "" {
			marks = append(marks, s.Text+" "+s.Anchor)
		}
	}
	if shown+gaps != utf8.RuneCountInString(doc) {
		t.Errorf("%d shown and %d left out of %d characters", shown, gaps, utf8.RuneCountInString(doc))
	}
	if !reflect.DeepEqual(marks, []string{"SPAN span-0", "ÜBER span-1"}) {
		t.Errorf("marks %q", marks)
	}
	// The head before the first span keeps its last docContext
	// characters; the text between the spans both ends; the tail is whole.
	want := []int{0, docContext, 4, docContext, 0, docContext, 4, 100}
	var got []int
	for _, s := range clipped {
		got = append(got, utf8.RuneCountInString(s.Text))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("segment lengths %v, want %v", got, want)
	}
	// No span: the document's start.
	plain, ok := clipSegments(docSegments(newSourceText(doc), nil))
	if !ok || len(plain) != 2 || utf8.RuneCountInString(plain[0].Text) != docHeadChars {
		t.Errorf("a document with no span: %d segments", len(plain))
	}
}

// A cut ends or starts at white space near it rather than inside a word;
// text without spaces is cut where it falls.
func TestWordCuts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s          string
		n          int
		head, tail string
	}{
		{"alpha beta gamma", 8, "alpha ", " gamma"},
		{"alpha beta gamma", 6, "alpha ", " gamma"},
		{"alpha beta gamma", 0, "", ""},
		{"日本語のテキストです", 3, "日本語", "トです"},
		// No space within reach: cut where it falls.
		{strings.Repeat("x", 100) + " y", 60, strings.Repeat("x", 60), strings.Repeat("x", 58) + " y"},
	} {
		if h := wordPrefix(tc.s, tc.n); h != tc.head {
			t.Errorf("wordPrefix(%q, %d) = %q, want %q", tc.s, tc.n, h, tc.head)
		}
		if tl := wordSuffix(tc.s, tc.n); tl != tc.tail {
			t.Errorf("wordSuffix(%q, %d) = %q, want %q", tc.s, tc.n, tl, tc.tail)
		}
	}
}

// A list pass is a chunk attempt that starts later in its chunk than the
// chunk's own: the page names it so, and numbers a chunk's passes.
func TestDocStepsListPasses(t *testing.T) {
	t.Parallel()
	chunk := func(n, start int) stepInput {
		return stepInput{Kind: fixpoint.StepChunk, Chunk: &fixpoint.ChunkRef{N: n, Start: start, End: start + 500}}
	}
	steps := docSteps([]stepInput{chunk(0, 0), chunk(1, 400), chunk(0, 0), chunk(0, 250), chunk(1, 700), chunk(0, 390), chunk(0, 250)})
	want := []string{"Chunk 0", "Chunk 1", "Chunk 0", "Chunk 0, list pass 1", "Chunk 1, list pass 1", "Chunk 0, list pass 2", "Chunk 0, list pass 1"}
	for i, st := range steps {
		if st.Label != want[i] {
			t.Errorf("step %d: %q, want %q", i, st.Label, want[i])
		}
	}
}
