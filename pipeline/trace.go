package pipeline

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// Traces: one span per delivery of a job (JobSpanName), parenting one
// span per provider call ("chat {model}"), which follows the OpenTelemetry
// GenAI semantic conventions (gen_ai.* attributes, error.type,
// server.address). Spans carry ids, names, counts and classes only: never
// a prompt, a reply, a schema, a value, an error message a provider wrote
// (it may quote the request) or a key.

// JobSpanName is the name of a job delivery's span.
const JobSpanName = "fixpoint.job"

// The fixpoint attributes of the spans.
const (
	AttrJobID       = attribute.Key("fixpoint.job.id")
	AttrBatch       = attribute.Key("fixpoint.batch")
	AttrRun         = attribute.Key("fixpoint.job.run")
	AttrDelivery    = attribute.Key("fixpoint.job.delivery")
	AttrStatus      = attribute.Key("fixpoint.job.status")
	AttrClass       = attribute.Key("fixpoint.job.class")
	AttrAttempts    = attribute.Key("fixpoint.job.attempts")
	AttrDisposition = attribute.Key("fixpoint.job.disposition")
	AttrAttempt     = attribute.Key("fixpoint.attempt.number")
	AttrAttemptCls  = attribute.Key("fixpoint.attempt.class")
	AttrValid       = attribute.Key("fixpoint.attempt.valid")
	AttrErrors      = attribute.Key("fixpoint.attempt.errors")
	AttrCostUSD     = attribute.Key("fixpoint.attempt.cost_usd")
	AttrRetries     = attribute.Key("fixpoint.attempt.transport_retries")
	// AttrRequestID is the provider's id of the request (its request-id
	// header), what its support asks for; not gen_ai.response.id, the
	// completion's id.
	AttrRequestID = attribute.Key("fixpoint.provider.request_id")
)

// TracerName is the instrumentation scope of the worker's spans.
const TracerName = "github.com/fixpoint-dev/fixpoint/pipeline"

// tracerOr returns t, or a tracer that records nothing.
func tracerOr(t trace.Tracer) trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer(TracerName)
	}
	return t
}

// startJobSpan starts the span of one delivery of env's job: a consumer
// span of the messaging conventions too (the message it processes, from
// which subject, for which consumer).
func (w *Worker) startJobSpan(ctx context.Context, env *queue.Envelope, delivered int) (context.Context, trace.Span) {
	return w.tracer.Start(ctx, JobSpanName, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		AttrJobID.String(env.JobID), AttrBatch.String(env.Batch), AttrRun.Int(env.RunOrFirst()), AttrDelivery.Int(delivered),
		semconv.GenAIProviderNameKey.String(env.Provider), semconv.GenAIRequestModel(env.Model),
		semconv.MessagingSystemKey.String("nats"), semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(w.cfg.Queue.Subject), semconv.MessagingConsumerGroupName(w.cfg.Queue.Consumer)))
}

// traceResult puts a job's outcome on its delivery's span: its status, the
// class of its last failure and its attempts. A job that ended invalid or
// failed marks the span an error, with the class as its error.type; one
// cancelled or stopped by its batch's spend cap did what it was told.
func traceResult(ctx context.Context, res *fixpoint.Result) {
	span := trace.SpanFromContext(ctx)
	if res == nil || !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrStatus.String(string(res.Status)), AttrAttempts.Int(len(res.Attempts)))
	if res.Class != "" {
		span.SetAttributes(AttrClass.String(res.Class))
	}
	if res.Status == fixpoint.StatusInvalid || res.Status == fixpoint.StatusFailed {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(res.Class, string(res.Status))))
		span.SetStatus(codes.Error, string(res.Status))
	}
}

// traceDisposition puts what became of a delivery's message on its span.
func traceDisposition(ctx context.Context, d queue.Disposition) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrDisposition.String(dispositionName(d.Kind)))
	status := map[queue.DispositionKind]fixpoint.Status{queue.DispReject: fixpoint.StatusRejected, queue.DispDead: fixpoint.StatusDead}[d.Kind]
	if status != "" {
		span.SetAttributes(AttrStatus.String(string(status)))
		span.SetStatus(codes.Error, string(status))
	}
}

// dispositionName names a disposition on a span.
func dispositionName(k queue.DispositionKind) string {
	switch k {
	case queue.DispAck:
		return "ack"
	case queue.DispSkip:
		return "skip"
	case queue.DispRetry:
		return "retry"
	case queue.DispRelease:
		return "release"
	case queue.DispReject:
		return "reject"
	case queue.DispDead:
		return "dead"
	case queue.DispForeign:
		return "foreign"
	case queue.DispWave:
		return "wave"
	}
	return "unknown"
}

// errorType is the error.type of a failure: its class, else what stands
// for it.
func errorType(class, fallback string) string {
	if class != "" {
		return class
	}
	return fallback
}

// callTarget is what the call spans of a loop say of its provider: its
// name (gen_ai.provider.name) and the server its client calls.
type callTarget struct {
	provider string
	address  string
	port     int
}

// targetOf reads the provider and server of client, when it is an
// llm.Client; the provider's name in the worker's table wins over the
// client's own.
func targetOf(name string, client Completer) callTarget {
	t := callTarget{provider: name}
	c, ok := client.(interface{ Config() llm.Config })
	if !ok {
		return t
	}
	cfg := c.Config()
	if t.provider == "" {
		t.provider = cfg.Provider
	}
	t.address, t.port = llm.ServerOf(cfg.BaseURL)
	return t
}

// startCall starts the span of one provider call of req, a child of the
// job's span in ctx.
func (l *Loop) startCall(ctx context.Context, req *fixpoint.Request) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(req.Model),
		semconv.GenAIOutputTypeJSON}
	if l.target.provider != "" {
		attrs = append(attrs, semconv.GenAIProviderNameKey.String(l.target.provider))
	}
	if l.target.address != "" {
		attrs = append(attrs, semconv.ServerAddress(l.target.address))
	}
	if l.target.port > 0 {
		attrs = append(attrs, semconv.ServerPort(l.target.port))
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(req.MaxTokens))
	}
	if req.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(*req.Temperature))
	}
	return l.tracer.Start(ctx, "chat "+req.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endCall ends a call's span with what the provider answered and what the
// repair step made of it (a, nil for a call never sent). The transport
// retries inside the call are events of its span.
func endCall(span trace.Span, resp *fixpoint.Response, err error, a *fixpoint.Attempt) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if resp != nil {
		span.SetAttributes(semconv.GenAIUsageInputTokens(resp.Usage.InputTokens), semconv.GenAIUsageOutputTokens(resp.Usage.OutputTokens))
		if resp.Usage.CachedInputTokens > 0 {
			span.SetAttributes(semconv.GenAIUsageCacheReadInputTokens(resp.Usage.CachedInputTokens))
		}
		if resp.Usage.CacheWriteTokens > 0 {
			span.SetAttributes(semconv.GenAIUsageCacheCreationInputTokens(resp.Usage.CacheWriteTokens))
		}
		if resp.Model != "" {
			span.SetAttributes(semconv.GenAIResponseModel(resp.Model))
		}
		if resp.RequestID != "" {
			span.SetAttributes(AttrRequestID.String(resp.RequestID))
		}
		if resp.FinishReason != "" {
			span.SetAttributes(semconv.GenAIResponseFinishReasons(string(resp.FinishReason)))
		}
	}
	var retries []fixpoint.Retry
	if a != nil {
		span.SetAttributes(AttrAttempt.Int(a.No), AttrValid.Bool(a.Valid), AttrErrors.Int(len(a.Errors)), AttrCostUSD.Float64(a.CostUSD))
		if a.Class != "" {
			span.SetAttributes(AttrAttemptCls.String(a.Class))
		}
		retries = a.Retries
	} else if resp != nil {
		retries = resp.Retries
	}
	span.SetAttributes(AttrRetries.Int(len(retries)))
	for _, r := range retries {
		span.AddEvent("retry", trace.WithAttributes(semconv.ErrorTypeKey.String(string(r.Class)),
			semconv.HTTPResponseStatusCode(r.Status), attribute.Float64("fixpoint.retry.wait_s", r.Wait.Seconds())))
	}
	if err == nil {
		return
	}
	// The provider's class, never its message: it may quote the request.
	class := "_OTHER"
	var perr *fixpoint.ProviderError
	if errors.As(err, &perr) {
		class = errorType(string(perr.Class), class)
		if perr.RequestID != "" {
			span.SetAttributes(AttrRequestID.String(perr.RequestID))
		}
		if perr.Status > 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(perr.Status))
		}
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(class))
	span.SetStatus(codes.Error, class)
}
