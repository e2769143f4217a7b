package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
)

// kill -9 of a worker process with calls in flight, then a restart: every
// job final, and every call the provider received has a row, those cut
// short by the kill recorded as crashed with no reply; then SIGTERM makes
// the second process exit 0.
func TestProcessKill9AndRestart(t *testing.T) {
	t.Parallel()
	const n, conc = 60, 8
	h := newHarness(t, harnessConfig{
		Sim:   sim.Config{Latency: fixedLatency(300 * time.Millisecond)},
		Queue: queue.Config{AckWait: 2 * time.Second},
	})
	h.enqueue("b", n)
	p1 := h.startProc("", nil, "--concurrency", fmt.Sprint(conc))
	waitFor(t, 60*time.Second, "jobs done and calls in flight in the first process", func() bool {
		return h.progress("b").Valid >= 10 && h.sim.inFlight.Load() >= 4
	})
	if err := p1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p1.wait(t, 10*time.Second)
	if p := h.progress("b"); p.Queued == 0 {
		t.Fatalf("the batch finished before the kill")
	}
	p2 := h.startProc("", nil, "--concurrency", fmt.Sprint(conc))
	h.waitDone("b", n, 90*time.Second)
	h.checkQueueEmpty()
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p2.wait(t, 30*time.Second); err != nil {
		t.Errorf("second worker after SIGTERM: %v, want exit 0", err)
	}
	// In flight at the kill: calls, and finished results waiting for
	// their batch to commit. The reply journal has both (a call from when
	// it went out), and the second process recorded them: every call the
	// provider received has a row.
	if p2.logCount("recorded the calls a worker that died had made and not written") != 1 {
		t.Errorf("the second worker did not say it recorded the first one's calls:\n%s", p2.out.tail(20))
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// kill -9 of a worker whose jobs wait for their lane's --rpm budget: a
// call is written down as it goes out, not while it waits, so the next
// start records as in flight only calls the provider received (it recorded
// 24 for one call sent), and a call is never counted twice.
func TestProcessKill9WhileCallsWaitForBudget(t *testing.T) {
	t.Parallel()
	const n, conc = 12, 8
	h := newHarness(t, harnessConfig{
		Sim:   sim.Config{Latency: fixedLatency(1500 * time.Millisecond)},
		Queue: queue.Config{AckWait: 3 * time.Second},
	})
	h.enqueue("b", n)
	p1 := h.startProc("", nil, "--concurrency", fmt.Sprint(conc), "--rpm", "60")
	waitFor(t, 60*time.Second, "a call in flight", func() bool { return h.sim.inFlight.Load() >= 1 })
	time.Sleep(200 * time.Millisecond) // the other jobs wait for the budget
	if err := p1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p1.wait(t, 10*time.Second)
	received := h.sim.requests()
	h.finishWithNoUnsentCalls("b", n, conc)
	inFlight := h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'b:%' AND provider_class = 'in_flight'`)
	if inFlight < 1 || int64(inFlight) > received {
		t.Errorf("%d calls recorded in flight at the kill; the provider had received %d calls by then (at least one in flight)", inFlight, received)
	}
}

// finishWithNoUnsentCalls runs a second worker process until batch's n
// jobs are final, stops it, and checks that every call the provider
// received has a row and no row is a call never sent, besides the
// batch's invariants.
func (h *harness) finishWithNoUnsentCalls(batch string, n, conc int) {
	h.t.Helper()
	p := h.startProc("", nil, "--concurrency", fmt.Sprint(conc))
	h.waitDone(batch, n, 90*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		h.t.Fatal(err)
	}
	if err := p.wait(h.t, 30*time.Second); err != nil {
		h.t.Errorf("second worker after SIGTERM: %v, want exit 0", err)
	}
	c, err := h.st.Counts(context.Background(), batch)
	if err != nil {
		h.t.Fatal(err)
	}
	if calls := h.sim.requests(); c.Calls > calls {
		h.t.Errorf("the ledger accounts for %d calls, the provider received %d: calls never sent were recorded", c.Calls, calls)
	}
	h.checkInvariants(batch, invariants{Jobs: n})
}

// A worker stopped while its jobs wait for their lane's budget records
// no call for a wait: the provider never saw one (a SIGTERM recorded seven
// lane waits as interrupted calls).
func TestStopWhileCallsWaitForBudget(t *testing.T) {
	t.Parallel()
	const n, conc = 10, 8
	h := newHarness(t, harnessConfig{Sim: sim.Config{Latency: fixedLatency(1500 * time.Millisecond)}})
	h.enqueue("b", n)
	p1 := h.startProc("", nil, "--concurrency", fmt.Sprint(conc), "--rpm", "60", "--grace", "100ms")
	// The third call went out about two seconds after its job was pulled.
	waitFor(t, 60*time.Second, "three calls sent", func() bool { return h.sim.requests() >= 3 && h.sim.inFlight.Load() >= 1 })
	time.Sleep(200 * time.Millisecond)
	if err := p1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p1.wait(t, 30*time.Second); err != nil {
		t.Errorf("worker after SIGTERM: %v, want exit 0", err)
	}
	if waits := h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'b:%' AND provider_error LIKE '%wait for lane%'`); waits != 0 {
		t.Errorf("%d lane waits recorded as interrupted calls, want none", waits)
	}
	// A call cut off in flight started when it was sent, not when its job
	// was pulled: its latency is its time in flight (a 1.5 s call, cut).
	if cut, slow := h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'b:%' AND reason = 'shutdown'`),
		h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'b:%' AND reason = 'shutdown' AND latency_ms > 1700`); cut == 0 || slow != 0 {
		t.Errorf("%d calls cut off at the stop, %d of them with a latency over the call's 1.5 s: timed from before the lane's wait", cut, slow)
	}
	h.finishWithNoUnsentCalls("b", n, conc)
}

// kill -9 of a worker holding replies it has not written (the ledger is
// cut off, so their results wait for a commit): the next worker started
// with the same spill directory records each of them from the reply
// journal, as a crashed call, so every call the provider answered has a
// row (they were lost: the first worker's calls exceeded the ledger's).
func TestProcessKill9KeepsPaidReplies(t *testing.T) {
	t.Parallel()
	const n, conc = 60, 4
	proxy := &pgProxy{}
	h := newHarness(t, harnessConfig{
		Sim:   sim.Config{Latency: fixedLatency(200 * time.Millisecond)},
		Queue: queue.Config{AckWait: 5 * time.Second},
		DSN:   proxy.dsn(t),
	})
	h.enqueue("b", n)
	p1 := h.startProc("", nil, "--concurrency", fmt.Sprint(conc), "--jobs-ahead", "0")
	// Cut with calls in flight, so that results come back to be held (cut
	// between two jobs' state reads, none was, and under load the wait
	// below never ended).
	waitFor(t, 60*time.Second, "jobs done in the first process and calls in flight", func() bool {
		return h.progress("b").Valid >= 5 && h.sim.inFlight.Load() > 0
	})
	proxy.cut()
	// The replies in flight at the cut come back and their results wait
	// for a commit that cannot happen; no job starts (its state cannot be
	// read), so no call is in flight at the kill.
	waitFor(t, 30*time.Second, "results held while the ledger is cut off", func() bool {
		return p1.logCount("ledger write failed") > 0 && h.sim.inFlight.Load() == 0
	})
	if err := p1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p1.wait(t, 10*time.Second)
	proxy.restore()
	if left, _ := filepath.Glob(filepath.Join(h.spillDir, "replies-*.jsonl")); len(left) == 0 {
		t.Fatalf("no reply journal in %s after the kill", h.spillDir)
	}
	p2 := h.startProc("", nil, "--concurrency", fmt.Sprint(conc))
	h.waitDone("b", n, 90*time.Second)
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p2.wait(t, 30*time.Second); err != nil {
		t.Errorf("second worker after SIGTERM: %v, want exit 0", err)
	}
	// The held results' calls are recorded from the journal as crashed,
	// and the worker says so. (A commit cut off mid-way may have landed
	// all the same: then the journal finds them in the ledger and records
	// nothing, saying nothing; the provider's calls are accounted for
	// either way, below.)
	crashed := h.sqlInt(`SELECT count(*) FROM interrupted_attempts WHERE job_id LIKE 'b:%' AND reason = 'crashed'`)
	if said := p2.logCount("recorded the calls a worker that died had made and not written"); said != min(crashed, 1) {
		t.Errorf("%d crashed calls recorded, and the second worker said so %d times:\n%s", crashed, said, p2.out.tail(20))
	}
	if left, _ := filepath.Glob(filepath.Join(h.spillDir, "replies-*.jsonl")); len(left) != 0 {
		t.Errorf("reply journals left after a clean stop: %v", left)
	}
	h.checkInvariants("b", invariants{Jobs: n, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// Three worker processes on one consumer: each does part of the work, the
// jobs in flight across all of them stay within MaxAckPending, and their
// combined request rate within the budget they share.
func TestThreeWorkerProcesses(t *testing.T) {
	t.Parallel()
	const n, maxAckPending, budget = 90, 6, 1200
	h := newHarness(t, harnessConfig{Queue: queue.Config{MaxAckPending: maxAckPending}})
	h.enqueue("b", n)
	load := &sharedLoad{}
	var taps []*simTap
	var procs []*proc
	for i := range 3 {
		tap, url := startSim(t, sim.Config{Seed: uint64(i + 1), Latency: fixedLatency(50 * time.Millisecond)})
		tap.shared.Store(load)
		taps = append(taps, tap)
		procs = append(procs, h.startProc(url, nil, "--concurrency", "4", "--rpm", fmt.Sprint(budget/3)))
	}
	h.waitDone("b", n, 120*time.Second)
	h.checkQueueEmpty()
	var total int64
	for i, tap := range taps {
		got := tap.requests()
		total += got
		if got == 0 {
			t.Errorf("worker process %d made no call: the work was not spread", i+1)
		}
	}
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, p := range procs {
		if err := p.wait(t, 30*time.Second); err != nil {
			t.Errorf("worker process %d: %v, want exit 0", i+1, err)
		}
	}
	if got := load.max.Load(); got > maxAckPending {
		t.Errorf("%d calls in flight across the processes, MaxAckPending is %d", got, maxAckPending)
	}
	load.mu.Lock()
	perSecond := maxInWindow(load.starts, time.Second)
	load.mu.Unlock()
	if limit := budget/60 + 3; perSecond > limit {
		t.Errorf("%d calls within one second across the processes, the shared budget allows %d (+1 per process)", perSecond, limit)
	}
	h.checkInvariants("b", invariants{Jobs: n})
	if total > int64(3*n) {
		t.Errorf("%d calls for %d jobs", total, n)
	}
}

// With a provider key set, no log line, exit message, ledger row or metric
// carries it, even when the provider echoes it in its 401: the worker that
// got it stops (exit 1, the key redacted from its reason) and the next one
// finishes the batch.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	const n, secret = 20, "sk-test-SECRET123"
	var refused sync.Map // job id -> refused once
	h := newHarness(t, harnessConfig{Sim: sim.Config{Script: func(_ int, r *http.Request) *sim.ScriptedReply {
		if u := userOf(r); u == jobID("b", 3) || u == jobID("b", 4) {
			if _, again := refused.LoadOrStore(u, true); again {
				return nil
			}
			body := `{"error":{"message":"Incorrect API key provided: ` + secret + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
			return &sim.ScriptedReply{Status: 401, Body: []byte(body), Header: http.Header{"Content-Type": {"application/json"}}}
		}
		return nil
	}}})
	h.enqueue("b", n)
	first := h.startProc("", []string{"OPENAI_API_KEY=" + secret}, "--metrics-addr", "off")
	if err := first.wait(t, 30*time.Second); err == nil || !strings.Contains(first.out.String(), "openai refused the API key") {
		t.Fatalf("worker given a 401: %v, want exit 1 saying the key was refused; output:\n%s", err, first.out.tail(20))
	}
	port := freePort(t)
	p := h.startProc("", []string{"OPENAI_API_KEY=" + secret}, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port))
	h.waitDone("b", n, 60*time.Second)
	var metrics string
	waitFor(t, 10*time.Second, "a metrics scrape", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		metrics = string(b)
		return resp.StatusCode == 200 && strings.Contains(metrics, "fixpoint_jobs_total")
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 30*time.Second); err != nil {
		t.Errorf("worker: %v", err)
	}
	if _, ok := h.sim.auth.Load("Bearer " + secret); !ok {
		t.Fatalf("the key never reached the provider; the test proves nothing")
	}
	where := map[string]string{"logs of the worker refused": first.out.String(), "logs": p.out.String(), "metrics": metrics}
	var ledger strings.Builder
	_ = h.st.Export(h.ctx, "b", func(r store.ExportRow) error {
		fmt.Fprintf(&ledger, "%s %s %s %s\n", r.ID, r.Metadata, r.Value, r.Error)
		j, as := h.job(r.ID)
		fmt.Fprintf(&ledger, "%s %s %s\n", j.Error, j.Payload, j.Metadata)
		for _, a := range as {
			fmt.Fprintf(&ledger, "%s %s %s %s %s %s\n", a.Request, a.Raw, a.Errors, a.ProviderError, a.RetryClasses, a.Repairs)
		}
		return nil
	})
	where["ledger"] = ledger.String()
	if p := h.progress("b"); p.Valid != n {
		t.Errorf("after the refused key and a second worker: %+v; want all %d valid", p, n)
	}
	for name, text := range where {
		if strings.Contains(text, secret) || strings.Contains(text, "SECRET123") {
			i := strings.Index(text, "SECRET123")
			t.Errorf("the key appears in the %s: ...%s...", name, text[max(0, i-80):min(len(text), i+40)])
		}
	}
}
