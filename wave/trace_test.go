package wave

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/store"
)

// secretBase is a provider base URL with a key in its credentials and its
// query: a span names its server by host and port only.
const secretBase = "https://user:sk-test-SECRET1@api.example.test:8443/v1?api-key=sk-test-SECRET2"

// configuredProvider is the fake provider with a base URL, as an
// llm.Client has one.
type configuredProvider struct {
	*fakeProvider
	base string
}

func (p configuredProvider) Config() llm.Config {
	return llm.Config{Provider: p.name, BaseURL: p.base}
}

// tracedHarness is a harness whose driver traces into the exporter it
// returns, its provider's client at secretBase.
func tracedHarness(t *testing.T, provider string) (*harness, *tracetest.InMemoryExporter) {
	t.Helper()
	h := newHarness(t, provider, testConfig())
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h.tracer, h.baseURL = tp.Tracer("wave-test"), secretBase
	h.v = h.driver(testConfig())
	return h, exp
}

// collectSecret collects n jobs whose prompts hold a secret into one wave,
// recorded and submitted (or tried) when it is full.
func (h *harness) collectSecret(n int, deadline time.Time) {
	h.t.Helper()
	h.v.cfg.MaxRequests = n
	envs := h.jobs(n, deadline)
	for _, env := range envs {
		env.Prompt = "SECRET-PROMPT: say n"
	}
	h.collect(envs...)
	h.v.flushes.Wait()
}

// TestTraceWaveLife follows a wave through its provider steps and reads
// their spans back: a submit (upload and create), a poll while it runs, a
// poll that finds it ended, a collect of its results (one reply the
// schema refuses), and the submit of the repair wave that collect made.
// Each is a client span of its own trace, with the GenAI attributes that
// apply and the wave's, the state the step left the wave in; the collect
// sums the replies' usage and counts them; no attribute holds the prompt,
// a reply or the key.
func TestTraceWaveLife(t *testing.T) {
	t.Parallel()
	h, exp := tracedHarness(t, llm.ProviderOpenAI)
	// The jobs come with their delivery's span, as the worker's do; it
	// ends once they are collected, and is no step's parent.
	var job trace.Span
	h.ctx, job = h.tracer.Start(h.ctx, "fixpoint.job")
	h.collectSecret(3, time.Time{})
	job.End()
	w := h.ledger.wave(1)
	h.drive() // still running
	h.provider.end(w.ProviderBatchID, llm.BatchCompleted, func(it llm.BatchItem) *llm.BatchResult {
		r := validReply(it)
		if it.CustomID == "w1-2" {
			r.Response.Text = `{"n": "SECRET-REPLY"}` // the schema wants a number: a repair
		}
		return r
	})
	h.drive() // ended: collected, its repair wave recorded and submitted
	w2 := h.ledger.wave(2)
	if w2.Status != store.WaveSubmitted || w2.Requests != 1 {
		t.Fatalf("repair wave %s with %d requests, want submitted with 1", w2.Status, w2.Requests)
	}

	spans := slices.DeleteFunc(exp.GetSpans(), func(s tracetest.SpanStub) bool { return s.Name == "fixpoint.job" })
	want := []struct {
		name          string
		wave          int64
		requests      int
		state, pbatch string
	}{
		{SpanSubmit, 1, 3, store.WaveSubmitted, w.ProviderBatchID},
		{SpanPoll, 1, 3, store.WaveSubmitted, w.ProviderBatchID},
		{SpanPoll, 1, 3, store.WaveEnded, w.ProviderBatchID},
		{SpanCollect, 1, 3, store.WaveDone, w.ProviderBatchID},
		{SpanSubmit, 2, 1, store.WaveSubmitted, w2.ProviderBatchID},
	}
	if len(spans) != len(want) {
		t.Fatalf("spans %v, want %d", spanNames(spans), len(want))
	}
	traces := map[trace.TraceID]bool{}
	for i, s := range spans {
		wn := want[i]
		if s.Name != wn.name+" gpt-4o-mini" || s.SpanKind != trace.SpanKindClient {
			t.Errorf("span %d: %q of kind %s, want %q, a client span", i, s.Name, s.SpanKind, wn.name+" gpt-4o-mini")
		}
		if s.Parent.IsValid() || traces[s.SpanContext.TraceID()] {
			t.Errorf("span %d %q: parent %s, trace seen before %v; want each step the root of a trace of its own",
				i, s.Name, s.Parent.SpanID(), traces[s.SpanContext.TraceID()])
		}
		traces[s.SpanContext.TraceID()] = true
		if s.Status.Code == codes.Error {
			t.Errorf("span %d %q: status %v, want no error", i, s.Name, s.Status)
		}
		wantAttrs(t, s, map[attribute.Key]attribute.Value{
			"gen_ai.operation.name": attribute.StringValue("chat"),
			"gen_ai.provider.name":  attribute.StringValue(llm.ProviderOpenAI),
			"gen_ai.request.model":  attribute.StringValue("gpt-4o-mini"),
			"server.address":        attribute.StringValue("api.example.test"),
			"server.port":           attribute.IntValue(8443),
			AttrWaveID:              attribute.Int64Value(wn.wave),
			AttrBatch:               attribute.StringValue("b"),
			AttrRequests:            attribute.IntValue(wn.requests),
			AttrState:               attribute.StringValue(wn.state),
			AttrProviderBatch:       attribute.StringValue(wn.pbatch),
		})
	}
	wantAttrs(t, spans[3], map[attribute.Key]attribute.Value{
		AttrValid:                                  attribute.IntValue(2),
		AttrInvalid:                                attribute.IntValue(1),
		AttrFailed:                                 attribute.IntValue(0),
		"gen_ai.usage.input_tokens":                attribute.IntValue(300),
		"gen_ai.usage.output_tokens":               attribute.IntValue(30),
		"gen_ai.usage.cache_read.input_tokens":     attribute.IntValue(0),
		"gen_ai.usage.cache_creation.input_tokens": attribute.IntValue(0),
	})
	noSecrets(t, spans)
}

// TestTraceWaveStepErrors: a step whose provider call fails is an error
// span whose error.type is the provider error's class, with its HTTP
// status and request id, never its message; the state is the one the
// step left the wave in, retried or failed.
func TestTraceWaveStepErrors(t *testing.T) {
	t.Parallel()
	failure := func(c fixpoint.ErrorClass, status int) error {
		return &fixpoint.ProviderError{Class: c, Status: status, RequestID: "req_42",
			Message: "SECRET-MESSAGE: the request said SECRET-PROMPT"}
	}
	for _, tc := range []struct {
		name string
		// run drives the wave to the failing step.
		run        func(h *harness)
		span       string
		class      fixpoint.ErrorClass
		httpStatus int
		state      string
	}{
		{"create retried", func(h *harness) {
			h.provider.setInject(func(call string, _ any) error {
				return map[string]error{"create": failure(fixpoint.ClassServer, 500)}[call]
			})
			h.collectSecret(2, time.Time{})
		}, SpanSubmit, fixpoint.ClassServer, 500, store.WaveUploaded},
		{"create refused", func(h *harness) {
			h.provider.setInject(func(call string, _ any) error {
				return map[string]error{"create": failure(fixpoint.ClassBadRequest, 400)}[call]
			})
			h.collectSecret(2, time.Time{})
		}, SpanSubmit, fixpoint.ClassBadRequest, 400, store.WaveFailed},
		{"batch failed", func(h *harness) {
			h.collectSecret(2, time.Time{})
			h.provider.fail(h.ledger.wave(1).ProviderBatchID, "SECRET-MESSAGE: line 1 is SECRET-PROMPT")
			h.drive()
		}, SpanPoll, fixpoint.ClassBadRequest, 0, store.WaveFailed},
		{"cancel failed", func(h *harness) {
			deadline := h.clock.Now().Add(3 * time.Hour)
			h.collectSecret(2, deadline)
			h.provider.setInject(func(call string, _ any) error {
				return map[string]error{"cancel": failure(fixpoint.ClassServer, 503)}[call]
			})
			h.clock.advanceTo(deadline.Add(-time.Hour + time.Second))
			h.drive()
		}, SpanCancel, fixpoint.ClassServer, 503, store.WaveSubmitted},
		{"results download failed", func(h *harness) {
			h.collectSecret(2, time.Time{})
			h.provider.setInject(func(call string, _ any) error {
				return map[string]error{"results": failure(fixpoint.ClassServer, 502)}[call]
			})
			h.provider.end(h.ledger.wave(1).ProviderBatchID, llm.BatchCompleted, validReply)
			h.drive()
		}, SpanCollect, fixpoint.ClassServer, 502, store.WaveEnded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, exp := tracedHarness(t, llm.ProviderOpenAI)
			tc.run(h)
			spans := exp.GetSpans()
			var failed tracetest.SpanStubs
			for _, s := range spans {
				if s.Status.Code == codes.Error {
					failed = append(failed, s)
				}
			}
			if len(failed) != 1 || failed[0].Name != tc.span+" gpt-4o-mini" {
				t.Fatalf("error spans %v of %v, want one %s", spanNames(failed), spanNames(spans), tc.span)
			}
			s := failed[0]
			if s.Status.Description != string(tc.class) {
				t.Errorf("status %q, want the class %q", s.Status.Description, tc.class)
			}
			want := map[attribute.Key]attribute.Value{
				"error.type": attribute.StringValue(string(tc.class)),
				AttrState:    attribute.StringValue(tc.state),
				AttrWaveID:   attribute.Int64Value(1),
			}
			if tc.httpStatus > 0 {
				want["http.response.status_code"] = attribute.IntValue(tc.httpStatus)
				want[AttrRequestID] = attribute.StringValue("req_42")
			}
			wantAttrs(t, s, want)
			noSecrets(t, spans)
		})
	}
}

// wantAttrs checks that span s has each attribute of want.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[attribute.Key]attribute.Value) {
	t.Helper()
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		got[kv.Key] = kv.Value
	}
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("span %q has no %s, want %s", s.Name, k, v.Emit())
		} else if g.Type() != v.Type() || g.Emit() != v.Emit() {
			t.Errorf("span %q %s = %s (%s), want %s (%s)", s.Name, k, g.Emit(), g.Type(), v.Emit(), v.Type())
		}
	}
}

// noSecrets checks that no attribute, event or status of spans holds a
// prompt, a reply, a provider's error message or a key.
func noSecrets(t *testing.T, spans tracetest.SpanStubs) {
	t.Helper()
	for _, s := range spans {
		all := slices.Clone(s.Attributes)
		for _, e := range s.Events {
			all = append(all, e.Attributes...)
		}
		for _, kv := range all {
			if v := kv.Value.Emit(); strings.Contains(v, "SECRET") {
				t.Errorf("span %q attribute %s holds a secret: %s", s.Name, kv.Key, v)
			}
		}
		if strings.Contains(s.Status.Description, "SECRET") {
			t.Errorf("span %q status %q holds a secret", s.Name, s.Status.Description)
		}
	}
}

func spanNames(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = fmt.Sprintf("%s (wave state %s)", s.Name, stateOf(s))
	}
	return out
}

func stateOf(s tracetest.SpanStub) string {
	for _, kv := range s.Attributes {
		if kv.Key == AttrState {
			return kv.Value.AsString()
		}
	}
	return "?"
}
