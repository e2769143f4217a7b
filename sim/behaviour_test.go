package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

func TestOutcomeFaultsOnEachWire(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(weatherSchema)
	msgs := []any{map[string]any{"role": "user", "content": "weather?"}}
	openaiJSON := map[string]any{"model": "m", "messages": msgs,
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "w", "schema": schema}}}
	anthTool := map[string]any{"model": "m", "max_tokens": 500, "messages": msgs,
		"tools":       []any{map[string]any{"name": "w", "input_schema": schema}},
		"tool_choice": map[string]any{"type": "tool", "name": "w"}}
	anthText := map[string]any{"model": "m", "max_tokens": 500, "messages": msgs,
		"system": fixpoint.SchemaMarkerOpen + "\n" + weatherSchema + "\n" + fixpoint.SchemaMarkerClose}
	ollama := map[string]any{"model": "m", "stream": false, "format": schema, "messages": msgs}
	tests := []struct {
		name string
		mix  Mix
		path string
		body map[string]any
		want string // a fragment the reply must hold
	}{
		{"openai-refusal", Mix{Refusal: 1}, "/v1/chat/completions", openaiJSON, `"content":null,"refusal":"I'm sorry, but I can't help with that."`},
		{"openai-truncation", Mix{Truncation: 1}, "/v1/chat/completions", openaiJSON, `"finish_reason":"length"`},
		{"openai-empty", Mix{Empty: 1}, "/v1/chat/completions", openaiJSON, `"content":"","refusal":null`},
		{"anthropic-refusal", Mix{Refusal: 1}, "/v1/messages", anthText, `"stop_reason":"refusal"`},
		{"anthropic-truncation", Mix{Truncation: 1}, "/v1/messages", anthText, `"stop_reason":"max_tokens"`},
		{"anthropic-tool-truncation", Mix{Truncation: 1}, "/v1/messages", anthTool, `"input":{}}],"stop_reason":"max_tokens"`},
		{"anthropic-empty", Mix{Empty: 1}, "/v1/messages", anthText, `"content":[],"stop_reason":"end_turn"`},
		{"ollama-truncation", Mix{Truncation: 1}, "/api/chat", ollama, `"done_reason":"length"`},
		{"ollama-refusal", Mix{Refusal: 1}, "/api/chat", ollama, `"content":"I'm sorry, but I can't help with that."`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := do(t, New(Config{Mix: tc.mix, Now: fixedNow}), tc.path, tc.body)
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("status %d body %s, want it to contain %s", rec.Code, rec.Body, tc.want)
			}
		})
	}
}

func TestJSONModeWithoutSchemaAnswersJSON(t *testing.T) {
	t.Parallel()
	msgs := []any{map[string]any{"role": "user", "content": "hello"}}
	tests := []struct {
		name, path string
		body       map[string]any
		jsonWanted bool
	}{
		{"openai json_object", "/v1/chat/completions", map[string]any{"model": "m", "messages": msgs, "response_format": map[string]any{"type": "json_object"}}, true},
		{"openai text", "/v1/chat/completions", map[string]any{"model": "m", "messages": msgs}, false},
		{"ollama json", "/api/chat", map[string]any{"model": "m", "stream": false, "format": "json", "messages": msgs}, true},
		{"ollama text", "/api/chat", map[string]any{"model": "m", "stream": false, "messages": msgs}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := do(t, New(Config{}), tc.path, tc.body)
			var r struct {
				Choices []struct{ Message struct{ Content string } }
				Message struct{ Content string }
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			text := r.Message.Content
			if len(r.Choices) > 0 {
				text = r.Choices[0].Message.Content
			}
			if got := json.Valid([]byte(text)); got != tc.jsonWanted || text == "" {
				t.Fatalf("reply %q: JSON %v, want %v", text, got, tc.jsonWanted)
			}
		})
	}
}

func TestMaxTokensCutsTheReply(t *testing.T) {
	t.Parallel()
	s := New(Config{Now: fixedNow})
	body := orderRequest("cut")
	body["max_completion_tokens"] = 10
	rec := do(t, s, "/v1/chat/completions", body)
	var r struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Choices[0].FinishReason != "length" || r.Usage.CompletionTokens != 10 || len(r.Choices[0].Message.Content) != 40 {
		t.Fatalf("finish %q, %d tokens, content %q; want length, 10 tokens, 40 bytes", r.Choices[0].FinishReason, r.Usage.CompletionTokens, r.Choices[0].Message.Content)
	}
	if got := rec.Header().Get("X-Sim-Faults"); got != "truncation" {
		t.Errorf("X-Sim-Faults = %q, want truncation", got)
	}
}

func TestUsageIsBytesOverFour(t *testing.T) {
	t.Parallel()
	s := New(Config{Now: fixedNow})
	system := strings.Repeat("s", 10)
	user := strings.Repeat("u", 7)
	body := map[string]any{"model": "m", "max_tokens": 1000, "system": system,
		"messages": []any{map[string]any{"role": "user", "content": user}},
		"tools":    []any{map[string]any{"name": "w", "input_schema": json.RawMessage(weatherSchema)}}}
	rec := do(t, s, "/v1/messages", body)
	var r struct {
		Content []struct {
			Type  string
			Input json.RawMessage
			Text  string
		}
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(weatherSchema)); err != nil {
		t.Fatal(err)
	}
	wantIn := (len(system) + len(user) + compact.Len() + 3) / 4 // the schema goes out compacted
	last := r.Content[len(r.Content)-1]
	wantOut := (len(last.Input) + 3) / 4
	if r.Usage.InputTokens != wantIn || r.Usage.OutputTokens != wantOut {
		t.Fatalf("usage in %d out %d, want %d and %d", r.Usage.InputTokens, r.Usage.OutputTokens, wantIn, wantOut)
	}
}

// TestCachedTokensOnLongConversations: OpenAI's cache is automatic; the
// first sight of a long prompt reads nothing and writes it, and the same
// prompt again reads its longest prefix in whole 128-token steps.
func TestCachedTokensOnLongConversations(t *testing.T) {
	t.Parallel()
	s := New(Config{Now: fixedNow})
	long := strings.Repeat("x", 8000) // 2002 prompt tokens with the two short messages
	body := map[string]any{"model": "m", "messages": []any{
		map[string]any{"role": "user", "content": long},
		map[string]any{"role": "assistant", "content": "ok"},
		map[string]any{"role": "user", "content": "more"},
	}}
	cached := func() int {
		rec := do(t, s, "/v1/chat/completions", body)
		var r struct {
			Usage struct {
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &r)
		return r.Usage.PromptTokensDetails.CachedTokens
	}
	if got := cached(); got != 0 {
		t.Fatalf("first sight: cached_tokens = %d, want 0", got)
	}
	if got := cached(); got != 1920 {
		t.Fatalf("second sight: cached_tokens = %d, want 1920 (2002 prompt tokens in steps of 128)", got)
	}
}

// faultyFirstAttempt returns a task whose first attempt has content faults.
func faultyFirstAttempt(t *testing.T, s *Server) (map[string]any, string, []string) {
	t.Helper()
	for i := range 200 {
		body := orderRequest(fmt.Sprintf("repair-%d", i))
		rec := do(t, s, "/v1/chat/completions", body)
		text, _ := openAIText(t, rec.Body.Bytes())
		var ptrs []string
		for _, f := range strings.Split(rec.Header().Get("X-Sim-Faults"), ",") {
			if _, p, ok := strings.Cut(f, ":"); ok {
				ptrs = append(ptrs, p)
			}
		}
		if len(ptrs) >= 2 {
			return body, text, ptrs
		}
	}
	t.Fatal("no first attempt with two content faults")
	return nil, "", nil
}

func TestRepairStrategyFixesExactlyWhatIsNamed(t *testing.T) {
	t.Parallel()
	s := New(Config{Seed: 9, Mix: Mix{WrongType: 0.5, MissingRequired: 0.5, ExtraProperty: 0.5, EnumViolation: 0.5, OutOfRange: 0.5},
		FixProb: 1, Now: fixedNow})
	body, prev, ptrs := faultyFirstAttempt(t, s)
	truth, err := s.Truth(body["user"].(string), []byte(orderSchema), userText(body))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(feedback string) (string, string) {
		b := orderRequest(body["user"].(string))
		msgs := b["messages"].([]any)
		b["messages"] = append(msgs[:1:1], map[string]any{"role": "user", "content": feedback + "\n" + fixpoint.PreviousReplyOpen + "\n" + prev + "\n" + fixpoint.PreviousReplyClose})
		rec := do(t, s, "/v1/chat/completions", b)
		text, _ := openAIText(t, rec.Body.Bytes())
		return text, rec.Header().Get("X-Sim-Faults")
	}
	// Naming every pointer fixes everything: the reply is the ground truth.
	text, faults := ask("Fix " + strings.Join(ptrs, " and "))
	var got any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode %q: %v", text, err)
	}
	if faults != "" || !reflect.DeepEqual(got, truth) {
		t.Fatalf("after naming %v: faults %q, reply %s, want the ground truth", ptrs, faults, text)
	}
	// Naming one leaves the others.
	_, faults = ask("Fix " + ptrs[0] + ".")
	if strings.Contains(faults, ":"+ptrs[0]+",") || strings.HasSuffix(faults, ":"+ptrs[0]) || !strings.Contains(faults, ptrs[1]) {
		t.Fatalf("after naming %s: faults %q, want it fixed and %s kept", ptrs[0], faults, ptrs[1])
	}
	// Vague feedback fixes nothing.
	_, faults = ask("Wrong, try again.")
	for _, p := range ptrs {
		if !strings.Contains(faults, p) {
			t.Fatalf("after vague feedback: faults %q lost %s", faults, p)
		}
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  string
		f    ContentFault
		want bool
	}{
		{"exact", "at /items/0/sku: wrong", ContentFault{Kind: FaultWrongType, Pointer: "/items/0/sku"}, true},
		{"quoted", `at "/items/0/sku"`, ContentFault{Kind: FaultWrongType, Pointer: "/items/0/sku"}, true},
		{"end of sentence", "fix /total.", ContentFault{Kind: FaultOutOfRange, Pointer: "/total"}, true},
		{"prefix of longer pointer", "at /items/0/sku_code", ContentFault{Kind: FaultWrongType, Pointer: "/items/0/sku"}, false},
		{"longer index", "at /items/10", ContentFault{Kind: FaultWrongType, Pointer: "/items/1"}, false},
		{"suffix of longer pointer", "at /order/items/0", ContentFault{Kind: FaultWrongType, Pointer: "/items/0"}, false},
		{"vague", "invalid, try again", ContentFault{Kind: FaultWrongType, Pointer: "/total"}, false},
		{"missing at parent with name", `/customer: missing required property "email"`, ContentFault{Kind: FaultMissingRequired, Pointer: "/customer/email"}, true},
		{"missing at root with name", `(root): missing required property 'paid'`, ContentFault{Kind: FaultMissingRequired, Pointer: "/paid"}, true},
		{"missing name without parent", `missing required property "email"`, ContentFault{Kind: FaultMissingRequired, Pointer: "/customer/email"}, false},
		{"extra by pointer", `/notes2: property "notes2" is not allowed`, ContentFault{Kind: FaultExtraProperty, Pointer: "/notes2"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := names(tc.msg, tc.f); got != tc.want {
				t.Fatalf("names(%q, %v) = %v, want %v", tc.msg, tc.f, got, tc.want)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr error
	}{
		{"zero", Config{}, nil},
		{"prob above one", Config{Mix: Mix{Fence: 1.5}}, ErrConfig},
		{"negative prob", Config{NewFaultProb: -0.1}, ErrConfig},
		{"outcomes above one", Config{Mix: Mix{Refusal: 0.6, Empty: 0.6}}, ErrConfig},
		{"transport above one", Config{Transport: Transport{Hang: 0.7, Reset: 0.7}}, ErrConfig},
		{"negative rpm", Config{RPM: -1}, ErrConfig},
		{"bad dist", Config{Latency: Latency{Dist: "pareto"}}, ErrConfig},
		{"negative latency", Config{Latency: Latency{RequestP50: -1}}, ErrConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewChecked(tc.cfg)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("NewChecked = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestPresets(t *testing.T) {
	t.Parallel()
	infos := PresetNames()
	var names []string
	for _, p := range infos {
		names = append(names, p.Name)
		cfg, err := Preset(p.Name)
		if err != nil {
			t.Fatalf("Preset(%q): %v", p.Name, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("preset %s: %v", p.Name, err)
		}
		if p.Description == "" {
			t.Errorf("preset %s has no description", p.Name)
		}
	}
	if want := []string{"clean", "typical", "messy", "rate-limited", "chaos"}; !reflect.DeepEqual(names, want) {
		t.Errorf("presets %v, want %v", names, want)
	}
	if _, err := Preset("nope"); !errors.Is(err, ErrUnknownPreset) {
		t.Errorf("Preset(nope) = %v, want ErrUnknownPreset", err)
	}
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"unknown path", "POST", "/v1/embeddings", `{}`, 404},
		{"get", "GET", "/v1/chat/completions", ``, 405},
		{"openai bad json", "POST", "/v1/chat/completions", `{`, 400},
		{"openai no messages", "POST", "/v1/chat/completions", `{"model":"m","messages":[]}`, 400},
		{"openai stream", "POST", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`, 400},
		{"anthropic no max_tokens", "POST", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 400},
		{"anthropic bad role", "POST", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, 400},
		{"anthropic unknown tool", "POST", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"a","input_schema":{}}],"tool_choice":{"type":"tool","name":"b"}}`, 400},
		{"ollama streaming default", "POST", "/api/chat", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(tc.method, tc.path, bytes.NewReader([]byte(tc.body)))
			rec := httptest.NewRecorder()
			New(Config{}).ServeHTTP(rec, req)
			if rec.Code != tc.want || !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("status %d body %s, want %d with a JSON error", rec.Code, rec.Body, tc.want)
			}
		})
	}
}

func TestOllamaBusyWhenRateLimited(t *testing.T) {
	t.Parallel()
	s := New(Config{RPM: 1, Now: fixedNow})
	body := map[string]any{"model": "m", "stream": false, "messages": []any{map[string]any{"role": "user", "content": "x"}}}
	do(t, s, "/api/chat", body)
	rec := do(t, s, "/api/chat", body)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "server busy") {
		t.Fatalf("status %d body %s, want 503 server busy", rec.Code, rec.Body)
	}
}
