package pipeline_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/sim"
)

// The batch rollups the dashboard reads (kept by the ledger's triggers)
// equal a recount of the rows after a real run on the simulator with a
// weak model, kill -9 of a worker process mid-run twice (once in the
// first run, once in the requeued one), a requeue of the invalid and
// failed jobs, and a cancel of another batch mid-run.
func TestRollupsExactAfterKillsAndRequeue(t *testing.T) {
	t.Parallel()
	const n, conc = 60, 8
	cfg, err := sim.Preset("messy")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Latency = fixedLatency(150 * time.Millisecond)
	h := newHarness(t, harnessConfig{Sim: cfg})
	drift := func(when string) {
		t.Helper()
		lines, err := h.st.RollupDrift(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) > 0 {
			t.Fatalf("%s, the rollups differ from a recount:\n%s", when, strings.Join(lines, "\n"))
		}
	}
	kill := func(p *proc, what string, cond func() bool) {
		t.Helper()
		waitFor(t, 60*time.Second, what, cond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t, 10*time.Second)
	}

	h.enqueue("b", n)
	h.enqueue("c", n)
	p1 := h.startProc("", nil, "--concurrency", fmt.Sprint(conc))
	kill(p1, "jobs done and calls in flight", func() bool {
		return h.progress("b").Valid+h.progress("c").Valid >= 10 && h.sim.inFlight.Load() >= 2
	})
	drift("after kill -9 in the first run")
	if _, err := h.st.Cancel(h.ctx, "c"); err != nil {
		t.Fatal(err)
	}
	drift("after a cancel")
	p2 := h.startProc("", nil, "--concurrency", fmt.Sprint(conc))
	h.waitDone("b", n, 90*time.Second)
	drift("after the first run")

	p := h.progress("b")
	if p.Invalid+p.Failed == 0 {
		t.Fatalf("the messy model left no job invalid or failed to requeue: %+v", p)
	}
	rep, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "b",
		Statuses: []fixpoint.Status{fixpoint.StatusInvalid, fixpoint.StatusFailed}, Queue: h.q})
	if err != nil || rep.Published == 0 {
		t.Fatalf("requeue: %+v %v", rep, err)
	}
	drift("after the requeue")
	kill(p2, "some requeued jobs done", func() bool { return h.progress("b").Queued < rep.Published })
	drift("after kill -9 in the requeued run")
	h.startProc("", nil, "--concurrency", fmt.Sprint(conc))
	h.waitDone("b", n, 90*time.Second)
	drift("after the requeued run")
	ov, err := h.st.Overview(h.ctx, "b")
	if err != nil || ov.Jobs != n || ov.Queued != 0 || ov.Valid == 0 {
		t.Errorf("overview of b: %+v %v", ov, err)
	}
}
