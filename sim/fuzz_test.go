package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzServeHTTP sends arbitrary bodies to every route: the handler must not
// panic and must always answer with a JSON body.
func FuzzServeHTTP(f *testing.F) {
	seeds := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"name":"t","input_schema":{"type":"object"}}]}`,
		`{"model":"m","stream":false,"format":{"type":"array","items":{"$ref":"#"}},"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"<json-schema>\n{\"type\":\"object\",\"required\":[\"a\"],\"properties\":{\"a\":{\"pattern\":\"(\"}}}\n</json-schema>"},{"role":"user","content":"x"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"<previous-reply>\n{\"a\":1\n</previous-reply>"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"allOf":[{"$ref":"#/$defs/nope"}]}}}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"fix /a"}]}`,
		`{"model":"m","stream":false,"format":{"type":"object","required":["a"],"properties":{"a":{"$ref":"#"}}},"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","stream":false,"format":{"$ref":"#"},"messages":[{"role":"user","content":"x"}]}`,
		`{`,
		``,
	}
	for i, s := range seeds {
		f.Add(s, uint8(i))
	}
	// Self-referent schemas, each sent where its wire format reads it
	// (route 0: OpenAI, 1: Anthropic, 2: Ollama).
	for _, s := range []struct {
		body  string
		route uint8
	}{
		{`{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$defs":{"node":{"type":["object","array"],"properties":{"name":{"type":"string"}},"items":{"$ref":"#/$defs/node"}}},"$ref":"#/$defs/node"}}},"messages":[{"role":"user","content":"x"}]}`, 0},
		{`{"model":"m","max_tokens":50,"tools":[{"name":"t","input_schema":{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}}],"tool_choice":{"type":"tool","name":"t"},"messages":[{"role":"user","content":"x"}]}`, 1},
		{`{"model":"m","stream":false,"format":{"type":"object","required":["a","b"],"properties":{"a":{"$ref":"#"},"b":{"$ref":"#"}}},"messages":[{"role":"user","content":"x"}]}`, 2},
		{`{"model":"m","tools":[{"type":"function","function":{"name":"t","parameters":{"type":"array","minItems":5,"items":{"$ref":"#"}}}}],"tool_choice":{"type":"function","function":{"name":"t"}},"messages":[{"role":"user","content":"x"}]}`, 0},
		{`{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"t","input_schema":{"$defs":{"a":{"allOf":[` + strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/a"},`, 20), ",") + `]}},"$ref":"#/$defs/a"}}]}`, 1},
		{`{"model":"m","stream":false,"format":{"type":"array","minItems":1000000000,"items":{"type":"string","minLength":1000000000}},"messages":[{"role":"user","content":"x"}]}`, 2},
		{`{"model":"m","stream":false,"messages":[{"role":"system","content":"<json-schema>\n{\"type\":\"object\",\"required\":[\"c\"],\"properties\":{\"c\":{\"$ref\":\"#\"}}}\n</json-schema>"},{"role":"user","content":"x"}]}`, 2},
		// Agent requests (they offer set_output), with tool turns.
		{`{"model":"m","tools":[{"type":"function","function":{"name":"set_output","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}},{"type":"function","function":{"name":"finish","parameters":{}}}],"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"set_output","arguments":"{\"a\":"}},{"id":"c2","type":"function","function":{"name":"finish","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"Error: /a"},{"role":"tool","tool_call_id":"c2","content":"Error: no output"}],"tool_choice":"required"}`, 0},
		{`{"model":"m","max_tokens":50,"tools":[{"name":"set_output","input_schema":{"type":"array","items":{"$ref":"#"}}},{"name":"fail","input_schema":{}}],"tool_choice":{"type":"tool","name":"fail"},"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"set_output","input":[]}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"/0"}],"is_error":true},{"type":"text","text":"again"}]}]}`, 1},
		{`{"model":"m","stream":false,"tools":[{"type":"function","function":{"name":"set_output","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"finish","arguments":{}}}]},{"role":"tool","content":"ok","tool_name":"finish"}]}`, 2},
	} {
		f.Add(s.body, s.route)
	}
	paths := []string{"/v1/chat/completions", "/v1/messages", "/api/chat"}
	s := New(Config{Mix: Mix{Truncation: 0.2, WrongType: 0.5, MissingRequired: 0.5, ExtraProperty: 0.5, Fence: 0.5, Comments: 0.5}, Seed: 1})
	f.Fuzz(func(t *testing.T, body string, route uint8) {
		req := httptest.NewRequest(http.MethodPost, paths[int(route)%len(paths)], bytes.NewReader([]byte(body)))
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("status %d: body is not JSON: %q", rec.Code, rec.Body)
		}
	})
}
