package pipeline_test

import (
	"fmt"
	"net/http"
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
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/wave"
)

// TestTraceJobWithRepair runs one job whose first reply breaks the schema
// (after a 500 the transport retries) and whose second is valid, and reads
// its spans back from an in-memory exporter: a job span parenting one
// "chat {model}" span per attempt, with the GenAI semantic conventions'
// attributes and fixpoint's, the transport retry an event of its call,
// and no attribute holding the prompt, the reply, the schema or the key.
func TestTraceJobWithRepair(t *testing.T) {
	t.Parallel()
	const responseModel = "sim-model-2026-01-05"
	h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(n int, _ *http.Request) *sim.ScriptedReply {
		switch n {
		case 1:
			return &sim.ScriptedReply{Status: http.StatusInternalServerError}
		case 2:
			// A reply the schema refuses: tier is missing.
			body := `{"id":"c1","object":"chat.completion","model":"` + responseModel + `","choices":[{"index":0,"finish_reason":"stop",` +
				`"message":{"role":"assistant","content":"{\"name\": \"Ada Lovelace\", \"age\": 36}"}}],"usage":{"prompt_tokens":120,"completion_tokens":17,"total_tokens":137}}`
			return &sim.ScriptedReply{Status: http.StatusOK, Body: []byte(body), Header: http.Header{"Content-Type": {"application/json"}}}
		}
		return nil // the simulator's own valid reply
	}}})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })

	h.enqueue("traced", 1)
	cfg := h.workerConfig(h.client(nil))
	cfg.Tracer = tp.Tracer(pipeline.TracerName)
	rw := h.startWorker(cfg, nil, nil)
	h.waitDone("traced", 1, 30*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	job, attempts := h.job(jobID("traced", 1))
	if job.Status != fixpoint.StatusValid || len(attempts) != 2 {
		t.Fatalf("job %s after %d attempts, want valid after 2 (a repair)", job.Status, len(attempts))
	}

	spans := exp.GetSpans()
	var jobs, calls tracetest.SpanStubs
	for _, s := range spans {
		switch {
		case s.Name == pipeline.JobSpanName:
			jobs = append(jobs, s)
		case strings.HasPrefix(s.Name, "chat "):
			calls = append(calls, s)
		default:
			t.Errorf("unexpected span %q", s.Name)
		}
	}
	if len(jobs) != 1 || len(calls) != 2 {
		t.Fatalf("%d job spans and %d call spans, want 1 and 2: %v", len(jobs), len(calls), names(spans))
	}
	js := jobs[0]
	if js.Parent.IsValid() {
		t.Errorf("the job span has a parent %s: it should start the trace", js.Parent.SpanID())
	}
	wantAttrs(t, js, map[attribute.Key]attribute.Value{
		pipeline.AttrJobID:              attribute.StringValue(jobID("traced", 1)),
		pipeline.AttrBatch:              attribute.StringValue("traced"),
		pipeline.AttrRun:                attribute.IntValue(1),
		pipeline.AttrDelivery:           attribute.IntValue(1),
		pipeline.AttrStatus:             attribute.StringValue(string(fixpoint.StatusValid)),
		pipeline.AttrAttempts:           attribute.IntValue(2),
		"gen_ai.provider.name":          attribute.StringValue("openai"),
		"gen_ai.request.model":          attribute.StringValue("sim-model"),
		"messaging.system":              attribute.StringValue("nats"),
		"messaging.operation.type":      attribute.StringValue("process"),
		"messaging.destination.name":    attribute.StringValue(h.q.Subject),
		"messaging.consumer.group.name": attribute.StringValue(h.q.Consumer),
	})
	if js.SpanKind != trace.SpanKindConsumer || js.Status.Code == codes.Error {
		t.Errorf("job span: kind %s, status %v; want a consumer span, not an error", js.SpanKind, js.Status)
	}
	slices.SortFunc(calls, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	for i, c := range calls {
		if c.Parent.SpanID() != js.SpanContext.SpanID() || c.SpanContext.TraceID() != js.SpanContext.TraceID() {
			t.Errorf("call %d: parent %s in trace %s, want the job span %s in %s", i+1, c.Parent.SpanID(), c.SpanContext.TraceID(),
				js.SpanContext.SpanID(), js.SpanContext.TraceID())
		}
		if c.Name != "chat sim-model" || c.SpanKind != trace.SpanKindClient {
			t.Errorf("call %d: %q of kind %s, want \"chat sim-model\", a client span", i+1, c.Name, c.SpanKind)
		}
		want := map[attribute.Key]attribute.Value{
			"gen_ai.operation.name":      attribute.StringValue("chat"),
			"gen_ai.provider.name":       attribute.StringValue("openai"),
			"gen_ai.request.model":       attribute.StringValue("sim-model"),
			"server.address":             attribute.StringValue("127.0.0.1"),
			pipeline.AttrAttempt:         attribute.IntValue(i + 1),
			pipeline.AttrValid:           attribute.BoolValue(attempts[i].Valid),
			pipeline.AttrAttemptCls:      attribute.StringValue(attempts[i].Class),
			"gen_ai.usage.input_tokens":  attribute.Int64Value(attempts[i].TokensIn),
			"gen_ai.usage.output_tokens": attribute.Int64Value(attempts[i].TokensOut),
		}
		if attempts[i].Class == "" {
			delete(want, pipeline.AttrAttemptCls) // a valid attempt has no class
		}
		wantAttrs(t, c, want)
		if c.Status.Code == codes.Error {
			t.Errorf("call %d: status %v; a call the provider answered is no error, whatever its reply", i+1, c.Status)
		}
	}
	first := calls[0]
	wantAttrs(t, first, map[attribute.Key]attribute.Value{
		"gen_ai.response.model":          attribute.StringValue(responseModel),
		"gen_ai.usage.input_tokens":      attribute.IntValue(120),
		"gen_ai.usage.output_tokens":     attribute.IntValue(17),
		pipeline.AttrRetries:             attribute.IntValue(1),
		"gen_ai.response.finish_reasons": attribute.StringSliceValue([]string{"stop"}),
	})
	if attempts[0].Class == "" || attempts[0].Valid {
		t.Fatalf("attempt 1 in the ledger: valid %v class %q, want a schema failure", attempts[0].Valid, attempts[0].Class)
	}
	if len(first.Events) != 1 || first.Events[0].Name != "retry" || !hasAttr(first.Events[0].Attributes, "error.type", attribute.StringValue(string(fixpoint.ClassServer))) {
		t.Errorf("call 1 events %+v, want one retry event of error.type %s", first.Events, fixpoint.ClassServer)
	}

	// Nothing the job sent or got back is on a span, nor the key.
	secrets := []string{"customer number 1", "signed up", "Ada Lovelace", "sk-test-SECRET123", "minLength", "Extract the customer"}
	for _, s := range spans {
		all := slices.Clone(s.Attributes)
		for _, e := range s.Events {
			all = append(all, e.Attributes...)
		}
		all = append(all, s.Resource.Attributes()...)
		for _, kv := range all {
			v := kv.Value.Emit()
			for _, secret := range secrets {
				if strings.Contains(v, secret) {
					t.Errorf("span %q attribute %s holds %q: %s", s.Name, kv.Key, secret, v)
				}
			}
		}
		if d := s.Status.Description; d != "" && strings.ContainsAny(d, " {") {
			t.Errorf("span %q status %q: a status names a class, not a message", s.Name, d)
		}
	}
}

// TestTraceFailedCall: a call the provider refuses is an error span whose
// error.type is the provider error's class, never its message, and the job
// it fails is an error span whose error.type is the job's class.
func TestTraceFailedCall(t *testing.T) {
	t.Parallel()
	const message = "This model's maximum context length is 10 tokens: customer number 1 signed up"
	h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(int, *http.Request) *sim.ScriptedReply {
		body := `{"error":{"message":"` + message + `","type":"invalid_request_error","code":"context_length_exceeded"}}`
		return &sim.ScriptedReply{Status: http.StatusBadRequest, Body: []byte(body), Header: http.Header{"Content-Type": {"application/json"}}}
	}}})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })

	h.enqueue("refused", 1)
	cfg := h.workerConfig(h.client(nil))
	cfg.Tracer = tp.Tracer(pipeline.TracerName)
	rw := h.startWorker(cfg, nil, nil)
	h.waitDone("refused", 1, 30*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	job, attempts := h.job(jobID("refused", 1))
	if job.Status != fixpoint.StatusFailed || len(attempts) != 1 {
		t.Fatalf("job %s/%s after %d attempts, want failed after 1", job.Status, job.FinalClass, len(attempts))
	}
	var js, call tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == pipeline.JobSpanName {
			js = s
		} else {
			call = s
		}
	}
	if call.Parent.SpanID() != js.SpanContext.SpanID() || !js.SpanContext.IsValid() {
		t.Fatalf("spans %v: want a job span and its call", names(exp.GetSpans()))
	}
	wantAttrs(t, call, map[attribute.Key]attribute.Value{
		"error.type":                attribute.StringValue(string(fixpoint.ClassBadRequest)),
		"http.response.status_code": attribute.IntValue(http.StatusBadRequest),
		pipeline.AttrAttempt:        attribute.IntValue(1),
	})
	wantAttrs(t, js, map[attribute.Key]attribute.Value{
		pipeline.AttrStatus: attribute.StringValue(string(fixpoint.StatusFailed)),
		"error.type":        attribute.StringValue(job.FinalClass),
	})
	for _, s := range []tracetest.SpanStub{js, call} {
		if s.Status.Code != codes.Error {
			t.Errorf("span %q: status %v, want an error", s.Name, s.Status)
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.Emit(), "context length") || strings.Contains(s.Status.Description, "context length") {
				t.Errorf("span %q holds the provider's message (%s)", s.Name, kv.Key)
			}
		}
	}
}

// TestTraceBatchDelivery: with a tracer, a worker traces its
// batch-delivery jobs' waves too: each job's delivery a job span handed to
// the wave driver, and the wave's provider steps (submit, polls, collect)
// client spans of their own traces, naming the wave the ledger has and the
// simulator's server.
func TestTraceBatchDelivery(t *testing.T) {
	t.Parallel()
	const n = 4
	h := newHarness(t, harnessConfig{Sim: waveSim(50*time.Millisecond, 0, 0)})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })

	h.enqueueBatch("tracedwave", llm.ProviderOpenAI, n, time.Hour)
	cfg := h.waveWorker(llm.ProviderOpenAI, h.batchClient(llm.ProviderOpenAI))
	cfg.Drain = true
	cfg.Tracer = tp.Tracer(pipeline.TracerName)
	rw := h.startWorker(cfg, nil, nil)
	if err := rw.wait(t, 60*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	firstWave := h.sqlInt(`SELECT min(id)::int FROM waves WHERE batch = 'tracedwave'`)
	steps, jobs := map[string]int{}, 0
	for _, s := range exp.GetSpans() {
		if s.Name == pipeline.JobSpanName {
			jobs++
			wantAttrs(t, s, map[attribute.Key]attribute.Value{pipeline.AttrDisposition: attribute.StringValue("wave")})
		}
		if s.Name == pipeline.JobSpanName || strings.HasPrefix(s.Name, "chat ") {
			continue
		}
		steps[strings.TrimSuffix(s.Name, " sim-model")]++
		if s.SpanKind != trace.SpanKindClient || s.Parent.IsValid() {
			t.Errorf("span %q: kind %s, parent %v; want a client span that starts its trace", s.Name, s.SpanKind, s.Parent.IsValid())
		}
		wantAttrs(t, s, map[attribute.Key]attribute.Value{
			"gen_ai.provider.name": attribute.StringValue("openai"),
			"gen_ai.request.model": attribute.StringValue("sim-model"),
			"server.address":       attribute.StringValue("127.0.0.1"),
			wave.AttrBatch:         attribute.StringValue("tracedwave"),
		})
		if s.Name == wave.SpanSubmit+" sim-model" && hasAttr(s.Attributes, wave.AttrWaveID, attribute.Int64Value(int64(firstWave))) {
			wantAttrs(t, s, map[attribute.Key]attribute.Value{
				wave.AttrRequests: attribute.IntValue(n),
				wave.AttrState:    attribute.StringValue(store.WaveSubmitted),
			})
		}
	}
	if jobs != n {
		t.Errorf("%d job spans, want one for each of the %d jobs' one delivery", jobs, n)
	}
	for _, step := range []string{wave.SpanSubmit, wave.SpanPoll, wave.SpanCollect} {
		if steps[step] == 0 {
			t.Errorf("no %s span among %v", step, steps)
		}
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func hasAttr(attrs []attribute.KeyValue, key attribute.Key, want attribute.Value) bool {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value == want || kv.Value.Emit() == want.Emit()
		}
	}
	return false
}

// wantAttrs checks span s has each attribute of want with its value.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[attribute.Key]attribute.Value) {
	t.Helper()
	for k, v := range want {
		if !hasAttr(s.Attributes, k, v) {
			got := "absent"
			for _, kv := range s.Attributes {
				if kv.Key == k {
					got = fmt.Sprintf("%s (%s)", kv.Value.Emit(), kv.Value.Type())
				}
			}
			t.Errorf("span %q: %s = %s, want %s (%s)", s.Name, k, got, v.Emit(), v.Type())
		}
	}
}
