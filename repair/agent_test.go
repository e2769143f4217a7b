package repair_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/validate"
)

const agentTestSchema = `{"type":"object","properties":{
 "party":{"type":"string","minLength":1},
 "term":{"type":"integer","minimum":1},
 "items":{"type":"array","x-fixpoint-key":"name","items":{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name"],"additionalProperties":false}}},
 "required":["party","term"],"additionalProperties":false}`

// agentTestDoc is cut into several chunks of 40 tokens.
var agentTestDoc = strings.Join([]string{
	"# Agreement\n\nThis agreement is made between Acme GmbH and its customer, who buys services under it for a long time to come.",
	"## Term\n\nThe term of the agreement is 24 months from the effective date, renewed each year unless either party ends it.",
	"## Subsidiaries\n\nThe subsidiaries are Alpha Ltd with 3 offices and Beta SA with 5 offices, both wholly owned by the provider.",
	"## Law\n\nThe agreement is governed by the law of Zürich, and every dispute goes to the courts of that city alone.",
}, "\n\n")

func agentJob(t *testing.T, lim fixpoint.Limits) *repair.Job {
	t.Helper()
	schema, err := validate.Compile([]byte(agentTestSchema))
	if err != nil {
		t.Fatal(err)
	}
	lim.Strategy = fixpoint.StrategyAgent
	if lim.ChunkTokens == 0 {
		lim.ChunkTokens, lim.ChunkOverlap = 40, 0
	}
	return &repair.Job{ID: "agent-1", Schema: schema, SchemaRaw: []byte(agentTestSchema), Model: "gpt-4o-mini",
		Prompt: "Extract the agreement's party, term and subsidiaries.", Document: agentTestDoc, Limits: lim}
}

// call makes a tool call with an id of the turn.
func agentCall(id, name, args string) fixpoint.ToolCall {
	return fixpoint.ToolCall{ID: id, Name: name, Arguments: args}
}

func agentCalls(cs ...fixpoint.ToolCall) *fixpoint.Response {
	return &fixpoint.Response{ToolCalls: cs, FinishReason: fixpoint.FinishTool,
		Usage: fixpoint.Usage{InputTokens: 100, OutputTokens: 10}}
}

func agentText(s string) *fixpoint.Response {
	return &fixpoint.Response{Text: s, FinishReason: fixpoint.FinishStop, Usage: fixpoint.Usage{InputTokens: 100, OutputTokens: 10}}
}

// agentRun drives m with the scripted replies, in order, and returns the
// requests sent. It fails the test when the machine asks for more
// requests than there are replies, or ends before they are used.
func agentRun(t *testing.T, m repair.Machine, replies ...*fixpoint.Response) []*fixpoint.Request {
	t.Helper()
	sent, _ := agentRunNext(t, m, replies...)
	return sent
}

// agentRunNext is agentRun that also returns what the machine asked for
// after the last reply.
func agentRunNext(t *testing.T, m repair.Machine, replies ...*fixpoint.Response) ([]*fixpoint.Request, repair.DocAction) {
	t.Helper()
	var sent []*fixpoint.Request
	act := m.Next()
	for i, r := range replies {
		if act.Done() {
			t.Fatalf("the run ended after %d of %d replies: %+v", i, len(replies), m.Result())
		}
		if len(act.Requests) != 1 {
			t.Fatalf("turn %d: %d requests, want 1 (%+v)", i, len(act.Requests), act)
		}
		req := act.Requests[0]
		sent = append(sent, req)
		_, act = m.Feed(req, r, nil, time.Now())
	}
	return sent, act
}

// toolResults are the tool turns answering the last assistant turn of req.
func toolResults(req *fixpoint.Request) []fixpoint.Message {
	var out []fixpoint.Message
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role == fixpoint.RoleTool; i-- {
		out = append([]fixpoint.Message{req.Messages[i]}, out...)
	}
	return out
}

// A run reads chunks, sets and updates the value, and finishes: the first
// request offers the six tools and outlines the document without its
// text; each turn is one attempt of step agent with its calls; a chunk's
// text comes back with its place; an update merges by the merge rules
// (a keyed item into the item of its key, the update's value winning
// where they disagree); the finished value is the job's, valid, and the
// totals cover every turn.
func TestAgentReadsBuildsAndFinishes(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{}), nil)
	reqs := agentRun(t, m,
		agentCalls(agentCall("c1", fixpoint.ToolReadChunk, `{"n":0}`)),
		agentCalls(agentCall("c2", fixpoint.ToolSetOutput, `{"party":"Acme GmbH"}`), agentCall("c3", fixpoint.ToolReadChunk, `{"n":1}`)),
		agentCalls(agentCall("c4", fixpoint.ToolUpdateOutput, `{"term":24,"items":[{"name":"Alpha Ltd","n":3}]}`)),
		agentCalls(agentCall("c5", fixpoint.ToolUpdateOutput, `{"items":[{"name":"alpha  ltd","n":4},{"name":"Beta SA"}]}`), agentCall("c6", fixpoint.ToolFinish, `{}`)),
	)
	first := reqs[0]
	var names []string
	for _, tl := range first.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{"set_output", "update_output", "read_chunk", "search", "finish", "fail"}; !reflect.DeepEqual(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
	if msg := first.Messages[0].Content; strings.Contains(msg, "Zürich") || !strings.Contains(msg, "chunks") || !strings.Contains(msg, "chunk 0: code points 0 to") {
		t.Errorf("first message does not outline the document without its text: %q", msg)
	}
	if !strings.Contains(first.System, fixpoint.SchemaMarkerOpen) {
		t.Errorf("system prompt has no schema block: %q", first.System)
	}
	res := toolResults(reqs[1])
	if len(res) != 1 || res[0].ToolCallID != "c1" || !strings.HasPrefix(res[0].Content, "chunk 0 of ") || !strings.Contains(res[0].Content, "Acme GmbH") {
		t.Fatalf("read_chunk result: %+v", res)
	}
	r := m.Result()
	if !m.Next().Done() || r.Status != fixpoint.StatusValid {
		t.Fatalf("status %s (%s), want valid and done", r.Status, r.Error)
	}
	var got map[string]any
	if err := json.Unmarshal(r.Value, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"party": "Acme GmbH", "term": 24.0, "items": []any{
		map[string]any{"name": "alpha  ltd", "n": 4.0}, map[string]any{"name": "Beta SA"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("value %s, want %v", r.Value, want)
	}
	if len(r.Attempts) != 4 || r.Calls != 4 || r.TokensIn != 400 || r.TokensOut != 40 {
		t.Errorf("%d attempts, %d calls, tokens %d/%d; want 4, 4, 400/40", len(r.Attempts), r.Calls, r.TokensIn, r.TokensOut)
	}
	for i, a := range r.Attempts {
		if a.Step != fixpoint.StepAgent || len(a.ToolCalls) == 0 || a.Valid != (i == 3) {
			t.Errorf("attempt %d: step %q, %d calls, valid %v", i+1, a.Step, len(a.ToolCalls), a.Valid)
		}
	}
	if r.CostUSD <= 0 {
		t.Errorf("cost %v, want the turns' sum", r.CostUSD)
	}
}

// An invalid set_output is refused as a tool error naming the error, the
// value unchanged; the call fixed on the next turn is taken.
func TestAgentInvalidSetOutputRefusedThenFixed(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{}), nil)
	reqs := agentRun(t, m,
		agentCalls(agentCall("a", fixpoint.ToolSetOutput, `{"party":"Acme GmbH","term":"soon"}`)),
		agentCalls(agentCall("b", fixpoint.ToolSetOutput, `{"party":"Acme GmbH","term":24}`), agentCall("c", fixpoint.ToolFinish, `{}`)),
	)
	res := toolResults(reqs[1])
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content, "/term") {
		t.Fatalf("result of an invalid set_output: %+v; want an error naming /term", res)
	}
	r := m.Result()
	if r.Status != fixpoint.StatusValid || r.Attempts[0].Class != string(fixpoint.ClassShape) || len(r.Attempts[0].Value) != 0 {
		t.Errorf("status %s; first attempt class %q value %s; want valid, shape, no value", r.Status, r.Attempts[0].Class, r.Attempts[0].Value)
	}
}

// An item of a keyed list put without its key is refused at once, naming
// it: no later update could merge with it or remove it.
func TestAgentRefusesUnkeyedItems(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{}), nil)
	reqs := agentRun(t, m,
		agentCalls(agentCall("a", fixpoint.ToolSetOutput, `{"party":"Acme GmbH","term":24,"items":[{"name":"Alpha Ltd"},{"n":5}]}`)),
		agentCalls(agentCall("b", fixpoint.ToolFail, `{"reason":"x"}`)),
	)
	res := toolResults(reqs[1])
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content, `/items/1/name: missing key field "name"`) {
		t.Fatalf("results %+v; want the item without its name refused", res)
	}
}

// A finish refused for a missing required property goes back as a tool
// error, and the run goes on: the value completed, finish passes.
func TestAgentFinishRefusedThenFixed(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{}), nil)
	reqs := agentRun(t, m,
		agentCalls(agentCall("a", fixpoint.ToolSetOutput, `{"party":"Acme GmbH"}`), agentCall("b", fixpoint.ToolFinish, `{}`)),
		agentCalls(agentCall("c", fixpoint.ToolUpdateOutput, `{"term":24}`), agentCall("d", fixpoint.ToolFinish, ``)),
	)
	res := toolResults(reqs[1])
	if len(res) != 2 || res[0].IsError || !strings.Contains(res[0].Content, "/term") || !res[1].IsError || !strings.Contains(res[1].Content, "term") {
		t.Fatalf("results: %+v; want set_output taken (naming /term as still required) and finish refused naming term", res)
	}
	if r := m.Result(); r.Status != fixpoint.StatusValid || r.FirstAttemptValid {
		t.Errorf("status %s, first attempt valid %v; want valid, false", r.Status, r.FirstAttemptValid)
	}
}

// Finish refused MaxValidationAttempts times ends the job invalid with
// the last errors.
func TestAgentMaxValidationAttempts(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{MaxValidationAttempts: 2}), nil)
	agentRun(t, m,
		agentCalls(agentCall("a", fixpoint.ToolSetOutput, `{"party":"Acme GmbH"}`), agentCall("b", fixpoint.ToolFinish, `{}`)),
		agentCalls(agentCall("c", fixpoint.ToolFinish, `{}`)),
	)
	r := m.Result()
	if !m.Next().Done() || r.Status != fixpoint.StatusInvalid || r.Class != string(fixpoint.ClassShape) || !strings.Contains(r.Error, "term") {
		t.Fatalf("status %s class %q error %q; want invalid, shape, naming term", r.Status, r.Class, r.Error)
	}
	if last := r.Attempts[len(r.Attempts)-1]; r.Value != nil || string(last.Value) != `{"party":"Acme GmbH"}` {
		t.Errorf("job value %s, last attempt's %s; want none, and the value set", r.Value, last.Value)
	}
}

// A text answer is nudged back with a user turn, and the next request
// requires a tool call; a turn with calls starts the count again; the
// fourth text answer in a row ends the job invalid.
func TestAgentNudges(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{}), nil)
	all := agentRun(t, m, agentText("Let me look."), agentText("Still looking."), agentCalls(agentCall("a", fixpoint.ToolReadChunk, `{"n":0}`)),
		agentText("The party is Acme."), agentText("Still text."), agentText("More text."), agentText("Last text."))
	if pre := all[:3]; !pre[1].ToolChoice.Required || !pre[2].ToolChoice.Required {
		t.Errorf("the requests after text answers do not require a tool call")
	}
	reqs := all[3:]
	for i, req := range reqs {
		if req.ToolChoice.Required != (i > 0) {
			t.Errorf("request %d after the call: tool choice required %v", i, req.ToolChoice.Required)
		}
		if i > 0 {
			last := req.Messages[len(req.Messages)-1]
			if last.Role != fixpoint.RoleUser || !strings.Contains(last.Content, "tool calls only") {
				t.Errorf("request %d: last message %+v, want the nudge", i, last)
			}
		}
	}
	r := m.Result()
	if !m.Next().Done() || r.Status != fixpoint.StatusInvalid || r.Class != string(fixpoint.ClassSyntax) || !strings.Contains(r.Error, "4 times in a row") || len(r.Attempts) != 7 {
		t.Fatalf("status %s class %q error %q after %d turns; want invalid after 4 text answers in a row, 7 turns", r.Status, r.Class, r.Error, len(r.Attempts))
	}
}

// fail ends the job invalid, class refusal, with the agent's reason.
func TestAgentFail(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{}), nil)
	agentRun(t, m, agentCalls(agentCall("a", fixpoint.ToolFail, `{"reason":"the document is a recipe"}`), agentCall("b", fixpoint.ToolFinish, `{}`)))
	r := m.Result()
	if !m.Next().Done() || r.Status != fixpoint.StatusInvalid || r.Class != fixpoint.OutcomeRefusal || !strings.Contains(r.Error, "recipe") {
		t.Fatalf("status %s class %q error %q; want invalid, refusal, the reason", r.Status, r.Class, r.Error)
	}
}

// Bad calls are refused one by one, naming what is wrong: arguments that
// are no JSON object, a chunk out of range, an unknown tool; a search
// finds each place with its chunk and offsets; a chunk number may be
// written as a string or 2.0, not as 1.5.
func TestAgentBadCallsAndSearch(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{}), nil)
	reqs := agentRun(t, m,
		agentCalls(agentCall("a", fixpoint.ToolSetOutput, `{"party":`), agentCall("b", fixpoint.ToolReadChunk, `{"n":99}`),
			agentCall("c", "summarize", `{}`), agentCall("d", fixpoint.ToolSearch, `{"text":"ZÜRICH"}`)),
		agentCalls(agentCall("e", fixpoint.ToolReadChunk, `{"n":"1"}`), agentCall("f", fixpoint.ToolReadChunk, `{"n":2.0}`), agentCall("g", fixpoint.ToolReadChunk, `{"n":1.5}`)),
		agentCalls(agentCall("h", fixpoint.ToolFail, `{"reason":"done"}`)),
	)
	if res := toolResults(reqs[2]); len(res) != 3 || !strings.HasPrefix(res[0].Content, "chunk 1 of") || !strings.HasPrefix(res[1].Content, "chunk 2 of") || !res[2].IsError {
		t.Errorf("read_chunk of \"1\", 2.0 and 1.5: %+v; want chunks 1 and 2, and 1.5 refused", res)
	}
	if sent := reqs[1].Messages[len(reqs[1].Messages)-5]; len(sent.ToolCalls) != 4 || sent.ToolCalls[0].Arguments != "{}" {
		t.Errorf("the turn sent back: %+v; want its cut arguments sent as {}", sent)
	}
	res := toolResults(reqs[1])
	if len(res) != 4 {
		t.Fatalf("%d results, want 4", len(res))
	}
	for i, want := range []string{"not valid JSON", "no chunk 99", `no tool named "summarize"`} {
		if !res[i].IsError || !strings.Contains(res[i].Content, want) {
			t.Errorf("result %d: %+v; want an error saying %q", i, res[i], want)
		}
	}
	at := strings.Index(agentTestDoc, "Zürich")
	start := len([]rune(agentTestDoc[:at]))
	if want := fmt.Sprintf("code points %d to %d, chunk ", start, start+6); res[3].IsError || !strings.Contains(res[3].Content, want) || !strings.HasPrefix(res[3].Content, "1 passages") {
		t.Errorf("search result %q; want one passage at %q", res[3].Content, want)
	}
}

// The run continues from its attempts: a machine started from the result
// of two turns sends what the first would have sent next, and finishes
// the same.
func TestAgentResume(t *testing.T) {
	t.Parallel()
	job := agentJob(t, fixpoint.Limits{})
	replies := []*fixpoint.Response{
		agentCalls(agentCall("a", fixpoint.ToolReadChunk, `{"n":0}`), agentCall("b", fixpoint.ToolSetOutput, `{"party":"Acme GmbH","term":"x"}`)),
		agentText(""),
		agentCalls(agentCall("c", fixpoint.ToolSetOutput, `{"party":"Acme GmbH"}`), agentCall("d", fixpoint.ToolReadChunk, `{"n":1}`)),
	}
	whole := startDoc(t, job, nil)
	_, want := agentRunNext(t, whole, replies...)

	part := startDoc(t, job, nil)
	agentRun(t, part, replies[:2]...)
	prev := part.Result()
	resumed := startDoc(t, job, prev)
	_, got := agentRunNext(t, resumed, replies[2])
	if len(got.Requests) != 1 || len(want.Requests) != 1 {
		t.Fatalf("requests: resumed %+v, whole %+v", got, want)
	}
	gj, _ := json.Marshal(got.Requests[0])
	wj, _ := json.Marshal(want.Requests[0])
	if string(gj) != string(wj) {
		t.Errorf("the resumed run's next request differs:\n%s\nwant\n%s", gj, wj)
	}
	// A paid reply that could not be read is no turn to run again: the
	// same request goes out.
	unreadable := &fixpoint.ProviderError{Status: 200, Class: fixpoint.ClassBadResponse, Message: "bad body", Head: `{"choi`, Size: 6}
	if a, act := resumed.Feed(got.Requests[0], nil, unreadable, time.Now()); a.Class != fixpoint.OutcomeProvider || len(act.Requests) != 1 {
		t.Fatalf("unreadable reply: class %q, %+v; want a provider attempt and the request again", a.Class, act)
	}
	resumed = startDoc(t, job, resumed.Result())
	again := resumed.Next()
	if aj, _ := json.Marshal(again.Requests[0]); string(aj) != string(wj) {
		t.Fatalf("after an unreadable reply, resumed: %s\nwant %s", aj, wj)
	}
	got = again
	fin := agentCalls(agentCall("e", fixpoint.ToolUpdateOutput, `{"term":24}`), agentCall("f", fixpoint.ToolFinish, `{}`))
	whole.Feed(want.Requests[0], fin, nil, time.Now())
	resumed.Feed(got.Requests[0], fin, nil, time.Now())
	if w, g := whole.Result(), resumed.Result(); g.Status != fixpoint.StatusValid || string(g.Value) != string(w.Value) || len(g.Attempts) != 5 {
		t.Errorf("resumed: %s %s with %d attempts; whole: %s %s", g.Status, g.Value, len(g.Attempts), w.Status, w.Value)
	}
}

// A transient provider failure asks the driver to run the job later; the
// run then goes on with the same turn.
func TestAgentTransientFailure(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{}), nil)
	act := m.Next()
	req := act.Requests[0]
	if w := m.Next(); !w.Waiting {
		t.Fatalf("Next with a request outstanding = %+v, want waiting", w)
	}
	perr := &fixpoint.ProviderError{Status: 503, Class: fixpoint.ClassServer, Message: "overloaded"}
	a, act := m.Feed(req, nil, perr, time.Now())
	if !errors.Is(act.Err, fixpoint.ErrTransient) || a.Class != fixpoint.OutcomeProvider || a.Step != fixpoint.StepAgent {
		t.Fatalf("act %+v, attempt class %q step %q; want a transient error and a provider attempt", act, a.Class, a.Step)
	}
	act = m.Next()
	if len(act.Requests) != 1 || len(act.Requests[0].Messages) != len(req.Messages) {
		t.Fatalf("after the failure: %+v, want the first turn again", act)
	}
	resumed := startDoc(t, agentJob(t, fixpoint.Limits{}), m.Result())
	if act := resumed.Next(); len(act.Requests) != 1 {
		t.Fatalf("resumed after a failure: %+v, want the first turn", act)
	}
}

// Chunk texts read more than three turns ago are left out of the
// request, their headers kept.
func TestAgentElidesOldChunks(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{}), nil)
	reqs := agentRun(t, m,
		agentCalls(agentCall("a", fixpoint.ToolReadChunk, `{"n":0}`)),
		agentCalls(agentCall("b", fixpoint.ToolReadChunk, `{"n":1}`)),
		agentCalls(agentCall("c", fixpoint.ToolReadChunk, `{"n":2}`)),
		agentCalls(agentCall("d", fixpoint.ToolReadChunk, `{"n":3}`)),
		agentCalls(agentCall("e", fixpoint.ToolFail, `{"reason":"x"}`)),
	)
	last, _ := json.Marshal(reqs[4].Messages)
	if strings.Contains(string(last), "Acme GmbH and its customer") || !strings.Contains(string(last), "chunk 0 of") {
		t.Errorf("request 5 keeps chunk 0's text or loses its header: %s", last)
	}
	for _, kept := range []string{"24 months", "Alpha Ltd", "Zürich"} {
		if !strings.Contains(string(last), kept) {
			t.Errorf("request 5 lost %q, of the chunks of the last three turns: %s", kept, last)
		}
	}
	if first, _ := json.Marshal(reqs[3].Messages); !strings.Contains(string(first), "Acme GmbH and its customer") {
		t.Errorf("request 4 lost chunk 0's text, read three turns before: %s", first)
	}
}

// The turns are bounded by the chunk count: a run that never finishes
// ends invalid at the limit.
func TestAgentTurnLimit(t *testing.T) {
	t.Parallel()
	job := agentJob(t, fixpoint.Limits{})
	m := startDoc(t, job, nil)
	act := m.Next()
	n := 0
	for !act.Done() {
		n++
		_, act = m.Feed(act.Requests[0], agentCalls(agentCall(fmt.Sprint("c", n), fixpoint.ToolReadChunk, `{"n":0}`)), nil, time.Now())
		if n > 100 {
			t.Fatal("no turn limit")
		}
	}
	r := m.Result()
	if r.Status != fixpoint.StatusInvalid || !strings.Contains(r.Error, "turns") || n < 8 {
		t.Errorf("after %d turns: %s %q; want invalid at the turn limit", n, r.Status, r.Error)
	}
}

// Strict offers the full schema as set_output's parameters and refuses a
// value that lacks a required property at once.
func TestAgentStrict(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{Strict: true}), nil)
	reqs := agentRun(t, m,
		agentCalls(agentCall("a", fixpoint.ToolSetOutput, `{"party":"Acme GmbH"}`)),
		agentCalls(agentCall("b", fixpoint.ToolFail, `{"reason":"x"}`)),
	)
	if !strings.Contains(string(reqs[0].Tools[0].Parameters), `"required"`) {
		t.Errorf("strict set_output parameters %s, want the full schema", reqs[0].Tools[0].Parameters)
	}
	if res := toolResults(reqs[1]); len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content, "term") {
		t.Errorf("strict set_output of a partial value: %+v; want refused naming term", res)
	}
}

// A job the agent cannot run is refused as a bad job.
func TestAgentBadJobs(t *testing.T) {
	t.Parallel()
	job := agentJob(t, fixpoint.Limits{})
	job.Document = ""
	_, err := repair.StartDocument(job, nil, repair.Config{})
	if !errors.Is(err, fixpoint.ErrBadJob) {
		t.Errorf("no document: %v, want ErrBadJob", err)
	}
	job = agentJob(t, fixpoint.Limits{})
	job.SchemaRaw = []byte(`{"type":"array","items":{"type":"string"}}`)
	if job.Schema, err = validate.Compile(job.SchemaRaw); err != nil {
		t.Fatal(err)
	}
	if _, err := repair.StartDocument(job, nil, repair.Config{}); !errors.Is(err, fixpoint.ErrBadJob) || !strings.Contains(err.Error(), "array") {
		t.Errorf("an array schema: %v, want ErrBadJob naming the type", err)
	}
	job = agentJob(t, fixpoint.Limits{})
	job.Mode = fixpoint.ModeJSONSchema
	if _, err := repair.StartDocument(job, nil, repair.Config{}); !errors.Is(err, fixpoint.ErrBadJob) {
		t.Errorf("mode json_schema: %v, want ErrBadJob", err)
	}
}

// A finish error inside an item of a keyed list names the item by its
// key: the model put items, not indexes of the merged list.
func TestAgentFinishNamesItemsByKey(t *testing.T) {
	t.Parallel()
	raw := `{"type":"object","properties":{"items":{"type":"array","x-fixpoint-key":"name","items":{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name","n"]}}},"required":["items"]}`
	job := agentJob(t, fixpoint.Limits{})
	job.SchemaRaw = []byte(raw)
	var err error
	if job.Schema, err = validate.Compile(job.SchemaRaw); err != nil {
		t.Fatal(err)
	}
	m := startDoc(t, job, nil)
	reqs := agentRun(t, m,
		agentCalls(agentCall("a", fixpoint.ToolSetOutput, `{"items":[{"name":"Alpha Ltd","n":1}]}`),
			agentCall("b", fixpoint.ToolUpdateOutput, `{"items":[{"name":"Beta \"SA\""}]}`), agentCall("c", fixpoint.ToolFinish, `{}`)),
		agentCalls(agentCall("d", fixpoint.ToolFail, `{"reason":"x"}`)),
	)
	res := toolResults(reqs[1])
	if len(res) != 3 || !res[2].IsError || !strings.Contains(res[2].Content, `/items/1/n: `) || !strings.Contains(res[2].Content, `(in the item with name "Beta \"SA\"")`) {
		t.Fatalf("finish result %+v; want /items/1/n named with its item's key", res)
	}
}

// Outstanding is the attempt of the request out, with no reply, and
// changes nothing; Stop ends the run with the driver's status.
func TestAgentOutstandingAndStop(t *testing.T) {
	t.Parallel()
	m := startDoc(t, agentJob(t, fixpoint.Limits{}), nil)
	req := m.Next().Requests[0]
	a := m.Outstanding(req, time.Now())
	if a == nil || a.Step != fixpoint.StepAgent || a.ProviderClass != fixpoint.ClassInFlight || a.No != 1 {
		t.Fatalf("outstanding attempt %+v; want attempt 1 of step agent, in flight", a)
	}
	if m.Outstanding(&fixpoint.Request{}, time.Now()) != nil {
		t.Error("a request that is not out has an outstanding attempt")
	}
	if len(m.Result().Attempts) != 0 {
		t.Error("Outstanding recorded an attempt")
	}
	m.Stop(fixpoint.StatusOverBudget, fixpoint.OutcomeBudget, "spend cap reached")
	if r := m.Result(); !m.Next().Done() || r.Status != fixpoint.StatusOverBudget || r.Class != fixpoint.OutcomeBudget {
		t.Errorf("after Stop: %s %q, want over_budget, budget, done", r.Status, r.Class)
	}
}
