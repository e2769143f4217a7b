package enqueue_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// dyingLedger is a run that dies right after it recorded its first chunk
// as published: the run's context ends there (the publishing stops part
// way) and the chunk is never settled, as when the process is killed.
type dyingLedger struct {
	*store.Store
	die func()
}

func (l *dyingLedger) InsertJobsPublishing(ctx context.Context, token string, jobs []store.NewJob) (int, store.PublishingChunk, error) {
	n, pc, err := l.Store.InsertJobsPublishing(ctx, token, jobs)
	l.die()
	return n, pc, err
}

func (l *dyingLedger) SettlePublishing(context.Context, store.PublishingChunk, []string) error {
	return errors.New("killed")
}

// A run killed between recording a chunk as published and the queue's
// answers leaves jobs the ledger calls published that the stream never
// took; the same command run again finds them by their unsettled chunk and
// publishes them: every job is then on the stream once.
func TestRerunPublishesAKilledRunsUnsettledChunk(t *testing.T) {
	t.Parallel()
	const n = 600
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.NewDB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	js := jetStream(t)
	cfg := enqueue.Config{
		Batch: "killed", Schema: []byte(benchSchema), Template: benchTemplate, Format: enqueue.FormatJSONL,
		IDField: "ticket_id", Provider: "openai", Model: "sim-typical", Limits: fixpoint.Limits{MaxAttempts: 3},
		Queue: queue.Config{Stream: "KILLED", Subject: "killed.jobs", Consumer: "killed"}, Chunk: n / 2,
	}
	data := ticketRows(n)
	runCtx, die := context.WithCancel(ctx)
	if _, err := enqueue.Run(runCtx, js, &dyingLedger{Store: st, die: die}, cfg, strings.NewReader(data)); err == nil {
		t.Fatal("the killed run returned no error")
	}
	stream, err := js.Stream(ctx, "KILLED")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Progress(ctx, "killed")
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != n/2 || p.Unpublished != 0 || info.State.Msgs >= uint64(p.Total) {
		t.Fatalf("after the killed run: %d jobs, %d unpublished, %d on the stream; want %d jobs all marked published, fewer on the stream",
			p.Total, p.Unpublished, info.State.Msgs, n/2)
	}

	prog, err := enqueue.Run(ctx, js, st, cfg, strings.NewReader(data))
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if info, err = stream.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err = st.Progress(ctx, "killed"); err != nil {
		t.Fatal(err)
	}
	if p.Total != n || p.Unpublished != 0 || info.State.Msgs != n || prog.Published+prog.Duplicates < n/2 {
		t.Fatalf("after the rerun: %d jobs, %d unpublished, %d on the stream, %d published and %d duplicates; want %d, 0, %d, the killed run's chunk published again",
			p.Total, p.Unpublished, info.State.Msgs, prog.Published, prog.Duplicates, n, n)
	}
}

// failingLedger fails the recording of the chunk that starts at row
// first, once the chunk after it is recorded: the second pass stops with
// that chunk recorded as published and not yet on the queue.
type failingLedger struct {
	*store.Store
	first     int
	nextAdded chan struct{}
	once      sync.Once
}

func (l *failingLedger) InsertJobsPublishing(ctx context.Context, token string, jobs []store.NewJob) (int, store.PublishingChunk, error) {
	if jobs[0].RowNo == l.first {
		<-l.nextAdded
		return 0, 0, errors.New("the ledger refused the chunk")
	}
	n, pc, err := l.Store.InsertJobsPublishing(ctx, token, jobs)
	if jobs[0].RowNo > l.first {
		l.once.Do(func() { close(l.nextAdded) })
	}
	return n, pc, err
}

// A run that stops in its second pass while chunks are being recorded
// marks them unpublished, not published: the ledger says what the queue
// lacks, and the run again publishes it.
func TestStoppedRunMarksTheChunkBeingRecordedUnpublished(t *testing.T) {
	t.Parallel()
	const n, chunk = 30, 10
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.NewDB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	js := jetStream(t)
	cfg := enqueue.Config{
		Batch: "changed", Schema: []byte(benchSchema), Template: benchTemplate, Format: enqueue.FormatJSONL,
		IDField: "ticket_id", Provider: "openai", Model: "sim-typical", Limits: fixpoint.Limits{MaxAttempts: 3},
		Queue: queue.Config{Stream: "CHANGED", Subject: "changed.jobs", Consumer: "changed"}, Chunk: chunk,
	}
	data := ticketRows(n)
	// The first two chunks are recorded at once; the first fails.
	led := &failingLedger{Store: st, first: 1, nextAdded: make(chan struct{})}
	_, err = enqueue.Run(ctx, js, led, cfg, strings.NewReader(data))
	if err == nil || !strings.Contains(err.Error(), "the ledger refused the chunk") {
		t.Fatalf("run whose ledger refused a chunk: %v", err)
	}
	stream, err := js.Stream(ctx, "CHANGED")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Progress(ctx, "changed")
	if err != nil {
		t.Fatal(err)
	}
	// The chunk recorded beside the one refused is marked unpublished.
	if p.Total != chunk || info.State.Msgs != 0 || p.Unpublished != chunk {
		t.Fatalf("after the stopped run: %d jobs, %d on the stream, %d unpublished; want %d, none on the stream, all unpublished",
			p.Total, info.State.Msgs, p.Unpublished, chunk)
	}
	if _, err := enqueue.Run(ctx, js, st, cfg, strings.NewReader(data)); err != nil {
		t.Fatalf("run again: %v", err)
	}
	if info, err = stream.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err = st.Progress(ctx, "changed"); err != nil {
		t.Fatal(err)
	}
	if p.Total != n || info.State.Msgs != n || p.Unpublished != 0 {
		t.Fatalf("after the run again: %d jobs, %d on the stream, %d unpublished; want %d, %d, 0", p.Total, info.State.Msgs, p.Unpublished, n, n)
	}
}

// gatedData reads as first, then waits for gate to close before it reads
// as rest.
type gatedData struct {
	first, rest io.Reader
	gate        <-chan struct{}
}

func (d *gatedData) Read(p []byte) (int, error) {
	n, err := d.first.Read(p)
	if errors.Is(err, io.EOF) {
		<-d.gate
		return d.rest.Read(p)
	}
	return n, err
}

// A run stopped in its first pass says so and records nothing, also when
// the reading, ahead of the checking, saw the stop first and ended the
// rows early.
func TestRunStoppedWhileCheckingRecordsNothing(t *testing.T) {
	t.Parallel()
	const chunk = 2000
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.NewDB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	js := jetStream(t)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	cfg := enqueue.Config{
		Batch: "stopped", Schema: []byte(benchSchema), Template: benchTemplate, Format: enqueue.FormatJSONL,
		IDField: "ticket_id", Provider: "openai", Model: "sim-typical", Limits: fixpoint.Limits{MaxAttempts: 3},
		Queue: queue.Config{Stream: "STOPPED", Subject: "stopped.jobs", Consumer: "stopped"}, Chunk: chunk,
		ProgressFunc: func(p enqueue.Progress) {
			if p.Phase == enqueue.PhaseCheck {
				stop()
			}
		},
	}
	// The stop comes at the first chunk's end; the rows after are read
	// once it has come, and end before the pass looks at the context again.
	lines := strings.SplitAfter(ticketRows(chunk+1000), "\n")
	data := &gatedData{first: strings.NewReader(strings.Join(lines[:chunk+48], "")), rest: strings.NewReader(strings.Join(lines[chunk+48:], "")), gate: runCtx.Done()}
	prog, err := enqueue.Run(runCtx, js, st, cfg, data)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped while checking the rows") {
		t.Fatalf("run stopped in its first pass: %v", err)
	}
	if prog.Recorded != 0 {
		t.Fatalf("the stopped run recorded %d jobs; want none", prog.Recorded)
	}
	if _, err := st.Batch(ctx, "stopped"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the stopped run's batch: %v, want none recorded", err)
	}
}
