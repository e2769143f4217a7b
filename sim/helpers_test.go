package sim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fixedNow is the injected clock of the tests.
func fixedNow() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

// compileSchema compiles a schema with the reference validator.
func compileSchema(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("unmarshal schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatalf("add schema: %v", err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return sch
}

// decodeValue decodes JSON text the way the reference validator wants it.
func decodeValue(t testing.TB, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// do sends one request to the handler and returns the recorded response.
func do(t testing.TB, s *Server, path string, body any) *httptest.ResponseRecorder {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatalf("marshal request: %v", err)
	}
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// openAIText returns the text of an OpenAI reply: content or tool arguments.
func openAIText(t testing.TB, body []byte) (text, finish string) {
	t.Helper()
	var r struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				Refusal   *string `json:"refusal"`
				ToolCalls []struct {
					Function struct {
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("decode reply %s: %v", body, err)
	}
	m := r.Choices[0].Message
	switch {
	case len(m.ToolCalls) > 0:
		return m.ToolCalls[0].Function.Arguments, r.Choices[0].FinishReason
	case m.Content != nil:
		return *m.Content, r.Choices[0].FinishReason
	case m.Refusal != nil:
		return *m.Refusal, r.Choices[0].FinishReason
	}
	return "", r.Choices[0].FinishReason
}

func readAll(t testing.TB, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return b
}

// userText is the first user message of a request body: the task text
// Server.Truth takes.
func userText(body map[string]any) string {
	for _, m := range body["messages"].([]any) {
		if msg := m.(map[string]any); msg["role"] == "user" {
			return msg["content"].(string)
		}
	}
	return ""
}

// orderSchema is the schema most tests use: every content fault kind has a
// place in it, and it has booleans for the Python literal fault.
const orderSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["order_id", "status", "customer", "items", "total", "paid"],
  "properties": {
    "order_id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
    "status": {"type": "string", "enum": ["pending", "shipped", "delivered"]},
    "customer": {
      "type": "object",
      "additionalProperties": false,
      "required": ["name", "email"],
      "properties": {
        "name": {"type": "string", "minLength": 1},
        "email": {"type": "string", "format": "email"},
        "age": {"type": "integer", "minimum": 18, "maximum": 120}
      }
    },
    "items": {
      "type": "array", "minItems": 1, "maxItems": 4,
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["sku", "qty", "price"],
        "properties": {
          "sku": {"type": "string", "pattern": "^SKU-[0-9]{5}$"},
          "qty": {"type": "integer", "minimum": 1, "maximum": 99},
          "price": {"type": "number", "exclusiveMinimum": 0, "maximum": 10000, "multipleOf": 0.01}
        }
      }
    },
    "total": {"type": "number", "minimum": 0},
    "paid": {"type": "boolean"},
    "notes": {"type": ["string", "null"], "maxLength": 80}
  }
}`
