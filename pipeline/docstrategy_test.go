package pipeline_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/chunk"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
)

// docChunkTokens is the chunk size of the document batches here: a
// simulated 50,000-character agreement is four chunks.
const docChunkTokens = 4000

// enqueueDocuments records and publishes n simulated agreements as the
// jobs of batch under strategy s, with the limits edited by edit, and
// returns each job's chunk count.
func enqueueDocuments(h *harness, batch string, n int, s fixpoint.Strategy, edit ...func(*fixpoint.Limits)) map[string]int {
	h.t.Helper()
	var rows strings.Builder
	chunks := map[string]int{}
	for i := range n {
		d, err := sim.NewDocument(uint64(40+i), i, "en", sim.DocumentMinChars)
		if err != nil {
			h.t.Fatal(err)
		}
		cs, err := chunk.Split(d.Text, chunk.Options{Tokens: docChunkTokens, Overlap: fixpoint.ChunkOverlapDefault})
		if err != nil {
			h.t.Fatal(err)
		}
		id := fmt.Sprintf("a%d", i)
		chunks[batch+":"+id] = len(cs)
		line, _ := json.Marshal(map[string]string{"id": id, "doc": d.Text})
		rows.Write(append(line, '\n'))
	}
	cfg := h.enqueueConfig(batch)
	cfg.Schema, cfg.Template, cfg.DocumentField = []byte(sim.DocumentSchema), sim.DocumentTemplate, "doc"
	cfg.MaxTokens = 8000 // a chunk's share of the 500 subsidiaries
	cfg.Limits = fixpoint.Limits{MaxAttempts: 3, Strategy: s, ChunkTokens: docChunkTokens, ChunkOverlap: fixpoint.ChunkOverlapDefault}
	for _, e := range edit {
		e(&cfg.Limits)
	}
	prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(rows.String()))
	if err != nil || prog.Recorded != n {
		h.t.Fatalf("enqueue: %d recorded, %v; want %d", prog.Recorded, err, n)
	}
	return chunks
}

// A batch of documents under the parallel strategy end to end on the
// simulator, against the real queue and ledger: every job valid, its
// attempts a call per chunk and the merge, which is no call (no request,
// no tokens), and every call the simulator answered in the ledger.
//
// The ledger's step, chunk and conflict columns come with migration 015
// (branch s22-ledger): after the merge, assert attempts' step is chunk
// for the calls and merge for the rest, and each chunk's offsets.
func TestParallelDocumentsEndToEnd(t *testing.T) {
	t.Parallel()
	const n = 3
	h := newHarness(t, harnessConfig{})
	chunks := enqueueDocuments(h, "p", n, fixpoint.StrategyParallel)
	rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
	h.waitDone("p", n, 60*time.Second)
	if err := rw.stop(t, 20*time.Second); err != nil {
		t.Fatalf("worker: %v", err)
	}
	for id, want := range chunks {
		j, as := h.job(id)
		if j.Status != fixpoint.StatusValid {
			t.Errorf("job %s: %s (%s), want valid", id, j.Status, j.Error)
		}
		calls, merges := 0, 0
		for _, a := range as {
			switch {
			case a.RequestHash == "" && a.TokensIn+a.TokensOut == 0:
				merges++
			default:
				calls++
			}
		}
		if calls < want || merges != 1 || j.Calls != calls {
			t.Errorf("job %s: %d calls (job says %d) and %d merges over %d chunks; want a call per chunk and one merge", id, calls, j.Calls, merges, want)
		}
	}
	h.checkInvariants("p", invariants{Jobs: n, Schema: sim.DocumentSchema, Statuses: map[fixpoint.Status]int{fixpoint.StatusValid: n}})
}

// kill -9 of a worker whose document jobs have their chunk calls in flight
// together, then a restart: every job final, and every chunk call the
// simulator received has a row (the reply journal pairs each call with its
// own outcome).
func TestDocumentChunkCallsInFlightAtKill9(t *testing.T) {
	t.Parallel()
	const n = 2
	h := newHarness(t, harnessConfig{
		Sim:   sim.Config{Latency: fixedLatency(1500 * time.Millisecond)},
		Queue: queue.Config{AckWait: 3 * time.Second},
	})
	enqueueDocuments(h, "k", n, fixpoint.StrategyParallel)
	p1 := h.startProc("", nil, "--concurrency", "2", "--lane-max-concurrency", "16")
	waitFor(t, 60*time.Second, "chunk calls of both jobs in flight", func() bool { return h.sim.inFlight.Load() >= 6 })
	if err := p1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p1.wait(t, 10*time.Second)
	p2 := h.startProc("", nil, "--concurrency", "2", "--lane-max-concurrency", "16")
	h.waitDone("k", n, 90*time.Second)
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p2.wait(t, 30*time.Second); err != nil {
		t.Errorf("second worker after SIGTERM: %v, want exit 0", err)
	}
	crashed := 0
	for i := range n {
		in, err := h.st.JobInterrupted(h.ctx, fmt.Sprintf("k:a%d", i))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range in {
			if c.Reason == store.InterruptCrashed {
				crashed += c.Calls
			}
		}
	}
	if crashed < 6 {
		t.Errorf("%d crashed calls recorded, want every chunk call in flight at the kill (6 or more)", crashed)
	}
	h.checkInvariants("k", invariants{Jobs: n, Schema: sim.DocumentSchema})
}

// enqueue requeue --strategy takes the document strategies for a batch
// of documents, and refuses them, naming why, for a batch without any.
func TestRequeueToADocumentStrategy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	h.enqueue("plain", 2)
	enqueueDocuments(h, "docs", 1, fixpoint.StrategyParallel)
	statuses := []fixpoint.Status{fixpoint.StatusInvalid}
	_, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "plain", Statuses: statuses,
		Strategy: fixpoint.StrategyAgent, Queue: h.q})
	if !errors.Is(err, enqueue.ErrBadConfig) || !strings.Contains(err.Error(), "batch plain's jobs have none") {
		t.Errorf("requeue --strategy agent of a batch without documents: %v; want a usage error naming the batch", err)
	}
	if _, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "docs", Statuses: statuses,
		Strategy: fixpoint.StrategySequential, Queue: h.q}); err != nil {
		t.Errorf("requeue --strategy sequential of a batch of documents: %v", err)
	}
}

// The sequential and agent strategies through the worker: every job final
// with its calls accounted for in the ledger (whether the simulator's
// answers make them valid is the strategies' bench, not this test's).
func TestSequentialAndAgentDocumentsEndToEnd(t *testing.T) {
	t.Parallel()
	for _, s := range []fixpoint.Strategy{fixpoint.StrategySequential, fixpoint.StrategyAgent} {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			const n = 2
			h := newHarness(t, harnessConfig{})
			batch := string(s)[:3]
			enqueueDocuments(h, batch, n, s)
			rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
			h.waitDone(batch, n, 60*time.Second)
			if err := rw.stop(t, 20*time.Second); err != nil {
				t.Fatalf("worker: %v", err)
			}
			for i := range n {
				j, as := h.job(fmt.Sprintf("%s:a%d", batch, i))
				if !j.Status.Final() || len(as) == 0 || j.Calls == 0 {
					t.Errorf("job %s: %s after %d attempts, %d calls; want final after calls", j.ID, j.Status, len(as), j.Calls)
				}
			}
			h.checkInvariants(batch, invariants{Jobs: n, Schema: sim.DocumentSchema})
		})
	}
}
