package enqueue_test

import (
	"context"
	"errors"
	"strings"
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

// changingData reads as first until it is rewound, then as second: a
// dataset edited between enqueue's two passes.
type changingData struct {
	*strings.Reader
	second string
}

func (d *changingData) Seek(offset int64, whence int) (int64, error) {
	if d.second != "" {
		d.Reader, d.second = strings.NewReader(d.second), ""
	}
	return d.Reader.Seek(offset, whence)
}

// A run that stops in its second pass while chunks are being recorded
// (a row changed between the passes) marks them unpublished, not
// published: the ledger says what the queue lacks, and the run again
// publishes it.
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
	lines := strings.SplitAfter(data, "\n")
	lines[2*chunk+4] = "{not json}\n" // in the third chunk
	_, err = enqueue.Run(ctx, js, st, cfg, &changingData{Reader: strings.NewReader(data), second: strings.Join(lines, "")})
	if err == nil || !strings.Contains(err.Error(), "changed between the two reads") {
		t.Fatalf("run with a row changed between the passes: %v", err)
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
	// Each job recorded is on the stream or marked unpublished (the
	// chunks being recorded when it stopped, however many).
	if p.Total != 2*chunk || info.State.Msgs+uint64(p.Unpublished) != uint64(p.Total) || p.Unpublished == 0 {
		t.Fatalf("after the stopped run: %d jobs, %d on the stream, %d unpublished; want %d, each on the stream or unpublished",
			p.Total, info.State.Msgs, p.Unpublished, 2*chunk)
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
