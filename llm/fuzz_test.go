package llm

import (
	"net/http"
	"testing"
	"time"
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
	req := &Request{Model: "m", SchemaName: "get_weather"}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dec := range []func([]byte, *Request, *Response) error{decodeOpenAI, decodeAnthropic, decodeOllama} {
			var out Response
			if err := dec(body, req, &out); err == nil && out.FinishReason == FinishRefusal && out.Refusal == "" {
				t.Fatalf("refusal without a refusal message: %+v", out)
			}
		}
		pe := parseProviderError(body)
		classify(ProviderOpenAI, 429, http.Header{}, pe, time.Now(), demand{input: 100, output: 100})
		messageHint(pe.Message)
	})
}
