package repair_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const listSchema = `{"type": "object", "properties": {
  "party": {"type": "string"},
  "items": {"type": "array", "x-fixpoint-key": "name", "items": {"type": "object",
    "properties": {"name": {"type": "string"}, "country": {"type": "string"}}, "required": ["name"]}}},
  "required": ["party", "items"], "additionalProperties": false}`

var listCountries = []string{"Germany", "France", "Japan"}

// listDoc is a document of n subsidiaries, one a line, after a heading
// and the party's sentence.
func listDoc(n int) string {
	var b strings.Builder
	b.WriteString("# Subsidiaries\n\nAcme GmbH, the provider, owns the companies below.\n\n")
	for i := range n {
		fmt.Fprintf(&b, "- Acme Holding %02d Ltd, %s\n", i, listCountries[i%3])
	}
	return b.String()
}

func listJob(t *testing.T, strategy fixpoint.Strategy, n, passes int) *repair.Job {
	t.Helper()
	schema, err := validate.Compile([]byte(listSchema))
	if err != nil {
		t.Fatal(err)
	}
	return &repair.Job{ID: "list-1", Schema: schema, SchemaRaw: []byte(listSchema), Model: "gpt-4o-mini",
		Prompt: "Extract the party and the subsidiaries.", Document: listDoc(n),
		Limits: fixpoint.Limits{MaxAttempts: 2, Strategy: strategy, ListPasses: passes}}
}

var itemLine = regexp.MustCompile(`(?m)^- (Acme Holding \d+ Ltd), (\w+)$`)

// listModel is a model that lists the first k subsidiaries its document
// block holds whole, as a model asked for a long list gives its first
// few tens; under sequential it replies with the value so far extended.
// edit, when not nil, changes the items before they are sent, given
// whether the request is a list pass's.
func listModel(k int, edit func(items []any, pass bool) []any) replyFunc {
	return func(req *fixpoint.Request) (*fixpoint.Response, error) {
		msg := req.Messages[0].Content
		text := msg[len(fixpoint.DocumentOpen)+1 : strings.Index(msg, "\n"+fixpoint.DocumentClose)]
		value := map[string]any{}
		var items []any
		if i := strings.Index(msg, fixpoint.ValueSoFarOpen); i >= 0 {
			j := strings.Index(msg, fixpoint.ValueSoFarClose)
			_ = json.Unmarshal([]byte(msg[i+len(fixpoint.ValueSoFarOpen):j]), &value)
			items, _ = value["items"].([]any)
		}
		var read []any
		for _, m := range itemLine.FindAllStringSubmatch(text, -1) {
			if len(read) == k {
				break
			}
			read = append(read, map[string]any{"name": m[1], "country": m[2]})
		}
		if edit != nil {
			read = edit(read, strings.Contains(msg, "the rest of part"))
		}
		for _, it := range read {
			if !slices.ContainsFunc(items, func(x any) bool { return x.(map[string]any)["name"] == it.(map[string]any)["name"] }) {
				items = append(items, it)
			}
		}
		if strings.Contains(text, "Acme GmbH") {
			value["party"] = "Acme GmbH"
		}
		if len(items) > 0 {
			value["items"] = items
		}
		b, _ := json.Marshal(value)
		return chunkReply(string(b))
	}
}

// passAttempts are the attempts of res over list passes.
func passAttempts(res *fixpoint.Result) []fixpoint.Attempt {
	var out []fixpoint.Attempt
	for _, a := range res.Attempts {
		if a.Chunk != nil && a.Chunk.Pass > 0 {
			out = append(out, a)
		}
	}
	return out
}

// itemNames are the names of the subsidiaries of a job's value.
func itemNames(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var v struct {
		Items []struct{ Name string } `json:"items"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("value %s: %v", raw, err)
	}
	var out []string
	for _, it := range v.Items {
		out = append(out, it.Name)
	}
	return out
}

func holdings(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("Acme Holding %02d Ltd", i))
	}
	return out
}

// TestListPassWhenTheListLooksCut: a chunk's value whose last item is
// written before text that can hold an item (one line of the list is
// enough) gets a list pass; one whose last item is the chunk's last, one
// with a few words after its last item, one with no list, and one whose
// last item the text does not hold get none.
func TestListPassWhenTheListLooksCut(t *testing.T) {
	t.Parallel()
	invent := func(items []any, _ bool) []any {
		return append(items, map[string]any{"name": "Nowhere Trading Ltd", "country": "Atlantis"})
	}
	cases := []struct {
		name  string
		k     int
		after string // text after the list
		edit  func([]any, bool) []any
		want  int
	}{
		{"cut", 5, "", nil, 1},
		{"one item's line left", 19, "", nil, 1},
		{"last item at the end", 20, "", nil, 0},
		{"a few words after the last item", 20, "Signed in Berlin.\n", nil, 0},
		{"no list", 0, "", nil, 0},
		{"last item not in the text", 5, "", invent, 0},
	}
	for _, c := range cases {
		for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyParallel, fixpoint.StrategySequential} {
			job := listJob(t, strategy, 20, 1)
			job.Document += c.after
			m := startDoc(t, job, nil)
			drive(t, m, listModel(c.k, c.edit))
			if got := len(passAttempts(m.Result())); got != c.want {
				t.Errorf("%s, %s: %d list passes, want %d", c.name, strategy, got, c.want)
			}
		}
	}
}

// TestListPassRequest: the pass is sent the rest of the chunk from the
// line of the last item read, named in its attempt (the chunk's number,
// the pass's start, the chunk's end, pass 1) and in its lead; its items
// merge after the chunk's, the item read twice once.
func TestListPassRequest(t *testing.T) {
	t.Parallel()
	job := listJob(t, fixpoint.StrategyParallel, 20, 1)
	m := startDoc(t, job, nil)
	sent := drive(t, m, listModel(5, nil))
	if len(sent) != 2 {
		t.Fatalf("%d requests, want the chunk's and one pass's", len(sent))
	}
	doc := []rune(job.Document)
	start := strings.Index(job.Document, "- Acme Holding 04 Ltd") // ASCII: bytes are code points
	msg := sent[1].Messages[0].Content
	if !strings.HasPrefix(msg, fixpoint.DocumentOpen+"\n- Acme Holding 04 Ltd, France\n- Acme Holding 05 Ltd") {
		t.Errorf("the pass's document block does not start at the last item read:\n%.200s", msg)
	}
	lead := fmt.Sprintf("The document above is the rest of part 1 of 1 of the whole document (its code points %d to %d), after the items already read from that part", start, len(doc))
	if !strings.Contains(msg, lead) {
		t.Errorf("the pass's message does not hold %q:\n%s", lead, msg[strings.Index(msg, fixpoint.DocumentClose):])
	}
	res := m.Result()
	passes := passAttempts(res)
	if len(passes) != 1 || *passes[0].Chunk != (fixpoint.ChunkRef{N: 0, Start: start, End: len(doc), Pass: 1}) || passes[0].Step != fixpoint.StepChunk {
		t.Fatalf("pass attempts %+v, want one over chunk 0 from %d to %d, pass 1", passes, start, len(doc))
	}
	if res.Status != fixpoint.StatusValid {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	if got, want := itemNames(t, res.Value), holdings(0, 9); !slices.Equal(got, want) {
		t.Errorf("items %q, want %q", got, want)
	}
}

// TestListPassesEnd: passes go on while one adds items and its list
// looks cut, up to ListPasses; a pass that adds nothing new (it gives
// the item it was started at again) ends them, and so does one that
// lists fewer items than the call before it (the list ended there, not
// the model's listing); ListPasses 0 makes none.
func TestListPassesEnd(t *testing.T) {
	t.Parallel()
	rereadOnly := func(items []any, pass bool) []any {
		if pass {
			return items[:1]
		}
		return items
	}
	shorter := func(items []any, pass bool) []any {
		if pass {
			return items[:3]
		}
		return items
	}
	cases := []struct {
		name       string
		n, passes  int
		edit       func([]any, bool) []any
		wantPasses int
		wantItems  []string
	}{
		{"fewer items than the call before", 40, 3, shorter, 1, holdings(0, 7)},
		{"bound", 40, 2, nil, 2, holdings(0, 13)},
		{"off", 40, 0, nil, 0, holdings(0, 5)},
		{"read to the end", 20, 10, nil, 4, holdings(0, 20)},
		{"nothing new", 40, 3, rereadOnly, 1, holdings(0, 5)},
	}
	for _, c := range cases {
		for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyParallel, fixpoint.StrategySequential} {
			m := startDoc(t, listJob(t, strategy, c.n, c.passes), nil)
			drive(t, m, listModel(5, c.edit))
			res := m.Result()
			if got := len(passAttempts(res)); got != c.wantPasses {
				t.Errorf("%s, %s: %d list passes, want %d", c.name, strategy, got, c.wantPasses)
			}
			if got := itemNames(t, res.Value); !slices.Equal(got, c.wantItems) {
				t.Errorf("%s, %s: items %q, want %q", c.name, strategy, got, c.wantItems)
			}
		}
	}
}

// multiChunkJob is a job over 90 subsidiaries in chunks of 150 tokens.
func multiChunkJob(t *testing.T, strategy fixpoint.Strategy) *repair.Job {
	job := listJob(t, strategy, 90, 5)
	job.Limits.ChunkTokens, job.Limits.ChunkOverlap = 150, 20
	return job
}

// TestListPassesOverChunks: over several chunks, each chunk's passes
// read it to its end; the merged (parallel) or built (sequential) list
// is every item once, in document order. A sequential pass is given the
// value so far, the chunk's items included.
func TestListPassesOverChunks(t *testing.T) {
	t.Parallel()
	for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyParallel, fixpoint.StrategySequential} {
		m := startDoc(t, multiChunkJob(t, strategy), nil)
		sent := drive(t, m, listModel(5, nil))
		res := m.Result()
		if res.Status != fixpoint.StatusValid {
			t.Fatalf("%s: status %s: %s", strategy, res.Status, res.Error)
		}
		if got := itemNames(t, res.Value); !slices.Equal(got, holdings(0, 90)) {
			t.Errorf("%s: items %q, want the 90 in order", strategy, got)
		}
		chunks := map[int]bool{}
		for _, a := range passAttempts(res) {
			chunks[a.Chunk.N] = true
		}
		if len(chunks) < 3 {
			t.Errorf("%s: passes over %d chunks, want most of them", strategy, len(chunks))
		}
		if strategy != fixpoint.StrategySequential {
			continue
		}
		for _, req := range sent {
			msg := req.Messages[0].Content
			if !strings.Contains(msg, "the rest of part 1 of") {
				continue
			}
			if !strings.Contains(msg, fixpoint.ValueSoFarOpen) || !strings.Contains(msg, `"Acme Holding 04 Ltd"`) {
				t.Errorf("the first sequential pass is not given the chunk's items as the value so far:\n%s", msg)
			}
		}
	}
}

// TestListPassesResume: a job stopped in the middle of its passes, and
// continued from its attempts as the ledger keeps them (no values, no
// pass numbers), asks no finished chunk or pass again and ends with the
// value of a run that was not stopped.
func TestListPassesResume(t *testing.T) {
	t.Parallel()
	for _, strategy := range []fixpoint.Strategy{fixpoint.StrategyParallel, fixpoint.StrategySequential} {
		whole := startDoc(t, multiChunkJob(t, strategy), nil)
		all := drive(t, whole, listModel(5, nil))
		want := whole.Result()

		job := multiChunkJob(t, strategy)
		m := startDoc(t, job, nil)
		reply := listModel(5, nil)
		asked := map[string]bool{}
		var queue []*fixpoint.Request
		act := m.Next()
		for len(passAttempts(m.Result())) < 3 {
			queue = append(queue, act.Requests...)
			req := queue[0]
			queue = queue[1:]
			asked[req.Messages[0].Content] = true
			resp, err := reply(req)
			_, act = m.Feed(req, resp, err, time.Now())
		}
		rows := slices.Clone(m.Result().Attempts)
		for i := range rows {
			rows[i].Value = nil
			ref := *rows[i].Chunk
			ref.Pass = 0
			rows[i].Chunk = &ref
		}
		again := startDoc(t, job, &fixpoint.Result{JobID: job.ID, Attempts: rows})
		resumed := drive(t, again, reply)
		for _, req := range resumed {
			if asked[req.Messages[0].Content] {
				t.Errorf("%s: resumed job asks again:\n%.300s", strategy, req.Messages[0].Content)
			}
		}
		if got := len(asked) + len(resumed); got != len(all) {
			t.Errorf("%s: %d requests stopped and resumed, want %d as in one run", strategy, got, len(all))
		}
		res := again.Result()
		if string(res.Value) != string(want.Value) || res.Status != want.Status {
			t.Errorf("%s: resumed %s %s, want %s %s", strategy, res.Status, res.Value, want.Status, want.Value)
		}
		if got, w := len(passAttempts(res)), len(passAttempts(want)); got != w {
			t.Errorf("%s: %d pass attempts after the resume, want %d", strategy, got, w)
		}
	}
}

// TestListPassesThroughTheSimulator: on one messy document (its model
// lists 30 items a call, a chunk of 4,000 tokens holds about 60), list
// passes raise the share of the document's subsidiaries the merged value
// lists above the run without them.
func TestListPassesThroughTheSimulator(t *testing.T) {
	t.Parallel()
	d, err := sim.NewDocument(5, 0, "en", 120_000)
	if err != nil {
		t.Fatal(err)
	}
	recall := func(passes int) float64 {
		job := simDocJob(t, fixpoint.StrategyParallel, d)
		job.Limits.ListPasses = passes
		m, err := repair.StartDocument(job, nil, repair.Config{})
		if err != nil {
			t.Fatal(err)
		}
		driveSim(t, simCompleter(t, "messy"), m)
		var merged json.RawMessage
		for _, a := range m.Result().Attempts {
			if a.Step == fixpoint.StepMerge {
				merged = a.Value
			}
		}
		var v struct {
			Subsidiaries []struct{ Name string } `json:"subsidiaries"`
		}
		if err := json.Unmarshal(merged, &v); err != nil {
			t.Fatalf("merged value %.200s: %v", merged, err)
		}
		found := 0
		got := map[string]bool{}
		for _, s := range v.Subsidiaries {
			got[strings.ToLower(s.Name)] = true
		}
		for _, s := range d.Truth.Subsidiaries {
			if got[strings.ToLower(s.Name)] {
				found++
			}
		}
		return float64(found) / float64(len(d.Truth.Subsidiaries))
	}
	without, with := recall(0), recall(fixpoint.ListPassesDefault)
	if with <= without || with < 0.9 {
		t.Errorf("item recall %.3f with list passes, %.3f without: want a rise, to 0.9 or more", with, without)
	}
	t.Logf("item recall %.3f with list passes, %.3f without", with, without)
}

// TestListPassesNegative: a negative ListPasses is a bad job, named.
func TestListPassesNegative(t *testing.T) {
	t.Parallel()
	_, err := repair.StartDocument(listJob(t, fixpoint.StrategyParallel, 20, -1), nil, repair.Config{})
	if !errors.Is(err, fixpoint.ErrBadJob) || !strings.Contains(err.Error(), "list_passes -1") {
		t.Errorf("ListPasses -1: error %v, want a bad job naming list_passes", err)
	}
}
