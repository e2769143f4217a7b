package sim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// agentDocRun is one agent run over a simulated document, through the
// real client of a wire format against the simulator over HTTP.
type agentDocRun struct {
	job    *repair.Job
	doc    sim.Document
	res    *fixpoint.Result
	bodies []string // the request bodies, in order
	reqs   []*fixpoint.Request
}

// runAgentDoc runs the agent strategy on document 0 of seed 1 (50,000
// characters of English) to its end.
func runAgentDoc(t *testing.T, provider string, cfg sim.Config, lim fixpoint.Limits) agentDocRun {
	t.Helper()
	return runAgentDocFrom(t, provider, cfg, lim, nil)
}

// runAgentDocFrom is runAgentDoc with the first turn's reply given, not
// the simulator's.
func runAgentDocFrom(t *testing.T, provider string, cfg sim.Config, lim fixpoint.Limits, first *fixpoint.Response) agentDocRun {
	t.Helper()
	var mu sync.Mutex
	var run agentDocRun
	cfg.Script = func(_ int, r *http.Request) *sim.ScriptedReply {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		run.bodies = append(run.bodies, string(b))
		mu.Unlock()
		return nil
	}
	_, c := simClient(t, provider, cfg, llm.Config{Retry: llm.RetryConfig{Disabled: true}})
	doc, err := sim.NewDocument(1, 0, "en", sim.DocumentMinChars)
	if err != nil {
		t.Fatal(err)
	}
	run.doc = doc
	schema, err := validate.Compile([]byte(sim.DocumentSchema))
	if err != nil {
		t.Fatal(err)
	}
	lim.Strategy = fixpoint.StrategyAgent
	job := &repair.Job{ID: "doc-agent-" + provider, Schema: schema, SchemaRaw: []byte(sim.DocumentSchema), Model: "gpt-4o-mini",
		Prompt: strings.ReplaceAll(sim.DocumentTemplate, "{{.id}}", "FA-1"), Document: doc.Text, MaxTokens: 16000, Limits: lim}
	run.job = job
	m, err := repair.StartDocument(job, nil, repair.Config{})
	if err != nil {
		t.Fatal(err)
	}
	act := m.Next()
	for !act.Done() {
		if act.Err != nil || len(act.Requests) != 1 {
			t.Fatalf("after %d turns: %+v", len(run.reqs), act)
		}
		req := act.Requests[0]
		run.reqs = append(run.reqs, req)
		resp, err := first, error(nil)
		if len(run.reqs) > 1 || first == nil {
			resp, err = c.Complete(context.Background(), *req)
		}
		_, act = m.Feed(req, resp, err, time.Now())
	}
	run.res = m.Result()
	return run
}

// wantValidValue fails unless a valid result's value passes the full
// schema.
func wantValidValue(t *testing.T, res *fixpoint.Result) map[string]any {
	t.Helper()
	if res.Status != fixpoint.StatusValid {
		t.Fatalf("status %s (%s: %s), want valid", res.Status, res.Class, res.Error)
	}
	schema, _ := validate.Compile([]byte(sim.DocumentSchema))
	var v any
	dec := json.NewDecoder(strings.NewReader(string(res.Value)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if errs := schema.Validate(v); len(errs) > 0 {
		t.Fatalf("a finished run's value fails the schema: %v", errs)
	}
	return v.(map[string]any)
}

// The reader reads every chunk through the tools and finishes with the
// document's fields, on each wire format: each turn is an attempt of
// step agent with the reply's calls and their ids; every result the
// next request sends names its call by the provider's id (Anthropic's
// tool_use id in tool_use_id, OpenAI's in tool_call_id; the simulator
// refuses a result naming no call, as the providers do); the totals are
// the turns' sums.
func TestAgentReaderOnEachWireFormat(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			run := runAgentDoc(t, provider, sim.Config{Seed: 1}, fixpoint.Limits{})
			got := wantValidValue(t, run.res)
			truth, _ := json.Marshal(run.doc.Truth)
			var want map[string]any
			_ = json.Unmarshal(truth, &want)
			for _, f := range []string{"provider", "customer", "effective_date", "governing_law", "currency"} {
				if !reflect.DeepEqual(got[f], want[f]) {
					t.Errorf("%s = %v, want %v", f, got[f], want[f])
				}
			}
			if n := len(got["subsidiaries"].([]any)); n < sim.DocumentItems*98/100 {
				t.Errorf("%d subsidiaries, want at least 98%% of %d", n, sim.DocumentItems)
			}
			res := run.res
			var in, out int
			resultKey := map[string]string{llm.ProviderOpenAI: `"tool_call_id":"`, llm.ProviderAnthropic: `"tool_use_id":"`}[provider]
			for i, a := range res.Attempts {
				in, out = in+a.TokensIn, out+a.TokensOut
				if a.Step != fixpoint.StepAgent || len(a.ToolCalls) == 0 {
					t.Fatalf("attempt %d: step %q, calls %v", i+1, a.Step, a.ToolCalls)
				}
				for _, c := range a.ToolCalls {
					if c.ID == "" {
						t.Errorf("attempt %d: a call without an id", i+1)
					}
					if resultKey != "" && i+1 < len(run.bodies) && !strings.Contains(run.bodies[i+1], resultKey+c.ID+`"`) {
						t.Errorf("request %d does not answer call %s", i+2, c.ID)
					}
				}
			}
			if res.TokensIn != in || res.TokensOut != out || res.Calls != len(res.Attempts) || in == 0 {
				t.Errorf("totals %d/%d over %d calls; the attempts sum to %d/%d over %d", res.TokensIn, res.TokensOut, res.Calls, in, out, len(res.Attempts))
			}
			first := run.reqs[0]
			if strings.Contains(first.Messages[0].Content, run.doc.Truth.GoverningLaw) || len(first.Tools) != 6 {
				t.Errorf("the first request sends the document or lacks tools: %d tools", len(first.Tools))
			}
		})
	}
}

// Text answers are nudged back (every first put is a prose answer here):
// the nudge is a user turn, and on OpenAI and Anthropic the request after
// it requires a tool call ("required", {"type":"any"}), so the reader
// calls one and the run finishes. Ollama has no such field: its nudged
// turn may answer text again, and the simulator's agent over a task
// that is no document, asked four times, answers text four times in a
// row, which ends the run invalid.
func TestAgentReaderNudges(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			run := runAgentDoc(t, provider, sim.Config{Seed: 1, Mix: sim.Mix{Prose: 1}}, fixpoint.Limits{})
			wantValidValue(t, run.res)
			want := map[string]string{llm.ProviderOpenAI: `"tool_choice":"required"`, llm.ProviderAnthropic: `"tool_choice":{"type":"any"}`}[provider]
			texts := 0
			for i, a := range run.res.Attempts {
				if len(a.ToolCalls) > 0 {
					continue
				}
				texts++
				if next := run.bodies[i+1]; !strings.Contains(next, want) || !strings.Contains(next, "Answer with tool calls only") {
					t.Errorf("request %d, after a text answer, lacks the nudge or %s", i+2, want)
				}
			}
			if texts == 0 {
				t.Error("no text answer; want the prose faults answered as text")
			}
		})
	}
	t.Run(llm.ProviderOllama, func(t *testing.T) {
		t.Parallel()
		schemaText := `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`
		schema, err := validate.Compile([]byte(schemaText))
		if err != nil {
			t.Fatal(err)
		}
		_, c := simClient(t, llm.ProviderOllama, sim.Config{Seed: 1, Mix: sim.Mix{Prose: 1}}, llm.Config{Retry: llm.RetryConfig{Disabled: true}})
		job := &repair.Job{ID: "nudge-ollama", Schema: schema, SchemaRaw: []byte(schemaText), Model: "m",
			Prompt: "Name the person.", Document: "Ada Park wrote this.", Limits: fixpoint.Limits{Strategy: fixpoint.StrategyAgent}}
		m, err := repair.StartDocument(job, nil, repair.Config{})
		if err != nil {
			t.Fatal(err)
		}
		act := m.Next()
		for !act.Done() {
			resp, err := c.Complete(context.Background(), *act.Requests[0])
			_, act = m.Feed(act.Requests[0], resp, err, time.Now())
		}
		res := m.Result()
		if res.Status != fixpoint.StatusInvalid || res.Class != string(fixpoint.ClassSyntax) || !strings.Contains(res.Error, "4 times in a row") || len(res.Attempts) != fixpoint.NudgesMax+1 {
			t.Fatalf("status %s class %q error %q after %d turns; want invalid after %d text answers", res.Status, res.Class, res.Error, len(res.Attempts), fixpoint.NudgesMax+1)
		}
	})
}

// A put with a wrong type is refused as a tool error naming the place,
// and the next turn puts it corrected (FixProb 1): the run finishes.
func TestAgentReaderFixesRefusedPuts(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			run := runAgentDoc(t, provider, sim.Config{Seed: 2, Mix: sim.Mix{WrongType: 1}, FixProb: 1}, fixpoint.Limits{})
			wantValidValue(t, run.res)
			refused := 0
			for _, a := range run.res.Attempts {
				if a.Class == string(fixpoint.ClassShape) && strings.Contains(a.Feedback, "refused: the output is unchanged") {
					refused++
				}
			}
			if refused == 0 {
				t.Error("no put was refused; want the wrong types refused")
			}
		})
	}
}

// A premature finish (every chunk's first answer empty) is refused for
// the fields the value lacks; refused max_validation_attempts times the
// run ends invalid with the last errors.
func TestAgentReaderMaxValidationAttempts(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			run := runAgentDoc(t, provider, sim.Config{Seed: 1, Mix: sim.Mix{Empty: 1}}, fixpoint.Limits{MaxValidationAttempts: 2})
			res := run.res
			if res.Status != fixpoint.StatusInvalid || !strings.Contains(res.Error, "finish refused 2 times") {
				t.Fatalf("status %s error %q; want invalid after two refused finishes", res.Status, res.Error)
			}
		})
	}
}

// A finish refused for the required fields the value lacks goes back as
// a tool error naming them (the first turn, given, sets the provider
// only and finishes); the reader searches for each, reads the chunks
// found and puts them, and its finish is accepted.
func TestAgentReaderFinishRefusedThenFixed(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			ids := map[string]string{llm.ProviderOpenAI: "call_given", llm.ProviderAnthropic: "toolu_01given", llm.ProviderOllama: "ollama_call_0"}
			first := &fixpoint.Response{FinishReason: fixpoint.FinishTool, ToolCalls: []fixpoint.ToolCall{
				{ID: ids[provider] + "0", Name: fixpoint.ToolSetOutput, Arguments: `{"provider":"Given Provider Ltd"}`},
				{ID: ids[provider] + "1", Name: fixpoint.ToolFinish, Arguments: `{}`}}}
			run := runAgentDocFrom(t, provider, sim.Config{Seed: 3}, fixpoint.Limits{}, first)
			got := wantValidValue(t, run.res)
			if a := run.res.Attempts[0]; a.Class != string(fixpoint.ClassShape) || !strings.Contains(a.Feedback, "/governing_law") {
				t.Errorf("first turn: class %q, feedback %q; want the finish refused naming /governing_law", a.Class, a.Feedback)
			}
			searched := 0
			for _, a := range run.res.Attempts {
				for _, c := range a.ToolCalls {
					if c.Name == fixpoint.ToolSearch {
						searched++
					}
				}
			}
			if searched == 0 || got["governing_law"] != run.doc.Truth.GoverningLaw || got["provider"] != "Given Provider Ltd" {
				t.Errorf("%d searches, law %v (want %q), provider %v (want the one given)", searched, got["governing_law"], run.doc.Truth.GoverningLaw, got["provider"])
			}
		})
	}
}

// fail ends the run invalid, class refusal, with the model's reason, on
// each wire format (the simulator's agent over a task that is not a
// simulated document calls fail on a refusal).
func TestAgentFailOnEachWireFormat(t *testing.T) {
	t.Parallel()
	schemaText := `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`
	schema, err := validate.Compile([]byte(schemaText))
	if err != nil {
		t.Fatal(err)
	}
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			_, c := simClient(t, provider, sim.Config{Seed: 1, Mix: sim.Mix{Refusal: 1}}, llm.Config{Retry: llm.RetryConfig{Disabled: true}})
			job := &repair.Job{ID: "fail-" + provider, Schema: schema, SchemaRaw: []byte(schemaText), Model: "m",
				Prompt: "Name the person.", Document: "Ada Park wrote this.", Limits: fixpoint.Limits{Strategy: fixpoint.StrategyAgent}}
			m, err := repair.StartDocument(job, nil, repair.Config{})
			if err != nil {
				t.Fatal(err)
			}
			act := m.Next()
			for !act.Done() {
				resp, err := c.Complete(context.Background(), *act.Requests[0])
				_, act = m.Feed(act.Requests[0], resp, err, time.Now())
			}
			res := m.Result()
			if res.Status != fixpoint.StatusInvalid || res.Class != fixpoint.OutcomeRefusal || !strings.Contains(res.Error, sim.RefusalText) || len(res.Attempts) != 1 {
				t.Fatalf("status %s class %q error %q after %d turns; want invalid, refusal, the reason, one turn", res.Status, res.Class, res.Error, len(res.Attempts))
			}
		})
	}
}

// A run stopped after some turns continues from its result on a new
// machine, through the same client: it ends as the run that never
// stopped, with every attempt kept.
func TestAgentReaderResume(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			whole := runAgentDoc(t, provider, sim.Config{Seed: 1}, fixpoint.Limits{})
			_, c := simClient(t, provider, sim.Config{Seed: 1}, llm.Config{Retry: llm.RetryConfig{Disabled: true}})
			job := whole.job
			var prev *fixpoint.Result
			for stop := 0; ; stop++ {
				m, err := repair.StartDocument(job, prev, repair.Config{})
				if err != nil {
					t.Fatal(err)
				}
				act := m.Next()
				if act.Done() {
					break
				}
				// One turn, then the worker "stops".
				resp, err := c.Complete(context.Background(), *act.Requests[0])
				m.Feed(act.Requests[0], resp, err, time.Now())
				prev = m.Result()
				if stop > 50 {
					t.Fatal("no end")
				}
			}
			if prev.Status != whole.res.Status || string(prev.Value) != string(whole.res.Value) || len(prev.Attempts) != len(whole.res.Attempts) {
				t.Errorf("resumed turn by turn: %s with %d attempts; whole: %s with %d", prev.Status, len(prev.Attempts), whole.res.Status, len(whole.res.Attempts))
			}
		})
	}
}
