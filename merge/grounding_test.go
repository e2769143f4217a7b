package merge

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// graded makes the values of chunks 0, 1, ... from JSON texts, each
// followed by its grades as "pointer=grade" words ("" for none).
func graded(t *testing.T, pairs ...string) []ChunkValue {
	t.Helper()
	var out []ChunkValue
	for i := 0; i < len(pairs); i += 2 {
		cv := ChunkValue{Chunk: i / 2, Value: decode(t, pairs[i])}
		for _, w := range strings.Fields(pairs[i+1]) {
			ptr, g, _ := strings.Cut(w, "=")
			if cv.Grades == nil {
				cv.Grades = map[string]fixpoint.Grade{}
			}
			cv.Grades[ptr] = fixpoint.Grade(g)
		}
		out = append(out, cv)
	}
	return out
}

// TestValuesGrounding: where the chunks disagree, a value grounded in its
// chunk beats one its chunks graded none, before the count; values with
// no grade, or all graded none, compare by count as before.
func TestValuesGrounding(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		schema   string
		chunks   []string // JSON, grades
		want     string
		conflict string // the conflict's rendering, then " by " its By
	}{
		{
			name:     "an invention in an earlier chunk loses the tie to the real value",
			chunks:   []string{`{"vendor":"Globex"}`, `/vendor=none`, `{}`, ``, `{"vendor":"Acme Corp"}`, `/vendor=exact`},
			want:     `{"vendor":"Acme Corp"}`,
			conflict: `/vendor: "Acme Corp" of "Globex" [0] | "Acme Corp" [2] by grounding`,
		},
		{
			name:     "grounding beats the count",
			chunks:   []string{`{"n":7}`, `/n=none`, `{"n":7}`, `/n=none`, `{"n":9}`, `/n=fuzzy`},
			want:     `{"n":9}`,
			conflict: `/n: 9 of 7 [0 1] | 9 [2] by grounding`,
		},
		{
			name:     "a value one chunk grounds is grounded",
			chunks:   []string{`{"n":7}`, `/n=none`, `{"n":9}`, `/n=none`, `{"n":9}`, `/n=normalized`},
			want:     `{"n":9}`,
			conflict: `/n: 9 of 7 [0] | 9 [1 2] by `,
		},
		{
			name:     "without grades, the count and the earliest chunk as before",
			chunks:   []string{`{"v":"a"}`, ``, `{"v":"b"}`, ``},
			want:     `{"v":"a"}`,
			conflict: `/v: "a" of "a" [0] | "b" [1] by `,
		},
		{
			name:     "all graded none: the count as before",
			chunks:   []string{`{"v":"a"}`, `/v=none`, `{"v":"b"}`, `/v=none`},
			want:     `{"v":"a"}`,
			conflict: `/v: "a" of "a" [0] | "b" [1] by `,
		},
		{
			name:     "an ungraded value is not beaten by a grounded one",
			chunks:   []string{`{"v":"a"}`, ``, `{"v":"b"}`, `/v=exact`},
			want:     `{"v":"a"}`,
			conflict: `/v: "a" of "a" [0] | "b" [1] by `,
		},
		{
			name:     "once grounding drops a value, the count among the rest",
			chunks:   []string{`{"v":"a"}`, `/v=none`, `{"v":"c"}`, ``, `{"v":"b"}`, `/v=exact`},
			want:     `{"v":"c"}`,
			conflict: `/v: "c" of "a" [0] | "c" [1] | "b" [2] by grounding`,
		},
		{
			name:     "a keyed item's field, graded at its place in its own chunk",
			schema:   `{"type":"object","properties":{"subs":{"type":"array","x-fixpoint-key":"name"}}}`,
			chunks:   []string{`{"subs":[{"name":"x","country":"FR"}]}`, `/subs/0/name=exact /subs/0/country=none`, `{"subs":[{"name":"y"},{"name":"x","country":"DE"}]}`, `/subs/0/name=exact /subs/1/name=exact /subs/1/country=exact`},
			want:     `{"subs":[{"country":"DE","name":"x"},{"name":"y"}]}`,
			conflict: `/subs/0/country: "DE" of "FR" [0] | "DE" [1] by grounding`,
		},
		{
			name:     "a tuple is refuted by a leaf graded none",
			schema:   `{"type":"object","properties":{"r":{"type":"array","prefixItems":[{"type":"integer"},{"type":"integer"}]}}}`,
			chunks:   []string{`{"r":[1,2]}`, `/r/0=exact /r/1=none`, `{"r":[1,3]}`, `/r/0=exact /r/1=exact`},
			want:     `{"r":[1,3]}`,
			conflict: `/r: [1,3] of [1,2] [0] | [1,3] [1] by grounding`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			schema := compile(t, `{}`)
			if tc.schema != "" {
				schema = compile(t, tc.schema)
			}
			values := graded(t, tc.chunks...)
			rng := rand.New(rand.NewPCG(3, 3))
			for range 5 {
				got, conflicts := run(t, schema, values, Options{})
				if got != tc.want {
					t.Fatalf("merged %s, want %s", got, tc.want)
				}
				var cs []string
				for i, c := range conflictsOf(t, conflicts) {
					cs = append(cs, fmt.Sprintf("%s by %s", c, conflicts[i].By))
				}
				if !slices.Equal(cs, []string{tc.conflict}) {
					t.Fatalf("conflicts %q, want %q", cs, tc.conflict)
				}
				rng.Shuffle(len(values), func(i, j int) { values[i], values[j] = values[j], values[i] })
			}
		})
	}
}
