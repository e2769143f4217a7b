package llm

import (
	"context"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// cacheGolden holds the bodies the encoders wrote for cacheGoldenCases
// before requests had cache fields (generated from the parent commit's
// encoders): without the fields set, a body must not change by a byte.
var cacheGolden = map[string]string{
	"openai prompt":                      "{\"model\":\"claude-sonnet-4-5\",\"messages\":[{\"role\":\"system\",\"content\":\"be exact\"},{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.2,\"max_completion_tokens\":300,\"user\":\"job-7\"}",
	"openai json_schema":                 "{\"model\":\"claude-sonnet-4-5\",\"messages\":[{\"role\":\"system\",\"content\":\"be exact\"},{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.2,\"max_completion_tokens\":300,\"user\":\"job-7\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"result\",\"schema\":{\"additionalProperties\":false,\"properties\":{\"name\":{\"type\":\"string\"}},\"required\":[\"name\"],\"type\":\"object\"},\"strict\":true}}}",
	"openai tool":                        "{\"model\":\"claude-sonnet-4-5\",\"messages\":[{\"role\":\"system\",\"content\":\"be exact\"},{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.2,\"max_completion_tokens\":300,\"user\":\"job-7\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"result\",\"description\":\"Return the result. The arguments must match the schema.\",\"parameters\":{\"additionalProperties\":false,\"properties\":{\"name\":{\"type\":\"string\"}},\"required\":[\"name\"],\"type\":\"object\"},\"strict\":true}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"result\"}}}",
	"openai max_tokens":                  "{\"model\":\"claude-sonnet-4-5\",\"messages\":[{\"role\":\"system\",\"content\":\"be exact\"},{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.2,\"max_tokens\":300,\"user\":\"job-7\"}",
	"openai bare":                        "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
	"anthropic prompt":                   "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":300,\"system\":\"be exact\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.2,\"metadata\":{\"user_id\":\"job-7\"}}",
	"anthropic tool":                     "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":300,\"system\":\"be exact\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.2,\"tools\":[{\"name\":\"result\",\"description\":\"Return the result. The arguments must match the schema.\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1}},\"required\":[\"name\"]}}],\"tool_choice\":{\"type\":\"tool\",\"name\":\"result\"},\"metadata\":{\"user_id\":\"job-7\"}}",
	"anthropic json_schema":              "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":300,\"system\":\"be exact\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.2,\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":{\"additionalProperties\":false,\"properties\":{\"name\":{\"type\":\"string\"}},\"required\":[\"name\"],\"type\":\"object\"}}},\"metadata\":{\"user_id\":\"job-7\"}}",
	"anthropic json_schema, older model": "{\"model\":\"claude-3-5-haiku-latest\",\"max_tokens\":300,\"system\":\"be exact\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.2,\"tools\":[{\"name\":\"result\",\"description\":\"Return the result. The arguments must match the schema.\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1}},\"required\":[\"name\"]}}],\"tool_choice\":{\"type\":\"tool\",\"name\":\"result\"},\"metadata\":{\"user_id\":\"job-7\"}}",
	"anthropic system moved":             "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1024,\"system\":\"sys\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
	"anthropic bare":                     "{\"model\":\"gpt-4o-mini\",\"max_tokens\":1024,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
	"ollama prompt":                      "{\"model\":\"claude-sonnet-4-5\",\"messages\":[{\"role\":\"system\",\"content\":\"be exact\"},{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":false,\"options\":{\"temperature\":0.2,\"num_predict\":300}}",
	"ollama json_schema":                 "{\"model\":\"claude-sonnet-4-5\",\"messages\":[{\"role\":\"system\",\"content\":\"be exact\"},{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":false,\"format\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1}},\"required\":[\"name\"]},\"options\":{\"temperature\":0.2,\"num_predict\":300}}",
	"ollama tool":                        "{\"model\":\"claude-sonnet-4-5\",\"messages\":[{\"role\":\"system\",\"content\":\"be exact\"},{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":false,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"result\",\"description\":\"Return the result. The arguments must match the schema.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1}},\"required\":[\"name\"]}}}],\"options\":{\"temperature\":0.2,\"num_predict\":300}}",
}

// cacheGoldenCases are requests without the cache fields, one per shape
// each encoder writes.
func cacheGoldenCases() []cacheGoldenCase {
	temp := 0.2
	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1}},"required":["name"]}`)
	base := fixpoint.Request{Model: "claude-sonnet-4-5", System: "be exact", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}},
		MaxTokens: 300, Temperature: &temp, User: "job-7", Mode: fixpoint.ModePrompt}
	with := func(mode fixpoint.Mode) fixpoint.Request {
		r := base
		r.Mode, r.Schema = mode, schema
		return r
	}
	older := func(r fixpoint.Request) fixpoint.Request {
		r.Model = "claude-3-5-haiku-latest" // before structured outputs: a tool
		return r
	}
	bare := fixpoint.Request{Model: "gpt-4o-mini", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}}
	moved := fixpoint.Request{Model: "claude-haiku-4-5", Messages: []fixpoint.Message{{Role: "system", Content: "sys"}, {Role: fixpoint.RoleUser, Content: "hi"}}}
	return []cacheGoldenCase{
		{"openai prompt", Config{Provider: ProviderOpenAI}, base},
		{"openai json_schema", Config{Provider: ProviderOpenAI}, with(fixpoint.ModeJSONSchema)},
		{"openai tool", Config{Provider: ProviderOpenAI}, with(fixpoint.ModeTool)},
		{"openai max_tokens", Config{Provider: ProviderOpenAI, OpenAIMaxTokensParam: "max_tokens"}, base},
		{"openai bare", Config{Provider: ProviderOpenAI}, bare},
		{"anthropic prompt", Config{Provider: ProviderAnthropic}, base},
		{"anthropic tool", Config{Provider: ProviderAnthropic}, with(fixpoint.ModeTool)},
		{"anthropic json_schema", Config{Provider: ProviderAnthropic}, with(fixpoint.ModeJSONSchema)},
		{"anthropic json_schema, older model", Config{Provider: ProviderAnthropic}, older(with(fixpoint.ModeJSONSchema))},
		{"anthropic system moved", Config{Provider: ProviderAnthropic}, moved},
		{"anthropic bare", Config{Provider: ProviderAnthropic}, bare},
		{"ollama prompt", Config{Provider: ProviderOllama}, base},
		{"ollama json_schema", Config{Provider: ProviderOllama}, with(fixpoint.ModeJSONSchema)},
		{"ollama tool", Config{Provider: ProviderOllama}, with(fixpoint.ModeTool)},
	}
}

type cacheGoldenCase struct {
	name string
	cfg  Config
	req  fixpoint.Request
}

func encodeBody(t *testing.T, cfg Config, req fixpoint.Request) string {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, _, e := c.encode(&req)
	if e != nil {
		t.Fatal(e)
	}
	return string(body)
}

// TestCacheFieldsUnsetBodyUnchanged: without CacheKey and CacheSystem every
// body is byte for byte what it was; a field a provider ignores changes
// nothing either, nor CacheSystem on a system prompt too short to cache.
func TestCacheFieldsUnsetBodyUnchanged(t *testing.T) {
	t.Parallel()
	cases := cacheGoldenCases()
	if len(cases) != len(cacheGolden) {
		t.Fatalf("%d cases, %d golden bodies", len(cases), len(cacheGolden))
	}
	for _, tc := range cases {
		want, ok := cacheGolden[tc.name]
		if !ok {
			t.Fatalf("no golden body for %s", tc.name)
		}
		if got := encodeBody(t, tc.cfg, tc.req); got != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
		ignored := tc.req
		switch tc.cfg.Provider {
		case ProviderOpenAI:
			ignored.CacheSystem = true
		case ProviderAnthropic:
			// "be exact" and "sys" are far below any model's minimum.
			ignored.CacheKey, ignored.CacheSystem = "batch-1", true
		case ProviderOllama:
			ignored.CacheKey, ignored.CacheSystem = "batch-1", true
		}
		if got := encodeBody(t, tc.cfg, ignored); got != want {
			t.Errorf("%s with %+v ignored:\n got %s\nwant %s", tc.name, ignored, got, want)
		}
	}
}

func TestCacheOpenAIPromptCacheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range cacheGoldenCases() {
		if tc.cfg.Provider != ProviderOpenAI {
			continue
		}
		req := tc.req
		req.CacheKey = "tickets/4f2a"
		// The key follows "user" (or the last field before it) and
		// nothing else moves.
		want := cacheGolden[tc.name]
		at := `"max_tokens":300,"user":"job-7"`
		if strings.Contains(want, `"max_completion_tokens"`) {
			at = `"max_completion_tokens":300,"user":"job-7"`
		}
		if !strings.Contains(want, at) {
			at = `"messages":[{"role":"user","content":"hi"}]`
		}
		want = strings.Replace(want, at, at+`,"prompt_cache_key":"tickets/4f2a"`, 1)
		if got := encodeBody(t, tc.cfg, req); got != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
	}
}

// TestCachePromptCacheKeySent checks the key on the wire of a real call.
func TestCachePromptCacheKeySent(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, replyJSON(200, okOpenAI))
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL + "/v1"})
	_, err := c.Complete(context.Background(), fixpoint.Request{Model: "gpt-4o-mini", System: "rules", CacheKey: "k1", CacheSystem: true,
		Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["prompt_cache_key"] != "k1" {
		t.Fatalf("prompt_cache_key = %v, want k1 in %s", body["prompt_cache_key"], rec.requests()[0].Body)
	}
	if msgs := body["messages"].([]any); msgs[0].(map[string]any)["role"] != "system" {
		t.Fatalf("the system prompt is not the first message: %v", msgs)
	}
}

// tokensOf returns a system prompt the package's measure (bytes / 4,
// rounded up) counts as n tokens.
func tokensOf(n int) string { return strings.Repeat("abcd", n) }

func TestCacheAnthropicSystemBlock(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object"}`
	toolPart := `,"tools":[{"name":"result","description":"` + toolDescription + `","input_schema":` + schema + `}],"tool_choice":{"type":"tool","name":"result"}`
	toolBytes := len("result") + len(toolDescription) + len(schema)
	tests := []struct {
		name   string
		model  string
		system string
		moved  string // a "system" message, merged after system
		tool   bool
		cached bool
	}{
		{name: "sonnet 4.5 at its minimum", model: "claude-sonnet-4-5", system: tokensOf(1024), cached: true},
		{name: "sonnet 4.5 one token short", model: "claude-sonnet-4-5", system: tokensOf(1023)},
		{name: "sonnet 4.5 snapshot", model: "claude-sonnet-4-5-20250929", system: tokensOf(1024), cached: true},
		{name: "sonnet 4 snapshot", model: "claude-sonnet-4-20250514", system: tokensOf(1024), cached: true},
		{name: "haiku 4.5 needs 4096", model: "claude-haiku-4-5", system: tokensOf(4095)},
		{name: "haiku 4.5 at 4096", model: "claude-haiku-4-5", system: tokensOf(4096), cached: true},
		{name: "haiku 3.5 needs 2048", model: "claude-3-5-haiku-latest", system: tokensOf(2047)},
		{name: "haiku 3.5 at 2048", model: "claude-3-5-haiku-20241022", system: tokensOf(2048), cached: true},
		{name: "unknown model below 4096", model: "claude-sonnet-9", system: tokensOf(4095)},
		{name: "unknown model at 4096", model: "claude-sonnet-9", system: tokensOf(4096), cached: true},
		{name: "a system message merged in", model: "claude-sonnet-4-5", system: tokensOf(600), moved: tokensOf(600), cached: true},
		// The tools precede the system prompt in the cached prefix.
		{name: "tools count toward the prefix", model: "claude-sonnet-4-5", system: strings.Repeat("a", 4*1024-toolBytes), tool: true, cached: true},
		{name: "tools and prompt one token short", model: "claude-sonnet-4-5", system: strings.Repeat("a", 4*1023-toolBytes), tool: true},
	}
	for _, tt := range tests {
		req := fixpoint.Request{Model: tt.model, System: tt.system, CacheSystem: true, MaxTokens: 300,
			Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}}
		text := tt.system
		if tt.moved != "" {
			req.Messages = append([]fixpoint.Message{{Role: "system", Content: tt.moved}}, req.Messages...)
			text = tt.system + "\n\n" + tt.moved
		}
		tail := ""
		if tt.tool {
			req.Mode, req.Schema = fixpoint.ModeTool, json.RawMessage(schema)
			tail = toolPart
		}
		quoted, _ := json.Marshal(text)
		sys := string(quoted)
		if tt.cached {
			sys = `[{"type":"text","text":` + sys + `,"cache_control":{"type":"ephemeral"}}]`
		}
		want := `{"model":"` + tt.model + `","max_tokens":300,"system":` + sys + `,"messages":[{"role":"user","content":"hi"}]` + tail + `}`
		if got := encodeBody(t, Config{Provider: ProviderAnthropic}, req); got != want {
			t.Errorf("%s:\n got %.300s...\nwant %.300s...", tt.name, got, want)
		}
		// Without CacheSystem the same prompt is always a string.
		req.CacheSystem = false
		plain := `{"model":"` + tt.model + `","max_tokens":300,"system":` + string(quoted) + `,"messages":[{"role":"user","content":"hi"}]` + tail + `}`
		if got := encodeBody(t, Config{Provider: ProviderAnthropic}, req); got != plain {
			t.Errorf("%s without CacheSystem:\n got %.300s...\nwant %.300s...", tt.name, got, plain)
		}
	}
}

func TestAnthropicCacheMinTokens(t *testing.T) {
	t.Parallel()
	tests := map[string]int{
		"claude-opus-4-6":            4096,
		"claude-opus-4-5":            4096,
		"claude-opus-4-5-20251101":   4096,
		"claude-haiku-4-5":           4096,
		"claude-haiku-4-5-20251001":  4096,
		"claude-sonnet-4-6":          1024,
		"claude-sonnet-4-5":          1024,
		"claude-sonnet-4-5-20250929": 1024,
		"claude-opus-4-1":            1024,
		"claude-opus-4-1-20250805":   1024,
		"claude-opus-4-0":            1024,
		"claude-opus-4-20250514":     1024,
		"claude-sonnet-4-0":          1024,
		"claude-sonnet-4-20250514":   1024,
		"claude-3-7-sonnet-latest":   1024,
		"claude-3-7-sonnet-20250219": 1024,
		"claude-3-5-sonnet-20241022": 1024,
		"claude-3-opus-20240229":     1024,
		"claude-3-5-haiku-latest":    2048,
		"claude-3-5-haiku-20241022":  2048,
		"claude-3-haiku-20240307":    2048,
		// Unknown: the largest minimum.
		"claude-opus-4-7":           AnthropicCacheMinTokensUnknown, // not opus 4 + a date
		"claude-sonnet-4-5-2025":    AnthropicCacheMinTokensUnknown, // not a date
		"claude-sonnet-4-5-preview": AnthropicCacheMinTokensUnknown,
		"sim-typical":               AnthropicCacheMinTokensUnknown,
		"":                          AnthropicCacheMinTokensUnknown,
	}
	for model, want := range tests {
		if got := AnthropicCacheMinTokens(model); got != want {
			t.Errorf("AnthropicCacheMinTokens(%q) = %d, want %d", model, got, want)
		}
	}
	if AnthropicCacheMinTokensUnknown != 4096 {
		t.Errorf("unknown minimum = %d, want the largest published, 4096", AnthropicCacheMinTokensUnknown)
	}
}

// TestCacheUsageNormalized replays the recorded fixtures with cache reads
// and writes set, as the replay server's "set" would: every provider's
// InputTokens counts them all, the reads and the writes apart.
func TestCacheUsageNormalized(t *testing.T) {
	t.Parallel()
	fixtures := loadFixtures(t)
	anthropic := func(read, write int) []byte {
		var body map[string]any
		if err := json.Unmarshal(fixtures["anthropic_text"].wireBytes(t), &body); err != nil {
			t.Fatal(err)
		}
		u := body["usage"].(map[string]any)
		u["cache_read_input_tokens"], u["cache_creation_input_tokens"] = read, write
		u["cache_creation"] = map[string]any{"ephemeral_5m_input_tokens": write, "ephemeral_1h_input_tokens": 0}
		data, _ := json.Marshal(body)
		return data
	}
	tests := []struct {
		name    string
		fixture string
		body    []byte // nil: as recorded
		want    fixpoint.Usage
	}{
		// Anthropic's input_tokens (514) leaves out cache reads and writes.
		{"anthropic as recorded", "anthropic_text", nil, fixpoint.Usage{InputTokens: 514, OutputTokens: 19}},
		{"anthropic cache write", "anthropic_text", anthropic(0, 1800), fixpoint.Usage{InputTokens: 514 + 1800, OutputTokens: 19, CacheWriteTokens: 1800}},
		{"anthropic cache read", "anthropic_text", anthropic(1800, 0), fixpoint.Usage{InputTokens: 514 + 1800, OutputTokens: 19, CachedInputTokens: 1800}},
		{"anthropic read and write", "anthropic_text", anthropic(1200, 600), fixpoint.Usage{InputTokens: 514 + 1200 + 600, OutputTokens: 19, CachedInputTokens: 1200, CacheWriteTokens: 600}},
		// OpenAI's prompt_tokens (2006) already include cached_tokens.
		{"openai cached", "openai_text_cached_usage", nil, fixpoint.Usage{InputTokens: 2006, OutputTokens: 300, CachedInputTokens: 1920}},
		{"ollama", "ollama_chat_json", nil, fixpoint.Usage{InputTokens: 34, OutputTokens: 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := fixtures[tt.fixture]
			body := tt.body
			if body == nil {
				body = fx.wireBytes(t)
			}
			srv := serveFixture(t, fx, body)
			base := srv.URL
			if fx.Provider == ProviderOpenAI {
				base += "/v1"
			}
			c := testClient(t, Config{Provider: fx.Provider, BaseURL: base})
			resp, err := c.Complete(context.Background(), fixpoint.Request{Model: "m", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != tt.want {
				t.Fatalf("Usage = %+v, want %+v", resp.Usage, tt.want)
			}
		})
	}
}
