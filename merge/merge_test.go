package merge

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/validate"
)

func decode(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func compile(t testing.TB, schema string) *validate.Schema {
	t.Helper()
	s, err := validate.Compile([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// chunks makes the values of chunks 0, 1, ... from JSON texts.
func chunks(t testing.TB, texts ...string) []ChunkValue {
	t.Helper()
	var out []ChunkValue
	for i, s := range texts {
		out = append(out, ChunkValue{Chunk: i, Value: decode(t, s)})
	}
	return out
}

// jsonOf renders v as JSON with members sorted, for comparisons.
func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func run(t *testing.T, schema *validate.Schema, values []ChunkValue, opt Options) (string, []fixpoint.Conflict) {
	t.Helper()
	merged, conflicts, err := Values(schema, values, opt)
	if err != nil {
		t.Fatalf("Values: %v", err)
	}
	return jsonOf(t, merged), conflicts
}

// conflictsOf renders conflicts as "path: chosen of v1 [chunks] | v2 [chunks]".
func conflictsOf(t testing.TB, cs []fixpoint.Conflict) []string {
	var out []string
	for _, c := range cs {
		var alts []string
		for i, v := range c.Values {
			alts = append(alts, fmt.Sprintf("%s %v", jsonOf(t, v), c.Chunks[i]))
		}
		out = append(out, fmt.Sprintf("%s: %s of %s", c.Path, jsonOf(t, c.Chosen), strings.Join(alts, " | ")))
	}
	return out
}

func TestValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		schema    string
		opt       Options
		chunks    []string
		want      string
		conflicts []string
	}{
		{
			name:   "objects merge by property, recursively",
			chunks: []string{`{"vendor":{"name":"Acme"},"total":12}`, `{"vendor":{"vat":"DE1"},"date":"2027-01-15"}`},
			want:   `{"date":"2027-01-15","total":12,"vendor":{"name":"Acme","vat":"DE1"}}`,
		},
		{
			name:   "null and absent never beat a value",
			chunks: []string{`{"a":null,"b":null}`, `{"a":"x"}`, `{"a":null}`, `{}`},
			want:   `{"a":"x","b":null}`,
		},
		{
			name:      "the value most chunks gave wins",
			chunks:    []string{`{"term":"12 months"}`, `{"term":"24 months"}`, `{"term":"24 months"}`},
			want:      `{"term":"24 months"}`,
			conflicts: []string{`/term: "24 months" of "12 months" [0] | "24 months" [1 2]`},
		},
		{
			name:      "a tie goes to the earliest chunk",
			chunks:    []string{`{"n":1}`, `{"n":2}`, `{"n":2}`, `{"n":1}`, `{"n":3}`},
			want:      `{"n":1}`,
			conflicts: []string{`/n: 1 of 1 [0 3] | 2 [1 2] | 3 [4]`},
		},
		{
			name:   "numbers compare by value",
			chunks: []string{`{"n":1.50}`, `{"n":1.5}`, `{"n":15e-1}`},
			want:   `{"n":1.50}`,
		},
		{
			name:      "values of different kinds conflict",
			chunks:    []string{`{"n":"12"}`, `{"n":12}`, `{"n":12}`},
			want:      `{"n":12}`,
			conflicts: []string{`/n: 12 of "12" [0] | 12 [1 2]`},
		},
		{
			name:      "an object against a string conflicts, whole",
			chunks:    []string{`{"addr":{"city":"Paris"}}`, `{"addr":"Paris"}`},
			want:      `{"addr":{"city":"Paris"}}`,
			conflicts: []string{`/addr: {"city":"Paris"} of {"city":"Paris"} [0] | "Paris" [1]`},
		},
		{
			name:   "empty lists merge to an empty list, not null",
			chunks: []string{`{"tags":[]}`, `{"tags":[]}`},
			want:   `{"tags":[]}`,
		},
		{
			name:   "arrays concatenate in chunk order and lose repeats",
			chunks: []string{`{"tags":["a","b","c"]}`, `{"tags":["c","d"]}`, `{"tags":["d","e"]}`},
			want:   `{"tags":["a","b","c","d","e"]}`,
		},
		{
			name:   "an item one chunk lists twice stays twice",
			chunks: []string{`{"xs":[1,1,2]}`, `{"xs":[1,2,1,1,3]}`},
			want:   `{"xs":[1,1,2,1,3]}`,
		},
		{
			name:   "unkeyed objects are duplicates when equal, members in any order",
			chunks: []string{`{"xs":[{"a":1,"b":2}]}`, `{"xs":[{"b":2,"a":1.0},{"a":3}]}`},
			want:   `{"xs":[{"a":1,"b":2},{"a":3}]}`,
		},
		{
			name:   "keyed items merge their fields, case and white space aside",
			schema: `{"type":"object","properties":{"subs":{"type":"array","x-fixpoint-key":"name","items":{"type":"object"}}}}`,
			chunks: []string{
				`{"subs":[{"name":"Acme GmbH","country":"DE"},{"name":"Beta Ltd"}]}`,
				`{"subs":[{"name":"beta  ltd","country":"UK","since":1999},{"name":"Gamma"}]}`,
			},
			want:      `{"subs":[{"country":"DE","name":"Acme GmbH"},{"country":"UK","name":"Beta Ltd","since":1999},{"name":"Gamma"}]}`,
			conflicts: []string{`/subs/1/name: "Beta Ltd" of "Beta Ltd" [0] | "beta  ltd" [1]`},
		},
		{
			name:   "a keyed item's fields conflict under its own path",
			schema: `{"type":"object","properties":{"subs":{"type":"array","x-fixpoint-key":"name"}}}`,
			chunks: []string{`{"subs":[{"name":"A","share":50}]}`, `{"subs":[{"name":"B"},{"name":"A","share":60}]}`, `{"subs":[{"name":"A","share":60}]}`},
			want:   `{"subs":[{"name":"A","share":60},{"name":"B"}]}`,
			conflicts: []string{
				`/subs/0/share: 60 of 50 [0] | 60 [1 2]`,
			},
		},
		{
			name:   "a composite key",
			schema: `{"type":"object","properties":{"lines":{"type":"array","x-fixpoint-key":["sku","lot"]}}}`,
			chunks: []string{`{"lines":[{"sku":"A","lot":1,"qty":5},{"sku":"A","lot":2,"qty":1}]}`, `{"lines":[{"sku":"A","lot":2,"qty":1},{"sku":"B","lot":1}]}`},
			want:   `{"lines":[{"lot":1,"qty":5,"sku":"A"},{"lot":2,"qty":1,"sku":"A"},{"lot":1,"sku":"B"}]}`,
		},
		{
			name:      "an item without its key is deduplicated whole",
			schema:    `{"type":"object","properties":{"subs":{"type":"array","x-fixpoint-key":"name"}}}`,
			chunks:    []string{`{"subs":[{"name":"A"},{"city":"X"},{"name":null,"city":"Y"}]}`, `{"subs":[{"city":"X"},{"name":"a","city":"Z"}]}`},
			want:      `{"subs":[{"city":"Z","name":"A"},{"city":"X"},{"city":"Y","name":null}]}`,
			conflicts: []string{`/subs/0/name: "A" of "A" [0] | "a" [1]`},
		},
		{
			name:   "the key through $ref",
			schema: `{"$defs":{"list":{"type":"array","x-fixpoint-key":"id"}},"type":"object","properties":{"a":{"$ref":"#/$defs/list"}}}`,
			chunks: []string{`{"a":[{"id":1,"x":"p"}]}`, `{"a":[{"id":1,"y":"q"}]}`},
			want:   `{"a":[{"id":1,"x":"p","y":"q"}]}`,
		},
		{
			name:   "the user's keys, with * for any index, nested",
			opt:    Options{Keys: map[string][]string{"/sections": {"title"}, "/sections/*/clauses": {"no"}}},
			chunks: []string{`{"sections":[{"title":"Term","clauses":[{"no":1,"text":"a"}]}]}`, `{"sections":[{"title":"Term","clauses":[{"no":1,"text":"a"},{"no":2}]},{"title":"Fees"}]}`},
			want:   `{"sections":[{"clauses":[{"no":1,"text":"a"},{"no":2}],"title":"Term"},{"title":"Fees"}]}`,
		},
		{
			name:   "the user's key replaces the schema's",
			schema: `{"type":"object","properties":{"subs":{"type":"array","x-fixpoint-key":"name"}}}`,
			opt:    Options{Keys: map[string][]string{"/subs": {"id"}}},
			chunks: []string{`{"subs":[{"id":1,"name":"A"}]}`, `{"subs":[{"id":2,"name":"A"}]}`},
			want:   `{"subs":[{"id":1,"name":"A"},{"id":2,"name":"A"}]}`,
		},
		{
			name:   "a root array",
			opt:    Options{Keys: map[string][]string{"": {"k"}}},
			chunks: []string{`[{"k":1,"a":1}]`, `[{"k":1,"b":2},{"k":2}]`},
			want:   `[{"a":1,"b":2,"k":1},{"k":2}]`,
		},
		{
			name:      "a tuple is one value",
			schema:    `{"type":"object","properties":{"at":{"type":"array","prefixItems":[{"type":"number"},{"type":"number"}]}}}`,
			chunks:    []string{`{"at":[48.8,2.3]}`, `{"at":[48.8,2.4]}`},
			want:      `{"at":[48.8,2.3]}`,
			conflicts: []string{`/at: [48.8,2.3] of [48.8,2.3] [0] | [48.8,2.4] [1]`},
		},
		{
			name:   "conflicts in path order",
			chunks: []string{`{"b":{"y":1,"x":1},"a":1}`, `{"b":{"y":2,"x":2},"a":2}`},
			want:   `{"a":1,"b":{"x":1,"y":1}}`,
			conflicts: []string{
				`/a: 1 of 1 [0] | 2 [1]`,
				`/b/x: 1 of 1 [0] | 2 [1]`,
				`/b/y: 1 of 1 [0] | 2 [1]`,
			},
		},
		{
			name:   "one chunk",
			chunks: []string{`{"a":[1,1],"b":{"c":null}}`},
			want:   `{"a":[1,1],"b":{"c":null}}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var schema *validate.Schema
			if c.schema != "" {
				schema = compile(t, c.schema)
			}
			got, conflicts := run(t, schema, chunks(t, c.chunks...), c.opt)
			if want := jsonOf(t, decode(t, c.want)); got != want {
				t.Errorf("merged %s\nwant   %s", got, want)
			}
			if got := conflictsOf(t, conflicts); strings.Join(got, "\n") != strings.Join(c.conflicts, "\n") {
				t.Errorf("conflicts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.conflicts, "\n"))
			}
		})
	}
}

func TestValuesNone(t *testing.T) {
	t.Parallel()
	merged, conflicts, err := Values(nil, nil, Options{})
	if merged != nil || conflicts != nil || err != nil {
		t.Fatalf("Values of nothing = %v, %v, %v", merged, conflicts, err)
	}
}

// TestValuesDeterministic: the merge depends on the chunks' numbers and
// values, not on the order they come in, values of one chunk number
// included.
func TestValuesDeterministic(t *testing.T) {
	t.Parallel()
	schema := compile(t, `{"type":"object","properties":{"subs":{"type":"array","x-fixpoint-key":"name"}}}`)
	values := []ChunkValue{
		{Chunk: 0, Value: decode(t, `{"vendor":"A","subs":[{"name":"x","n":1}],"tags":["p"]}`)},
		{Chunk: 1, Value: decode(t, `{"vendor":"B","subs":[{"name":"x","n":2}],"tags":["q"]}`)},
		{Chunk: 1, Value: decode(t, `{"vendor":"C","subs":[{"name":"y"}],"tags":["r","p"]}`)},
		{Chunk: 2, Value: decode(t, `{"vendor":"B","subs":[{"name":"x","n":3}]}`)},
		{Chunk: 2, Value: decode(t, `{"vendor":"C","tags":["s"]}`)},
	}
	wantMerged, wantConflicts := run(t, schema, values, Options{})
	rng := rand.New(rand.NewPCG(7, 7))
	for range 50 {
		shuffled := append([]ChunkValue(nil), values...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		merged, conflicts := run(t, schema, shuffled, Options{})
		if merged != wantMerged || !reflect.DeepEqual(conflictsOf(t, conflicts), conflictsOf(t, wantConflicts)) {
			t.Fatalf("input order %v:\n%s %q\nwant\n%s %q", chunkOrder(shuffled), merged, conflictsOf(t, conflicts), wantMerged, conflictsOf(t, wantConflicts))
		}
	}
}

func chunkOrder(vs []ChunkValue) []int {
	var out []int
	for _, v := range vs {
		out = append(out, v.Chunk)
	}
	return out
}

// TestValuesLongListAcrossChunks: 500 items listed across chunks whose
// overlaps repeat the items at each boundary merge into the 500, in
// order, with every repeat dropped: keyed by the schema, by the user, and
// unkeyed.
func TestValuesLongListAcrossChunks(t *testing.T) {
	t.Parallel()
	const items, perChunk, overlap = 500, 37, 4
	item := func(i int) map[string]any {
		return map[string]any{"name": fmt.Sprintf("Subsidiary %03d", i), "country": []string{"DE", "FR", "JP"}[i%3], "share": json.Number(fmt.Sprint(i % 100))}
	}
	var values []ChunkValue
	for start, n := 0, 0; start < items; start, n = start+perChunk-overlap, n+1 {
		var list []any
		for i := start; i < min(items, start+perChunk); i++ {
			it := item(i)
			if i == start && n > 0 {
				// The overlap's first item, cut at the chunk's start, lacks
				// a field the previous chunk gave.
				delete(it, "country")
			}
			list = append(list, it)
		}
		values = append(values, ChunkValue{Chunk: n, Value: map[string]any{"subsidiaries": list}})
	}
	if len(values) < 10 {
		t.Fatalf("%d chunks", len(values))
	}
	for _, c := range []struct {
		name   string
		schema *validate.Schema
		opt    Options
	}{
		{"keyed by the schema", compile(t, `{"type":"object","properties":{"subsidiaries":{"type":"array","x-fixpoint-key":"name"}}}`), Options{}},
		{"keyed by the user", nil, Options{Keys: map[string][]string{"/subsidiaries": {"name"}}}},
	} {
		merged, conflicts, err := Values(c.schema, values, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		got := merged.(map[string]any)["subsidiaries"].([]any)
		if len(got) != items || len(conflicts) != 0 {
			t.Fatalf("%s: %d items, %d conflicts, want %d and none", c.name, len(got), len(conflicts), items)
		}
		for i, it := range got {
			if !reflect.DeepEqual(it, item(i)) {
				t.Fatalf("%s: item %d is %v, want %v", c.name, i, it, item(i))
			}
		}
	}
	// Unkeyed, the items cut at a chunk's start differ from their copies:
	// each of those stays twice, every whole repeat goes.
	merged, _, err := Values(nil, values, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(merged.(map[string]any)["subsidiaries"].([]any)), items+len(values)-1; got != want {
		t.Fatalf("unkeyed: %d items, want %d", got, want)
	}
}

// TestValuesSharesNothing: changing the merged value changes no input.
func TestValuesSharesNothing(t *testing.T) {
	t.Parallel()
	values := chunks(t, `{"a":{"b":[{"c":1}]},"d":[[1]],"e":{"f":1}}`, `{"e":"x"}`)
	before := jsonOf(t, values[0].Value)
	merged, _, err := Values(nil, values, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := merged.(map[string]any)
	m["a"].(map[string]any)["b"].([]any)[0].(map[string]any)["c"] = 2
	m["d"].([]any)[0].([]any)[0] = 2
	m["e"].(map[string]any)["f"] = 2
	if after := jsonOf(t, values[0].Value); after != before {
		t.Fatalf("input changed: %s, was %s", after, before)
	}
}

func TestValuesRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		schema string
		opt    Options
		values []ChunkValue
		want   string
	}{
		{name: "a Go value that is no JSON", values: []ChunkValue{{Chunk: 0, Value: map[string]any{"a": []any{make(chan int)}}}}, want: "chunk 0: /a/0: a Go chan int is not a JSON value"},
		{name: "NaN", values: []ChunkValue{{Chunk: 3, Value: map[string]any{"x": math.NaN()}}}, want: "chunk 3: /x: NaN is no JSON number"},
		{name: "a number out of range", values: []ChunkValue{{Chunk: 0, Value: json.Number("1e99999")}}, want: "chunk 0: (root): number \"1e99999\""},
		{name: "a negative chunk number", values: []ChunkValue{{Chunk: -1, Value: "x"}}, want: "chunk number -1"},
		{name: "a key place that is no pointer", opt: Options{Keys: map[string][]string{"subs": {"name"}}}, want: `key at "subs": the place of an array is a JSON pointer`},
		{name: "a key with no fields", opt: Options{Keys: map[string][]string{"/subs": {}}}, want: `key at "/subs": x-fixpoint-key is an empty list`},
		{name: "a key field named twice", opt: Options{Keys: map[string][]string{"/subs": {"a", "a"}}}, want: `names "a" twice`},
		{name: "the schema's key is no name", schema: `{"properties":{"subs":{"x-fixpoint-key":{"name":true}}}}`, want: "the schema at /properties/subs: x-fixpoint-key is object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var schema *validate.Schema
			if c.schema != "" {
				schema = compile(t, c.schema)
			}
			_, _, err := Values(schema, c.values, c.opt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Values = %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestCanonicalNumbers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ a, b string }{
		{"0", "-0"}, {"0", "0.0"}, {"12", "12.000"}, {"12", "1.2e1"}, {"-3", "-3.0"}, {"0.5", "5e-1"}, {"100", "1E2"},
	} {
		if x, y := number(c.a), number(c.b); x != y {
			t.Errorf("%s is %q, %s is %q", c.a, x, c.b, y)
		}
	}
	for _, c := range []struct{ a, b string }{{"1", "-1"}, {"0.1", "0.10000000000000001"}, {"12", "120"}} {
		if number(c.a) == number(c.b) {
			t.Errorf("%s and %s are both %q", c.a, c.b, number(c.a))
		}
	}
}

// TestValuesListPasses: a chunk's list passes merge after it and before
// the next chunk, whatever the input order; the item a pass reads again
// (the one its chunk's value ended on) is one item, keyed or not; a
// conflict names the chunks, the pass under its chunk's number.
func TestValuesListPasses(t *testing.T) {
	t.Parallel()
	keyed := compile(t, `{"type":"object","properties":{"subs":{"type":"array","x-fixpoint-key":"name"}}}`)
	values := []ChunkValue{
		{Chunk: 1, Value: decode(t, `{"party":"Y","subs":[{"name":"d"}]}`)},
		{Chunk: 0, Pass: 2, Value: decode(t, `{"subs":[{"name":"c"},{"name":"e"}]}`)},
		{Chunk: 0, Pass: 1, Value: decode(t, `{"party":"Y","subs":[{"name":"b"},{"name":"c"}]}`)},
		{Chunk: 0, Value: decode(t, `{"party":"X","subs":[{"name":"a"},{"name":"b"}]}`)},
	}
	for _, c := range []struct {
		name   string
		schema *validate.Schema
	}{{"keyed", keyed}, {"unkeyed", nil}} {
		merged, conflicts := run(t, c.schema, values, Options{})
		if want := `{"party":"Y","subs":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"e"},{"name":"d"}]}`; merged != want {
			t.Errorf("%s: merged %s, want %s", c.name, merged, want)
		}
		if got, want := conflictsOf(t, conflicts), []string{`/party: "Y" of "X" [0] | "Y" [0 1]`}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: conflicts %q, want %q", c.name, got, want)
		}
	}
	if _, _, err := Values(nil, []ChunkValue{{Chunk: 0, Pass: -1, Value: "x"}}, Options{}); err == nil || !strings.Contains(err.Error(), "pass -1:") {
		t.Errorf("a negative pass number: error %v, want one naming it", err)
	}
}
