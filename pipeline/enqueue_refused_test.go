package pipeline_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// jobTally takes every message of the harness's consumer and counts the
// deliveries of each job id.
type jobTally struct {
	mu   sync.Mutex
	seen map[string]int
	bad  []string
}

// consume acks every job message of h's consumer, counting it, until the
// returned stop is called.
func (tl *jobTally) consume(t *testing.T, h *harness) (stop func()) {
	t.Helper()
	_, cons, err := queue.Ensure(h.ctx, h.js, h.q)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		env, err := queue.DecodeEnvelope(m.Data())
		tl.mu.Lock()
		if err != nil {
			tl.bad = append(tl.bad, err.Error())
		} else {
			tl.seen[env.JobID]++
		}
		tl.mu.Unlock()
		_ = m.DoubleAck(h.ctx)
	}, jetstream.PullMaxMessages(64))
	if err != nil {
		t.Fatal(err)
	}
	return cc.Stop
}

// total is how many messages were taken, and how many distinct jobs.
func (tl *jobTally) total() (msgs, jobs int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, n := range tl.seen {
		msgs += n
	}
	return msgs, len(tl.seen)
}

// A large enqueue into a stream that holds only 300 messages: the queue
// refuses the rest, which stay recorded and unpublished, and the run says
// how many; once a consumer drains the stream, --resume publishes them,
// with the queue refusing some again while it fills. Every row is then
// recorded once, published once and delivered once: none lost, none
// twice, none marked published that the stream did not take.
func TestEnqueueRefusedPublishesAreNotLost(t *testing.T) {
	t.Parallel()
	const n, room = 3000, 300
	h := newHarness(t, harnessConfig{Queue: queue.Config{MaxMsgs: room}})
	cfg := h.enqueueConfig("full")

	prog, err := enqueue.Run(h.ctx, h.js, h.st, cfg, strings.NewReader(dataset(n)))
	if err == nil || !strings.Contains(err.Error(), "recorded but not published") {
		t.Fatalf("enqueue into a full stream: %v, want the jobs not published named", err)
	}
	if prog.Recorded == 0 || prog.Published != room {
		t.Fatalf("enqueue into a full stream: recorded %d, published %d, want %d published", prog.Recorded, prog.Published, room)
	}
	p := h.progress("full")
	if p.Total != prog.Recorded || p.Unpublished != prog.Recorded-room {
		t.Fatalf("ledger: %d jobs, %d unpublished; the run recorded %d and published %d", p.Total, p.Unpublished, prog.Recorded, room)
	}

	tally := &jobTally{seen: map[string]int{}}
	stop := tally.consume(t, h)
	defer stop()
	// The stream is drained while the rest are published: some are
	// refused again while it is full, and tried again.
	published := prog.Published
	for try := 0; ; try++ {
		rcfg := enqueue.Config{Batch: "full", Resume: true, Queue: h.q}
		if p := h.progress("full"); p.Total < n || p.Recording != nil {
			// A run stopped before it recorded every row, or before it
			// published what it recorded: its mark asks for the same
			// command again, which --resume refuses.
			rcfg = cfg
		}
		prog, err := enqueue.Run(h.ctx, h.js, h.st, rcfg, strings.NewReader(dataset(n)))
		published += prog.Published
		if err == nil {
			break
		}
		if try == 20 || !strings.Contains(err.Error(), "recorded but not published") && !errors.Is(err, enqueue.ErrPartlyRecorded) {
			t.Fatalf("rerun %d: %v", try, err)
		}
	}
	waitFor(t, 30*time.Second, "every job delivered", func() bool {
		msgs, _ := tally.total()
		return msgs >= n
	})
	stop()
	if p := h.progress("full"); p.Total != n || p.Unpublished != 0 {
		t.Errorf("ledger: %d jobs, %d unpublished; want %d, 0", p.Total, p.Unpublished, n)
	}
	if published != n {
		t.Errorf("the runs published %d jobs, want %d", published, n)
	}
	msgs, jobs := tally.total()
	if msgs != n || jobs != n || len(tally.bad) > 0 {
		t.Errorf("delivered %d messages of %d jobs (%d undecodable), want each of %d once", msgs, jobs, len(tally.bad), n)
	}
	for i := 1; i <= n; i++ {
		if c := tally.seen[jobID("full", i)]; c != 1 {
			t.Fatalf("job %s delivered %d times", jobID("full", i), c)
		}
	}
}
