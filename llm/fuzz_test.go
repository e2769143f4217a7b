package llm

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// FuzzDecode feeds arbitrary bodies to the three decoders, for a request
// with tools and one without, and the error parser: they may reject a
// body but must not panic, a refusal never carries answer text or calls,
// and a request without tools gets no calls. Seeded from the published
// fixtures.
func FuzzDecode(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.wireBytes(f))
	}
	f.Add([]byte(`{"choices":[{"message":{"content":[{"type":"text","text":"a"}]}}]}`))
	f.Add([]byte(`{"content":[{"type":"tool_use","input":null}],"stop_reason":"refusal"}`))
	f.Add([]byte(`{"model":"m","message":{"content":"","tool_calls":[{"function":{"name":"a","arguments":"{"}},{"id":"x","function":{"name":"b","arguments":{}}}]},"done":true}`))
	req := &fixpoint.Request{Model: "m", SchemaName: "get_weather"}
	withTools := &fixpoint.Request{Model: "m", Tools: agentTools, Messages: agentConversation()}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dec := range []func([]byte, *fixpoint.Request, *fixpoint.Response) error{decodeOpenAI, decodeAnthropic, decodeOllama} {
			for _, r := range []*fixpoint.Request{req, withTools} {
				var out fixpoint.Response
				err := dec(body, r, &out)
				if err == nil && out.FinishReason == fixpoint.FinishRefusal && (out.Refusal == "" || out.ToolCalls != nil) {
					t.Fatalf("refusal without a refusal message, or with calls: %+v", out)
				}
				if err == nil && r == req && out.ToolCalls != nil {
					t.Fatalf("tool calls of a request that offered no tools: %+v", out)
				}
			}
		}
		pe := parseProviderError(body)
		classify(WireOpenAIChat, 429, http.Header{}, pe, time.Now(), demand{input: 100, output: 100})
		messageHint(pe.Message)
	})
}

// FuzzStrictSchema: the strict transform never panics, returns JSON, and is
// a fixed point: what it sends in strict mode it would send unchanged.
func FuzzStrictSchema(f *testing.F) {
	for _, s := range selfReferentSchemas {
		f.Add(s)
	}
	f.Add(`{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"$ref":"#"}]}},"additionalProperties":{"$ref":"#"}}`)
	f.Add(`{"type":"object","properties":{"a":{},"b":{}},"required":["a","a"],"$defs":{"x":{"items":[{"$ref":"#"}]}}}`)
	f.Add(nested(maxStrictDepth + 1))
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return // Complete refuses it before the transform
		}
		out, _, strict, err := strictSchema(json.RawMessage(in))
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
		if !strict {
			return
		}
		again, dropped, strict2, err := strictSchema(out)
		if err != nil || !strict2 || len(dropped) != 0 || string(again) != string(out) {
			t.Fatalf("not a fixed point: %s\nbecame %s (dropped %v, strict %v, %v)", out, again, dropped, strict2, err)
		}
	})
}
