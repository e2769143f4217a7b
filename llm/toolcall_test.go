package llm

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// In tool mode only a call of the tool asked for is the answer: a call of
// another function was taken as one (OpenAI: the first call; Anthropic: a
// tool_use of any name over a valid text block). Arguments sent as a JSON
// object instead of a string (some compatible servers) are read as that
// JSON: they failed to decode, and the paid reply was retried as a bad
// response.
func TestToolCallsOfOtherTools(t *testing.T) {
	t.Parallel()
	req := &fixpoint.Request{Model: "m", Mode: fixpoint.ModeTool, SchemaName: "respond"}
	for _, tc := range []struct {
		name   string
		decode func([]byte, *fixpoint.Request, *fixpoint.Response) error
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
		var out fixpoint.Response
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
	var out fixpoint.Response
	err := decodeOpenAI([]byte(`{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"type":"function","function":{"name":7}}]},"finish_reason":"tool_calls"}]}`), &fixpoint.Request{Model: "m"}, &out)
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "function.name is a JSON") {
		t.Errorf("err = %v; want a brief error naming the field", err)
	}
}

// A 2xx body that cannot be decoded was made and billed: it is one call,
// never retried inside Complete (each retry was paid for again, unseen),
// charged the usage it reports when that can be read and be true, else by
// estimate from the request and the body's length.
func TestBilledUsageOfBodiesThatDoNotDecode(t *testing.T) {
	t.Parallel()
	withUsage := `{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"type":"function","function":{"name":7}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":50}}}`
	huge := `{"model":"m","choices":[],"usage":{"prompt_tokens":5000000,"completion_tokens":5000000}}`
	good := `{"model":"m","choices":[{"message":{"content":"{}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":5}}`
	req := hello
	req.MaxTokens = 100
	est := func(body string) fixpoint.Usage { return fixpoint.EstimateUsage(&req, int64(len(body))) }
	for _, tc := range []struct {
		name, body string
		want       fixpoint.Usage
		note       string
	}{
		{"usage readable", withUsage, fixpoint.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 50}, "charged as reported"},
		{"no usage", `<html>bad gateway</html>`, est(`<html>bad gateway</html>`), "no usage could be read"},
		{"cut short", withUsage[:60], est(withUsage[:60]), "no usage could be read"},
		{"usage beyond the request", huge, est(huge), "over the request's max_tokens"},
	} {
		h, calls := script(replyJSON(200, tc.body), replyJSON(200, good))
		srv := httptest.NewServer(h)
		c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, Clock: newFakeClock(true),
			Retry: RetryConfig{NoJitter: true, InitialInterval: time.Millisecond, MaxRetries: 2}})
		_, err := c.Complete(context.Background(), req)
		srv.Close()
		var e *fixpoint.ProviderError
		if !errors.As(err, &e) || e.Class != fixpoint.ClassBadResponse || !e.Replied() || e.Billed != tc.want || len(e.Retries) != 0 {
			t.Errorf("%s: err %v, billed %+v; want one replied bad_response billed %+v", tc.name, err, e, tc.want)
			continue
		}
		if calls.Load() != 1 {
			t.Errorf("%s: %d requests; want 1 (a paid reply is not asked for again inside the call)", tc.name, calls.Load())
		}
		if !strings.Contains(e.Message, tc.note) || e.Size != int64(len(tc.body)) || e.Head != tc.body {
			t.Errorf("%s: message %q, size %d, head %q; want the note %q and the body", tc.name, e.Message, e.Size, e.Head, tc.note)
		}
	}
}
