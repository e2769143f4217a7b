package llm

import (
	"strings"
	"testing"
)

// In tool mode only a call of the tool asked for is the answer: a call of
// another function was taken as one (OpenAI: the first call; Anthropic: a
// tool_use of any name over a valid text block). Arguments sent as a JSON
// object instead of a string (some compatible servers) are read as that
// JSON: they failed to decode, and the paid reply was retried as a bad
// response.
func TestToolCallsOfOtherTools(t *testing.T) {
	t.Parallel()
	req := &Request{Model: "m", Mode: ModeTool, SchemaName: "respond"}
	for _, tc := range []struct {
		name   string
		decode func([]byte, *Request, *Response) error
		body   string
		want   string
	}{
		{"openai other tool", decodeOpenAI, `{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"type":"function","function":{"name":"other_tool","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`, ""},
		{"openai ours after another", decodeOpenAI, `{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"type":"function","function":{"name":"other","arguments":"{}"}},{"type":"function","function":{"name":"respond","arguments":"{\"a\":2}"}}]},"finish_reason":"tool_calls"}]}`, `{"a":2}`},
		{"openai arguments as an object", decodeOpenAI, `{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"type":"function","function":{"name":"respond","arguments":{"name":"a","age":1}}}]},"finish_reason":"tool_calls"}]}`, `{"name":"a","age":1}`},
		{"anthropic other tool and text", decodeAnthropic, `{"model":"m","content":[{"type":"text","text":"{\"a\":3}"},{"type":"tool_use","name":"other","input":{"a":4}}],"stop_reason":"tool_use"}`, `{"a":3}`},
		{"anthropic ours", decodeAnthropic, `{"model":"m","content":[{"type":"tool_use","name":"other","input":{"a":4}},{"type":"tool_use","name":"respond","input":{"a":5}}],"stop_reason":"tool_use"}`, `{"a":5}`},
		{"ollama other tool", decodeOllama, `{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"other","arguments":{"a":6}}}]},"done":true,"done_reason":"stop"}`, ""},
	} {
		var out Response
		if err := tc.decode([]byte(tc.body), req, &out); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if out.Text != tc.want {
			t.Errorf("%s: text %q, want %q", tc.name, out.Text, tc.want)
		}
	}
}

// A body field of another JSON type than the API's is named briefly (the
// error named the Go struct type: 2 KB stored as provider_error).
func TestDecodeTypeErrorIsBrief(t *testing.T) {
	t.Parallel()
	var out Response
	err := decodeOpenAI([]byte(`{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"type":"function","function":{"name":7}}]},"finish_reason":"tool_calls"}]}`), &Request{Model: "m"}, &out)
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "function.name is a JSON") {
		t.Errorf("err = %v; want a brief error naming the field", err)
	}
}
