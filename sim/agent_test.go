package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/sim"
)

const (
	agentSchema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"required":["name","age"],"additionalProperties":false}`
	agentTask   = "Extract the person: Ada Park, aged 36."
)

// agentRequest is an agent strategy's first request: the schema between
// the markers in the system prompt, and the agent's six tools.
func agentRequest() fixpoint.Request {
	obj := func(props string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
	}
	return fixpoint.Request{
		Model:     "m",
		System:    "Build the output with the tools.\n" + fixpoint.SchemaMarkerOpen + "\n" + agentSchema + "\n" + fixpoint.SchemaMarkerClose,
		Messages:  []fixpoint.Message{{Role: fixpoint.RoleUser, Content: agentTask}},
		MaxTokens: 1000,
		Tools: []fixpoint.Tool{
			{Name: fixpoint.ToolSetOutput, Description: "Set the whole output.", Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"additionalProperties":false}`)},
			{Name: fixpoint.ToolUpdateOutput, Parameters: obj(`"name":{"type":"string"},"age":{"type":"integer"}`)},
			{Name: fixpoint.ToolReadChunk, Parameters: obj(`"n":{"type":"integer"}`)},
			{Name: fixpoint.ToolSearch, Parameters: obj(`"text":{"type":"string"}`)},
			{Name: fixpoint.ToolFinish, Parameters: obj(``)},
			{Name: fixpoint.ToolFail, Parameters: obj(`"reason":{"type":"string"}`)},
		},
	}
}

// answer appends resp's turn and a result for each of its calls.
func answer(req *fixpoint.Request, resp *fixpoint.Response, result func(fixpoint.ToolCall) (string, bool)) {
	req.Messages = append(req.Messages, fixpoint.Message{Role: fixpoint.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls})
	for _, c := range resp.ToolCalls {
		content, isErr := result(c)
		req.Messages = append(req.Messages, fixpoint.Message{Role: fixpoint.RoleTool, ToolCallID: c.ID, Content: content, IsError: isErr})
	}
}

func callNames(calls []fixpoint.ToolCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Name)
	}
	return out
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, s)
	}
	return v
}

// A three-turn tool conversation through the real client, over HTTP, on
// each wire format: the first reply calls set_output with the truth and
// finish in parallel; with finish refused, the second calls them again;
// with both accepted, the third says it is done. The provider's ids come
// back (Ollama's made up by the client) and go out again with the
// results: the simulator answers 400, as the providers do, when a result
// names no call of the turn before.
func TestAgentToolConversation(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var bodies []string
			record := func(_ int, r *http.Request) *sim.ScriptedReply {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
				return nil
			}
			s, c := simClient(t, provider, sim.Config{Seed: 1, Script: record}, llm.Config{Retry: llm.RetryConfig{Disabled: true}})
			truth, err := s.Truth(sim.TaskKey("", agentTask), []byte(agentSchema), agentTask)
			if err != nil {
				t.Fatal(err)
			}
			truthJSON, _ := json.Marshal(truth)
			req := agentRequest()
			var ids []string
			for turn := range 3 {
				resp, err := c.Complete(context.Background(), req)
				if err != nil {
					t.Fatalf("turn %d: %v", turn, err)
				}
				if turn == 2 {
					if len(resp.ToolCalls) != 0 || resp.Text == "" || resp.FinishReason != fixpoint.FinishStop {
						t.Fatalf("turn 2: calls %v, text %q, finish %s; want a text saying it is done", callNames(resp.ToolCalls), resp.Text, resp.FinishReason)
					}
					break
				}
				if got := callNames(resp.ToolCalls); !reflect.DeepEqual(got, []string{fixpoint.ToolSetOutput, fixpoint.ToolFinish}) || resp.FinishReason != fixpoint.FinishTool {
					t.Fatalf("turn %d: calls %v, finish %s; want set_output and finish in one reply", turn, got, resp.FinishReason)
				}
				if got := decodeJSON(t, resp.ToolCalls[0].Arguments); !reflect.DeepEqual(got, decodeJSON(t, string(truthJSON))) {
					t.Errorf("turn %d: set_output %s, want the truth %s", turn, resp.ToolCalls[0].Arguments, truthJSON)
				}
				for i, call := range resp.ToolCalls {
					ids = append(ids, call.ID)
					if provider == llm.ProviderOllama && call.ID != "ollama_call_"+string(rune('0'+turn))+"_"+string(rune('0'+i)) {
						t.Errorf("turn %d: Ollama call %d has id %q", turn, i, call.ID)
					}
				}
				answer(&req, resp, func(call fixpoint.ToolCall) (string, bool) {
					if call.Name == fixpoint.ToolFinish && turn == 0 {
						return "/age: must be checked again", true
					}
					return "ok", false
				})
			}
			seen := map[string]bool{}
			prefix := map[string]string{llm.ProviderOpenAI: "call_", llm.ProviderAnthropic: "toolu_01", llm.ProviderOllama: "ollama_call_"}[provider]
			for _, id := range ids {
				if seen[id] || !strings.HasPrefix(id, prefix) || len(id) <= len(prefix) {
					t.Errorf("ids %v: want four distinct ids starting %q", ids, prefix)
					break
				}
				seen[id] = true
			}
			if n := s.Stats().Requests; n != 3 {
				t.Errorf("%d requests, want 3", n)
			}
			// The ids as each wire format names a result's call.
			resultKey := map[string]string{llm.ProviderOpenAI: `"tool_call_id":"`, llm.ProviderAnthropic: `"tool_use_id":"`}[provider]
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != 3 {
				t.Fatalf("%d request bodies recorded, want 3", len(bodies))
			}
			for i, id := range ids {
				if resultKey != "" && !strings.Contains(bodies[1+i/2], resultKey+id+`"`) {
					t.Errorf("request %d does not send %s%s\": %s", 2+i/2, resultKey, id, bodies[1+i/2])
				}
			}
		})
	}
}

// A turn of calls not all answered by the results after it is refused
// as the provider refuses it, naming the call left unanswered: the ids
// the client sends back are the ones the simulator checks.
func TestAgentUnansweredCallRefused(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			_, c := simClient(t, provider, sim.Config{Seed: 1}, llm.Config{Retry: llm.RetryConfig{Disabled: true}})
			req := agentRequest()
			resp, err := c.Complete(context.Background(), req)
			if err != nil || len(resp.ToolCalls) != 2 {
				t.Fatalf("first turn: %v, %+v", err, resp)
			}
			req.Messages = append(req.Messages, fixpoint.Message{Role: fixpoint.RoleAssistant, ToolCalls: resp.ToolCalls},
				fixpoint.Message{Role: fixpoint.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: "ok"})
			_, err = c.Complete(context.Background(), req)
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, resp.ToolCalls[1].ID) {
				t.Fatalf("err = %v; want a 400 naming %s", err, resp.ToolCalls[1].ID)
			}
		})
	}
}

// A prose fault, drawn from the mix, answers the JSON as text instead of
// a tool call, for a driver to nudge; a request that requires a call
// gets set_output and finish. Ollama cannot be sent the requirement: its
// nudged turn draws the fault afresh, which a mix of 1 draws again.
func TestAgentTextAnswerThenNudge(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			_, c := simClient(t, provider, sim.Config{Seed: 1, Mix: sim.Mix{Prose: 1}}, llm.Config{Retry: llm.RetryConfig{Disabled: true}})
			req := agentRequest()
			resp, err := c.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ToolCalls) != 0 || !strings.Contains(resp.Text, `"name"`) || resp.FinishReason != fixpoint.FinishStop {
				t.Fatalf("calls %v, text %q, finish %s; want the JSON as text", callNames(resp.ToolCalls), resp.Text, resp.FinishReason)
			}
			req.Messages = append(req.Messages, fixpoint.Message{Role: fixpoint.RoleAssistant, Content: resp.Text},
				fixpoint.Message{Role: fixpoint.RoleUser, Content: "Call set_output with the value, then finish."})
			req.ToolChoice = fixpoint.ToolChoice{Required: true}
			resp, err = c.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{fixpoint.ToolSetOutput, fixpoint.ToolFinish}
			if provider == llm.ProviderOllama {
				want = nil
			}
			if got := callNames(resp.ToolCalls); !reflect.DeepEqual(got, want) {
				t.Fatalf("after the nudge: calls %v, text %q; want %v", got, resp.Text, want)
			}
		})
	}
}

// A refusal calls fail with a reason; a truncation cuts set_output's
// arguments on OpenAI (a string the client returns as written, which
// CheckArguments reports) and leaves the call empty or out where the
// arguments are an object.
func TestAgentRefusalAndTruncation(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			_, c := simClient(t, provider, sim.Config{Seed: 1, Mix: sim.Mix{Refusal: 1}}, llm.Config{Retry: llm.RetryConfig{Disabled: true}})
			resp, err := c.Complete(context.Background(), agentRequest())
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != fixpoint.ToolFail || !strings.Contains(resp.ToolCalls[0].Arguments, sim.RefusalText[:20]) {
				t.Errorf("refusal: calls %+v; want fail with the reason", resp.ToolCalls)
			}

			_, c = simClient(t, provider, sim.Config{Seed: 1, Mix: sim.Mix{Truncation: 1}}, llm.Config{Retry: llm.RetryConfig{Disabled: true}})
			resp, err = c.Complete(context.Background(), agentRequest())
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != fixpoint.FinishLength {
				t.Errorf("truncation: finish %s, want length", resp.FinishReason)
			}
			switch provider {
			case llm.ProviderOpenAI:
				if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].CheckArguments() == nil ||
					!strings.Contains(resp.ToolCalls[0].CheckArguments().Error(), "arguments are not valid JSON") {
					t.Errorf("truncation: calls %+v; want set_output with cut arguments", resp.ToolCalls)
				}
			case llm.ProviderAnthropic:
				if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Arguments != "{}" {
					t.Errorf("truncation: calls %+v; want set_output with an empty input", resp.ToolCalls)
				}
			case llm.ProviderOllama:
				if len(resp.ToolCalls) != 0 {
					t.Errorf("truncation: calls %+v; want none", resp.ToolCalls)
				}
			}
		})
	}
}

// The value set on a first turn carries the mix's content faults; a turn
// after a finish error naming the faulty places sets the corrected value
// (FixProb 1).
func TestAgentCorrectsWhatTheResultNames(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			s, c := simClient(t, provider, sim.Config{Seed: 3, Mix: sim.Mix{WrongType: 1}, FixProb: 1}, llm.Config{Retry: llm.RetryConfig{Disabled: true}})
			truth, err := s.Truth(sim.TaskKey("", agentTask), []byte(agentSchema), agentTask)
			if err != nil {
				t.Fatal(err)
			}
			req := agentRequest()
			resp, err := c.Complete(context.Background(), req)
			if err != nil || len(resp.ToolCalls) != 2 {
				t.Fatalf("first turn: %v, %+v", err, resp)
			}
			got := decodeJSON(t, resp.ToolCalls[0].Arguments).(map[string]any)
			want := decodeJSON(t, mustJSON(t, truth)).(map[string]any)
			var errs []string
			for k, v := range want {
				if !reflect.DeepEqual(got[k], v) {
					errs = append(errs, "/"+k+": wrong type")
				}
			}
			if len(errs) == 0 {
				t.Fatalf("first turn's value %v is the truth; want a wrong type in it", got)
			}
			answer(&req, resp, func(call fixpoint.ToolCall) (string, bool) {
				if call.Name == fixpoint.ToolFinish {
					return strings.Join(errs, "\n"), true
				}
				return "ok", false
			})
			resp, err = c.Complete(context.Background(), req)
			if err != nil || len(resp.ToolCalls) != 2 {
				t.Fatalf("second turn: %v, %+v", err, resp)
			}
			if got := decodeJSON(t, resp.ToolCalls[0].Arguments); !reflect.DeepEqual(got, any(want)) {
				t.Errorf("second turn's value %s, want the truth %v (first %s)", resp.ToolCalls[0].Arguments, want, errs)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
