package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// collector is an OTLP/HTTP trace receiver: it keeps every span posted to
// /v1/traces, with its resource's service name.
type collector struct {
	mu       sync.Mutex
	posts    int
	spans    []*tracepb.Span
	services []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if r.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, fmt.Sprintf("%s: %v", r.URL.Path, err), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.posts++
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				c.services = append(c.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// worker --traces otlp sends a span of each job, parenting its call
// spans, to the collector OTEL_EXPORTER_OTLP_ENDPOINT names, under
// OTEL_SERVICE_NAME; without --traces nothing is sent. The rows' text is on
// no span.
func TestWorkerTracesOTLP(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDB(t) // first: -short skips before the build
	bin := buildCommands(t)
	var col collector
	srv := httptest.NewServer(&col)
	t.Cleanup(srv.Close)
	const rows = 5
	var data strings.Builder
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&data, `{"ticket_id":"T%03d","customer":"Ada","plan":"pro","order_id":"ORD-%05d","subject":"Charged twice","body":"Refund me, ticket %d."}`+"\n", i, i, i)
	}
	work := ticketsDir(t, data.String())
	env := append(os.Environ(), "DATABASE_URL="+dsn, "NATS_URL=", "FIXPOINT_NATS_LISTEN=127.0.0.1:0",
		"FIXPOINT_METRICS_ADDR=off", "LOG_LEVEL=warn", "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL, "OTEL_SERVICE_NAME=nightly-test",
		"FIXPOINT_TRACES=", "OTEL_EXPORTER_OTLP_PROTOCOL=", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=")
	runLine := func(batch, traces string) {
		t.Helper()
		line := fmt.Sprintf(`%[1]s/enqueue --batch %[2]s --schema schema.json --template template.txt --model sim-clean --id-field ticket_id tickets.jsonl &&
%[1]s/worker --drain --batch %[2]s --sim clean %[3]s`, bin, batch, traces)
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = work, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	runLine("untraced", "")
	col.mu.Lock()
	if col.posts != 0 {
		t.Errorf("a worker without --traces sent %d posts to the collector", col.posts)
	}
	col.mu.Unlock()

	runLine("traced", "--traces otlp")
	col.mu.Lock()
	defer col.mu.Unlock()
	jobSpans := map[string]bool{}
	calls := 0
	for _, s := range col.spans {
		if s.Name == pipeline.JobSpanName {
			jobSpans[string(s.SpanId)] = true
		}
	}
	for _, s := range col.spans {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.GetValue().String(), "Refund me") {
				t.Errorf("span %s: attribute %s holds a row's text", s.Name, kv.Key)
			}
		}
		if !strings.HasPrefix(s.Name, "chat ") {
			continue
		}
		calls++
		if !jobSpans[string(s.ParentSpanId)] {
			t.Errorf("call span %s has no job span for a parent", s.Name)
		}
	}
	if len(jobSpans) != rows || calls < rows {
		t.Errorf("%d job spans and %d call spans, want %d and at least as many", len(jobSpans), calls, rows)
	}
	for _, svc := range col.services {
		if svc != "nightly-test" {
			t.Errorf("service.name %q, want OTEL_SERVICE_NAME's nightly-test", svc)
		}
	}
}

// A --traces mode or an OTLP protocol the worker cannot serve is a usage
// error (exit 2), said before anything starts.
func TestWorkerTracesUsage(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	unreachable := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none", "--nats-url", "nats://127.0.0.1:1", "--start-timeout", "0", "--metrics-addr", "off"}
	if code := run(t.Context(), append(unreachable, "--traces", "jaeger"), strings.NewReader(""), &out, &out); code != exitUsage ||
		!strings.Contains(out.String(), `--traces "jaeger" (env FIXPOINT_TRACES): want off or otlp`) {
		t.Errorf("--traces jaeger: exit %d, want %d naming the flag\n%s", code, exitUsage, out.String())
	}
	for _, tc := range []struct {
		mode string
		env  map[string]string
		want string
	}{
		{"otlp", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: this worker sends traces over OTLP/HTTP"},
		{"otlp", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json"},
		{"otlp", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, ""},
		{"off", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ""}, // not read when off
	} {
		err := (&traceFlags{mode: tc.mode}).checkEnv(func(k string) string { return tc.env[k] })
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("--traces %s with %v: %v, want %q", tc.mode, tc.env, err, tc.want)
		}
	}
}

// A collector that is down fails every batch of spans: the worker says so
// once a minute, not once a batch.
func TestTracesErrorsThrottled(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	h := throttledErrors(slog.New(slog.NewTextHandler(&logs, nil)), time.Hour)
	for range 5 {
		h.Handle(errors.New("connection refused"))
	}
	if n := strings.Count(logs.String(), "traces not sent"); n != 1 {
		t.Errorf("5 export errors within the interval logged %d times, want once:\n%s", n, logs.String())
	}
}

// The log line naming the collector leaves out credentials and a query.
func TestTracesEndpointLogged(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://user:s3cret@collector.example:4318/otlp?token=abc")
	if got, want := tracesEndpoint(), "https://collector.example:4318/otlp"; got != want {
		t.Errorf("tracesEndpoint() = %q, want %q", got, want)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	if got := tracesEndpoint(); got != "http://localhost:4318" {
		t.Errorf("tracesEndpoint() with nothing set = %q, want the exporter's default", got)
	}
}
