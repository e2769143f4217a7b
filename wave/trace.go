package wave

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
	"github.com/fixpoint-dev/fixpoint/store"
)

// Traces: one client span per step of a wave that calls its provider's
// batch API. The OpenTelemetry GenAI semantic conventions (v1.41, in
// development) define the span of one inference call, named
// "{gen_ai.operation.name} {gen_ai.request.model}", and nothing for a
// batch API (nor do the general conventions define batch jobs). So each
// step is a client span shaped as an inference span is: the attributes
// that hold for the requests it carries (gen_ai.operation.name "chat",
// gen_ai.provider.name, gen_ai.request.model, server.address and
// server.port, error.type the provider error's class), named after the
// step the way the conventions name a call ("batch.submit gpt-4o-mini"),
// and a collect's gen_ai.usage.* are the sums over the replies it
// recorded. Like the job spans, they carry ids, names, counts and classes
// only: never a prompt, a reply, an error message a provider wrote (it
// may quote a request) or a key.

// The names of the steps' spans, before the wave's model.
const (
	// SpanSubmit: the input file's upload (OpenAI) and the batch's
	// create, after looking for a batch an earlier holder created.
	SpanSubmit = "batch.submit"
	// SpanPoll: one retrieve of the provider batch.
	SpanPoll = "batch.poll"
	// SpanCollect: the download of an ended batch's results, recorded.
	SpanCollect = "batch.collect"
	// SpanCancel: the provider batch's cancel, asked for or due to the
	// deadline, or the end of a wave cancelled before it was submitted.
	SpanCancel = "batch.cancel"
)

// The fixpoint attributes of the steps' spans.
const (
	AttrWaveID = attribute.Key("fixpoint.wave.id")
	// AttrBatch is the job spans' key too.
	AttrBatch    = attribute.Key("fixpoint.batch")
	AttrRequests = attribute.Key("fixpoint.wave.requests")
	// AttrProviderBatch is the provider's id of the wave's batch, once
	// created.
	AttrProviderBatch = attribute.Key("fixpoint.wave.provider_batch_id")
	// AttrState is the wave's state after the step (store.WaveRecorded,
	// store.WaveSubmitted, ...).
	AttrState = attribute.Key("fixpoint.wave.state")
	// AttrValid, AttrInvalid and AttrFailed count a collect's outcomes:
	// replies the schema took, replies it refused (their jobs go on to a
	// repair), and requests that got no reply (errored, expired,
	// cancelled).
	AttrValid   = attribute.Key("fixpoint.wave.valid")
	AttrInvalid = attribute.Key("fixpoint.wave.invalid")
	AttrFailed  = attribute.Key("fixpoint.wave.failed")
	// AttrRequestID is the provider's id of a failed call's request (the
	// realtime call spans' key).
	AttrRequestID = attribute.Key("fixpoint.provider.request_id")
)

// tracerOr returns t, or a tracer that records nothing.
func tracerOr(t trace.Tracer) trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer("")
	}
	return t
}

// target is the server a provider's batch calls go to.
type target struct {
	address string
	port    int
}

// step runs fn, a step of wave that calls its provider, under the step's
// span. The span starts a trace of its own: ctx holds no span of the wave,
// only the driver's or, for a wave just collected, the ended span of the
// job that filled it.
func (v *Driver) step(ctx context.Context, name string, wave *store.Wave, fn func(context.Context) error) error {
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(wave.Provider),
		semconv.GenAIRequestModel(wave.Model), AttrWaveID.Int64(wave.ID), AttrBatch.String(wave.Batch),
		AttrRequests.Int(wave.Requests), AttrState.String(wave.Status)}
	if t := v.targets[wave.Provider]; t.address != "" {
		attrs = append(attrs, semconv.ServerAddress(t.address), semconv.ServerPort(t.port))
	}
	if wave.ProviderBatchID != "" {
		attrs = append(attrs, AttrProviderBatch.String(wave.ProviderBatchID))
	}
	ctx, span := v.tracer.Start(ctx, name+" "+wave.Model, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...))
	defer span.End()
	err := fn(ctx)
	if err != nil {
		traceFailure(ctx, err)
	}
	return err
}

// setWave applies u to wave in the ledger and puts what it changed on the
// step's span in ctx: the wave's state, its provider batch.
func (v *Driver) setWave(ctx context.Context, wave *store.Wave, u store.WaveUpdate) error {
	if err := v.ledger.UpdateWave(ctx, wave.ID, v.cfg.Owner, u); err != nil {
		return err
	}
	span := trace.SpanFromContext(ctx)
	if u.Status != "" {
		span.SetAttributes(AttrState.String(u.Status))
	}
	if u.ProviderBatchID != "" {
		span.SetAttributes(AttrProviderBatch.String(u.ProviderBatchID))
	}
	return nil
}

// traceFailure marks the step's span in ctx failed by err: error.type is
// the provider error's class, never its message; "_OTHER" for a failure
// that is not the provider's (the ledger's, the queue's).
func traceFailure(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	class := "_OTHER"
	var perr *fixpoint.ProviderError
	if errors.As(err, &perr) {
		class = string(perr.Class)
		if class == "" {
			class = "_OTHER"
		}
		if perr.Status > 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(perr.Status))
		}
		if perr.RequestID != "" {
			span.SetAttributes(AttrRequestID.String(perr.RequestID))
		}
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(class))
	span.SetStatus(codes.Error, class)
}

// targetOf is the server of a provider's base URL.
func targetOf(baseURL string) target {
	var t target
	t.address, t.port = llm.ServerOf(baseURL)
	return t
}

// collectTally sums what a collect recorded, for its span.
type collectTally struct {
	valid, invalid, failed         int
	in, out, cacheRead, cacheWrite int
}

// add counts the attempt a a reply (callErr nil) or a failure made.
func (t *collectTally) add(a *fixpoint.Attempt, callErr error) {
	switch {
	case callErr != nil:
		t.failed++
	case a != nil && a.Valid:
		t.valid++
	default:
		t.invalid++
	}
	if a == nil {
		return
	}
	t.in += a.TokensIn
	t.out += a.TokensOut
	t.cacheRead += a.TokensCached
	t.cacheWrite += a.TokensCacheWrite
}

// trace puts the tally on the collect's span in ctx.
func (t *collectTally) trace(ctx context.Context) {
	trace.SpanFromContext(ctx).SetAttributes(AttrValid.Int(t.valid), AttrInvalid.Int(t.invalid), AttrFailed.Int(t.failed),
		semconv.GenAIUsageInputTokens(t.in), semconv.GenAIUsageOutputTokens(t.out),
		semconv.GenAIUsageCacheReadInputTokens(t.cacheRead), semconv.GenAIUsageCacheCreationInputTokens(t.cacheWrite))
}
