package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// discard is a minimal ResponseWriter so the benchmark measures the handler,
// not the recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

func benchBodies(b *testing.B) map[string]struct {
	path string
	body []byte
} {
	b.Helper()
	mk := func(v any) []byte {
		out, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	schema := json.RawMessage(orderSchema)
	return map[string]struct {
		path string
		body []byte
	}{
		"openai-prompt": {"/v1/chat/completions", mk(orderRequest("bench"))},
		"openai-json-schema": {"/v1/chat/completions", mk(map[string]any{"model": "m", "user": "bench",
			"messages":        []any{map[string]any{"role": "user", "content": "go"}},
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "o", "schema": schema}}})},
		"anthropic-tool": {"/v1/messages", mk(map[string]any{"model": "m", "max_tokens": 2000, "metadata": map[string]any{"user_id": "bench"},
			"messages": []any{map[string]any{"role": "user", "content": "go"}},
			"tools":    []any{map[string]any{"name": "o", "input_schema": schema}}, "tool_choice": map[string]any{"type": "tool", "name": "o"}})},
		"ollama-format": {"/api/chat", mk(map[string]any{"model": "m", "stream": false, "format": schema,
			"messages": []any{map[string]any{"role": "user", "content": "go"}}})},
	}
}

// BenchmarkServeHTTP measures the handler at zero latency.
func BenchmarkServeHTTP(b *testing.B) {
	for _, preset := range []string{"clean", "typical"} {
		for name, tc := range benchBodies(b) {
			b.Run(preset+"/"+name, func(b *testing.B) {
				cfg, _ := Preset(preset)
				s := New(cfg)
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for i := 0; b.Loop(); i++ {
					req := httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader(tc.body))
					w := &discard{h: http.Header{}}
					s.ServeHTTP(w, req)
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			})
		}
	}
}

// BenchmarkLoopback measures whole HTTP round trips over loopback, in
// parallel, with distinct tasks.
func BenchmarkLoopback(b *testing.B) {
	_, url, closeFn, err := Start(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer closeFn()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	start := time.Now()
	var n int64
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			body, _ := json.Marshal(orderRequest(fmt.Sprintf("loop-%d", i)))
			resp, err := client.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = bytes.NewBuffer(nil).ReadFrom(resp.Body)
			resp.Body.Close()
		}
	})
	n = int64(b.N)
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "req/s")
}
