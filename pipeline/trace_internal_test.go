package pipeline

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
)

// TestTargetOf: a call span names the server its client calls by host and
// port only, whatever else the base URL holds.
func TestTargetOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		base, address string
		port          int
	}{
		{"https://api.openai.com/v1", "api.openai.com", 443},
		{"http://127.0.0.1:11434", "127.0.0.1", 11434},
		{"http://[::1]:8089/v1?api-version=2024-10-21", "::1", 8089},
		{"http://user:hunter2@gateway.internal/v1", "gateway.internal", 80},
	} {
		c, err := llm.New(llm.Config{Provider: llm.ProviderOpenAI, BaseURL: tc.base})
		if err != nil {
			t.Fatalf("%s: %v", tc.base, err)
		}
		got := targetOf("openai", c)
		if got != (callTarget{provider: "openai", address: tc.address, port: tc.port}) {
			t.Errorf("%s: %+v, want %s:%d", tc.base, got, tc.address, tc.port)
		}
	}
	if got := targetOf("ollama", &fakeCompleter{}); got != (callTarget{provider: "ollama"}) {
		t.Errorf("a client with no configuration: %+v, want the provider's name alone", got)
	}
}

// repairCompleter answers a job's first request with a reply the schema
// refuses and its correction with a valid one: each job takes two calls.
type repairCompleter struct{}

func (repairCompleter) Complete(_ context.Context, req fixpoint.Request) (*fixpoint.Response, error) {
	text := validReply
	if len(req.Messages) == 1 {
		text = enumReply
	}
	return &fixpoint.Response{Text: text, FinishReason: fixpoint.FinishStop, Status: 200, Model: req.Model,
		Usage: fixpoint.Usage{InputTokens: 100, OutputTokens: 20}}, nil
}

// BenchmarkLoopSpans is the cost of the spans of a job of two calls (a
// repair) through the loop: none (the default), and recorded by the SDK
// into memory.
func BenchmarkLoopSpans(b *testing.B) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, bc := range []struct {
		name   string
		tracer trace.Tracer
	}{{"off", nil}, {"recorded", tp.Tracer(TracerName)}} {
		b.Run(bc.name, func(b *testing.B) {
			l := NewLoop(repairCompleter{}, LoopConfig{Tracer: bc.tracer})
			job := testJob(b, fixpoint.Limits{MaxAttempts: 3})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := l.Run(ctx, job)
				if err != nil || res.Status != fixpoint.StatusValid || len(res.Attempts) != 2 {
					b.Fatalf("%v %v after %d attempts", err, res.Status, len(res.Attempts))
				}
				exp.Reset()
			}
		})
	}
}
