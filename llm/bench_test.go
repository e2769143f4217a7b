package llm

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// BenchmarkComplete measures the client against a zero-latency httptest
// server returning the published OpenAI example (openai_text_basic).
func BenchmarkComplete(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,"model":"gpt-5.4","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I assist you today?","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default"}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_1")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "59")
		w.Write(body)
	}))
	defer srv.Close()
	req := fixpoint.Request{Model: "gpt-5.4", System: "Answer in JSON.", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "Hello!"}}, MaxTokens: 256}

	run := func(b *testing.B, parallel bool) {
		c, err := New(Config{Provider: ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: "sk-bench",
			Lane: LaneConfig{InitialConcurrency: 64, MaxConcurrency: 64}})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		start := time.Now()
		if parallel {
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Complete(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		} else {
			for b.Loop() {
				if _, err := c.Complete(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	}
	b.Run("serial", func(b *testing.B) { run(b, false) })
	b.Run("parallel", func(b *testing.B) { run(b, true) })
}
