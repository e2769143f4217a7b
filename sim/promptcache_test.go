package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// oaUsage is the usage of an OpenAI reply.
type oaUsageJSON struct {
	PromptTokens        int `json:"prompt_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func openAIUsage(t *testing.T, s *Server, body map[string]any) oaUsageJSON {
	t.Helper()
	rec := do(t, s, "/v1/chat/completions", body)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var r struct{ Usage oaUsageJSON }
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	return r.Usage
}

// longPrompt is an OpenAI request: a system prompt of n bytes, then user.
func longPrompt(n int, user string) map[string]any {
	return map[string]any{"model": "gpt-4o", "messages": []any{
		map[string]any{"role": "system", "content": strings.Repeat("s", n)},
		map[string]any{"role": "user", "content": user},
	}}
}

// TestOpenAICacheRules: automatic from 1,024 tokens, the longest shared
// prefix in 128-token steps, first sight a miss, scoped by
// prompt_cache_key, gone after the TTL unless used, 24 h retention on
// request.
func TestOpenAICacheRules(t *testing.T) {
	t.Parallel()
	cached := func(s *Server, body map[string]any) int {
		return openAIUsage(t, s, body).PromptTokensDetails.CachedTokens
	}
	t.Run("below the minimum", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow})
		body := longPrompt(4000, "hi") // 1,001 tokens
		for i := range 3 {
			if got := cached(s, body); got != 0 {
				t.Fatalf("call %d: cached %d, want 0 under 1,024 tokens", i, got)
			}
		}
	})
	t.Run("longest shared prefix", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow})
		one := longPrompt(6000, strings.Repeat("x", 1000)) // 7,000 bytes
		two := longPrompt(6000, strings.Repeat("y", 1000))
		if got := cached(s, one); got != 0 {
			t.Fatalf("first sight: %d, want 0", got)
		}
		if got := cached(s, two); got != 1408 { // 6,000 shared bytes: 11 steps of 512
			t.Fatalf("shared system prompt: %d, want 1408", got)
		}
		if got := cached(s, two); got != 1664 { // 7,000 bytes: 13 steps
			t.Fatalf("same prompt again: %d, want 1664", got)
		}
		if u := openAIUsage(t, s, one); u.PromptTokens != 1750 || u.PromptTokensDetails.CachedTokens != 1664 {
			t.Fatalf("usage %+v, want 1750 prompt tokens, 1664 cached", u)
		}
		if st := s.Stats().Cache; st.Hits != 3 || st.ReadTokens != 1408+1664+1664 || st.Writes != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("prompt_cache_key", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow})
		keyed := func(key string) map[string]any {
			b := longPrompt(6000, "q")
			b["prompt_cache_key"] = key
			return b
		}
		cached(s, keyed("a"))
		if got := cached(s, keyed("b")); got != 0 {
			t.Fatalf("other key: %d, want 0", got)
		}
		if got := cached(s, longPrompt(6000, "q")); got != 0 {
			t.Fatalf("no key: %d, want 0", got)
		}
		if got := cached(s, keyed("a")); got != 1408 {
			t.Fatalf("same key: %d, want 1408", got)
		}
		if got := cached(s, keyed("b")); got != 1408 {
			t.Fatalf("key b's own entry: %d, want 1408", got)
		}
	})
	t.Run("ttl", func(t *testing.T) {
		t.Parallel()
		clock := newTestClock()
		s := New(Config{Now: clock.Now})
		body := longPrompt(6000, "q")
		cached(s, body)
		clock.Advance(4 * time.Minute)
		if got := cached(s, body); got != 1408 {
			t.Fatalf("after 4 min: %d, want a hit", got)
		}
		clock.Advance(4 * time.Minute) // 8 min after the write, 4 after the last use
		if got := cached(s, body); got != 1408 {
			t.Fatalf("4 min after the last use: %d, want a hit", got)
		}
		clock.Advance(5*time.Minute + time.Second)
		if got := cached(s, body); got != 0 {
			t.Fatalf("5 min after the last use: %d, want 0", got)
		}
		long := longPrompt(6000, "retained")
		long["prompt_cache_retention"] = "24h"
		cached(s, long)
		clock.Advance(time.Hour)
		if got := cached(s, long); got != 1408 {
			t.Fatalf("24h retention after 1 h: %d, want a hit", got)
		}
		long["prompt_cache_retention"] = "forever"
		if rec := do(t, s, "/v1/chat/completions", long); rec.Code != 400 {
			t.Fatalf("bad retention: %d", rec.Code)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow, Cache: CacheConfig{Off: true}})
		cached(s, longPrompt(6000, "q"))
		if got := cached(s, longPrompt(6000, "q")); got != 0 {
			t.Fatalf("cache off: %d", got)
		}
	})
}

// antUsageJSON is the usage of an Anthropic reply.
type antUsageJSON struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreation            struct {
		Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

func anthropicUsage(t *testing.T, s *Server, body map[string]any) antUsageJSON {
	t.Helper()
	rec := do(t, s, "/v1/messages", body)
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var r struct{ Usage antUsageJSON }
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	return r.Usage
}

// cachedSystem is an Anthropic request whose system prompt of n bytes is
// one block with cache_control (ttl "" for the default).
func cachedSystem(model string, n int, user, ttl string) map[string]any {
	cc := map[string]any{"type": "ephemeral"}
	if ttl != "" {
		cc["ttl"] = ttl
	}
	return map[string]any{"model": model, "max_tokens": 100,
		"system":   []any{map[string]any{"type": "text", "text": strings.Repeat("s", n), "cache_control": cc}},
		"messages": []any{map[string]any{"role": "user", "content": user}}}
}

// TestAnthropicCacheRules: only up to a cache_control breakpoint, from the
// model's minimum; the first sight writes, later ones within the TTL read,
// and input_tokens counts the tokens after the breakpoint.
func TestAnthropicCacheRules(t *testing.T) {
	t.Parallel()
	t.Run("write then read", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow})
		u := anthropicUsage(t, s, cachedSystem("sim-sonnet", 6000, "question one", "")) // 1,500 + 3 tokens
		if u.CacheCreationInputTokens != 1500 || u.CacheCreation.Ephemeral5m != 1500 || u.CacheReadInputTokens != 0 || u.InputTokens != 3 {
			t.Fatalf("first sight: %+v, want 1500 written, 3 input", u)
		}
		u = anthropicUsage(t, s, cachedSystem("sim-sonnet", 6000, strings.Repeat("q", 40), "")) // 1,510 tokens
		if u.CacheReadInputTokens != 1500 || u.CacheCreationInputTokens != 0 || u.InputTokens != 10 {
			t.Fatalf("second sight: %+v, want 1500 read, 10 input", u)
		}
		if st := s.Stats().Cache; st.Hits != 1 || st.ReadTokens != 1500 || st.Writes != 1 || st.WriteTokens != 1500 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("no breakpoint", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow})
		body := map[string]any{"model": "sim-sonnet", "max_tokens": 100, "system": strings.Repeat("s", 6000),
			"messages": []any{map[string]any{"role": "user", "content": "question one"}}}
		for range 2 {
			if u := anthropicUsage(t, s, body); u.CacheReadInputTokens != 0 || u.CacheCreationInputTokens != 0 || u.InputTokens != 1503 {
				t.Fatalf("without cache_control: %+v, want all 1503 tokens as input", u)
			}
		}
	})
	t.Run("minimum per model", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow})
		for _, tc := range []struct {
			model string
			n     int
			want  int
		}{
			{"sim-sonnet", 4000, 0},    // 1,000 tokens < 1,024
			{"sim-sonnet", 4096, 1024}, // exactly the minimum
			{"sim-haiku", 6000, 0},     // 1,500 < 2,048
			{"sim-haiku", 8400, 2100},
		} {
			for i := range 2 {
				u := anthropicUsage(t, s, cachedSystem(tc.model, tc.n, "q", ""))
				if got := u.CacheCreationInputTokens + u.CacheReadInputTokens; got != tc.want {
					t.Fatalf("%s, %d bytes, call %d: cached %d, want %d (%+v)", tc.model, tc.n, i, got, tc.want, u)
				}
			}
		}
		s = New(Config{Now: fixedNow, Cache: CacheConfig{AnthropicMinTokens: 4096}})
		if u := anthropicUsage(t, s, cachedSystem("sim-sonnet", 6000, "q", "")); u.CacheCreationInputTokens != 0 {
			t.Fatalf("AnthropicMinTokens 4096: %+v", u)
		}
	})
	t.Run("ttl", func(t *testing.T) {
		t.Parallel()
		clock := newTestClock()
		s := New(Config{Now: clock.Now})
		body := cachedSystem("sim-sonnet", 6000, "q", "")
		anthropicUsage(t, s, body)
		clock.Advance(4 * time.Minute)
		if u := anthropicUsage(t, s, body); u.CacheReadInputTokens != 1500 {
			t.Fatalf("within 5 min: %+v", u)
		}
		clock.Advance(4 * time.Minute) // 8 min after the write: the read refreshed it
		if u := anthropicUsage(t, s, body); u.CacheReadInputTokens != 1500 {
			t.Fatalf("4 min after the last read: %+v", u)
		}
		clock.Advance(5*time.Minute + time.Second)
		if u := anthropicUsage(t, s, body); u.CacheReadInputTokens != 0 || u.CacheCreationInputTokens != 1500 {
			t.Fatalf("after 5 min: %+v, want a new write", u)
		}
		hour := cachedSystem("sim-sonnet", 8000, "q", "1h") // another prefix: a cached one is read whatever its TTL
		if u := anthropicUsage(t, s, hour); u.CacheCreation.Ephemeral1h != 2000 || u.CacheCreation.Ephemeral5m != 0 {
			t.Fatalf("1h write: %+v", u)
		}
		clock.Advance(30 * time.Minute)
		if u := anthropicUsage(t, s, hour); u.CacheReadInputTokens != 2000 {
			t.Fatalf("1h entry after 30 min: %+v", u)
		}
	})
	t.Run("models do not share", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow})
		anthropicUsage(t, s, cachedSystem("sim-sonnet", 6000, "q", ""))
		if u := anthropicUsage(t, s, cachedSystem("sim-opus", 6000, "q", "")); u.CacheReadInputTokens != 0 || u.CacheCreationInputTokens != 1500 {
			t.Fatalf("other model: %+v", u)
		}
	})
	t.Run("breakpoints", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow})
		msg := func(user string) map[string]any {
			b := cachedSystem("sim-sonnet", 6000, "", "")
			b["messages"] = []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": user, "cache_control": map[string]any{"type": "ephemeral"}}}}}
			return b
		}
		u := anthropicUsage(t, s, msg(strings.Repeat("a", 400)))
		if u.CacheCreationInputTokens != 1600 || u.InputTokens != 0 {
			t.Fatalf("two breakpoints, first sight: %+v, want 1600 written", u)
		}
		u = anthropicUsage(t, s, msg(strings.Repeat("b", 400)))
		if u.CacheReadInputTokens != 1500 || u.CacheCreationInputTokens != 100 || u.InputTokens != 0 {
			t.Fatalf("same system, other message: %+v, want 1500 read, 100 written", u)
		}
		five := msg("x")
		five["system"] = []any{}
		for range 5 {
			five["system"] = append(five["system"].([]any), map[string]any{"type": "text", "text": "s", "cache_control": map[string]any{"type": "ephemeral"}})
		}
		if rec := do(t, s, "/v1/messages", five); rec.Code != 400 || !strings.Contains(rec.Body.String(), "maximum of 4") {
			t.Fatalf("six breakpoints: %d %s", rec.Code, rec.Body)
		}
		bad := cachedSystem("sim-sonnet", 10, "q", "10m")
		if rec := do(t, s, "/v1/messages", bad); rec.Code != 400 {
			t.Fatalf("ttl 10m: %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("lookback to an earlier breakpoint", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow})
		first := strings.Repeat("u", 6000)
		bp := map[string]any{"type": "ephemeral"}
		turn1 := map[string]any{"model": "sim-sonnet", "max_tokens": 100, "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": first, "cache_control": bp}}}}}
		anthropicUsage(t, s, turn1)
		turn2 := map[string]any{"model": "sim-sonnet", "max_tokens": 100, "messages": []any{
			map[string]any{"role": "user", "content": first},
			map[string]any{"role": "assistant", "content": "ok"},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "more", "cache_control": bp}}}}}
		if u := anthropicUsage(t, s, turn2); u.CacheReadInputTokens != 1500 || u.CacheCreationInputTokens != 2 {
			t.Fatalf("second turn: %+v, want the first turn read (1500) and the rest written", u)
		}
	})
	t.Run("tools first", func(t *testing.T) {
		t.Parallel()
		s := New(Config{Now: fixedNow})
		schema := map[string]any{"type": "object", "description": strings.Repeat("d", 5000),
			"properties": map[string]any{"a": map[string]any{"type": "string"}}}
		body := map[string]any{"model": "sim-sonnet", "max_tokens": 500,
			"tools":       []any{map[string]any{"name": "out", "input_schema": schema, "cache_control": map[string]any{"type": "ephemeral"}}},
			"tool_choice": map[string]any{"type": "tool", "name": "out"},
			"messages":    []any{map[string]any{"role": "user", "content": "go"}}}
		w := anthropicUsage(t, s, body)
		r := anthropicUsage(t, s, body)
		if w.CacheCreationInputTokens < 1250 || r.CacheReadInputTokens != w.CacheCreationInputTokens || r.InputTokens != 1 {
			t.Fatalf("tool breakpoint: write %+v then read %+v", w, r)
		}
	})
}

// TestBatchCaching: batch requests read and write the same cache as
// realtime calls; CacheHitProb makes batch reads best effort.
func TestBatchCaching(t *testing.T) {
	t.Parallel()
	params := func(n int) []map[string]any {
		var out []map[string]any
		for i := range n {
			out = append(out, cachedSystem("sim-sonnet", 6000, fmt.Sprintf("question %d", i), ""))
		}
		return out
	}
	results := func(t *testing.T, cfg Config, warm bool, n int) (read, written int) {
		s := New(cfg)
		base := serveSim(t, s)
		if warm {
			anthropicUsage(t, s, cachedSystem("sim-sonnet", 6000, "warm-up", ""))
		}
		b := pollAnthropic(t, base, anthropicBatch(t, base, params(n))["id"].(string))
		for _, l := range lines(t, download(t, b["results_url"].(string), "application/x-jsonl")) {
			var u antUsageJSON
			raw, _ := json.Marshal(l["result"].(map[string]any)["message"].(map[string]any)["usage"])
			_ = json.Unmarshal(raw, &u)
			read += u.CacheReadInputTokens
			written += u.CacheCreationInputTokens
		}
		return read, written
	}
	cfg := Config{Seed: 3, Now: fixedNow, Batch: BatchConfig{CompletionDelay: -1}}
	if r, w := results(t, cfg, false, 8); w != 1500 || r != 7*1500 {
		t.Fatalf("cold batch of 8: read %d written %d, want one write and 7 reads", r, w)
	}
	if r, w := results(t, cfg, true, 8); w != 0 || r != 8*1500 {
		t.Fatalf("after a realtime call: read %d written %d, want 8 reads", r, w)
	}
	never := cfg
	never.Batch.CacheHitProb = -1
	if r, w := results(t, never, true, 8); r != 0 || w != 8*1500 {
		t.Fatalf("CacheHitProb -1: read %d written %d, want 8 writes", r, w)
	}
	half := cfg
	half.Batch.CacheHitProb = 0.5
	r, w := results(t, half, true, 40)
	if r%1500 != 0 || r/1500 < 10 || r/1500 > 30 || r+w != 40*1500 {
		t.Fatalf("CacheHitProb 0.5: %d reads, %d writes of 40", r/1500, w/1500)
	}
	if r2, _ := results(t, half, true, 40); r2 != r {
		t.Fatalf("CacheHitProb draws differ for the same seed: %d vs %d", r, r2)
	}
	// OpenAI: the batch's usage sums the lines' cached tokens.
	s := New(cfg)
	base := serveSim(t, s)
	var bodies []map[string]any
	for i := range 4 {
		bodies = append(bodies, longPrompt(6000, fmt.Sprint(i)))
	}
	b := pollOpenAI(t, base, openAIBatch(t, base, bodies, nil)["id"].(string))
	if c := b["usage"].(map[string]any)["input_tokens_details"].(map[string]any)["cached_tokens"]; c != 3*1408.0 {
		t.Fatalf("OpenAI batch cached_tokens %v, want 3 × 1408", c)
	}
}

// TestCacheHasNoEffectOnReplies: caching changes the usage, never the
// answer.
func TestCacheHasNoEffectOnReplies(t *testing.T) {
	t.Parallel()
	cfg, _ := Preset("messy")
	cfg.Now = fixedNow
	on, off := New(cfg), New(func() Config { c := cfg; c.Cache.Off = true; return c }())
	body := orderRequest("job-1")
	body["messages"].([]any)[0].(map[string]any)["content"] = strings.Repeat("rules ", 1000) + body["messages"].([]any)[0].(map[string]any)["content"].(string)
	for i := range 2 {
		a, b := do(t, on, "/v1/chat/completions", body), do(t, off, "/v1/chat/completions", body)
		ta, _ := openAIText(t, a.Body.Bytes())
		tb, _ := openAIText(t, b.Body.Bytes())
		if ta != tb || a.Code != http.StatusOK {
			t.Fatalf("call %d: replies differ with the cache on", i)
		}
	}
}
