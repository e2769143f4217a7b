package web_test

import (
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/sim"
)

// exampleForm is a try of the form's example document under strategy.
func (ts *tryServer) exampleForm(t *testing.T, token, strategy string) url.Values {
	t.Helper()
	resp, body := get(t, ts.srv, "/try?example=document")
	wantPage(t, resp, body, 200, `id="try-example-document"`, `<option selected title="reads the document below (mode prompt)">parallel</option>`)
	doc := regexp.MustCompile(`(?s)<textarea name="document"[^>]*>(.*?)</textarea>`).FindStringSubmatch(body)
	schema := regexp.MustCompile(`(?s)<textarea name="schema"[^>]*>(.*?)</textarea>`).FindStringSubmatch(body)
	prompt := regexp.MustCompile(`(?s)<textarea name="prompt"[^>]*>(.*?)</textarea>`).FindStringSubmatch(body)
	if doc == nil || len(doc[1]) < sim.DocumentMinChars || schema == nil || prompt == nil {
		t.Fatalf("the example does not fill the form's document, schema and prompt")
	}
	f := tryForm(token)
	f.Set("source", "sim:clean")
	f.Set("strategy", strategy)
	f.Set("max_attempts", "3")
	mt := regexp.MustCompile(`name="max_tokens"[^>]* value="(\d+)"`).FindStringSubmatch(body)
	if mt == nil {
		t.Fatal("the example sets no output cap")
	}
	f.Set("max_tokens", mt[1])
	// A textarea drops the newline right after its tag; the form sends
	// what the box shows.
	f.Set("document", strings.TrimPrefix(html.UnescapeString(doc[1]), "\n"))
	f.Set("schema", strings.TrimPrefix(html.UnescapeString(schema[1]), "\n"))
	f.Set("prompt", strings.TrimPrefix(html.UnescapeString(prompt[1]), "\n"))
	return f
}

// TestTryDocumentStrategies runs the example document through the
// playground under each document strategy, on the simulator: the run's
// cards are grouped by step as on a job's page (chunk calls with their
// offsets, then the merge; the agent's turns with their tool calls).
func TestTryDocumentStrategies(t *testing.T) {
	t.Parallel()
	ts := newTryServer(t, sim.Latency{})
	token := ts.token(t)
	for _, tc := range []struct {
		strategy, mergeModel string
		want                 []string
	}{
		{"parallel", "", []string{"<h3>Chunks", `<table class="steps">`, `Chunk 0</a>`, `Chunk 1</a>`, "<h3>Merge", "Chunk 1 <span class=\"small\">attempt",
			// The document, its spans graded by the final check.
			`<section id="document">`, `<mark class="g-exact" id="span-0"`, "Clipped around the spans.", `<td class="small">chunk 0</td>`}},
		{"parallel", "sim-merge", []string{"<h3>Chunks", "<h3>Merge"}},
		{"sequential", "", []string{"<h3>Chunks", `Chunk 0</a>`, `Chunk 1</a>`, "characters 0–"}},
		{"agent", "", []string{"<h3>Agent turns", "Agent turn 1", `<span class="mono tool">set_output</span>`, `<span class="mono tool">finish</span>`}},
	} {
		t.Run(tc.strategy+tc.mergeModel, func(t *testing.T) {
			f := ts.exampleForm(t, token, tc.strategy)
			f.Set("chunk_tokens", "4000")
			f.Set("merge_model", tc.mergeModel)
			resp, body := ts.post(t, f, "HX-Request", "true")
			wantPage(t, resp, body, 200, `class="pipeline"`, " · "+tc.strategy+" · ")
			final := body
			if strings.Contains(body, `sse-connect=`) {
				final = ts.follow(t, body)
			}
			for _, w := range append(tc.want, `id="try-verdict"`) {
				if !strings.Contains(final, w) {
					t.Errorf("the %s run's part lacks %q:\n%s", tc.strategy, w, final)
				}
			}
		})
	}
}

// TestTryDocumentInput: a document strategy needs a document, another
// strategy reads none, and the chunk size is a whole number.
func TestTryDocumentInput(t *testing.T) {
	t.Parallel()
	ts := newTryServer(t, sim.Latency{})
	token := ts.token(t)
	for _, tc := range []struct {
		name, strategy, document, chunkTokens, want string
	}{
		{"no document", "parallel", "  ", "", "strategy parallel reads a document: paste one in the document box"},
		{"a document for conversation", "conversation", "Some text.", "", "strategy conversation reads no document: pick parallel, sequential or agent"},
		{"a bad chunk size", "sequential", "Some text.", "many", `chunk size "many": give a whole number of tokens`},
		{"a mode other than prompt", "agent", "Some text.", "", "needs mode prompt"},
	} {
		f := tryForm(token)
		f.Set("strategy", tc.strategy)
		f.Set("document", tc.document)
		f.Set("chunk_tokens", tc.chunkTokens)
		if tc.name == "a mode other than prompt" {
			f.Set("mode", "json_schema")
		}
		resp, body := ts.post(t, f, "HX-Request", "true")
		if resp.StatusCode != 400 || !strings.Contains(html.UnescapeString(body), tc.want) {
			t.Errorf("%s: %d, want 400 naming %q:\n%.400s", tc.name, resp.StatusCode, tc.want, body)
		}
	}
	// A merge model is the parallel strategy's.
	mf := tryForm(token)
	mf.Set("strategy", "sequential")
	mf.Set("document", "Some text.")
	mf.Set("merge_model", "sim-merge")
	if resp, body := ts.post(t, mf, "HX-Request", "true"); resp.StatusCode != 400 || !strings.Contains(html.UnescapeString(body), "a merge model merges the chunks' values of strategy parallel, not sequential") {
		t.Errorf("a merge model under sequential: %d, want 400 naming parallel:\n%.400s", resp.StatusCode, body)
	}
	// The form keeps what was typed when it is refused.
	f := tryForm(token)
	f.Set("strategy", "conversation")
	f.Set("document", "Clause 7 <b>bold</b>")
	resp, body := ts.post(t, f)
	wantPage(t, resp, body, 400, fmt.Sprintf(`<textarea name="document" rows="6" spellcheck="false" placeholder="paste a long document, and pick a document strategy">%s</textarea>`,
		html.EscapeString("Clause 7 <b>bold</b>")))
}
