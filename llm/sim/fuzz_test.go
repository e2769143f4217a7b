package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
