package pipeline_test

// The integration harness: real Postgres (a fresh database per test from
// storetest), real NATS JetStream (an embedded server per test on its own
// TCP port and store directory, so it can be restarted, or the machine's
// NATS under names unique to the test), and the provider simulator behind a
// tap that counts concurrent calls and keeps their start times. Tests wait on
// conditions with deadlines (waitFor), never on sleeps.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/internal/syncbuf"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/pipeline"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
	"github.com/fixpoint-dev/fixpoint/validate"
)

// TestMain fails the run if any test leaves a goroutine behind: workers,
// writers, heartbeats, NATS servers and connections, simulators.
func TestMain(m *testing.M) {
	code := m.Run()
	if workerBinDir != "" {
		os.RemoveAll(workerBinDir)
	}
	if code == 0 {
		if err := goleak.Find(
			// Keep-alive connections of http.DefaultTransport-like pools
			// and the pgx pools' background health checks end with the
			// process; the ones the tests own are closed explicitly.
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// soak reports whether the long variants run (FIXPOINT_SOAK=1, make soak).
func soak() bool { return os.Getenv("FIXPOINT_SOAK") == "1" }

// poll checks cond every 20ms until it holds (true) or timeout passes
// (false).
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// waitFor polls cond until it holds or timeout passes, then fails the test
// with what.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// testSchema is the contract of every test job.
const testSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 40},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "tier": {"enum": ["free", "pro", "enterprise"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}
  },
  "required": ["name", "age", "tier"],
  "additionalProperties": false
}`

const testTemplate = `Extract the customer record from this note: {{.text}}`

// dataset returns n JSONL rows with ids r0001...
func dataset(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"id":"r%04d","text":"customer number %d signed up for the plan on day %d"}`+"\n", i, i, i%28+1)
	}
	return b.String()
}

// jobID is the id Enqueue gives row i of batch.
func jobID(batch string, i int) string { return fmt.Sprintf("%s:r%04d", batch, i) }

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// simTap wraps the simulator: it counts calls in flight (and their maximum)
// and keeps each call's start time, across every worker that uses it.
type simTap struct {
	srv      *sim.Server
	inFlight atomic.Int64
	maxIn    atomic.Int64
	mu       sync.Mutex
	starts   []time.Time
	auth     sync.Map // Authorization and x-api-key values seen
	shared   atomic.Pointer[sharedLoad]
}

// sharedLoad counts calls in flight across several simulators.
type sharedLoad struct {
	inFlight, max atomic.Int64
	mu            sync.Mutex
	starts        []time.Time
}

func (l *sharedLoad) enter() {
	n := l.inFlight.Add(1)
	for {
		m := l.max.Load()
		if n <= m || l.max.CompareAndSwap(m, n) {
			break
		}
	}
	l.mu.Lock()
	l.starts = append(l.starts, time.Now())
	l.mu.Unlock()
}

func (s *simTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if l := s.shared.Load(); l != nil {
		l.enter()
		defer l.inFlight.Add(-1)
	}
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxIn.Load()
		if n <= m || s.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	s.mu.Lock()
	s.starts = append(s.starts, time.Now())
	s.mu.Unlock()
	if a := r.Header.Get("Authorization"); a != "" {
		s.auth.Store(a, true)
	}
	s.srv.ServeHTTP(w, r)
}

// maxPerWindow is the largest number of calls that started within any
// window of length d.
func (s *simTap) maxPerWindow(d time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maxInWindow(s.starts, d)
}

func maxInWindow(starts []time.Time, d time.Duration) int {
	starts = slices.Clone(starts)
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	best, j := 0, 0
	for i := range starts {
		for starts[i].Sub(starts[j]) >= d {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func (s *simTap) requests() int64 { return s.srv.Stats().Requests }

// startSim serves a simulator behind a tap; it is closed at cleanup.
func startSim(t testing.TB, cfg sim.Config) (*simTap, string) {
	t.Helper()
	srv, err := sim.NewChecked(cfg)
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	tap := &simTap{srv: srv}
	ts := httptest.NewServer(tap)
	t.Cleanup(func() {
		srv.Close()
		ts.CloseClientConnections()
		ts.Close()
	})
	return tap, ts.URL
}

// harnessConfig tunes one test environment.
type harnessConfig struct {
	// Sim is the simulator configuration; zero is a clean instant model.
	Sim sim.Config
	// Queue overrides queue limits; names are always unique to the test.
	Queue queue.Config
	// ExternalNATS uses the machine's NATS (TEST_NATS_URL, default
	// nats://127.0.0.1:4222) instead of an embedded server.
	ExternalNATS bool
	// Cluster, when set, runs that many nats-server processes as one
	// JetStream cluster (cluster_test.go) instead of an embedded server;
	// the queue's replicas default to that many.
	Cluster int
	// DSN, when set, is where workers reach Postgres (a proxy); the
	// harness itself always uses the direct database.
	DSN func(direct string) string
}

// harness is one test's world.
type harness struct {
	t       testing.TB
	ctx     context.Context
	dsn     string
	workDSN string
	st      *store.Store
	natsURL string
	natsDir string
	// spillDir is the worker processes' --spill-dir (results and the reply
	// journal), shared by the processes of one harness.
	spillDir string
	natsPort int
	ns       *server.Server
	cluster  *natsCluster
	nc       *nats.Conn
	js       jetstream.JetStream
	q        queue.Config
	sim      *simTap
	simURL   string
	logs     *syncBuffer
}

var nameSeq atomic.Int64

func newHarness(t *testing.T, cfg harnessConfig) *harness {
	t.Helper()
	h := &harness{t: t, ctx: t.Context(), logs: &syncBuffer{}, spillDir: t.TempDir()}
	h.dsn = storetest.NewDB(t)
	st, err := store.Open(context.Background(), h.dsn, &store.Config{MaxConns: 4})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(st.Close)
	h.st = st
	h.workDSN = h.dsn
	if cfg.DSN != nil {
		h.workDSN = cfg.DSN(h.dsn)
	}

	suffix := fmt.Sprintf("%s_%d_%d", sanitize(t.Name()), os.Getpid(), nameSeq.Add(1))
	q := cfg.Queue
	q.Stream = "T_" + strings.ToUpper(suffix)
	q.Subject = "fixpoint.test." + strings.ToLower(suffix)
	q.Consumer = "w_" + strings.ToLower(suffix)
	q.AckWait = cmp.Or(q.AckWait, 5*time.Second)
	h.q = q

	switch {
	case cfg.Cluster > 0:
		h.q.Replicas = cmp.Or(h.q.Replicas, cfg.Cluster)
		h.cluster = startCluster(t, cfg.Cluster)
		h.natsURL = h.cluster.urls(0)
	case cfg.ExternalNATS:
		h.natsURL = os.Getenv("TEST_NATS_URL")
		if h.natsURL == "" {
			h.natsURL = nats.DefaultURL
		}
	default:
		h.natsDir = t.TempDir()
		h.natsPort = freePort(t)
		h.startNATS()
		t.Cleanup(h.stopNATS)
		h.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", h.natsPort)
	}
	h.nc, h.js = h.connect()
	t.Cleanup(h.nc.Close)
	if cfg.ExternalNATS {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, s := range []string{q.Stream, q.Stream + "_DEAD"} {
				if err := h.js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
					t.Errorf("delete stream %s: %v", s, err)
				}
			}
		})
	}
	h.sim, h.simURL = startSim(t, cfg.Sim)
	return h
}

func sanitize(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 40 {
		s = s[len(s)-40:]
	}
	return s
}

func (h *harness) startNATS() {
	h.t.Helper()
	var err error
	h.ns, err = startServer(h.natsDir, h.natsPort, nil)
	if err != nil {
		h.t.Fatalf("embedded NATS on port %d: %v", h.natsPort, err)
	}
}

// startServer runs a NATS server with JetStream in the test process, on
// dir and port (-1: any), its warnings and errors written to warn when set.
// (The commands' embedded server is cmd/internal/natsconn's, which tests
// outside cmd cannot import.)
func startServer(dir string, port int, warn io.Writer) (*server.Server, error) {
	ns, err := server.NewServer(&server.Options{ServerName: "fixpoint-test", JetStream: true, StoreDir: dir,
		Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true, MaxPayload: 8 << 20})
	if err != nil {
		return nil, err
	}
	if warn != nil {
		ns.SetLogger(warnLogger{warn}, false, false)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("test NATS server not ready after 15s")
	}
	return ns, nil
}

// warnLogger writes a NATS server's warnings and errors, one a line.
type warnLogger struct{ w io.Writer }

func (l warnLogger) Noticef(string, ...any) {}
func (l warnLogger) Debugf(string, ...any)  {}
func (l warnLogger) Tracef(string, ...any)  {}
func (l warnLogger) Warnf(format string, v ...any) {
	fmt.Fprintf(l.w, "WARN "+format+"\n", v...)
}
func (l warnLogger) Errorf(format string, v ...any) {
	fmt.Fprintf(l.w, "ERROR "+format+"\n", v...)
}
func (l warnLogger) Fatalf(format string, v ...any) {
	fmt.Fprintf(l.w, "FATAL "+format+"\n", v...)
}

func (h *harness) stopNATS() {
	if h.ns != nil {
		h.ns.Shutdown()
		h.ns.WaitForShutdown()
		h.ns = nil
	}
}

// connect opens a client connection that reconnects forever.
func (h *harness) connect() (*nats.Conn, jetstream.JetStream) {
	h.t.Helper()
	nc, err := nats.Connect(h.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		h.t.Fatalf("connect to NATS at %s: %v", h.natsURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		h.t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// client returns an openai client on the simulator with quick retries.
func (h *harness) client(mod func(*llm.Config)) pipeline.Completer {
	h.t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	h.t.Cleanup(tr.CloseIdleConnections)
	cfg := llm.Config{
		Provider: llm.ProviderOpenAI, BaseURL: h.simURL + "/v1", APIKey: "sk-test-SECRET123",
		HTTPClient:       &http.Client{Transport: tr},
		FirstByteTimeout: 10 * time.Second, IdleTimeout: 5 * time.Second, TotalTimeout: 20 * time.Second,
		Retry: llm.RetryConfig{InitialInterval: 10 * time.Millisecond, MaxInterval: 200 * time.Millisecond,
			MaxElapsedTime: 5 * time.Second, MaxRetries: 4},
		Lane: llm.LaneConfig{InitialConcurrency: 16, MaxConcurrency: 64},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := llm.New(cfg)
	if err != nil {
		h.t.Fatalf("llm client: %v", err)
	}
	return c
}

// enqueueConfig is the EnqueueConfig of batch in this harness.
func (h *harness) enqueueConfig(batch string) enqueue.Config {
	return enqueue.Config{
		Batch: batch, Schema: []byte(testSchema), Template: testTemplate, Format: enqueue.FormatJSONL,
		IDField: "id", Provider: llm.ProviderOpenAI, Model: "sim-model", Queue: h.q,
		Limits: fixpoint.Limits{MaxAttempts: 3},
	}
}

// enqueue records and publishes n jobs of batch.
func (h *harness) enqueue(batch string, n int) enqueue.Progress {
	h.t.Helper()
	prog, err := enqueue.Run(h.ctx, h.js, h.st, h.enqueueConfig(batch), strings.NewReader(dataset(n)))
	if err != nil {
		h.t.Fatalf("enqueue %d jobs of %s: %v", n, batch, err)
	}
	return prog
}

// workerConfig is a quick worker on the harness queue.
func (h *harness) workerConfig(c pipeline.Completer) pipeline.WorkerConfig {
	return pipeline.WorkerConfig{
		Queue: h.q, Concurrency: 8, Grace: 10 * time.Second,
		NakDelayMin: 50 * time.Millisecond, NakDelayMax: 500 * time.Millisecond,
		Providers: map[string]pipeline.Completer{llm.ProviderOpenAI: c},
		Logger:    slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics:   pipeline.NewMetrics(),
	}
}

// runningWorker is a Worker running in a goroutine.
type runningWorker struct {
	w      *pipeline.Worker
	cancel context.CancelFunc
	done   chan error
	err    error
	ended  bool
	logs   func() string // the harness's log tail, for a worker that does not return
}

// startWorker runs a worker until stop (or the test's end).
func (h *harness) startWorker(cfg pipeline.WorkerConfig, js jetstream.JetStream, ledger pipeline.Ledger) *runningWorker {
	h.t.Helper()
	if js == nil {
		js = h.js
	}
	if ledger == nil {
		ledger = h.st
	}
	w, err := pipeline.NewWorker(js, ledger, cfg)
	if err != nil {
		h.t.Fatalf("new worker: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw := &runningWorker{w: w, cancel: cancel, done: make(chan error, 1), logs: func() string { return h.logs.tail(80) }}
	go func() { rw.done <- w.Run(ctx) }()
	h.t.Cleanup(func() { rw.stop(h.t, time.Minute) })
	return rw
}

// stop cancels the worker and waits for Run to return, at most timeout.
func (rw *runningWorker) stop(t testing.TB, timeout time.Duration) error {
	t.Helper()
	rw.cancel()
	return rw.wait(t, timeout)
}

func (rw *runningWorker) wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	if rw.ended {
		return rw.err
	}
	select {
	case rw.err = <-rw.done:
		rw.ended = true
	case <-time.After(timeout):
		t.Fatalf("worker did not return within %s; its logs:\n%s", timeout, rw.logs())
	}
	return rw.err
}

// progress reads the batch's progress, failing the test on error.
func (h *harness) progress(batch string) store.Progress {
	h.t.Helper()
	p, err := h.st.Progress(context.Background(), batch)
	if err != nil {
		h.t.Fatalf("progress: %v", err)
	}
	return p
}

// waitDone waits until every job of batch is final.
func (h *harness) waitDone(batch string, n int, timeout time.Duration) {
	h.t.Helper()
	var p store.Progress
	if !poll(timeout, func() bool {
		p = h.progress(batch)
		return p.Total == n && p.Queued == 0
	}) {
		h.t.Fatalf("timed out after %s waiting for %d jobs of %s final: %+v\nworker logs:\n%s", timeout, n, batch, p, h.logs.tail(40))
	}
}

// job reads one job and its attempts.
func (h *harness) job(id string) (*store.JobRecord, []store.Attempt) {
	h.t.Helper()
	j, as, err := h.st.Job(context.Background(), id)
	if err != nil {
		h.t.Fatalf("job %s: %v", id, err)
	}
	return j, as
}

// invariants are the scenario's allowances for checkInvariants.
type invariants struct {
	// Jobs is the number of jobs enqueued in the batch.
	Jobs int
	// MaxCalls bounds the provider calls; 0 means exactly the calls the
	// ledger accounts for (each job's calls plus its transport retries).
	MaxCalls int64
	// ExtraCalls is added to the ledger's account when MaxCalls is 0:
	// calls no row can record (a worker killed mid-call). Calls of a job
	// handed back or cut off at shutdown are recorded as interrupted and
	// need no allowance.
	ExtraCalls int64
	// Statuses, when set, is the exact count per final status.
	Statuses map[fixpoint.Status]int
	// SkipQueue skips I3 (the queue is checked by the test itself).
	SkipQueue bool
	// OneDelivery asserts that every job was finished on its first
	// delivery: nothing was redelivered.
	OneDelivery bool
	// Schema is the batch's schema, testSchema when "".
	Schema string
}

// checkInvariants asserts I1-I5 of issue 6 after a scenario.
func (h *harness) checkInvariants(batch string, want invariants) {
	h.t.Helper()
	ctx := context.Background()
	// I1: every enqueued job has exactly one final row.
	p := h.progress(batch)
	if p.Total != want.Jobs || p.Queued != 0 {
		h.t.Errorf("I1: batch %s has %d job rows, %d still queued; want %d rows, all final (%+v)", batch, p.Total, p.Queued, want.Jobs, p)
	}
	if want.Statuses != nil {
		got := map[fixpoint.Status]int{fixpoint.StatusValid: p.Valid, fixpoint.StatusInvalid: p.Invalid, fixpoint.StatusFailed: p.Failed,
			fixpoint.StatusRejected: p.Rejected, fixpoint.StatusDead: p.Dead}
		for s, n := range got {
			if n != want.Statuses[s] {
				h.t.Errorf("I1: %d jobs %s, want %d (%+v)", n, s, want.Statuses[s], p)
			}
		}
	}
	// I1b: the batch rollups the dashboard reads equal a recount.
	if drift, err := h.st.RollupDrift(ctx); err != nil || len(drift) > 0 {
		h.t.Errorf("I1b: the rollups differ from a recount (%v):\n%s", err, strings.Join(drift, "\n"))
	}
	// I2: every valid value validates against its schema; rows are unique
	// by id.
	schema, err := validate.Compile([]byte(cmp.Or(want.Schema, testSchema)))
	if err != nil {
		h.t.Fatalf("compile test schema: %v", err)
	}
	seen := map[string]bool{}
	var ids []string
	err = h.st.Export(ctx, batch, func(r store.ExportRow) error {
		if seen[r.ID] {
			h.t.Errorf("I2: job %s exported twice", r.ID)
		}
		seen[r.ID] = true
		ids = append(ids, r.ID)
		if r.Status != fixpoint.StatusValid {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(r.Value))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			h.t.Errorf("I2: job %s: valid value is not JSON: %v", r.ID, err)
			return nil
		}
		if errs := schema.Validate(v); errs != nil {
			h.t.Errorf("I2: job %s: valid value %s fails its schema: %v", r.ID, r.Value, errs)
		}
		return nil
	})
	if err != nil {
		h.t.Fatalf("export: %v", err)
	}
	// I3: the stream and the consumer are empty.
	if !want.SkipQueue {
		h.checkQueueEmpty()
	}
	c, err := h.st.Counts(ctx, batch)
	if err != nil {
		h.t.Fatalf("counts: %v", err)
	}
	// I4: provider calls within what the ledger accounts for: the
	// attempts of every run, each with its transport retries, and the
	// calls of deliveries that ended without a result (interrupted
	// attempts): every call made leaves a row.
	for _, id := range ids {
		j, _ := h.job(id)
		if want.OneDelivery && j.Deliveries != 1 {
			h.t.Errorf("job %s finished on delivery %d, want 1: it was redelivered", id, j.Deliveries)
		}
	}
	account := c.Calls
	calls := h.sim.requests()
	limit := want.MaxCalls
	if limit == 0 {
		limit = account + want.ExtraCalls
	}
	if calls > limit {
		h.t.Errorf("I4: %d provider calls, the scenario allows %d (ledger accounts for %d)", calls, limit, account)
	}
	// I5: job token totals equal the sums over their attempts.
	if c.JobTokensIn != c.AttemptTokensIn || c.JobTokensOut != c.AttemptTokensOut || c.JobTokensCached != c.AttemptTokensCached {
		h.t.Errorf("I5: job tokens in/out/cached %d/%d/%d, attempts %d/%d/%d", c.JobTokensIn, c.JobTokensOut, c.JobTokensCached,
			c.AttemptTokensIn, c.AttemptTokensOut, c.AttemptTokensCached)
	}
	if c.AttemptsMismatch != 0 {
		h.t.Errorf("I5: %d finished jobs whose attempts column differs from their attempt rows", c.AttemptsMismatch)
	}
	if c.CostMismatch != 0 {
		h.t.Errorf("I5: %d finished jobs whose cost differs from the sum of their attempts' costs", c.CostMismatch)
	}
	h.checkSpendCounter(batch)
	if c.PromptsMissing != 0 || c.InterruptedPromptsMissing != 0 {
		h.t.Errorf("I5: %d attempts and %d interrupted attempts refer to a system prompt the ledger does not hold",
			c.PromptsMissing, c.InterruptedPromptsMissing)
	}
	if h.t.Failed() {
		h.t.Logf("worker logs:\n%s", h.logs.tail(60))
	}
}

// checkQueueEmpty waits for the stream and consumer to be empty (acks are
// asynchronous on the server side).
func (h *harness) checkQueueEmpty() {
	h.t.Helper()
	var last string
	ok := poll(15*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := h.js.Stream(ctx, h.q.Stream)
		if err != nil {
			last = err.Error()
			return false
		}
		si, err := s.Info(ctx)
		if err != nil {
			last = err.Error()
			return false
		}
		c, err := s.Consumer(ctx, h.q.Consumer)
		if err != nil {
			last = err.Error()
			return false
		}
		ci, err := c.Info(ctx)
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("stream msgs %d, consumer pending %d, ack pending %d", si.State.Msgs, ci.NumPending, ci.NumAckPending)
		return si.State.Msgs == 0 && ci.NumPending == 0 && ci.NumAckPending == 0
	})
	if !ok {
		h.t.Errorf("I3: queue not empty: %s", last)
	}
}

// consumerInfo returns the shared consumer's info.
func (h *harness) consumerInfo() *jetstream.ConsumerInfo {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := h.js.Consumer(ctx, h.q.Stream, h.q.Consumer)
	if err != nil {
		h.t.Fatalf("consumer: %v", err)
	}
	ci, err := c.Info(ctx)
	if err != nil {
		h.t.Fatalf("consumer info: %v", err)
	}
	return ci
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct{ syncbuf.Buffer }

func (s *syncBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(s.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// The worker binary for process-level tests, built once per run.
var (
	workerBinOnce sync.Once
	workerBinDir  string
	workerBin     string
	workerBinErr  error
)

func buildWorker(t testing.TB) string {
	t.Helper()
	workerBinOnce.Do(func() {
		workerBinDir, workerBinErr = os.MkdirTemp("", "fixpoint-worker-bin-")
		if workerBinErr != nil {
			return
		}
		workerBin = filepath.Join(workerBinDir, "worker")
		if runtime.GOOS == "windows" {
			workerBin += ".exe"
		}
		cmd := exec.Command("go", "build", "-o", workerBin, "github.com/fixpoint-dev/fixpoint/cmd/worker")
		out, err := cmd.CombinedOutput()
		if err != nil {
			workerBinErr = fmt.Errorf("go build cmd/worker: %v\n%s", err, out)
		}
	})
	if workerBinErr != nil {
		t.Fatal(workerBinErr)
	}
	return workerBin
}

// proc is a worker subprocess.
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// startProc runs the worker binary against the harness's NATS, database and
// simulator, with extra flags and environment.
func (h *harness) startProc(simURL string, env []string, extra ...string) *proc {
	h.t.Helper()
	bin := buildWorker(h.t)
	if simURL == "" {
		simURL = h.simURL
	}
	args := []string{"run",
		"--database-url", h.workDSN, "--nats-url", h.natsURL,
		"--stream", h.q.Stream, "--subject", h.q.Subject, "--consumer", h.q.Consumer,
		"--ack-wait", h.q.WithDefaults().AckWait.String(), "--max-deliver", fmt.Sprint(h.q.WithDefaults().MaxDeliver),
		"--max-ack-pending", fmt.Sprint(h.q.WithDefaults().MaxAckPending),
		"--duplicates-window", h.q.WithDefaults().Duplicates.String(),
		"--metrics-addr", "off", "--openai-base-url", simURL + "/v1",
		"--log-format", "json", "--log-level", "debug", "--transport-retries", "4", "--spill-dir", h.spillDir,
	}
	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "NATS_URL=", "DATABASE_URL=")
	cmd.Env = append(cmd.Env, env...)
	p := &proc{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start worker process: %v", err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	h.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if h.t.Failed() {
			h.t.Logf("worker process %d output (tail):\n%s", cmd.Process.Pid, p.out.tail(40))
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit error.
func (p *proc) wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("worker process did not exit within %s; output:\n%s", timeout, p.out.tail(40))
		return nil
	}
}

// logCount counts log lines of the process containing s.
func (p *proc) logCount(s string) int { return strings.Count(p.out.String(), s) }

// checkSpendCounter asserts I6: a batch capped from its start has a spend
// counter equal to its calls in the ledger (attempts and interrupted
// calls, each charged by the transaction that wrote it).
func (h *harness) checkSpendCounter(batch string) {
	h.t.Helper()
	var capped bool
	var counted, calls int64
	var counter, ledger float64
	h.sqlRow([]any{&capped, &counted, &counter, &calls, &ledger}, fmt.Sprintf(`
		WITH c AS (
		    SELECT a.tokens_in + a.tokens_out AS tokens, a.cost_usd FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.batch = '%[1]s'
		    UNION ALL
		    SELECT i.tokens_in + i.tokens_out, i.cost_usd FROM interrupted_attempts i JOIN jobs j ON j.id = i.job_id WHERE j.batch = '%[1]s'
		)
		SELECT b.max_cost_usd IS NOT NULL OR b.max_total_tokens IS NOT NULL,
		       coalesce((SELECT calls FROM spend_counters WHERE batch = b.name), 0),
		       coalesce((SELECT cost_usd FROM spend_counters WHERE batch = b.name), 0)::float8,
		       (SELECT count(*) FROM c), coalesce((SELECT sum(cost_usd) FROM c), 0)::float8
		FROM batches b WHERE b.name = '%[1]s'`, batch))
	if capped && (counted != calls || math.Abs(counter-ledger) > 1e-6) {
		h.t.Errorf("I6: the spend counter holds %d calls, $%.8f; the ledger %d calls, $%.8f", counted, counter, calls, ledger)
	}
}

// sqlRow runs a query returning one row on the harness database, into
// dest.
func (h *harness) sqlRow(dest []any, query string, args ...any) {
	h.t.Helper()
	conn, err := pgx.Connect(context.Background(), h.dsn)
	if err != nil {
		h.t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), query, args...).Scan(dest...); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
}
