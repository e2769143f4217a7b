package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/sim"
)

// Issue 36, finding 5: on the simulator, a requeue of the invalid jobs is
// answered afresh, as a real model would answer, and does not replay the
// first run's failures byte for byte: the worker sends the job's run with
// its id (fixpoint.RequestUser), and the simulator draws by it.
func TestRequeueOnTheSimulatorIsAnsweredAfresh(t *testing.T) {
	t.Parallel()
	const n = 24
	mix, err := sim.Preset("messy")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessConfig{Sim: sim.Config{Seed: 2, Mix: mix.Mix}})
	cfg := h.enqueueConfig("b")
	cfg.Limits.MaxAttempts = 1
	if _, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n))); err != nil {
		t.Fatal(err)
	}
	rw := h.startWorker(h.workerConfig(h.client(nil)), nil, nil)
	h.waitDone("b", n, 30*time.Second)
	first := map[string]string{}
	for i := 1; i <= n; i++ {
		if j, as := h.job(jobID("b", i)); j.Status == fixpoint.StatusInvalid && len(as) == 1 {
			first[j.ID] = as[0].Raw
		}
	}
	if len(first) < 4 {
		t.Fatalf("%d of %d jobs invalid on the messy mix after one attempt: too few to compare", len(first), n)
	}
	rep, err := enqueue.Requeue(h.ctx, h.js, h.st, enqueue.RequeueConfig{Batch: "b", Statuses: []fixpoint.Status{fixpoint.StatusInvalid}, Queue: h.q})
	if err != nil || rep.Run != 2 || rep.Published != len(first) {
		t.Fatalf("requeue: %+v %v; want run 2 of the %d invalid jobs", rep, err, len(first))
	}
	waitFor(t, 30*time.Second, "the requeued jobs final", func() bool {
		for id := range first {
			if j, _ := h.job(id); j.Run != 2 || !j.Status.Final() {
				return false
			}
		}
		return true
	})
	rw.stop(t, 20*time.Second)
	same := 0
	for id, raw := range first {
		_, as := h.job(id)
		if len(as) == 1 && as[0].Raw == raw {
			same++
		}
	}
	if same > len(first)/2 {
		t.Errorf("run 2 replied as run 1, byte for byte, for %d of %d requeued jobs: a requeue replays the first run", same, len(first))
	}
}
