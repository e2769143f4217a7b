package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/chunk"
	"github.com/fixpoint-dev/fixpoint/internal/ledgerrow"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
	"github.com/fixpoint-dev/fixpoint/web"
	"github.com/fixpoint-dev/fixpoint/web/playground"
)

// docBatch holds two document jobs written to the ledger by hand, as the
// workers would: a parallel job over a simulated agreement (a chunk call
// per chunk, one of them retried, a merge with conflicts, a repair whose
// value is graded against the document), and an agent job over a
// Japanese one (turns of tool calls, one refused).
const (
	docBatch    = "docs"
	docParallel = "docs-parallel"
	docAgent    = "docs-agent"
	// docItems is how many of the document's subsidiaries the parallel
	// job's value lists (its spans are graded); docInvented the path of
	// the value no text holds.
	docItems    = 30
	docInvented = "/governing_law"
	inventedLaw = "the laws of Atlantis"
)

// docConflict is the parallel job's merge conflict on the notice period.
var docConflict = fixpoint.Conflict{Path: "/termination_notice_days", Values: []json.RawMessage{json.RawMessage(`180`), json.RawMessage(`90`)},
	Chunks: [][]int{{1}, {5, 6}}, Chosen: json.RawMessage(`90`)}

// docFixture is the ledger and what the checks compare the pages with.
type docFixture struct {
	st     *store.Store
	srv    *httptest.Server
	doc    sim.Document
	chunks []chunk.Chunk
	// grades are the parallel job's final grades, in order.
	grades []fixpoint.Grounding
	jaDoc  sim.Document
}

func newDocFixture(t *testing.T) *docFixture {
	t.Helper()
	ctx := context.Background()
	f := &docFixture{st: storetest.NewStore(t)}
	var err error
	if f.doc, err = sim.NewDocument(7, 0, "en", 60_000); err != nil {
		t.Fatal(err)
	}
	if f.jaDoc, err = sim.NewDocument(7, 1, "ja", 50_000); err != nil {
		t.Fatal(err)
	}
	if f.chunks, err = chunk.Split(f.doc.Text, chunk.Options{Tokens: 1000, Overlap: 100}); err != nil {
		t.Fatal(err)
	}
	hash, err := f.st.PutSchema(ctx, []byte(sim.DocumentSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutBatch(ctx, store.BatchParams{Name: docBatch, SchemaHash: hash, TotalJobs: 2,
		Settings: json.RawMessage(`{"provider":"openai","model":"sim-messy","strategy":"parallel","evidence":"check","evidence_source":"document"}`)}); err != nil {
		t.Fatal(err)
	}
	en, ja := store.NewDocument(f.doc.Text), store.NewDocument(f.jaDoc.Text)
	if _, err := f.st.PutDocuments(ctx, []store.Document{en, ja}); err != nil {
		t.Fatal(err)
	}
	for i, j := range []struct{ id, strategy, hash string }{{docParallel, "parallel", en.Hash}, {docAgent, "agent", ja.Hash}} {
		if _, err := f.st.InsertJobs(ctx, []store.NewJob{{ID: j.id, Batch: docBatch, RowNo: i + 1, SchemaHash: hash, Prompt: sim.DocumentTemplate,
			Provider: "openai", Model: "sim-messy", Mode: "prompt", Strategy: j.strategy, Metadata: json.RawMessage(`{"id":"` + j.id + `"}`),
			DocumentHash: j.hash}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.st.SaveResults(ctx, []store.Result{f.parallelResult(t), f.agentResult(t)}); err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(web.NewHandler(f.st, web.Config{}))
	t.Cleanup(f.srv.Close)
	return f
}

// docValue is the truth of d with its first items subsidiaries, as a
// JSON object.
func docValue(t *testing.T, d sim.Document, items int) map[string]any {
	t.Helper()
	truth := d.Truth
	truth.Subsidiaries = truth.Subsidiaries[:min(items, len(truth.Subsidiaries))]
	b, _ := json.Marshal(truth)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// parallelResult is the parallel job: a chunk call per chunk (chunk 2's
// first reply gives a currency the schema refuses and is asked again),
// the merge (no call) with its conflict and a missing property, and the
// repair, valid, its value graded against the document.
func (f *docFixture) parallelResult(t *testing.T) store.Result {
	value := docValue(t, f.doc, docItems)
	value[strings.TrimPrefix(docInvented, "/")] = inventedLaw
	final, _ := json.Marshal(value)
	r := store.Result{JobID: docParallel, Status: fixpoint.StatusValid, Value: final}
	add := func(a store.Attempt) {
		a.No = len(r.AttemptRows) + 1
		a.Model = "sim-messy"
		if a.Step != string(fixpoint.StepMerge) { // a deterministic merge sends no request
			a.RequestHash = fmt.Sprintf("hash-%d", a.No)
		}
		r.AttemptRows = append(r.AttemptRows, a)
	}
	for _, c := range f.chunks {
		fields := 2 + c.N%5
		a := store.Attempt{Step: string(fixpoint.StepChunk), Chunk: &fixpoint.ChunkRef{N: c.N, Start: c.Start, End: c.End}, Fields: &fields,
			Raw: fmt.Sprintf(`{"provider": %q}`, f.doc.Truth.Provider), Valid: true, TokensIn: int64(1000 + c.N), TokensOut: 120, CostUSD: 0.0004, LatencyMS: 800}
		if c.N == 2 {
			bad := a
			bad.Valid, bad.Class, bad.Raw = false, string(fixpoint.ClassSemantic), `{"currency": "euros"}`
			bad.Errors = json.RawMessage(`[{"path":"/currency","keyword":"enum","class":"semantic","message":"/currency: \"euros\" is not one of EUR, USD, GBP, CHF, JPY"}]`)
			bad.Feedback = "Fix /currency."
			add(bad)
		}
		add(a)
	}
	conflicts, _ := json.Marshal([]fixpoint.Conflict{docConflict})
	add(store.Attempt{Step: string(fixpoint.StepMerge), Class: string(fixpoint.ClassShape), Conflicts: conflicts,
		Errors: json.RawMessage(`[{"path":"/governing_law","keyword":"required","class":"shape","message":"/governing_law is required"}]`)})
	for _, p := range f.doc.Places {
		var item int
		if n, _ := fmt.Sscanf(p.Pointer, "/subsidiaries/%d/", &item); n == 1 && item >= docItems || p.Pointer == docInvented {
			continue
		}
		g := fixpoint.Grounding{Path: p.Pointer, Grade: fixpoint.GradeExact, Start: p.Start, End: p.End}
		if p.Pointer == "/total_amount" {
			g.Grade = fixpoint.GradeNormalized
		}
		f.grades = append(f.grades, g)
	}
	f.grades = append(f.grades, fixpoint.Grounding{Path: docInvented, Grade: fixpoint.GradeNone})
	evidence, _ := json.Marshal(f.grades)
	add(store.Attempt{Step: string(fixpoint.StepRepair), Raw: string(final), Valid: true, TokensIn: 3000, TokensOut: 900, CostUSD: 0.002,
		LatencyMS: 2100, Evidence: evidence})
	r.Attempts, r.Calls = len(r.AttemptRows), len(r.AttemptRows)-1
	return r
}

// agentResult is the agent job: a search and a chunk read, a set_output
// with long arguments, an update_output refused, and finish. Each turn's
// request carries the results of the previous turn's calls.
func (f *docFixture) agentResult(t *testing.T) store.Result {
	value := docValue(t, f.jaDoc, 2)
	setArgs, _ := json.Marshal(value)
	turns := [][]fixpoint.ToolCall{
		{{ID: "call_1", Name: fixpoint.ToolSearch, Arguments: `{"text": "準拠法"}`}, {ID: "call_2", Name: fixpoint.ToolReadChunk, Arguments: `{"n": 3}`}},
		{{ID: "call_3", Name: fixpoint.ToolSetOutput, Arguments: string(setArgs)}},
		{{ID: "call_4", Name: fixpoint.ToolUpdateOutput, Arguments: `{"currency": "yen"}`}},
		{{ID: "call_5", Name: fixpoint.ToolFinish, Arguments: `{}`}},
	}
	results := map[string]fixpoint.Message{
		"call_1": {Role: fixpoint.RoleTool, ToolCallID: "call_1", Content: "2 matches: chunk 11, chunk 12"},
		"call_2": {Role: fixpoint.RoleTool, ToolCallID: "call_2", Content: "chunk 3 text"},
		"call_3": {Role: fixpoint.RoleTool, ToolCallID: "call_3", Content: "ok"},
		"call_4": {Role: fixpoint.RoleTool, ToolCallID: "call_4", IsError: true, Content: `/currency: "yen" is not one of EUR, USD, GBP, CHF, JPY`},
	}
	final, _ := json.Marshal(value)
	r := store.Result{JobID: docAgent, Status: fixpoint.StatusValid, Value: final}
	msgs := []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "Extract the agreement."}}
	for i, calls := range turns {
		req, _ := json.Marshal(msgs)
		tc, _ := json.Marshal(calls)
		a := store.Attempt{No: i + 1, Step: string(fixpoint.StepAgent), Request: req, RequestHash: fmt.Sprintf("agent-%d", i), ToolCalls: tc,
			Model: "sim-messy", TokensIn: int64(2000 * (i + 1)), TokensOut: 150, CostUSD: 0.001, LatencyMS: 600, Valid: i == len(turns)-1}
		if a.Valid {
			// finish checked the value against the document.
			var gs []fixpoint.Grounding
			for _, p := range f.jaDoc.Places {
				if !strings.HasPrefix(p.Pointer, "/subsidiaries/") || strings.HasPrefix(p.Pointer, "/subsidiaries/0/") || strings.HasPrefix(p.Pointer, "/subsidiaries/1/") {
					gs = append(gs, fixpoint.Grounding{Path: p.Pointer, Grade: fixpoint.GradeExact, Start: p.Start, End: p.End})
				}
			}
			a.Evidence, _ = json.Marshal(gs)
		}
		if i == 2 {
			// The refused update leaves the value as it was: the turn
			// made no progress, which the agent's class says.
			a.Class = string(fixpoint.ClassShape)
		}
		r.AttemptRows = append(r.AttemptRows, a)
		msgs = append(msgs, fixpoint.Message{Role: fixpoint.RoleAssistant, ToolCalls: calls})
		for _, c := range calls {
			if m, ok := results[c.ID]; ok {
				msgs = append(msgs, m)
			}
		}
	}
	r.Attempts, r.Calls = len(turns), len(turns)
	return r
}

// get fetches a page of the fixture's dashboard, failing on any status
// but 200.
func (f *docFixture) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get(f.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%.800s", path, resp.StatusCode, b)
	}
	return string(b)
}

// section is the HTML of the page's element with id, up to its closing
// tag (sections do not nest on the job page).
func section(t *testing.T, page, id, tag string) string {
	t.Helper()
	i := strings.Index(page, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no element with id %q on the page", id)
	}
	j := strings.Index(page[i:], "</"+tag+">")
	if j < 0 {
		t.Fatalf("element %q is not closed", id)
	}
	return page[i : i+j]
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

// text is HTML without its tags, unescaped.
func text(s string) string { return html.UnescapeString(tagRE.ReplaceAllString(s, "")) }

func TestDocumentJobSteps(t *testing.T) {
	t.Parallel()
	f := newDocFixture(t)
	page := f.get(t, "/jobs/"+docParallel)

	// The chunk calls: one table, a row per call with its chunk's offsets,
	// chunk 2 twice (refused, then valid); their cards folded under it.
	chunks := section(t, page, "steps-0", "section")
	if !strings.Contains(chunks, "<h3>Chunks") || !strings.Contains(chunks, fmt.Sprintf("%d calls · %d valid · 1 semantic", len(f.chunks)+1, len(f.chunks))) {
		t.Errorf("the chunks' group does not sum its %d calls up:\n%.600s", len(f.chunks)+1, chunks)
	}
	table := section(t, chunks, "steps-0", "table")
	for _, c := range f.chunks {
		row := fmt.Sprintf(`Chunk %d</a>`, c.N)
		offsets := fmt.Sprintf(`<span class="mono">%d–%d</span>`, c.Start, c.End)
		if !strings.Contains(table, row) || !strings.Contains(table, offsets) {
			t.Errorf("chunk %d (%s) is not a row of the chunks' table", c.N, offsets)
		}
	}
	if n := strings.Count(table, "Chunk 2</a>"); n != 2 {
		t.Errorf("chunk 2 has %d rows, want 2 (the refused reply and its retry)", n)
	}
	if !strings.Contains(table, "is not one of EUR") || !strings.Contains(table, `<th class="n" title="the strings, numbers and booleans of the step's value">Fields</th>`) {
		t.Error("the chunks' table shows no first error or no field count")
	}
	if !strings.Contains(chunks, `<details class="step-cards">`) || strings.Count(chunks, `<article class="card`) != len(f.chunks)+1 {
		t.Errorf("the chunks' cards are not all there, folded (%d cards)", strings.Count(chunks, `<article class="card`))
	}
	if !strings.Contains(chunks, fmt.Sprintf("Chunk 3: characters %d–%d of the document", f.chunks[3].Start, f.chunks[3].End)) {
		t.Error("a chunk's card does not say which characters its chunk is")
	}

	// The merge: no call, its conflict with each value's chunks and the
	// chosen one marked, its error; then the repair.
	merge := section(t, page, fmt.Sprintf("steps-%d", len(f.chunks)+1), "section")
	for _, want := range []string{"<h3>Merge", "no call · 0 valid · 1 shape", "A deterministic merge: no call",
		`<td class="mono">/termination_notice_days</td>`, `<li><span class="mono msg">180</span> <span class="small">chunk 1</span></li>`,
		`<li class="chosen"><span class="mono msg">90</span> <span class="small">chunks 5, 6</span> <span class="badge s-valid">chosen</span></li>`,
		"/governing_law is required"} {
		if !strings.Contains(merge, want) {
			t.Errorf("the merge step lacks %q:\n%s", want, merge)
		}
	}
	if strings.Contains(merge, "<h4>Reply") || strings.Contains(merge, "Request as sent") {
		t.Error("the merge made no call, yet its card shows a reply or a request")
	}
	repair := section(t, page, fmt.Sprintf("steps-%d", len(f.chunks)+2), "section")
	if !strings.Contains(repair, "<h3>Repair") || !strings.Contains(repair, "Repair <span class=\"small\">attempt") {
		t.Errorf("no repair step:\n%.400s", repair)
	}
}

func TestDocumentJobToolCalls(t *testing.T) {
	t.Parallel()
	f := newDocFixture(t)
	page := f.get(t, "/jobs/"+docAgent)
	turns := section(t, page, "steps-0", "section")
	for _, want := range []string{"<h3>Agent turns", "4 calls · 1 valid · 1 shape",
		// Each call with its arguments and how its result went (the
		// results come with the next turn's request; the last turn's
		// finish has none).
		`<span class="mono tool">search</span><span class="mono msg args" title="">({&#34;text&#34;:&#34;準拠法&#34;})</span>`,
		`<span class="badge s-valid">ok</span> <span class="small msg">2 matches: chunk 11, chunk 12</span>`,
		`<span class="mono tool">read_chunk</span>`,
		`<span class="mono tool">update_output</span><span class="mono msg args" title="">({&#34;currency&#34;:&#34;yen&#34;})</span>
    <span class="badge c-shape">error</span> <span class="small msg">/currency: &#34;yen&#34; is not one of EUR`,
		`<span class="mono tool">finish</span><span class="mono msg args" title="">({})</span>
    <span class="badge">no result</span>`,
		"Agent turn 4", "no text: tool calls only"} {
		if !strings.Contains(turns, want) {
			t.Errorf("the agent's turns lack %q", want)
		}
	}
	// set_output's arguments are the whole value: clipped, said so.
	m := regexp.MustCompile(`<span class="mono tool">set_output</span><span class="mono msg args" title="([^"]*)">\(([^)]*)\)</span>`).FindStringSubmatch(turns)
	if m == nil || !strings.HasPrefix(m[1], "clipped") || !strings.HasSuffix(html.UnescapeString(m[2]), "…") || utf8.RuneCountInString(html.UnescapeString(m[2])) != 161 {
		t.Errorf("set_output's long arguments are not clipped to 160 characters: %q", m)
	}
	// Spans over a document without spaces between words: each planted
	// value marked at its place, in code points.
	doc := section(t, page, "document", "section")
	src := []rune(f.jaDoc.Text)
	for _, p := range f.jaDoc.Places[:3] {
		if quote := html.EscapeString(string(src[p.Start:p.End])); !strings.Contains(doc, `">`+quote+`</mark></a>`) {
			t.Errorf("%s (%q) is not marked in the Japanese document", p.Pointer, quote)
		}
	}
	// The table names each turn's calls, the refused one marked and its
	// result the turn's error.
	if !strings.Contains(turns, `<span class="mono tool-error">update_output</span> <span class="badge c-shape">error</span>`) ||
		!strings.Contains(turns, `<td class="msg small">update_output: /currency: &#34;yen&#34; is not one of EUR`) {
		t.Error("the turns' table does not mark the refused call, or does not say why")
	}
}

func TestDocumentJobSpans(t *testing.T) {
	t.Parallel()
	f := newDocFixture(t)
	page := f.get(t, "/jobs/"+docParallel)
	doc := section(t, page, "document", "section")
	box := doc[strings.Index(doc, `<pre class="box source document">`):strings.Index(doc, "</pre>")]

	// Clipped: the document is long; each span is shown with its text,
	// linked to its field's row, which links back; the rest is gaps.
	if !strings.Contains(doc, `href="?document=full#document" id="document-full"`) || !strings.Contains(box, `characters left out …]`) {
		t.Error("a long document is not clipped, or offers no way to see it whole")
	}
	if len(text(box)) >= len(f.doc.Text)/2 {
		t.Errorf("the clipped document shows %d of %d bytes", len(text(box)), len(f.doc.Text))
	}
	src := []rune(f.doc.Text)
	chunksOf := func(g fixpoint.Grounding) []int {
		var ns []int
		for _, c := range f.chunks {
			if c.Start <= g.Start && g.End <= c.End {
				ns = append(ns, c.N)
			}
		}
		return ns
	}
	seen := map[string]bool{}
	for k, g := range f.grades {
		row := section(t, doc, fmt.Sprintf("field-%d", k), "tr")
		if g.Grade == fixpoint.GradeNone {
			if !strings.Contains(row, "not in the document: maybe invented") || !strings.Contains(row, inventedLaw) {
				t.Errorf("the invented %s is not listed as such: %s", g.Path, row)
			}
			continue
		}
		quote := string(src[g.Start:g.End])
		mark := fmt.Sprintf(`<a href="#field-%d" class="span"><mark class="g-%s" id="span-%d" title="%s: %s">%s</mark></a>`,
			k, g.Grade, k, g.Path, g.Grade, html.EscapeString(quote))
		if !strings.Contains(box, mark) {
			t.Errorf("%s (%d-%d) is not marked and linked: want %s", g.Path, g.Start, g.End, mark)
		}
		if !strings.Contains(row, fmt.Sprintf(`<a href="#span-%d">%s</a>`, k, g.Path)) || !strings.Contains(row, fmt.Sprintf("%d–%d", g.Start, g.End)) {
			t.Errorf("the row of %s does not link to its span: %s", g.Path, row)
		}
		// Values from different chunks keep their own spans: the row
		// names the chunks whose text holds the span.
		ns := chunksOf(g)
		want := fmt.Sprint(ns)
		if len(ns) > 0 && !strings.Contains(text(row), strings.Trim(strings.ReplaceAll(want, " ", ", "), "[]")) {
			t.Errorf("the row of %s names no chunk %v: %s", g.Path, ns, text(row))
		}
		if len(ns) > 0 {
			seen[fmt.Sprint(ns[0])] = true
		}
	}
	if len(seen) < 3 {
		t.Errorf("the graded values lie in %d chunks; the fixture means them to be spread over at least 3", len(seen))
	}

	// Whole: the box is the document, its marks aside.
	full := section(t, f.get(t, "/jobs/"+docParallel+"?document=full"), "document", "section")
	fullBox := full[strings.Index(full, `<pre class="box source document">`):strings.Index(full, "</pre>")]
	if got := text(fullBox[strings.Index(fullBox, ">")+1:]); got != f.doc.Text {
		t.Errorf("the whole document is not shown whole: %d bytes, want %d", len(got), len(f.doc.Text))
	}
	if !strings.Contains(full, `id="document-clip"`) || strings.Count(fullBox, "<mark") != len(f.grades)-1 {
		t.Errorf("the whole document has %d marks, want %d", strings.Count(fullBox, "<mark"), len(f.grades)-1)
	}
}

// TestDocumentJobFromTheSimulator runs the example document under
// parallel and agent on the simulator (the playground's run, the repair
// step a worker runs), writes each result to the ledger as the worker
// does (ledgerrow), and checks the job's page shows what the run did:
// every attempt a card of its step, the merge no call, the tool calls
// with their results, the final check's spans over the document.
func TestDocumentJobFromTheSimulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	tr := playground.New(playground.Config{Simulator: testSims(t, sim.Latency{})})
	ex := tr.Choices().Example
	hash, err := st.PutSchema(ctx, []byte(ex.Schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutBatch(ctx, store.BatchParams{Name: "simdocs", SchemaHash: hash, TotalJobs: 2}); err != nil {
		t.Fatal(err)
	}
	doc := store.NewDocument(ex.Document)
	if _, err := st.PutDocuments(ctx, []store.Document{doc}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.NewHandler(st, web.Config{}))
	t.Cleanup(srv.Close)
	for i, strategy := range []fixpoint.Strategy{fixpoint.StrategyParallel, fixpoint.StrategyAgent} {
		run, err := tr.Prepare(web.TryRequest{Preset: "clean", Seed: "3", Prompt: ex.Prompt, Schema: []byte(ex.Schema), Document: ex.Document,
			MaxTokens: 4096, Mode: fixpoint.ModePrompt, Limits: fixpoint.Limits{MaxAttempts: 3, Strategy: strategy}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := run(ctx, func(web.TryEvent) {})
		if err != nil || res.Status != fixpoint.StatusValid {
			t.Fatalf("%s on the simulator: %v, %v", strategy, res.Status, err)
		}
		id := "simdocs-" + string(strategy)
		if _, err := st.InsertJobs(ctx, []store.NewJob{{ID: id, Batch: "simdocs", RowNo: i + 1, SchemaHash: hash, Prompt: ex.Prompt,
			Provider: "openai", Model: "sim-clean", Mode: "prompt", Strategy: string(strategy), Metadata: json.RawMessage(`{}`), DocumentHash: doc.Hash}}); err != nil {
			t.Fatal(err)
		}
		res.JobID = id
		if _, err := st.SaveResults(ctx, []store.Result{ledgerrow.Result(res, nil, 1)}); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(srv.URL + "/jobs/" + id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(b)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d\n%.500s", id, resp.StatusCode, page)
		}
		var chunks, merges, turns, tools, graded int
		for _, a := range res.Attempts {
			switch a.Step {
			case fixpoint.StepChunk:
				chunks++
			case fixpoint.StepMerge:
				merges++
			case fixpoint.StepAgent:
				turns++
				tools += len(a.ToolCalls)
			}
			if a.Valid && a.Evidence != nil {
				// The final check: the job's valid attempt, the last.
				spans := map[[2]int]bool{}
				for _, g := range a.Evidence {
					if g.Grade != fixpoint.GradeNone {
						spans[[2]int{g.Start, g.End}] = true
					}
				}
				graded = len(spans)
			}
		}
		if n := strings.Count(page, `<article class="card`); n != len(res.Attempts) {
			t.Errorf("%s: %d cards for %d attempts", id, n, len(res.Attempts))
		}
		switch strategy {
		case fixpoint.StrategyParallel:
			if chunks < 4 || merges != 1 || strings.Count(section(t, page, "steps-0", "table"), "<tr>") != chunks+1 || !strings.Contains(page, "A deterministic merge: no call") {
				t.Errorf("%s: %d chunk calls and %d merges are not shown as such", id, chunks, merges)
			}
		case fixpoint.StrategyAgent:
			if turns == 0 || strings.Count(page, `<span class="mono tool">`) != tools || !strings.Contains(page, `<span class="mono tool">finish</span>`) {
				t.Errorf("%s: %d turns with %d tool calls are not shown as such", id, turns, tools)
			}
			if turns > 1 && !strings.Contains(page, `<span class="badge s-valid">ok</span>`) {
				t.Errorf("%s: no tool call shows its result", id)
			}
		}
		// Each span starts a mark of its own (spans that overlap cut each
		// other into more).
		if marks := strings.Count(section(t, page, "document", "section"), "<mark class=\"g-"); graded == 0 || marks < graded {
			t.Errorf("%s: %d marks in the document for %d spans graded", id, marks, graded)
		}
	}
}
