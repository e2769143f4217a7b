package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// captured is one request seen by a test server.
type captured struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// recorder is an httptest server that records requests and answers with
// respond (default: status 200 and body).
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []captured
}

func newRecorder(t *testing.T, respond http.HandlerFunc) *recorder {
	t.Helper()
	r := &recorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, captured{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Body: body})
		r.mu.Unlock()
		respond(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) requests() []captured {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]captured(nil), r.reqs...)
}

func replyJSON(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// testClient builds a client for provider against url with retries off and
// an auto-advancing fake clock unless cfg says otherwise.
func testClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = newFakeClock(true)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("request body is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("request body\n got: %s\nwant: %s", got, want)
	}
}

const (
	okOpenAI    = `{"id":"x","model":"m-reported","choices":[{"message":{"content":"{}","tool_calls":[{"function":{"name":"result","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
	okAnthropic = `{"id":"x","model":"m-reported","content":[{"type":"text","text":"{}"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`
	okOllama    = `{"model":"m-reported","message":{"role":"assistant","content":"{}"},"done":true,"done_reason":"stop","prompt_eval_count":1,"eval_count":1}`
)

func TestWireRequest(t *testing.T) {
	t.Parallel()
	temp := 0.2
	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1},"age":{"type":"integer","minimum":0}},"required":["name"]}`)
	strict := `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"required":["age","name"],"additionalProperties":false}`
	base := fixpoint.Request{Model: "m1", System: "be exact", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}, MaxTokens: 300, Temperature: &temp, User: "job-7", SchemaName: "person"}
	with := func(mode fixpoint.Mode) fixpoint.Request {
		r := base
		r.Mode = mode
		if mode != fixpoint.ModePrompt {
			r.Schema = schema
		}
		return r
	}
	tests := []struct {
		name       string
		cfg        Config
		req        fixpoint.Request
		reply      string
		wantPath   string
		wantHeader map[string]string // "" value: header must be absent
		wantBody   string
		wantDrop   []string
	}{
		{
			name: "openai prompt no key", cfg: Config{Provider: ProviderOpenAI}, req: with(fixpoint.ModePrompt), reply: okOpenAI,
			wantPath:   "/v1/chat/completions",
			wantHeader: map[string]string{"Authorization": "", "Content-Type": "application/json"},
			wantBody:   `{"model":"m1","messages":[{"role":"system","content":"be exact"},{"role":"user","content":"hi"}],"temperature":0.2,"max_tokens":300,"user":"job-7"}`,
		},
		{
			name: "openai json_schema strict", cfg: Config{Provider: ProviderOpenAI, APIKey: "sk-1"}, req: with(fixpoint.ModeJSONSchema), reply: okOpenAI,
			wantPath:   "/v1/chat/completions",
			wantHeader: map[string]string{"Authorization": "Bearer sk-1"},
			wantBody: `{"model":"m1","messages":[{"role":"system","content":"be exact"},{"role":"user","content":"hi"}],"temperature":0.2,"max_tokens":300,"user":"job-7",
				"response_format":{"type":"json_schema","json_schema":{"name":"person","strict":true,"schema":` + strict + `}}}`,
			wantDrop: []string{"/properties/name/minLength", "/required"},
		},
		{
			name: "openai tool forced", cfg: Config{Provider: ProviderOpenAI, APIKey: "sk-1"}, req: with(fixpoint.ModeTool), reply: okOpenAI,
			wantPath: "/v1/chat/completions",
			wantBody: `{"model":"m1","messages":[{"role":"system","content":"be exact"},{"role":"user","content":"hi"}],"temperature":0.2,"max_tokens":300,"user":"job-7",
				"tools":[{"type":"function","function":{"name":"person","description":"` + toolDescription + `","parameters":` + strict + `,"strict":true}}],
				"tool_choice":{"type":"function","function":{"name":"person"}}}`,
			wantDrop: []string{"/properties/name/minLength", "/required"},
		},
		{
			name: "openai max_completion_tokens", cfg: Config{Provider: ProviderOpenAI, OpenAIMaxTokensParam: "max_completion_tokens"}, req: with(fixpoint.ModePrompt), reply: okOpenAI,
			wantPath: "/v1/chat/completions",
			wantBody: `{"model":"m1","messages":[{"role":"system","content":"be exact"},{"role":"user","content":"hi"}],"temperature":0.2,"max_completion_tokens":300,"user":"job-7"}`,
		},
		{
			name: "anthropic prompt", cfg: Config{Provider: ProviderAnthropic, APIKey: "ak-1"}, req: with(fixpoint.ModePrompt), reply: okAnthropic,
			wantPath:   "/v1/messages",
			wantHeader: map[string]string{"X-Api-Key": "ak-1", "Anthropic-Version": "2023-06-01", "Authorization": ""},
			wantBody:   `{"model":"m1","max_tokens":300,"system":"be exact","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"metadata":{"user_id":"job-7"}}`,
		},
		{
			name: "anthropic default max_tokens and system moved out of messages", cfg: Config{Provider: ProviderAnthropic, AnthropicVersion: "2024-01-01"},
			req: fixpoint.Request{Model: "m1", Messages: []fixpoint.Message{{Role: "system", Content: "sys"}, {Role: fixpoint.RoleUser, Content: "hi"}}}, reply: okAnthropic,
			wantPath:   "/v1/messages",
			wantHeader: map[string]string{"X-Api-Key": "", "Anthropic-Version": "2024-01-01"},
			wantBody:   `{"model":"m1","max_tokens":1024,"system":"sys","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "anthropic tool forced", cfg: Config{Provider: ProviderAnthropic, APIKey: "ak-1"}, req: with(fixpoint.ModeTool), reply: okAnthropic,
			wantPath: "/v1/messages",
			wantBody: `{"model":"m1","max_tokens":300,"system":"be exact","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"metadata":{"user_id":"job-7"},
				"tools":[{"name":"person","description":"` + toolDescription + `","input_schema":` + string(schema) + `}],"tool_choice":{"type":"tool","name":"person"}}`,
		},
		{
			// Structured outputs' subset: no minLength, no minimum, every
			// object closed; optional properties stay optional.
			name: "anthropic json_schema as output_config", cfg: Config{Provider: ProviderAnthropic, APIKey: "ak-1"}, req: with(fixpoint.ModeJSONSchema), reply: okAnthropic,
			wantPath: "/v1/messages",
			wantBody: `{"model":"m1","max_tokens":300,"system":"be exact","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"metadata":{"user_id":"job-7"},
				"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"],"additionalProperties":false}}}}`,
			wantDrop: []string{"/properties/age/minimum", "/properties/name/minLength"},
		},
		{
			name: "anthropic json_schema to a model before structured outputs falls back to tool", cfg: Config{Provider: ProviderAnthropic, APIKey: "ak-1"},
			req: func() fixpoint.Request {
				r := with(fixpoint.ModeJSONSchema)
				r.Model = "claude-sonnet-4-20250514"
				return r
			}(), reply: okAnthropic,
			wantPath: "/v1/messages",
			wantBody: `{"model":"claude-sonnet-4-20250514","max_tokens":300,"system":"be exact","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"metadata":{"user_id":"job-7"},
				"tools":[{"name":"person","description":"` + toolDescription + `","input_schema":` + string(schema) + `}],"tool_choice":{"type":"tool","name":"person"}}`,
		},
		{
			name: "ollama prompt", cfg: Config{Provider: ProviderOllama}, req: with(fixpoint.ModePrompt), reply: okOllama,
			wantPath:   "/api/chat",
			wantHeader: map[string]string{"Authorization": ""},
			wantBody:   `{"model":"m1","messages":[{"role":"system","content":"be exact"},{"role":"user","content":"hi"}],"stream":false,"options":{"temperature":0.2,"num_predict":300}}`,
		},
		{
			name: "ollama json_schema format", cfg: Config{Provider: ProviderOllama}, req: with(fixpoint.ModeJSONSchema), reply: okOllama,
			wantPath: "/api/chat",
			wantBody: `{"model":"m1","messages":[{"role":"system","content":"be exact"},{"role":"user","content":"hi"}],"stream":false,"format":` + string(schema) + `,"options":{"temperature":0.2,"num_predict":300}}`,
		},
		{
			name: "ollama tool", cfg: Config{Provider: ProviderOllama}, req: with(fixpoint.ModeTool), reply: okOllama,
			wantPath: "/api/chat",
			wantBody: `{"model":"m1","messages":[{"role":"system","content":"be exact"},{"role":"user","content":"hi"}],"stream":false,
				"tools":[{"type":"function","function":{"name":"person","description":"` + toolDescription + `","parameters":` + string(schema) + `}}],"options":{"temperature":0.2,"num_predict":300}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, replyJSON(200, tt.reply))
			cfg := tt.cfg
			cfg.BaseURL = rec.srv.URL
			if WireOf(cfg.Provider) == WireOpenAIChat {
				cfg.BaseURL += "/v1"
			}
			c := testClient(t, cfg)
			resp, err := c.Complete(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			reqs := rec.requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			got := reqs[0]
			if got.Method != http.MethodPost || got.Path != tt.wantPath {
				t.Fatalf("got %s %s, want POST %s", got.Method, got.Path, tt.wantPath)
			}
			for k, v := range tt.wantHeader {
				if g := got.Header.Get(k); g != v {
					t.Errorf("header %s = %q, want %q", k, g, v)
				}
			}
			jsonEqual(t, got.Body, tt.wantBody)
			if !reflect.DeepEqual(resp.DroppedKeywords, tt.wantDrop) {
				t.Errorf("DroppedKeywords = %v, want %v", resp.DroppedKeywords, tt.wantDrop)
			}
			if resp.Model != "m-reported" {
				t.Errorf("Model = %q, want the reported m-reported", resp.Model)
			}
		})
	}
}

// fixture is one file of testdata/wire (see testdata/wire/README.md).
type fixture struct {
	Name        string            `json:"name"`
	Provider    string            `json:"provider"`
	Status      int               `json:"status"`
	Headers     map[string]string `json:"headers"`
	Body        json.RawMessage   `json:"body"`
	RequestHint struct {
		Mode string `json:"mode"`
	} `json:"request_hint"`
}

// wireBytes returns the bytes the replay server would send: a string body
// verbatim, a JSON value compacted.
func (f *fixture) wireBytes(t testing.TB) []byte {
	t.Helper()
	var s string
	if json.Unmarshal(f.Body, &s) == nil {
		return []byte(s)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, f.Body); err != nil {
		t.Fatalf("compact %s: %v", f.Name, err)
	}
	return b.Bytes()
}

func loadFixtures(t testing.TB) map[string]*fixture {
	t.Helper()
	files, err := filepath.Glob("testdata/wire/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	out := make(map[string]*fixture, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx fixture
		if err := json.Unmarshal(data, &fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[fx.Name] = &fx
	}
	return out
}

// serveFixture answers every request with fx, headers applied as recorded.
func serveFixture(t *testing.T, fx *fixture, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		for k, v := range fx.Headers {
			if strings.EqualFold(k, "content-length") {
				continue
			}
			w.Header().Set(k, v)
		}
		w.WriteHeader(fx.Status)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWireFixtures(t *testing.T) {
	t.Parallel()
	type want struct {
		schemaName string // tool fixtures: the tool we forced
		set        func(body map[string]any)

		class      fixpoint.ErrorClass
		code       string
		retryAfter time.Duration

		text      string
		refusal   string
		finish    fixpoint.FinishReason
		usage     fixpoint.Usage
		model     string
		requestID string
		rateLimit map[string]string
		// tier is the service tier the reply says it served.
		tier string
	}
	openaiRL := map[string]string{
		"x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "150000",
		"x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984",
		"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s",
	}
	tests := map[string]want{
		"openai_text_basic":                    {text: "Hello! How can I assist you today?", finish: fixpoint.FinishStop, usage: fixpoint.Usage{InputTokens: 19, OutputTokens: 10, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "gpt-5.4", rateLimit: openaiRL, tier: "default"},
		"openai_flex_reply":                    {text: "Hello! How can I assist you today?", finish: fixpoint.FinishStop, usage: fixpoint.Usage{InputTokens: 19, OutputTokens: 10}, model: "gpt-5.4", tier: "flex"},
		"openai_429_flex_resource_unavailable": {class: fixpoint.ClassCapacity, code: "resource_unavailable"},
		"openai_text_forum_capture":            {text: "This is a test!", finish: fixpoint.FinishStop, usage: fixpoint.Usage{InputTokens: 13, OutputTokens: 5, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "gpt-4-0613", requestID: "req_deaa3616cbd15d33b4db96b3ba74d2b4"},
		"openai_text_cached_usage":             {text: "Hello! How can I assist you today?", finish: fixpoint.FinishStop, usage: fixpoint.Usage{InputTokens: 2006, OutputTokens: 300, CachedInputTokens: 1920, CacheWriteTokens: 0}, model: "gpt-5.4", tier: "default"},
		"openai_json_schema":                   {text: `{"city":"San Francisco","temperature":65,"units":"f"}`, finish: fixpoint.FinishStop, usage: fixpoint.Usage{InputTokens: 79, OutputTokens: 14, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "gpt-4o-2024-08-06"},
		"openai_refusal":                       {refusal: "I'm very sorry, but I can't assist with that.", finish: fixpoint.FinishRefusal, usage: fixpoint.Usage{InputTokens: 79, OutputTokens: 12, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "gpt-4o-2024-08-06"},
		"openai_length":                        {text: `{"`, finish: fixpoint.FinishLength, usage: fixpoint.Usage{InputTokens: 79, OutputTokens: 1, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "gpt-4o-2024-08-06"},
		"openai_tool_call":                     {schemaName: "get_current_weather", text: "{\n\"location\": \"Boston, MA\"\n}", finish: fixpoint.FinishTool, usage: fixpoint.Usage{InputTokens: 82, OutputTokens: 17, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "gpt-4o-mini"},
		"openai_tool_call_strict":              {schemaName: "GetWeatherArgs", text: `{"city":"Edinburgh","country":"UK","units":"c"}`, finish: fixpoint.FinishTool, usage: fixpoint.Usage{InputTokens: 76, OutputTokens: 24, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "gpt-4o-2024-08-06"},
		// The forced tool is the second call, not tool_calls[0].
		"openai_tool_calls_parallel":               {schemaName: "get_stock_price", text: `{"ticker": "AAPL", "exchange": "NASDAQ"}`, finish: fixpoint.FinishTool, usage: fixpoint.Usage{InputTokens: 149, OutputTokens: 60, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "gpt-4o-2024-08-06"},
		"openai_429_rate_limit_tpm":                {class: fixpoint.ClassRateLimited, code: "rate_limit_exceeded", retryAfter: 2 * time.Second},
		"openai_429_rate_limit_tpd_no_retry_after": {class: fixpoint.ClassRateLimited, code: "rate_limit_exceeded", retryAfter: 12441 * time.Millisecond},
		"openai_429_insufficient_quota":            {class: fixpoint.ClassQuotaExhausted, code: "insufficient_quota"},
		"openai_400_context_length_exceeded":       {class: fixpoint.ClassBadRequest, code: "context_length_exceeded"},
		"openai_401_invalid_api_key":               {class: fixpoint.ClassAuth, code: "invalid_api_key"},
		"openai_500_server_error":                  {class: fixpoint.ClassServer, code: "server_error"},

		"anthropic_text": {text: "The current temperature in San Francisco is 68 degrees Fahrenheit.", finish: fixpoint.FinishStop, usage: fixpoint.Usage{InputTokens: 514, OutputTokens: 19, CachedInputTokens: 0, CacheWriteTokens: 0},
			model: "claude-3-7-sonnet-20250219", requestID: "req_011CUdgeLbdAHJifhfifciof"},
		"anthropic_tool_use": {schemaName: "get_weather", text: `{"city":"San Francisco","units":"fahrenheit"}`, finish: fixpoint.FinishTool, usage: fixpoint.Usage{InputTokens: 402, OutputTokens: 89, CachedInputTokens: 0, CacheWriteTokens: 0},
			model: "claude-3-7-sonnet-20250219", requestID: "req_011CUdgeEZVNjY7M6qwNV9k6"},
		"anthropic_max_tokens":                 {text: "C", finish: fixpoint.FinishLength, usage: fixpoint.Usage{InputTokens: 42, OutputTokens: 1, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "claude-sonnet-4-5"},
		"anthropic_refusal_doc":                {refusal: "This request was declined because it could enable cyber harm.", finish: fixpoint.FinishRefusal},
		"anthropic_refusal_empty_content":      {refusal: "This request triggered cyber-related safeguards. To learn about the Cyber Verification Program and apply for access, visit our help center: ...", finish: fixpoint.FinishRefusal, usage: fixpoint.Usage{InputTokens: 2863, OutputTokens: 0, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "claude-sonnet-5"},
		"anthropic_429_rate_limit":             {class: fixpoint.ClassRateLimited, code: "rate_limit_error", retryAfter: 2 * time.Second, requestID: "req_011Ca6u66aLnUk1L2q2MSyRy"},
		"anthropic_429_rate_limit_itpm":        {class: fixpoint.ClassRateLimited, code: "rate_limit_error", retryAfter: 4 * time.Second},
		"anthropic_529_overloaded":             {class: fixpoint.ClassOverloaded, code: "overloaded_error"},
		"anthropic_500_api_error":              {class: fixpoint.ClassServer, code: "api_error", requestID: "req_011CcLLdL8STNSDEk7Wk9Z7L"},
		"anthropic_400_invalid_request":        {class: fixpoint.ClassBadRequest, code: "invalid_request_error"},
		"anthropic_400_credit_balance_too_low": {class: fixpoint.ClassQuotaExhausted, code: "invalid_request_error", requestID: "req_011CbrFTcXhtiMzr3s6EocF7"},
		"anthropic_401_authentication":         {class: fixpoint.ClassAuth, code: "authentication_error"},

		"ollama_chat_json":                {text: `{"age": 22, "available": false}`, finish: fixpoint.FinishStop, usage: fixpoint.Usage{InputTokens: 34, OutputTokens: 12, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "llama3.1"},
		"ollama_chat_text_no_done_reason": {text: "Hello! How are you today?", finish: fixpoint.FinishStop, usage: fixpoint.Usage{InputTokens: 26, OutputTokens: 298, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "llama3.2"},
		"ollama_chat_tool_call":           {schemaName: "get_weather", text: `{"city":"Tokyo"}`, finish: fixpoint.FinishTool, usage: fixpoint.Usage{InputTokens: 169, OutputTokens: 18, CachedInputTokens: 0, CacheWriteTokens: 0}, model: "llama3.2"},
		"ollama_404_model_not_found":      {class: fixpoint.ClassModelNotFound},
		"ollama_500_error_doc":            {class: fixpoint.ClassServer},
	}
	fixtures := loadFixtures(t)
	for name := range fixtures {
		if _, ok := tests[name]; !ok {
			t.Errorf("fixture %s has no expectation", name)
		}
	}
	for name, w := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fx, ok := fixtures[name]
			if !ok {
				t.Fatalf("fixture %s missing from testdata/wire", name)
			}
			srv := serveFixture(t, fx, fx.wireBytes(t))
			base := srv.URL
			if fx.Provider == ProviderOpenAI {
				base += "/v1"
			}
			c := testClient(t, Config{Provider: fx.Provider, BaseURL: base, APIKey: "k", Retry: RetryConfig{Disabled: true}})
			req := fixpoint.Request{Model: "m", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}, Mode: fixpoint.ModePrompt}
			switch fx.RequestHint.Mode {
			case "json_schema":
				req.Mode, req.Schema = fixpoint.ModeJSONSchema, json.RawMessage(`{"type":"object"}`)
			case "tool":
				req.Mode, req.Schema, req.SchemaName = fixpoint.ModeTool, json.RawMessage(`{"type":"object"}`), w.schemaName
			}
			resp, err := c.Complete(context.Background(), req)
			if w.class != "" {
				var e *fixpoint.ProviderError
				if !errors.As(err, &e) || !errors.Is(err, fixpoint.ErrProvider) {
					t.Fatalf("err = %v, want *Error of class %s", err, w.class)
				}
				if e.Class != w.class || e.Status != fx.Status || e.Code != w.code || e.RetryAfter != w.retryAfter || e.RequestID != w.requestID {
					t.Fatalf("got class=%s status=%d code=%q retryAfter=%v requestID=%q, want %s %d %q %v %q",
						e.Class, e.Status, e.Code, e.RetryAfter, e.RequestID, w.class, fx.Status, w.code, w.retryAfter, w.requestID)
				}
				if e.Message == "" {
					t.Errorf("error has no message")
				}
				if fx.Headers["retry-after"] != "" && e.RateLimit["retry-after"] != fx.Headers["retry-after"] {
					t.Errorf("RateLimit = %v, want retry-after recorded", e.RateLimit)
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if resp.Text != w.text || resp.Refusal != w.refusal || resp.FinishReason != w.finish || resp.Usage != w.usage ||
				resp.Model != w.model || resp.RequestID != w.requestID || resp.Status != 200 {
				t.Fatalf("got text=%q refusal=%q finish=%s usage=%+v model=%q requestID=%q status=%d\nwant text=%q refusal=%q finish=%s usage=%+v model=%q requestID=%q",
					resp.Text, resp.Refusal, resp.FinishReason, resp.Usage, resp.Model, resp.RequestID, resp.Status,
					w.text, w.refusal, w.finish, w.usage, w.model, w.requestID)
			}
			if w.rateLimit != nil && !reflect.DeepEqual(resp.RateLimit, w.rateLimit) {
				t.Errorf("RateLimit = %v, want %v", resp.RateLimit, w.rateLimit)
			}
			if resp.ServiceTier != w.tier {
				t.Errorf("ServiceTier = %q, want %q", resp.ServiceTier, w.tier)
			}
		})
	}
}

// TestWireAnthropicCacheHit replays anthropic_text with a cache hit, as the
// replay server's "set" would (the recorded bodies all have 0).
func TestWireAnthropicCacheHit(t *testing.T) {
	t.Parallel()
	fx := loadFixtures(t)["anthropic_text"]
	var body map[string]any
	if err := json.Unmarshal(fx.wireBytes(t), &body); err != nil {
		t.Fatal(err)
	}
	body["usage"].(map[string]any)["cache_read_input_tokens"] = 1800
	data, _ := json.Marshal(body)
	srv := serveFixture(t, fx, data)
	c := testClient(t, Config{Provider: ProviderAnthropic, BaseURL: srv.URL})
	resp, err := c.Complete(context.Background(), fixpoint.Request{Model: "m", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (fixpoint.Usage{InputTokens: 514 + 1800, OutputTokens: 19, CachedInputTokens: 1800}); resp.Usage != want {
		t.Fatalf("Usage = %+v, want %+v", resp.Usage, want)
	}
}
