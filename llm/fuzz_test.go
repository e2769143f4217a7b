package llm

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// FuzzDecode feeds arbitrary bodies to the three decoders and the error
// parser: they may reject a body but must not panic, and a refusal never
// carries answer text. Seeded from the published fixtures.
func FuzzDecode(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.wireBytes(f))
	}
	f.Add([]byte(`{"choices":[{"message":{"content":[{"type":"text","text":"a"}]}}]}`))
	f.Add([]byte(`{"content":[{"type":"tool_use","input":null}],"stop_reason":"refusal"}`))
	req := &fixpoint.Request{Model: "m", SchemaName: "get_weather"}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dec := range []func([]byte, *fixpoint.Request, *fixpoint.Response) error{decodeOpenAI, decodeAnthropic, decodeOllama} {
			var out fixpoint.Response
			if err := dec(body, req, &out); err == nil && out.FinishReason == fixpoint.FinishRefusal && out.Refusal == "" {
				t.Fatalf("refusal without a refusal message: %+v", out)
			}
		}
		pe := parseProviderError(body)
		classify(ProviderOpenAI, 429, http.Header{}, pe, time.Now(), demand{input: 100, output: 100})
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
