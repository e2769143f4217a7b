package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type fixture struct {
	Name    string            `json:"name"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
	IsWire  bool              `json:"body_is_wire_text"`
}

func loadFixture(t *testing.T, name string) (fixture, any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", name+".json"))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("decode fixture %s: %v", name, err)
	}
	body := []byte(f.Body)
	if f.IsWire {
		var s string
		if err := json.Unmarshal(f.Body, &s); err != nil {
			t.Fatalf("fixture %s body: %v", name, err)
		}
		body = []byte(s)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("fixture %s body JSON: %v", name, err)
	}
	return f, v
}

// shapeDiff lists the keys of want (a published body) that got lacks or holds
// with another JSON type. Arrays are compared by their first elements; a null
// in either matches anything (optional values).
func shapeDiff(path string, want, got any) []string {
	if want == nil || got == nil {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %T, want object", path, got)}
		}
		var out []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				out = append(out, path+"/"+k+": missing")
				continue
			}
			out = append(out, shapeDiff(path+"/"+k, wv, gv)...)
		}
		slices.Sort(out)
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %T, want array", path, got)}
		}
		if len(w) == 0 || len(g) == 0 {
			return nil
		}
		// Content blocks are matched by their "type"; a published block
		// type the reply does not hold is skipped, but one must match.
		var out []string
		matched := false
		for i, we := range w {
			wm, ok := we.(map[string]any)
			if !ok || wm["type"] == nil {
				return shapeDiff(path+"/0", w[0], g[0])
			}
			for j, ge := range g {
				if gm, ok := ge.(map[string]any); ok && gm["type"] == wm["type"] {
					out = append(out, shapeDiff(fmt.Sprintf("%s/%d~%d", path, i, j), we, ge)...)
					matched = true
					break
				}
			}
		}
		if !matched {
			out = append(out, path+": no element of a published type")
		}
		return out
	}
	if fmt.Sprintf("%T", want) != fmt.Sprintf("%T", got) {
		return []string{fmt.Sprintf("%s: got %T, want %T", path, got, want)}
	}
	return nil
}

const weatherSchema = `{"type":"object","additionalProperties":false,"required":["city","temperature","units"],
"properties":{"city":{"type":"string"},"temperature":{"type":"number"},"units":{"type":"string","enum":["c","f"]}}}`

func weatherMessages() []map[string]any {
	return []map[string]any{
		{"role": "system", "content": "You extract weather reports."},
		{"role": "user", "content": "What's the weather like in SF?"},
	}
}

func TestWireShapesMatchFixtures(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(weatherSchema)
	tests := []struct {
		name    string
		fixture string
		path    string
		body    map[string]any
		// check asserts the reply's content beyond its shape.
		check func(t *testing.T, got map[string]any)
	}{
		{"openai-text", "openai_text_basic", "/v1/chat/completions",
			map[string]any{"model": "gpt-4o", "messages": weatherMessages()},
			func(t *testing.T, got map[string]any) {
				msg := got["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
				if s, _ := msg["content"].(string); s == "" {
					t.Errorf("content = %v, want prose", msg["content"])
				}
			}},
		{"openai-json-schema", "openai_json_schema", "/v1/chat/completions",
			map[string]any{"model": "gpt-4o", "messages": weatherMessages(),
				"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "weather", "schema": schema, "strict": true}}},
			func(t *testing.T, got map[string]any) {
				msg := got["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
				var v map[string]any
				if err := json.Unmarshal([]byte(msg["content"].(string)), &v); err != nil || v["city"] == nil {
					t.Errorf("content %v is not the weather object: %v", msg["content"], err)
				}
			}},
		{"openai-tool", "openai_tool_call_strict", "/chat/completions",
			map[string]any{"model": "gpt-4o", "messages": weatherMessages(),
				"tools":       []any{map[string]any{"type": "function", "function": map[string]any{"name": "GetWeatherArgs", "parameters": schema, "strict": true}}},
				"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "GetWeatherArgs"}}},
			func(t *testing.T, got map[string]any) {
				ch := got["choices"].([]any)[0].(map[string]any)
				tc := ch["message"].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
				if fn := tc["function"].(map[string]any); fn["name"] != "GetWeatherArgs" || !json.Valid([]byte(fn["arguments"].(string))) {
					t.Errorf("tool call = %v, want GetWeatherArgs with JSON arguments", fn)
				}
				if ch["finish_reason"] != "stop" {
					t.Errorf("finish_reason = %v, want stop for a forced function", ch["finish_reason"])
				}
			}},
		{"anthropic-text", "anthropic_text", "/v1/messages",
			map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You extract weather reports.",
				"messages": []any{map[string]any{"role": "user", "content": "What's the weather like in SF?"}}},
			func(t *testing.T, got map[string]any) {
				if got["stop_reason"] != "end_turn" {
					t.Errorf("stop_reason = %v, want end_turn", got["stop_reason"])
				}
			}},
		{"anthropic-tool", "anthropic_tool_use", "/v1/messages",
			map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024,
				"messages":    []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Weather in SF?"}}}},
				"tools":       []any{map[string]any{"name": "get_weather", "description": "weather", "input_schema": schema}},
				"tool_choice": map[string]any{"type": "tool", "name": "get_weather"}},
			func(t *testing.T, got map[string]any) {
				blocks := got["content"].([]any)
				last := blocks[len(blocks)-1].(map[string]any)
				if last["type"] != "tool_use" || last["name"] != "get_weather" || got["stop_reason"] != "tool_use" {
					t.Errorf("content = %v stop_reason = %v, want a get_weather tool_use", blocks, got["stop_reason"])
				}
				if _, ok := last["input"].(map[string]any); !ok {
					t.Errorf("input = %T, want an object", last["input"])
				}
			}},
		{"anthropic-tool-auto", "anthropic_tool_use", "/v1/messages",
			map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024,
				"messages": []any{map[string]any{"role": "user", "content": "Weather in SF?"}},
				"tools":    []any{map[string]any{"name": "get_weather", "description": "weather", "input_schema": schema}}},
			func(t *testing.T, got map[string]any) {
				blocks := got["content"].([]any)
				if len(blocks) != 2 || blocks[0].(map[string]any)["type"] != "text" {
					t.Errorf("content = %v, want a text block before the tool_use when the tool is not forced", blocks)
				}
			}},
		{"ollama-format", "ollama_chat_json", "/api/chat",
			map[string]any{"model": "llama3.1", "stream": false, "format": schema, "messages": weatherMessages(),
				"options": map[string]any{"temperature": 0}},
			func(t *testing.T, got map[string]any) {
				if got["done"] != true || got["done_reason"] != "stop" {
					t.Errorf("done = %v done_reason = %v, want true stop", got["done"], got["done_reason"])
				}
			}},
		{"ollama-tool", "ollama_chat_tool_call", "/api/chat",
			map[string]any{"model": "llama3.2", "stream": false, "messages": weatherMessages(),
				"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": schema}}}},
			func(t *testing.T, got map[string]any) {
				msg := got["message"].(map[string]any)
				tc := msg["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
				if _, ok := tc["arguments"].(map[string]any); !ok || tc["name"] != "get_weather" {
					t.Errorf("tool call = %v, want get_weather with object arguments", tc)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(Config{Seed: 1, Now: fixedNow})
			rec := do(t, s, tc.path, tc.body)
			if rec.Code != 200 {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			f, want := loadFixture(t, tc.fixture)
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("decode reply: %v", err)
			}
			if d := shapeDiff("", want, got); len(d) > 0 {
				t.Errorf("reply differs from %s:\n%s\nreply: %s", f.Name, strings.Join(d, "\n"), rec.Body)
			}
			if ct, want := rec.Header().Get("Content-Type"), f.Headers["content-type"]; ct != want {
				t.Errorf("Content-Type = %q, want %q", ct, want)
			}
			tc.check(t, got)
		})
	}
}

func TestErrorShapesMatchFixtures(t *testing.T) {
	t.Parallel()
	anthropicReq := map[string]any{"model": "claude", "max_tokens": 100, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	openaiReq := map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	tests := []struct {
		name       string
		fixture    string
		cfg        Config
		path       string
		body       any
		wantStatus int
		wantHeader []string
		wantNoHdr  []string
	}{
		{"openai-429", "openai_429_rate_limit_tpm", Config{Transport: Transport{RateLimited: 1}, RPM: 1000, TPM: 100000},
			"/v1/chat/completions", openaiReq, 429,
			[]string{"retry-after", "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests", "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"}, nil},
		{"openai-quota", "openai_429_insufficient_quota", Config{QuotaExhausted: true}, "/v1/chat/completions", openaiReq, 429, nil, []string{"retry-after"}},
		{"openai-500", "openai_500_server_error", Config{Transport: Transport{Status500: 1}}, "/v1/chat/completions", openaiReq, 500, []string{"x-request-id"}, nil},
		{"anthropic-429", "anthropic_429_rate_limit", Config{Transport: Transport{RateLimited: 1}, RPM: 4000, TPM: 280000},
			"/v1/messages", anthropicReq, 429,
			[]string{"retry-after", "request-id", "anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset"}, nil},
		{"anthropic-quota", "anthropic_400_credit_balance_too_low", Config{QuotaExhausted: true}, "/v1/messages", anthropicReq, 400, []string{"request-id"}, []string{"retry-after"}},
		{"anthropic-529", "anthropic_529_overloaded", Config{Transport: Transport{Status529: 1}}, "/v1/messages", anthropicReq, 529, nil, nil},
		{"anthropic-missing-max-tokens", "anthropic_400_invalid_request", Config{}, "/v1/messages",
			map[string]any{"model": "claude", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, 400, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Now = fixedNow
			s := New(tc.cfg)
			rec := do(t, s, tc.path, tc.body)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tc.wantStatus, rec.Body)
			}
			_, want := loadFixture(t, tc.fixture)
			var got any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if d := shapeDiff("", want, got); len(d) > 0 {
				t.Errorf("error body differs from %s: %v\nbody: %s", tc.fixture, d, rec.Body)
			}
			for _, h := range tc.wantHeader {
				if rec.Header().Get(h) == "" {
					t.Errorf("header %s missing; headers %v", h, rec.Header())
				}
			}
			for _, h := range tc.wantNoHdr {
				if v := rec.Header().Get(h); v != "" {
					t.Errorf("header %s = %q, want none", h, v)
				}
			}
		})
	}
}

// fakeClock is an injected clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func doKey(t *testing.T, s *Server, path, key string, body any) *httptest.ResponseRecorder {
	t.Helper()
	b, _ := json.Marshal(body)
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Api-Key", key)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

func TestRPMBudget(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: fixedNow()}
	s := New(Config{RPM: 60, Now: clock.Now})
	body := map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	for i := range 60 {
		if rec := doKey(t, s, "/v1/chat/completions", "k1", body); rec.Code != 200 {
			t.Fatalf("call %d: status %d, want 200 within the budget", i+1, rec.Code)
		}
	}
	rec := doKey(t, s, "/v1/chat/completions", "k1", body)
	if rec.Code != 429 {
		t.Fatalf("call 61: status %d, want 429", rec.Code)
	}
	h := rec.Header()
	want := map[string]string{
		"Retry-After":                    "1",
		"X-Ratelimit-Limit-Requests":     "60",
		"X-Ratelimit-Remaining-Requests": "0",
		"X-Ratelimit-Reset-Requests":     "1m0s",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	var e struct {
		Error struct{ Type, Code string }
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &e)
	if e.Error.Code != "rate_limit_exceeded" || e.Error.Type != "requests" {
		t.Errorf("error = %+v, want rate_limit_exceeded requests", e.Error)
	}
	if rec := doKey(t, s, "/v1/chat/completions", "k2", body); rec.Code != 200 {
		t.Errorf("other key: status %d, want 200 (budgets are per key)", rec.Code)
	}
	clock.Advance(time.Second)
	if rec := doKey(t, s, "/v1/chat/completions", "k1", body); rec.Code != 200 {
		t.Errorf("after 1s: status %d, want 200 (one request refilled)", rec.Code)
	}
	if rec := doKey(t, s, "/v1/chat/completions", "k1", body); rec.Code != 429 {
		t.Errorf("second call after 1s: status %d, want 429", rec.Code)
	}
	if got := s.Stats().Transport[EventRateLimited]; got != 2 {
		t.Errorf("Stats rate_limited = %d, want 2", got)
	}
}

func TestTPMBudgetAnthropic(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: fixedNow()}
	s := New(Config{TPM: 1000, Now: clock.Now})
	// "hi" is 1 prompt token; max_tokens 400 is counted up front: 401 a call.
	body := map[string]any{"model": "claude", "max_tokens": 400, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	for i := range 2 {
		if rec := doKey(t, s, "/v1/messages", "k", body); rec.Code != 200 {
			t.Fatalf("call %d: status %d", i+1, rec.Code)
		}
	}
	rec := doKey(t, s, "/v1/messages", "k", body)
	if rec.Code != 429 {
		t.Fatalf("call 3: status %d, want 429", rec.Code)
	}
	// 198 tokens left, 401 needed, 1000/60 per second: 12.18s.
	if got := rec.Header().Get("Retry-After"); got != "13" {
		t.Errorf("Retry-After = %q, want 13", got)
	}
	if got := rec.Header().Get("Anthropic-Ratelimit-Tokens-Remaining"); got != "198" {
		t.Errorf("tokens remaining = %q, want 198", got)
	}
	reset, err := time.Parse(time.RFC3339, rec.Header().Get("Anthropic-Ratelimit-Tokens-Reset"))
	if err != nil {
		t.Fatalf("tokens reset: %v", err)
	}
	// Full again after (1000-198)/(1000/60) = 48.12s, rounded up to the second.
	if want := fixedNow().Add(49 * time.Second); !reset.Equal(want) {
		t.Errorf("tokens reset = %v, want %v", reset, want)
	}
	clock.Advance(13 * time.Second)
	if rec := doKey(t, s, "/v1/messages", "k", body); rec.Code != 200 {
		t.Errorf("after Retry-After: status %d, want 200", rec.Code)
	}
}

// TestTextCacheReadsEachPromptAsTextOf: the cache of system prompts gives
// what textOf gives for each raw value (escapes, parts, null), keeps
// distinct prompts apart, and stays right once it is full.
func TestTextCacheReadsEachPromptAsTextOf(t *testing.T) {
	var c textCache
	raws := []string{
		`"Reply with JSON.\n<json-schema>{\"type\":\"object\"}</json-schema>"`,
		`"Reply with JSON.\n<json-schema>{\"type\":\"array\"}</json-schema>"`,
		`[{"type":"text","text":"part one, "},{"type":"text","text":"part two"}]`,
		`null`,
		`"caf\u00e9 \ud83d\ude00"`,
	}
	for i := 0; i < textCacheMax+10; i++ {
		raws = append(raws, fmt.Sprintf(`"prompt %d\t\"quoted\""`, i))
	}
	for pass := 0; pass < 2; pass++ { // the second pass reads from the cache
		for _, raw := range raws {
			if got, want := c.text(json.RawMessage(raw)), textOf(json.RawMessage(raw)); got != want {
				t.Fatalf("pass %d: text(%s) = %q, textOf gives %q", pass, raw, got, want)
			}
		}
	}
	if got := c.text(json.RawMessage(raws[0])); !strings.Contains(got, `{"type":"object"}`) {
		t.Fatalf("escaped prompt read as %q", got)
	}
	if n := len(c.m); n != textCacheMax {
		t.Fatalf("cache holds %d prompts, want it to stop at %d", n, textCacheMax)
	}
}

// TestDecodeStrictRejectsTrailingData: a body is one JSON value, as the
// providers read it; whitespace after it is fine, anything else a 400.
func TestDecodeStrictRejectsTrailingData(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"model":"m"}`, true},
		{"{\"model\":\"m\"} \n\t", true},
		{`{"model":"m"} x`, false},
		{`{"model":"m"}{}`, false},
		{`{"model":"m"`, false},
		{`{"model":1}`, false},
	} {
		var v struct {
			Model string          `json:"model"`
			Raw   json.RawMessage `json:"raw"`
		}
		if err := decodeStrict([]byte(tc.body), &v); (err == nil) != tc.ok {
			t.Errorf("decodeStrict(%q) = %v, want ok=%v", tc.body, err, tc.ok)
		}
	}
	// A raw field is the body's own bytes, and reads as they were.
	body := []byte(`{"raw":{"a":[1,2]}}`)
	var v struct {
		Raw json.RawMessage `json:"raw"`
	}
	if err := decodeStrict(body, &v); err != nil || string(v.Raw) != `{"a":[1,2]}` {
		t.Fatalf("raw = %s, %v", v.Raw, err)
	}
	resp := httptest.NewRecorder()
	New(Config{Seed: 1}).ServeHTTP(resp, httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]} trailing`)))
	if resp.Code != http.StatusBadRequest || !strings.Contains(resp.Body.String(), "after top-level value") {
		t.Fatalf("trailing data: %d %s", resp.Code, resp.Body.String())
	}
}

// The Messages API's structured outputs: output_config.format's schema is
// the schema the reply's text answers; a format of another type, or
// without a schema, is a 400 as Anthropic gives.
func TestAnthropicOutputConfig(t *testing.T) {
	t.Parallel()
	const head = `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"output_config":`
	var texts textCache
	r, aerr := parseAnthropic([]byte(head+`{"format":{"type":"json_schema","schema":{"type":"object"}}}}`), &texts)
	if aerr != nil || string(r.schema) != `{"type":"object"}` || r.toolName != "" {
		t.Errorf("output_config: %v, schema %s, tool %q; want the schema and no tool", aerr, r.schema, r.toolName)
	}
	for _, bad := range []string{`{"format":{"type":"text","schema":{}}}`, `{"format":{"type":"json_schema"}}`} {
		if _, aerr := parseAnthropic([]byte(head+bad+`}`), &texts); aerr == nil || aerr.status != 400 {
			t.Errorf("output_config %s: %v, want a 400", bad, aerr)
		}
	}
}

// TestFlexTier: a flex call is answered on the flex tier and says so, or
// refused with the tier's capacity 429 at about the FlexBusy rate, which
// takes nothing from the rate limits; a default-tier call is never
// refused so and says default; an unknown tier is a 400.
func TestFlexTier(t *testing.T) {
	t.Parallel()
	s := New(Config{Seed: 3, FlexBusy: 0.3, RPM: 1000})
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	flex := map[string]any{"model": "gpt-4o", "messages": msgs, "service_tier": "flex"}
	busy := 0
	const n = 200
	for i := range n {
		rec := do(t, s, "/v1/chat/completions", flex)
		var b struct {
			ServiceTier string `json:"service_tier"`
			Error       struct{ Type, Code, Message string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		switch rec.Code {
		case 200:
			if b.ServiceTier != "flex" {
				t.Fatalf("call %d: served service_tier %q, want flex", i, b.ServiceTier)
			}
		case 429:
			busy++
			if b.Error.Code != "resource_unavailable" || !strings.Contains(b.Error.Message, "Resource Unavailable") || rec.Header().Get("Retry-After") != "" {
				t.Fatalf("call %d: 429 %+v, retry-after %q; want the capacity refusal", i, b.Error, rec.Header().Get("Retry-After"))
			}
		default:
			t.Fatalf("call %d: status %d", i, rec.Code)
		}
	}
	if busy < n*15/100 || busy > n*45/100 {
		t.Errorf("%d of %d flex calls refused, want about 30%%", busy, n)
	}
	st := s.Stats()
	if st.Transport[EventCapacity] != int64(busy) || st.Transport[EventRateLimited] != 0 {
		t.Errorf("stats capacity %d, rate limited %d; want %d, 0", st.Transport[EventCapacity], st.Transport[EventRateLimited], busy)
	}
	plain := map[string]any{"model": "gpt-4o", "messages": msgs}
	for i := range 20 {
		rec := do(t, s, "/v1/chat/completions", plain)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"service_tier":"default"`) {
			t.Fatalf("default-tier call %d: %d %s", i, rec.Code, rec.Body.String())
		}
	}
	flex["service_tier"] = "priority"
	if rec := do(t, s, "/v1/chat/completions", flex); rec.Code != 400 || !strings.Contains(rec.Body.String(), "service_tier") {
		t.Errorf("unknown tier: %d %s, want 400 naming service_tier", rec.Code, rec.Body.String())
	}
}
