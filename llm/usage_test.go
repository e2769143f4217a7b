package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// usageReq is a request whose input estimate is known: 400 bytes of
// prompt, 100 tokens.
var usageReq = fixpoint.Request{Model: "m", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: strings.Repeat("x", 400)}}, MaxTokens: 50}

// TestImplausibleUsageChargedByEstimate: usage no call can have (negative,
// over fixpoint.MaxCallTokens, more cached than input), in a realtime reply
// of each provider, in an undecodable 2xx body and in a batch result, is
// replaced by the estimate (the request's input, a quarter of the reply)
// and the reported counts are kept in a note. With a TPM budget on the
// lane, 10^18 reported tokens do not hold the limiter.
func TestImplausibleUsageChargedByEstimate(t *testing.T) {
	t.Parallel()
	const text = `{"name":"Ann","age":30}` // 23 bytes: 6 output tokens by estimate
	est := fixpoint.Usage{InputTokens: 100, OutputTokens: 6}
	oa := func(usage string) string {
		return `{"id":"x","model":"m","choices":[{"message":{"content":` + fmt.Sprintf("%q", text) + `},"finish_reason":"stop"}],"usage":` + usage + `}`
	}
	tests := []struct {
		name, provider, body, reported string
		want                           fixpoint.Usage
	}{
		{"openai negative", ProviderOpenAI, oa(`{"prompt_tokens":-1000000,"completion_tokens":-99999999}`), "input -1000000, output -99999999", est},
		{"openai 10^18", ProviderOpenAI, oa(`{"prompt_tokens":1000000000000000000,"completion_tokens":1000000000000000000}`), "input 1000000000000000000", est},
		{"openai cached over input", ProviderOpenAI, oa(`{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":500}}`), "cached 500", est},
		{"openai plausible stands", ProviderOpenAI, oa(`{"prompt_tokens":120,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":64}}`), "",
			fixpoint.Usage{InputTokens: 120, OutputTokens: 9, CachedInputTokens: 64}},
		{"anthropic negative", ProviderAnthropic, `{"id":"x","model":"m","content":[{"type":"text","text":` + fmt.Sprintf("%q", text) + `}],"stop_reason":"end_turn","usage":{"input_tokens":-5,"output_tokens":7}}`, "input -5", est},
		// Counts that are no integer leave the reply readable: it was
		// made and billed, and its text stands, charged by estimate.
		{"openai 1e300", ProviderOpenAI, oa(`{"prompt_tokens":1e300,"completion_tokens":9}`), "prompt_tokens 1e300", est},
		{"openai float", ProviderOpenAI, oa(`{"prompt_tokens":120.5,"completion_tokens":9}`), "prompt_tokens 120.5", est},
		{"openai string", ProviderOpenAI, oa(`{"prompt_tokens":"120","completion_tokens":9}`), `prompt_tokens "120"`, est},
		{"anthropic object", ProviderAnthropic, `{"id":"x","model":"m","content":[{"type":"text","text":` + fmt.Sprintf("%q", text) + `}],"stop_reason":"end_turn","usage":{"input_tokens":{"n":5},"output_tokens":7}}`, `input_tokens {"n":5}`, est},
		// Within fixpoint.MaxCallTokens, but more than the request could
		// have cost: over its max_tokens of 50, or input past its bytes.
		{"openai output over max_tokens", ProviderOpenAI, oa(`{"prompt_tokens":120,"completion_tokens":5000000}`), "output tokens 5000000 over the request's max_tokens 50", est},
		{"openai input past the request", ProviderOpenAI, oa(`{"prompt_tokens":5000000,"completion_tokens":9}`), "input tokens 5000000 over", est},
		{"ollama over the bound", ProviderOllama, `{"model":"m","message":{"role":"assistant","content":` + fmt.Sprintf("%q", text) + `},"done":true,"done_reason":"stop","prompt_eval_count":12,"eval_count":20000000}`, "output 20000000", est},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := countingServer(t, replyJSON(200, tt.body))
			c := testClient(t, Config{Provider: tt.provider, BaseURL: baseFor(tt.provider, srv.URL), APIKey: "sk-usage-test-key",
				Lane: LaneConfig{TPM: 100_000}})
			done := make(chan struct{})
			var resp *fixpoint.Response
			var err error
			go func() {
				defer close(done)
				resp, err = c.Complete(context.Background(), usageReq)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Complete did not return: the reported usage held the lane's token budget")
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if resp.Usage != tt.want {
				t.Errorf("usage %+v, want %+v", resp.Usage, tt.want)
			}
			if tt.reported == "" {
				if resp.UsageAnomaly != "" {
					t.Errorf("plausible usage noted as an anomaly: %s", resp.UsageAnomaly)
				}
				return
			}
			if !strings.Contains(resp.UsageAnomaly, "usage anomaly") || !strings.Contains(resp.UsageAnomaly, tt.reported) {
				t.Errorf("anomaly note %q does not keep the reported %q", resp.UsageAnomaly, tt.reported)
			}
		})
	}

	t.Run("undecodable body billed", func(t *testing.T) {
		t.Parallel()
		srv, _ := countingServer(t, replyJSON(200, `{"choices":"not a list","usage":{"prompt_tokens":-7,"completion_tokens":3}}`))
		c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: baseFor(ProviderOpenAI, srv.URL), Retry: RetryConfig{Disabled: true}})
		_, err := c.Complete(context.Background(), usageReq)
		var e *fixpoint.ProviderError
		if !errors.As(err, &e) || e.Class != fixpoint.ClassBadResponse {
			t.Fatalf("err %v, want a bad_response", err)
		}
		if e.Billed.InputTokens != 100 || e.Billed.OutputTokens < 0 || !strings.Contains(e.Message, "input -7") {
			t.Errorf("billed %+v, message %q; want the estimate, the reported counts in the message", e.Billed, e.Message)
		}
	})

	t.Run("batch result", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{ProviderOpenAI, ProviderAnthropic} {
			c := testClient(t, Config{Provider: p, BaseURL: "http://127.0.0.1:1"})
			rs := &resultSink{c: c, request: func(string) (fixpoint.Request, bool) { return usageReq, true }}
			body := oa(`{"prompt_tokens":-1000000,"completion_tokens":-99999999}`)
			if p == ProviderAnthropic {
				body = `{"id":"x","model":"m","content":[{"type":"text","text":` + fmt.Sprintf("%q", text) + `}],"stop_reason":"end_turn","usage":{"input_tokens":1000000000000000000,"output_tokens":1}}`
			}
			r := rs.decode("j1", []byte(body), 200, "req-1")
			if r.Err != nil {
				t.Fatalf("%s: decode: %v", p, r.Err)
			}
			if r.Response.Usage != est || !strings.Contains(r.Response.UsageAnomaly, "usage anomaly") {
				t.Errorf("%s: usage %+v, note %q; want %+v and a note", p, r.Response.Usage, r.Response.UsageAnomaly, est)
			}
		}
	})
}
