package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/fixpoint-dev/fixpoint/pipeline"
)

// The values of --traces.
const (
	tracesOff  = "off"
	tracesOTLP = "otlp"
)

// tracesServiceDefault is the traces' service.name when OTEL_SERVICE_NAME
// does not name one.
const tracesServiceDefault = "fixpoint-worker"

const tracesEnvHelp = `  FIXPOINT_TRACES        off (the default) or otlp: a span of each job, of each provider call under it, and of each provider-batch step (--traces)
  OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
                         with --traces otlp: the collector's OTLP/HTTP URL (default http://localhost:4318)
  OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS
                         headers sent to the collector, key=value,... (an auth token: keep it in a secret)
  OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
                         http/protobuf, the only one this worker speaks (grpc is refused)
  OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
                         the traces' service (default ` + tracesServiceDefault + `) and resource attributes
  OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG
                         which traces are kept (default parentbased_always_on: all)
`

// traceFlags turns traces on.
type traceFlags struct{ mode string }

func (t *traceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.mode, "traces", env("FIXPOINT_TRACES", tracesOff), "OpenTelemetry traces of each job and provider call (GenAI semantic conventions; never a prompt, reply or key): off, or otlp to send them over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT")
}

// check refuses a mode or an OTLP protocol the worker cannot serve.
func (t *traceFlags) check() error { return t.checkEnv(os.Getenv) }

// checkEnv is check reading the environment through getenv.
func (t *traceFlags) checkEnv(getenv func(string) string) error {
	switch t.mode {
	case tracesOff:
		return nil
	case tracesOTLP:
	default:
		return usagef("--traces %q (env FIXPOINT_TRACES): want off or otlp", t.mode)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(v); p != "" && p != "http/protobuf" {
			return usagef("%s=%s: this worker sends traces over OTLP/HTTP (http/protobuf) only; point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (4318)", v, p)
		}
	}
	return nil
}

// start returns the tracer of the worker's spans and a shutdown that sends
// the spans still buffered; with traces off, a nil tracer (no spans) and a
// no-op.
func (t *traceFlags) start(ctx context.Context, log *slog.Logger) (trace.Tracer, func(), error) {
	if t.mode != tracesOTLP {
		return nil, func() {}, nil
	}
	// The exporter reads the standard OTEL_EXPORTER_OTLP_* variables.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, usagef("--traces otlp: %v", err)
	}
	// The environment's service name and attributes win over the default.
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(tracesServiceDefault)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, nil, usagef("--traces otlp: OTEL_RESOURCE_ATTRIBUTES: %v", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(throttledErrors(log, time.Minute))
	log.Info("worker: sending traces over OTLP/HTTP", slog.String("endpoint", tracesEndpoint()))
	shutdown := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("worker: send the last traces", slog.String("error", err.Error()))
		}
	}
	return tp.Tracer(pipeline.TracerName), shutdown, nil
}

// tracesEndpoint is where the exporter sends, as the log says it: the
// variables' URL without its query or credentials, or the default.
func tracesEndpoint() string {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if e := os.Getenv(v); e != "" {
			if i := strings.IndexAny(e, "?#"); i >= 0 {
				e = e[:i]
			}
			if at := strings.LastIndex(e, "@"); at >= 0 {
				if scheme := strings.Index(e, "://"); scheme >= 0 && scheme < at {
					e = e[:scheme+3] + e[at+1:]
				}
			}
			return e
		}
	}
	return "http://localhost:4318"
}

// throttledErrors logs the exporter's errors (a collector down) at most
// once an every: a batch fails every few seconds while it is.
func throttledErrors(log *slog.Logger, every time.Duration) otel.ErrorHandler {
	var last atomic.Int64
	return otel.ErrorHandlerFunc(func(err error) {
		now, prev := time.Now().UnixNano(), last.Load()
		if now-prev < int64(every) || !last.CompareAndSwap(prev, now) {
			return
		}
		log.Warn("worker: traces not sent (said once a minute); the jobs go on", slog.String("error", err.Error()))
	})
}
