package llm_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
)

// A client for an OpenAI-compatible server (here a stand-in), asking for
// output that matches a schema with strict structured outputs.
func ExampleClient_Complete() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Request-Id", "req_123")
		io.WriteString(w, `{"model":"gpt-4o-mini","choices":[{"message":{"content":"{\"name\":\"Ada\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":42,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":32}}}`)
	}))
	defer srv.Close()

	c, err := llm.New(llm.Config{Provider: llm.ProviderOpenAI, BaseURL: srv.URL + "/v1", Lane: llm.LaneConfig{RPM: 500}})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := c.Complete(context.Background(), fixpoint.Request{
		Model:    "gpt-4o-mini",
		System:   "Extract the person.",
		Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "Ada Lovelace wrote the first program."}},
		Mode:     fixpoint.ModeJSONSchema,
		Schema:   []byte(`{"type":"object","properties":{"name":{"type":"string","minLength":1}},"required":["name"]}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text, resp.FinishReason, resp.Usage.InputTokens, resp.Usage.CachedInputTokens, resp.RequestID)
	fmt.Println("not sent:", resp.DroppedKeywords)
	// Output:
	// {"name":"Ada"} stop 42 32 req_123
	// not sent: [/properties/name/minLength]
}
