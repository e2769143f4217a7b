package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// fakeMachine is a parallel strategy in miniature: every chunk's request
// at once, then a merge with no call. It fails the test when two of its
// methods run at once, as a real Machine is not safe for that.
type fakeMachine struct {
	t      *testing.T
	chunks int
	// transientAt, when above 0, makes the Feed of that many outcomes ask
	// for the job to be run again later.
	transientAt int

	busy    atomic.Bool
	started bool
	out     map[*fixpoint.Request]int // outstanding request -> its attempt No
	next    int
	fed     int
	res     fixpoint.Result
	done    bool
}

func newFakeMachine(t *testing.T, chunks int) *fakeMachine {
	return &fakeMachine{t: t, chunks: chunks, out: map[*fixpoint.Request]int{}, res: fixpoint.Result{JobID: "doc-1"}}
}

func (m *fakeMachine) enter() func() {
	if m.busy.Swap(true) {
		m.t.Error("two Machine methods ran at once")
	}
	return func() { m.busy.Store(false) }
}

func (m *fakeMachine) Next() repair.DocAction {
	defer m.enter()()
	return m.next0()
}

func (m *fakeMachine) next0() repair.DocAction {
	if m.done {
		return repair.DocAction{}
	}
	if m.started {
		return repair.DocAction{Waiting: true}
	}
	m.started = true
	var act repair.DocAction
	for n := range m.chunks {
		req := &fixpoint.Request{Model: "gpt-4o-mini", MaxTokens: 64,
			Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: fmt.Sprintf("chunk %d", n)}}}
		m.next++
		m.out[req] = m.next
		act.Requests = append(act.Requests, req)
	}
	return act
}

func (m *fakeMachine) Feed(req *fixpoint.Request, resp *fixpoint.Response, err error, started time.Time) (*fixpoint.Attempt, repair.DocAction) {
	defer m.enter()()
	no, ok := m.out[req]
	if !ok {
		panic("fed a request that is not outstanding")
	}
	delete(m.out, req)
	m.fed++
	a := fixpoint.Attempt{No: no, Step: fixpoint.StepChunk, Chunk: &fixpoint.ChunkRef{N: no - 1}, StartedAt: started}
	if resp != nil {
		a.Raw, a.TokensIn, a.TokensOut = resp.Text, resp.Usage.InputTokens, resp.Usage.OutputTokens
	}
	if err != nil {
		a.Class, a.ProviderError = fixpoint.OutcomeProvider, err.Error()
	}
	m.res.Attempts = append(m.res.Attempts, a)
	m.res.Calls++
	if m.transientAt > 0 && m.fed == m.transientAt {
		return &a, repair.DocAction{Err: fmt.Errorf("%w: provider still failing", fixpoint.ErrTransient)}
	}
	if len(m.out) > 0 {
		return &a, repair.DocAction{Waiting: true}
	}
	m.res.Attempts = append(m.res.Attempts, fixpoint.Attempt{No: m.next + 1, Step: fixpoint.StepMerge, Valid: true, Value: json.RawMessage(`{}`)})
	m.res.Status, m.res.Value, m.done = fixpoint.StatusValid, json.RawMessage(`{}`), true
	return &a, repair.DocAction{}
}

func (m *fakeMachine) Outstanding(req *fixpoint.Request, at time.Time) *fixpoint.Attempt {
	defer m.enter()()
	no, ok := m.out[req]
	if !ok {
		return nil
	}
	return &fixpoint.Attempt{No: no, StartedAt: at, Class: fixpoint.OutcomeProvider, ProviderClass: fixpoint.ClassInFlight}
}

func (m *fakeMachine) Stop(status fixpoint.Status, class, msg string) {
	defer m.enter()()
	clear(m.out)
	m.res.Status, m.res.Class, m.res.Error, m.done = status, class, msg, true
}

func (m *fakeMachine) Result() *fixpoint.Result {
	defer m.enter()()
	res := m.res
	res.Attempts = append([]fixpoint.Attempt(nil), m.res.Attempts...)
	return &res
}

// barrierServer is an OpenAI server whose first `hold` calls each wait
// until all of them have arrived: the driver must have that many out at
// once or the test never ends. It records the most calls it had at once.
type barrierServer struct {
	hold    int
	mu      sync.Mutex
	now     int
	most    int
	arrived int
	all     chan struct{}
}

func newBarrierServer(t *testing.T, hold int) (*barrierServer, llm.Config) {
	b := &barrierServer{hold: hold, all: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(srv.Close)
	return b, llm.Config{Provider: llm.ProviderOpenAI, BaseURL: srv.URL, APIKey: "k",
		Retry: llm.RetryConfig{NoJitter: true, InitialInterval: 1, MaxRetries: 1}, Lane: llm.LaneConfig{MaxConcurrency: 64, InitialConcurrency: 64}}
}

func (b *barrierServer) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.now++
	b.most = max(b.most, b.now)
	b.arrived++
	if b.arrived == b.hold {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-r.Context().Done():
	}
	b.mu.Lock()
	b.now--
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"c","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"{}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`)
}

func docJob(t *testing.T) *repair.Job {
	job := testJob(t, fixpoint.Limits{Strategy: fixpoint.StrategyParallel})
	job.Document = "a long document"
	return job
}

// A document job's requests go out at once, at most DocCallsMax at a
// time; every hook runs once per call (the gate before it, the sent hook
// with the call's own outstanding attempt, the attempt hook with what
// Feed recorded), each call has its span, and the Machine's methods never
// run at once.
func TestDocumentLoopSendsAtOnceBounded(t *testing.T) {
	t.Parallel()
	const chunks = 20
	srv, cfg := newBarrierServer(t, DocCallsMax)
	client, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	loop := NewLoop(client, LoopConfig{Tracer: tp.Tracer(TracerName)})
	m := newFakeMachine(t, chunks)
	loop.startDocument = func(*repair.Job, *fixpoint.Result, repair.Config) (repair.Machine, error) { return m, nil }

	var mu sync.Mutex
	var gates, releases int
	sent, recorded := map[int]int{}, map[int]int{}
	hooks := LoopHooks{
		GateFunc: func(context.Context, *fixpoint.Request) (func(*fixpoint.Attempt), error) {
			mu.Lock()
			gates++
			mu.Unlock()
			return func(a *fixpoint.Attempt) {
				mu.Lock()
				defer mu.Unlock()
				if a != nil {
					releases++
				}
			}, nil
		},
		SentFunc: func(a *fixpoint.Attempt) {
			mu.Lock()
			sent[a.No]++
			mu.Unlock()
		},
		AttemptFunc: func(a *fixpoint.Attempt) {
			mu.Lock()
			recorded[a.No]++
			mu.Unlock()
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a driver sending one at a time never reaches the barrier
	defer cancel()
	res, err := loop.Resume(ctx, docJob(t), nil, hooks)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if res.Status != fixpoint.StatusValid || m.fed != chunks {
		t.Fatalf("status %s after %d calls fed, want valid after %d", res.Status, m.fed, chunks)
	}
	if srv.most != DocCallsMax {
		t.Errorf("%d calls out at once at most, want DocCallsMax (%d)", srv.most, DocCallsMax)
	}
	if gates != chunks || releases != chunks {
		t.Errorf("gate asked %d times and released %d, want %d each", gates, releases, chunks)
	}
	for no := 1; no <= chunks; no++ {
		if sent[no] != 1 || recorded[no] != 1 {
			t.Errorf("call %d: sent hook %d times, attempt hook %d, want 1 each", no, sent[no], recorded[no])
		}
	}
	if spans := len(exp.GetSpans()); spans != chunks {
		t.Errorf("%d call spans, want %d", spans, chunks)
	}
}

// A gate refusing a call over budget stops the Machine over_budget once
// the calls in flight are fed (their paid replies kept); a cancel, as
// cancelled; another refusal hands the job back.
func TestDocumentLoopGateStops(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		refuse error
		status fixpoint.Status
		err    error
	}{
		{"over budget", fmt.Errorf("%w: cap reached", fixpoint.ErrOverBudget), fixpoint.StatusOverBudget, nil},
		{"cancelled", fmt.Errorf("%w: batch cancelled", fixpoint.ErrCancelled), fixpoint.StatusCancelled, nil},
		{"ledger down", fmt.Errorf("%w: read ledger", fixpoint.ErrTransient), "", fixpoint.ErrTransient},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, cfg := newBarrierServer(t, 3)
			client, err := llm.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			loop := NewLoop(client, LoopConfig{})
			m := newFakeMachine(t, 6)
			loop.startDocument = func(*repair.Job, *fixpoint.Result, repair.Config) (repair.Machine, error) { return m, nil }
			var gates atomic.Int32
			hooks := LoopHooks{GateFunc: func(context.Context, *fixpoint.Request) (func(*fixpoint.Attempt), error) {
				if gates.Add(1) > 3 {
					return nil, tt.refuse
				}
				return nil, nil
			}}
			res, err := loop.Resume(context.Background(), docJob(t), nil, hooks)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("Resume: %v, want %v", err, tt.err)
			}
			if res.Status != tt.status {
				t.Errorf("status %q, want %q", res.Status, tt.status)
			}
			if calls := len(res.Attempts); calls < 3 || calls > DocCallsMax {
				t.Errorf("%d attempts, want the 3 calls let through (and no more than were in flight)", calls)
			}
		})
	}
}

// A Machine asking for the job to be run again (a provider still failing)
// hands it back with every attempt fed so far, and sends nothing more.
func TestDocumentLoopTransientHandsBack(t *testing.T) {
	t.Parallel()
	_, cfg := newBarrierServer(t, 1)
	client, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	loop := NewLoop(client, LoopConfig{})
	m := newFakeMachine(t, 3)
	m.transientAt = 1
	loop.startDocument = func(*repair.Job, *fixpoint.Result, repair.Config) (repair.Machine, error) { return m, nil }
	res, err := loop.Resume(context.Background(), docJob(t), nil, LoopHooks{})
	if !errors.Is(err, fixpoint.ErrTransient) {
		t.Fatalf("Resume: %v, want ErrTransient", err)
	}
	chunkAttempts := 0
	for _, a := range res.Attempts {
		if a.Step == fixpoint.StepChunk {
			chunkAttempts++
		}
	}
	if chunkAttempts != m.fed || m.fed == 0 {
		t.Errorf("%d chunk attempts in the result, %d fed: want every fed outcome kept", chunkAttempts, m.fed)
	}
}

// A call stopped while it waited for its lane was never sent: the job is
// handed back, and no attempt is recorded for it.
func TestDocumentLoopNotSentHandsBack(t *testing.T) {
	t.Parallel()
	loop := NewLoop(notSentCompleter{}, LoopConfig{})
	m := newFakeMachine(t, 4)
	loop.startDocument = func(*repair.Job, *fixpoint.Result, repair.Config) (repair.Machine, error) { return m, nil }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := loop.Resume(ctx, docJob(t), nil, LoopHooks{})
	if !errors.Is(err, fixpoint.ErrTransient) {
		t.Fatalf("Resume: %v, want ErrTransient", err)
	}
	if len(res.Attempts) != 0 {
		t.Errorf("%d attempts, want none: no call was sent", len(res.Attempts))
	}
}

// notSentCompleter answers every call as stopped before it was sent.
type notSentCompleter struct{}

func (notSentCompleter) Complete(ctx context.Context, _ fixpoint.Request) (*fixpoint.Response, error) {
	return nil, &fixpoint.ProviderError{Class: fixpoint.ClassTimeout, Message: ctx.Err().Error(), NotSent: true}
}

// A job whose document strategy cannot start (the Machine refuses it) is
// a bad job, with a result naming it.
func TestDocumentLoopBadJob(t *testing.T) {
	t.Parallel()
	loop := NewLoop(&fakeCompleter{}, LoopConfig{})
	loop.startDocument = func(*repair.Job, *fixpoint.Result, repair.Config) (repair.Machine, error) {
		return nil, fmt.Errorf("%w: no document", fixpoint.ErrBadJob)
	}
	res, err := loop.Resume(context.Background(), docJob(t), nil, LoopHooks{})
	if !errors.Is(err, fixpoint.ErrBadJob) || res == nil || res.JobID != "job-1" {
		t.Fatalf("Resume: %v, %+v; want ErrBadJob with the job's result", err, res)
	}
}
