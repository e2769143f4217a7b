package llm

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// agentTools are two of the agent's tools, as a request offers them.
var agentTools = []fixpoint.Tool{
	{Name: fixpoint.ToolSetOutput, Description: "Set the output.", Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)},
	{Name: fixpoint.ToolFinish, Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
}

// agentConversation is a three-turn tool conversation: the task, an
// assistant turn with text and two calls, their results (one an error),
// and the user's words after them.
func agentConversation() []fixpoint.Message {
	return []fixpoint.Message{
		{Role: fixpoint.RoleUser, Content: "Extract the person."},
		{Role: fixpoint.RoleAssistant, Content: "Setting it.", ToolCalls: []fixpoint.ToolCall{
			{ID: "call_1", Name: fixpoint.ToolSetOutput, Arguments: `{"name":"Ada"}`},
			{ID: "call_2", Name: fixpoint.ToolFinish, Arguments: `{}`},
		}},
		{Role: fixpoint.RoleTool, ToolCallID: "call_1", Content: "ok"},
		{Role: fixpoint.RoleTool, ToolCallID: "call_2", Content: "/age: missing", IsError: true},
		{Role: fixpoint.RoleUser, Content: "Fix it."},
	}
}

// Each wire format carries the tools, the calls with their ids and the
// results naming them: OpenAI tool turns with tool_call_id (an error
// said in the content, there being no flag), Anthropic tool_use blocks
// answered by tool_result blocks with tool_use_id and is_error in one
// user turn with the words after them, Ollama's calls with object
// arguments and results naming the tool.
func TestToolConversationBodies(t *testing.T) {
	t.Parallel()
	req := fixpoint.Request{Model: "m1", System: "be exact", Messages: agentConversation(), Tools: agentTools, MaxTokens: 100}
	setOutput := `{"type":"object","properties":{"name":{"type":"string"}}}`
	finish := `{"type":"object","properties":{}}`
	for _, tc := range []struct {
		provider, reply, want string
	}{
		{ProviderOpenAI, okOpenAI, `{"model":"m1","max_tokens":100,"messages":[
			{"role":"system","content":"be exact"},
			{"role":"user","content":"Extract the person."},
			{"role":"assistant","content":"Setting it.","tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"set_output","arguments":"{\"name\":\"Ada\"}"}},
				{"id":"call_2","type":"function","function":{"name":"finish","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"ok"},
			{"role":"tool","tool_call_id":"call_2","content":"Error: /age: missing"},
			{"role":"user","content":"Fix it."}],
			"tools":[{"type":"function","function":{"name":"set_output","description":"Set the output.","parameters":` + setOutput + `}},
				{"type":"function","function":{"name":"finish","parameters":` + finish + `}}]}`},
		{ProviderAnthropic, okAnthropic, `{"model":"m1","max_tokens":100,"system":"be exact","messages":[
			{"role":"user","content":"Extract the person."},
			{"role":"assistant","content":[{"type":"text","text":"Setting it."},
				{"type":"tool_use","id":"call_1","name":"set_output","input":{"name":"Ada"}},
				{"type":"tool_use","id":"call_2","name":"finish","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"ok"},
				{"type":"tool_result","tool_use_id":"call_2","content":"/age: missing","is_error":true},
				{"type":"text","text":"Fix it."}]}],
			"tools":[{"name":"set_output","description":"Set the output.","input_schema":` + setOutput + `},{"name":"finish","input_schema":` + finish + `}]}`},
		{ProviderOllama, okOllama, `{"model":"m1","stream":false,"options":{"num_predict":100},"messages":[
			{"role":"system","content":"be exact"},
			{"role":"user","content":"Extract the person."},
			{"role":"assistant","content":"Setting it.","tool_calls":[
				{"function":{"name":"set_output","arguments":{"name":"Ada"}}},{"function":{"name":"finish","arguments":{}}}]},
			{"role":"tool","content":"ok","tool_name":"set_output"},
			{"role":"tool","content":"Error: /age: missing","tool_name":"finish"},
			{"role":"user","content":"Fix it."}],
			"tools":[{"type":"function","function":{"name":"set_output","description":"Set the output.","parameters":` + setOutput + `}},
				{"type":"function","function":{"name":"finish","parameters":` + finish + `}}]}`},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, replyJSON(200, tc.reply))
			base := rec.srv.URL
			if tc.provider == ProviderOpenAI {
				base += "/v1"
			}
			c := testClient(t, Config{Provider: tc.provider, BaseURL: base})
			if _, err := c.Complete(context.Background(), req); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			jsonEqual(t, rec.requests()[0].Body, tc.want)
		})
	}
}

// An assistant turn of calls only sends OpenAI content null, as the API
// documents for tool calls without text.
func TestToolCallsWithoutTextSendNullContent(t *testing.T) {
	t.Parallel()
	msgs := agentConversation()[:4]
	msgs[1].Content = ""
	rec := newRecorder(t, replyJSON(200, okOpenAI))
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL})
	if _, err := c.Complete(context.Background(), fixpoint.Request{Model: "m", Messages: msgs, Tools: agentTools}); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(rec.requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if v, ok := body.Messages[1]["content"]; !ok || v != nil {
		t.Errorf("assistant content = %v (present %v), want null", v, ok)
	}
}

// The tool choice on each wire format: auto sends nothing (each API's
// default), required is OpenAI "required" and Anthropic {"type":"any"},
// a named tool is each API's forced function; Ollama cannot force a
// call and sends none.
func TestToolChoiceBodies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider string
		choice   fixpoint.ToolChoice
		want     any // the body's tool_choice; nil: absent
	}{
		{ProviderOpenAI, fixpoint.ToolChoice{}, nil},
		{ProviderOpenAI, fixpoint.ToolChoice{Required: true}, "required"},
		{ProviderOpenAI, fixpoint.ToolChoice{Name: "finish"}, map[string]any{"type": "function", "function": map[string]any{"name": "finish"}}},
		{ProviderOpenAI, fixpoint.ToolChoice{Required: true, Name: "finish"}, map[string]any{"type": "function", "function": map[string]any{"name": "finish"}}},
		{ProviderAnthropic, fixpoint.ToolChoice{}, nil},
		{ProviderAnthropic, fixpoint.ToolChoice{Required: true}, map[string]any{"type": "any"}},
		{ProviderAnthropic, fixpoint.ToolChoice{Name: "finish"}, map[string]any{"type": "tool", "name": "finish"}},
		{ProviderOllama, fixpoint.ToolChoice{Required: true}, nil},
		{ProviderOllama, fixpoint.ToolChoice{Name: "finish"}, nil},
	} {
		reply := map[string]string{ProviderOpenAI: okOpenAI, ProviderAnthropic: okAnthropic, ProviderOllama: okOllama}[tc.provider]
		rec := newRecorder(t, replyJSON(200, reply))
		c := testClient(t, Config{Provider: tc.provider, BaseURL: rec.srv.URL})
		req := fixpoint.Request{Model: "m", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}, Tools: agentTools, ToolChoice: tc.choice}
		if _, err := c.Complete(context.Background(), req); err != nil {
			t.Fatalf("%s %+v: %v", tc.provider, tc.choice, err)
		}
		var body map[string]any
		if err := json.Unmarshal(rec.requests()[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		if got := body["tool_choice"]; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %+v: tool_choice = %v, want %v", tc.provider, tc.choice, got, tc.want)
		}
		if tools, _ := body["tools"].([]any); len(tools) != 2 {
			t.Errorf("%s: %d tools sent, want 2", tc.provider, len(tools))
		}
	}
}

// The published tool-call replies, asked with tools offered, give every
// call with the provider's id (OpenAI call_..., Anthropic toolu_...), in
// order, parallel calls included; Ollama's, which have none, get ids
// made from the conversation's turn and the call's place.
func TestWireToolCallsWithIDs(t *testing.T) {
	t.Parallel()
	fixtures := loadFixtures(t)
	for _, tc := range []struct {
		fixture string
		text    string
		want    []fixpoint.ToolCall
	}{
		{"openai_tool_call", "", []fixpoint.ToolCall{{ID: "call_abc123", Name: "get_current_weather", Arguments: "{\n\"location\": \"Boston, MA\"\n}"}}},
		{"openai_tool_calls_parallel", "", []fixpoint.ToolCall{
			{ID: "call_fdNz3vOBKYgOIpMdWotB9MjY", Name: "GetWeatherArgs", Arguments: `{"city": "Edinburgh", "country": "GB", "units": "c"}`},
			{ID: "call_h1DWI1POMJLb0KwIyQHWXD4p", Name: "get_stock_price", Arguments: `{"ticker": "AAPL", "exchange": "NASDAQ"}`}}},
		{"anthropic_tool_use", "I'll get the current weather in San Francisco for you in Fahrenheit.", []fixpoint.ToolCall{
			{ID: "toolu_01TZR6ZrLHdpAWdmhVPuDfjQ", Name: "get_weather", Arguments: `{"city":"San Francisco","units":"fahrenheit"}`}}},
		{"ollama_chat_tool_call", "", []fixpoint.ToolCall{{ID: "ollama_call_1_0", Name: "get_weather", Arguments: `{"city":"Tokyo"}`}}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			fx := fixtures[tc.fixture]
			srv := serveFixture(t, fx, fx.wireBytes(t))
			base := srv.URL
			if fx.Provider == ProviderOpenAI {
				base += "/v1"
			}
			c := testClient(t, Config{Provider: fx.Provider, BaseURL: base, Retry: RetryConfig{Disabled: true}})
			// One earlier assistant turn: Ollama's made-up ids count it.
			msgs := []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "weather?"}, {Role: fixpoint.RoleAssistant, Content: "Which city?"}, {Role: fixpoint.RoleUser, Content: "all of them"}}
			resp, err := c.Complete(context.Background(), fixpoint.Request{Model: "m", Messages: msgs, Tools: agentTools})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(resp.ToolCalls, tc.want) || resp.Text != tc.text || resp.FinishReason != fixpoint.FinishTool {
				t.Errorf("calls %+v, text %q, finish %s\nwant %+v, %q, tool", resp.ToolCalls, resp.Text, resp.FinishReason, tc.want, tc.text)
			}
			for _, call := range resp.ToolCalls {
				if err := call.CheckArguments(); err != nil {
					t.Errorf("CheckArguments: %v", err)
				}
			}
			// Usage, model and request id are read as without tools.
			plain, err := c.Complete(context.Background(), fixpoint.Request{Model: "m", Messages: msgs})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != plain.Usage || resp.Usage.InputTokens == 0 || resp.Model != plain.Model || resp.RequestID != plain.RequestID {
				t.Errorf("usage %+v, model %q, id %q; without tools %+v, %q, %q", resp.Usage, resp.Model, resp.RequestID, plain.Usage, plain.Model, plain.RequestID)
			}
		})
	}
}

// Offered no tools (ModeTool, ModePrompt), a reply's calls are read as
// before: the forced tool's arguments in Text, ToolCalls empty.
func TestToolModeResponseUnchanged(t *testing.T) {
	t.Parallel()
	fx := loadFixtures(t)["openai_tool_calls_parallel"]
	srv := serveFixture(t, fx, fx.wireBytes(t))
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL + "/v1"})
	resp, err := c.Complete(context.Background(), fixpoint.Request{Model: "m", Mode: fixpoint.ModeTool, Schema: json.RawMessage(`{"type":"object"}`), SchemaName: "get_stock_price",
		Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ToolCalls != nil || resp.Text != `{"ticker": "AAPL", "exchange": "NASDAQ"}` {
		t.Errorf("tool calls %+v, text %q; want none and the forced tool's arguments", resp.ToolCalls, resp.Text)
	}
}

// Arguments that are not a JSON object are returned as written (the reply
// was billed and its other calls stand), and CheckArguments says what is
// wrong, naming the call; such a call cannot be sent back to Anthropic or
// Ollama, which take arguments as objects, and the request is refused
// before it is sent, naming the turn.
func TestMalformedToolArguments(t *testing.T) {
	t.Parallel()
	reply := `{"model":"m","choices":[{"message":{"content":null,"tool_calls":[
		{"id":"call_a","type":"function","function":{"name":"set_output","arguments":"{\"name\": \"Ada"}},
		{"id":"call_b","type":"function","function":{"name":"finish","arguments":"{}"}}]},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":9}}`
	rec := newRecorder(t, replyJSON(200, reply))
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL})
	req := fixpoint.Request{Model: "m", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}, Tools: agentTools}
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].Arguments != `{"name": "Ada` || resp.FinishReason != fixpoint.FinishLength || resp.Usage.OutputTokens != 9 {
		t.Fatalf("calls %+v, finish %s, usage %+v", resp.ToolCalls, resp.FinishReason, resp.Usage)
	}
	err = resp.ToolCalls[0].CheckArguments()
	if err == nil || !strings.Contains(err.Error(), "tool call call_a (set_output): arguments are not valid JSON") {
		t.Errorf("CheckArguments = %v; want it to name the call and say the JSON is cut", err)
	}
	if err := resp.ToolCalls[1].CheckArguments(); err != nil {
		t.Errorf("the other call: %v", err)
	}

	req.Messages = append(req.Messages, fixpoint.Message{Role: fixpoint.RoleAssistant, ToolCalls: resp.ToolCalls},
		fixpoint.Message{Role: fixpoint.RoleTool, ToolCallID: "call_a", Content: "bad", IsError: true},
		fixpoint.Message{Role: fixpoint.RoleTool, ToolCallID: "call_b", Content: "bad", IsError: true})
	for _, p := range []string{ProviderAnthropic, ProviderOllama} {
		rec := newRecorder(t, replyJSON(200, okAnthropic))
		c := testClient(t, Config{Provider: p, BaseURL: rec.srv.URL})
		_, err := c.Complete(context.Background(), req)
		var e *fixpoint.ProviderError
		if !errors.As(err, &e) || e.Class != fixpoint.ClassBadRequest || !strings.Contains(e.Message, "messages[1]: tool call call_a (set_output): arguments are not valid JSON") {
			t.Errorf("%s: err = %v; want a bad request naming the turn and the call", p, err)
		}
		if n := len(rec.requests()); n != 0 {
			t.Errorf("%s: %d requests sent, want none", p, n)
		}
	}
}

// A request whose tools or tool turns a provider would refuse is refused
// before it is sent, with what is wrong in the request's own terms.
func TestToolRequestErrors(t *testing.T) {
	t.Parallel()
	user := fixpoint.Message{Role: fixpoint.RoleUser, Content: "hi"}
	call := fixpoint.Message{Role: fixpoint.RoleAssistant, ToolCalls: []fixpoint.ToolCall{{ID: "c1", Name: "finish", Arguments: "{}"}}}
	obj := json.RawMessage(`{"type":"object"}`)
	for _, tc := range []struct {
		name string
		req  fixpoint.Request
		want string
	}{
		{"tools in tool mode", fixpoint.Request{Mode: fixpoint.ModeTool, Schema: obj, Tools: agentTools}, "tools are offered with mode prompt only"},
		{"choice without tools", fixpoint.Request{ToolChoice: fixpoint.ToolChoice{Required: true}}, "tool_choice is set but no tools are offered"},
		{"choice of a tool not offered", fixpoint.Request{Tools: agentTools, ToolChoice: fixpoint.ToolChoice{Name: "search"}}, `tool_choice names "search"`},
		{"bad name", fixpoint.Request{Tools: []fixpoint.Tool{{Name: "set output", Parameters: obj}}}, `tools[0]: name "set output" has ' '`},
		{"empty name", fixpoint.Request{Tools: []fixpoint.Tool{{Parameters: obj}}}, `tools[0]: name "" must be 1 to 64 characters`},
		{"twice", fixpoint.Request{Tools: []fixpoint.Tool{{Name: "a", Parameters: obj}, {Name: "a", Parameters: obj}}}, `tools[1]: name "a" is offered twice`},
		{"parameters not an object", fixpoint.Request{Tools: []fixpoint.Tool{{Name: "a", Parameters: json.RawMessage(`[]`)}}}, "tools[0] (a): parameters must be a JSON Schema object"},
		{"no parameters", fixpoint.Request{Tools: []fixpoint.Tool{{Name: "a"}}}, "tools[0] (a): parameters must be a JSON Schema object"},
		{"result without id", fixpoint.Request{Tools: agentTools, Messages: []fixpoint.Message{user, call, {Role: fixpoint.RoleTool, Content: "ok"}}}, "messages[2]: a tool result needs tool_call_id"},
		{"result of no call", fixpoint.Request{Tools: agentTools, Messages: []fixpoint.Message{user, call, {Role: fixpoint.RoleTool, ToolCallID: "c2"}}}, `messages[2]: tool result for "c2", a call no earlier assistant turn made`},
		{"call without id", fixpoint.Request{Tools: agentTools, Messages: []fixpoint.Message{user, {Role: fixpoint.RoleAssistant, ToolCalls: []fixpoint.ToolCall{{Name: "finish"}}}}}, "messages[1].tool_calls[0] (finish): the call has no id"},
		{"id twice", fixpoint.Request{Tools: agentTools, Messages: []fixpoint.Message{user, call, call}}, `messages[2].tool_calls[0]: id "c1" is used twice`},
		{"user makes calls", fixpoint.Request{Tools: agentTools, Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, ToolCalls: call.ToolCalls}}}, "messages[0]: only an assistant turn makes tool calls, not a user turn"},
		{"is_error on a user turn", fixpoint.Request{Tools: agentTools, Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "x", IsError: true}}}, "messages[0]: tool_call_id and is_error belong to a tool result"},
	} {
		rec := newRecorder(t, replyJSON(200, okOpenAI))
		c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL})
		tc.req.Model = "m"
		if tc.req.Messages == nil {
			tc.req.Messages = []fixpoint.Message{user}
		}
		_, err := c.Complete(context.Background(), tc.req)
		var e *fixpoint.ProviderError
		if !errors.As(err, &e) || e.Class != fixpoint.ClassBadRequest || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s: err = %v; want a bad request saying %q", tc.name, err, tc.want)
		}
		if len(rec.requests()) != 0 {
			t.Errorf("%s: the request was sent", tc.name)
		}
	}
}

// A call's arguments, like the reply's text, never carry the API key back.
func TestToolCallsRedacted(t *testing.T) {
	t.Parallel()
	key := "sk-secret-0123456789"
	reply := `{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"set_output","arguments":"{\"k\":\"` + key + `\"}"}}]},"finish_reason":"tool_calls"}]}`
	rec := newRecorder(t, replyJSON(200, reply))
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL, APIKey: key})
	resp, err := c.Complete(context.Background(), fixpoint.Request{Model: "m", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}, Tools: agentTools})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || strings.Contains(resp.ToolCalls[0].Arguments, "secret") {
		t.Errorf("calls %+v; want the key redacted", resp.ToolCalls)
	}
}

// A refused reply's calls are not an answer, as its text is not.
func TestRefusalDropsToolCalls(t *testing.T) {
	t.Parallel()
	var out fixpoint.Response
	body := `{"model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"set_output","input":{"a":1}}],"stop_reason":"refusal","usage":{"input_tokens":3,"output_tokens":2}}`
	if err := decodeAnthropic([]byte(body), &fixpoint.Request{Model: "m", Tools: agentTools}, &out); err != nil {
		t.Fatal(err)
	}
	if out.ToolCalls != nil || out.FinishReason != fixpoint.FinishRefusal || out.Refusal == "" {
		t.Errorf("calls %+v, finish %s, refusal %q; want no calls and a refusal", out.ToolCalls, out.FinishReason, out.Refusal)
	}
}
