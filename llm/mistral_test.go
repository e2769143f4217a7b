package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// mistralBody is what Mistral's chat completions take: a field outside it
// is refused with a 422.
type mistralBody struct {
	Model          string          `json:"model"`
	Messages       json.RawMessage `json:"messages"`
	Temperature    *float64        `json:"temperature"`
	TopP           *float64        `json:"top_p"`
	MaxTokens      *int            `json:"max_tokens"`
	Stream         bool            `json:"stream"`
	Stop           json.RawMessage `json:"stop"`
	RandomSeed     *int            `json:"random_seed"`
	ResponseFormat json.RawMessage `json:"response_format"`
	Tools          json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	N              *int            `json:"n"`
	SafePrompt     bool            `json:"safe_prompt"`
}

// mistralServer answers as Mistral does: a 422 naming the first field it
// does not know, else a completion. It reads the body the recorder kept.
func mistralServer(rec **recorder) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		reqs := (*rec).requests()
		mistralReply(w, r, reqs[len(reqs)-1].Body)
	}
}

func mistralReply(w http.ResponseWriter, r *http.Request, body []byte) {
	var b mistralBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		field, _ := strings.CutPrefix(err.Error(), "json: unknown field ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body",%s],"msg":"Extra inputs are not permitted"}]},"type":"invalid_request_error","param":null,"code":null}`, field)
		return
	}
	replyJSON(200, `{"id":"x","object":"chat.completion","model":"mistral-small-latest","choices":[{"index":0,"message":{"role":"assistant","content":"{\"name\":\"Ada\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`)(w, r)
}

// Mistral refuses body fields it does not know with a 422: in every mode
// its requests carry no user and no prompt_cache_key, and are taken,
// where the same request to openai's row is refused by such a server.
func TestMistralSendsNoFieldItRefuses(t *testing.T) {
	t.Parallel()
	temp := 0.2
	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
	for _, mode := range []fixpoint.Mode{fixpoint.ModePrompt, fixpoint.ModeJSONSchema, fixpoint.ModeTool} {
		req := fixpoint.Request{Model: "mistral-small-latest", System: "be exact", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}},
			MaxTokens: 300, Temperature: &temp, User: "job-7", CacheKey: "fixpoint-abc", Mode: mode}
		if mode != fixpoint.ModePrompt {
			req.Schema = schema
		}
		for provider, taken := range map[string]bool{"mistral": true, ProviderOpenAI: false} {
			var rec *recorder
			rec = newRecorder(t, mistralServer(&rec))
			c := testClient(t, Config{Provider: provider, BaseURL: rec.srv.URL + "/v1", APIKey: "mk-123456789", Retry: RetryConfig{Disabled: true}})
			resp, err := c.Complete(context.Background(), req)
			if taken != (err == nil) {
				t.Errorf("%s %s: error %v, want taken %v", provider, mode, err, taken)
				continue
			}
			body := rec.requests()[0].Body
			if !taken {
				continue
			}
			var top map[string]any
			_ = json.Unmarshal(body, &top)
			if _, u := top[FieldUser]; u || top[FieldPromptCacheKey] != nil {
				t.Errorf("mistral %s sent %s", mode, body)
			}
			if resp.Text != `{"name":"Ada"}` {
				t.Errorf("mistral %s: reply %q", mode, resp.Text)
			}
		}
	}
}
