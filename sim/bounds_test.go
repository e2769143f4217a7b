package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// selfReferent are schemas that refer to themselves, fan out, or ask for
// more than a reply can hold. valid marks those a finite instance satisfies
// (the generator must then produce one); the others have none (a reference
// cycle that consumes no input is an error to the reference validator), and
// the simulator must still answer, with a bounded value.
var selfReferent = []struct {
	name   string
	schema string
	valid  bool
}{
	{"items cycle to a node with properties",
		`{"$defs":{"node":{"type":["object","array"],"properties":{"name":{"type":"string"}},"items":{"$ref":"#/$defs/node"}}},"$ref":"#/$defs/node"}`, true},
	{"root self-reference", `{"$ref":"#"}`, false},
	{"mutual recursion through $defs", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, false},
	{"required self-reference", `{"type":"object","required":["c"],"properties":{"c":{"$ref":"#"}}}`, false},
	{"two required self-references", `{"type":"object","required":["a","b"],"properties":{"a":{"$ref":"#"},"b":{"$ref":"#"}}}`, false},
	{"self-reference with minItems", `{"type":"array","minItems":5,"items":{"$ref":"#"}}`, false},
	{"mutual required recursion", `{"$defs":{"a":{"type":"object","required":["b"],"properties":{"b":{"$ref":"#/$defs/b"}}},
		"b":{"type":"array","minItems":3,"items":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`, false},
	{"allOf fan-out", `{"$defs":{"a":{"allOf":[` + strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/a"},`, 20), ",") + `]}},"$ref":"#/$defs/a"}`, false},
	{"anyOf and allOf fan-out", `{"$defs":{"a":{"type":"object","anyOf":[{"$ref":"#/$defs/b"}],"allOf":[{"$ref":"#/$defs/b"},{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]},
		"b":{"allOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]}},"$ref":"#/$defs/a"}`, false},
	{"self-reference with a large minItems", `{"type":"array","minItems":200,"items":{"$ref":"#"}}`, false},
	{"many required self-references", `{"type":"object","required":[` + quotedNames(300) + `],"properties":{` + refProps(300) + `}}`, false},
	{"huge minItems", `{"type":"array","minItems":1000000000,"items":{"type":"integer"}}`, false},
	{"huge minLength", `{"type":"object","required":["s"],"properties":{"s":{"type":"string","minLength":1000000000}}}`, false},
	{"huge minItems of a big const", `{"type":"array","minItems":100000,"items":{"const":"` + strings.Repeat("x", 10000) + `"}}`, false},
}

// maxReplyValue bounds the JSON text of any generated value.
const maxReplyValue = 1 << 20

// finishes runs f and fails the test if it has not returned after limit (a
// guard against a hang or a runaway, not a measure of speed). f must not
// use t: it may still be running when the test ends.
func finishes(t *testing.T, what string, limit time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s did not finish within %v", what, limit)
	}
}

// TestWalkersBoundedOnSelfReferentSchemas: generating, checking and placing
// faults terminate on every self-referent schema, with a bounded value.
func TestWalkersBoundedOnSelfReferentSchemas(t *testing.T) {
	t.Parallel()
	for _, tc := range selfReferent {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc, err := parseSchema([]byte(tc.schema))
			if err != nil {
				t.Fatalf("parseSchema: %v", err)
			}
			var values [][]byte
			finishes(t, "generate, check and place faults", 2*time.Minute, func() {
				for seed := range uint64(5) {
					g := generator{doc: doc, rng: rand.New(rand.NewPCG(seed, 1))}
					v := g.gen(doc.root, "", 0)
					c := checker{doc: doc}
					c.walk(doc.root, v, "", 0)
					c.sites(doc.root, v, "", 0, map[FaultKind][]site{})
					values = append(values, encode(v, encOpts{}))
				}
			})
			sch := compileSchema(t, tc.schema)
			for seed, b := range values {
				if len(b) > maxReplyValue {
					t.Fatalf("seed %d: a %d-byte value, over %d", seed, len(b), maxReplyValue)
				}
				if err := sch.Validate(decodeValue(t, b)); tc.valid && err != nil {
					t.Fatalf("seed %d: %s is invalid: %v", seed, b, err)
				}
			}
		})
	}
}

// TestResolveBounded: one resolution of a node visits a bounded number of
// nodes, however the schema fans out through $ref and allOf.
func TestResolveBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range selfReferent {
		doc, err := parseSchema([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		finishes(t, tc.name+": resolve", 2*time.Minute, func() { doc.resolve(doc.root) })
	}
}

// TestServerAnswersSelfReferentSchemas sends each schema in each mode on
// each wire format, with every content fault on, then a correction naming
// the faults: the simulator answers each with a bounded reply.
func TestServerAnswersSelfReferentSchemas(t *testing.T) {
	t.Parallel()
	s := New(Config{Seed: 3, Now: fixedNow, NewFaultProb: 1, Mix: Mix{WrongType: 1, MissingRequired: 1, ExtraProperty: 1,
		EnumViolation: 1, OutOfRange: 1, Fence: 0.5, Comments: 0.5, TrailingComma: 0.5}})
	for _, tc := range selfReferent {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var schema any = decodeValue(t, []byte(tc.schema))
			prompt := "Answer as JSON.\n" + fixpoint.SchemaMarkerOpen + "\n" + tc.schema + "\n" + fixpoint.SchemaMarkerClose
			user := []any{map[string]any{"role": "user", "content": "task " + tc.name}}
			tool := map[string]any{"type": "function", "function": map[string]any{"name": "result", "parameters": schema}}
			requests := map[string]map[string]any{
				"/v1/chat/completions prompt": {"model": "m", "messages": append([]any{map[string]any{"role": "system", "content": prompt}}, user...)},
				"/v1/chat/completions json_schema": {"model": "m", "messages": user, "response_format": map[string]any{"type": "json_schema",
					"json_schema": map[string]any{"name": "result", "schema": schema, "strict": false}}},
				"/v1/chat/completions tool": {"model": "m", "messages": user, "tools": []any{tool},
					"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "result"}}},
				"/v1/messages prompt": {"model": "m", "max_tokens": 100000, "system": prompt, "messages": user},
				"/v1/messages tool": {"model": "m", "max_tokens": 100000, "messages": user,
					"tools":       []any{map[string]any{"name": "result", "input_schema": schema}},
					"tool_choice": map[string]any{"type": "tool", "name": "result"}},
				"/api/chat prompt":      {"model": "m", "stream": false, "messages": append([]any{map[string]any{"role": "system", "content": prompt}}, user...)},
				"/api/chat json_schema": {"model": "m", "stream": false, "messages": user, "format": schema},
				"/api/chat tool":        {"model": "m", "stream": false, "messages": user, "tools": []any{tool}},
			}
			for name, req := range requests {
				path, _, _ := strings.Cut(name, " ")
				var first, second *httptest.ResponseRecorder
				finishes(t, name, 2*time.Minute, func() {
					first = serve(s, path, req)
					// A correction turn naming every fault the reply carries.
					msgs := append(append([]any{}, req["messages"].([]any)...),
						map[string]any{"role": "assistant", "content": replyText(first.Body.Bytes())},
						map[string]any{"role": "user", "content": "Fix these: " + first.Header().Get("X-Sim-Faults")})
					next := maps.Clone(req)
					next["messages"] = msgs
					second = serve(s, path, next)
				})
				for i, rec := range []*httptest.ResponseRecorder{first, second} {
					if rec.Code != 200 || rec.Body.Len() > 4*maxReplyValue {
						t.Fatalf("%s, turn %d: status %d, %d bytes", name, i+1, rec.Code, rec.Body.Len())
					}
				}
			}
		})
	}
}

// serve sends body to the handler (do without t, for use in finishes).
func serve(s *Server, path string, body any) *httptest.ResponseRecorder {
	b, _ := json.Marshal(body)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(b)))
	return rec
}

// replyText digs the answer text out of any wire format's reply, enough to
// send it back as the previous reply.
func replyText(body []byte) string {
	v := decodeAny(body)
	m, _ := v.(map[string]any)
	if ch, ok := m["choices"].([]any); ok && len(ch) > 0 {
		msg, _ := ch[0].(map[string]any)["message"].(map[string]any)
		if s, ok := msg["content"].(string); ok {
			return s
		}
		if calls, ok := msg["tool_calls"].([]any); ok && len(calls) > 0 {
			fn, _ := calls[0].(map[string]any)["function"].(map[string]any)
			s, _ := fn["arguments"].(string)
			return s
		}
	}
	if content, ok := m["content"].([]any); ok {
		for _, c := range content {
			cm, _ := c.(map[string]any)
			if in, ok := cm["input"]; ok {
				return string(mustJSON(in))
			}
			if s, ok := cm["text"].(string); ok {
				return s
			}
		}
	}
	if msg, ok := m["message"].(map[string]any); ok {
		if s, _ := msg["content"].(string); s != "" {
			return s
		}
		return fmt.Sprint(msg["tool_calls"])
	}
	return ""
}

func decodeAny(b []byte) any {
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// TestTextOfBoundedNesting: tool_result content nested in tool_result
// content is read to maxContentDepth only, not to whatever depth a request
// body (32 MiB) can hold.
func TestTextOfBoundedNesting(t *testing.T) {
	t.Parallel()
	const levels = 10
	raw := `"deepest"`
	for i := levels - 1; i >= 0; i-- {
		raw = fmt.Sprintf(`[{"type":"text","text":"L%d "},{"type":"tool_result","content":%s}]`, i, raw)
	}
	got := textOf(json.RawMessage(raw))
	want := "L0 L1 L2 L3 L4 "
	if got != want {
		t.Fatalf("textOf = %q, want %q", got, want)
	}
}

func quotedNames(n int) string {
	q := make([]string, n)
	for i := range q {
		q[i] = fmt.Sprintf(`"p%d"`, i)
	}
	return strings.Join(q, ",")
}

func refProps(n int) string {
	q := make([]string, n)
	for i := range q {
		q[i] = fmt.Sprintf(`"p%d":{"$ref":"#"}`, i)
	}
	return strings.Join(q, ",")
}
