package enqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// pausingLedger stops the first requeue after its ledger transaction, before
// it publishes, until resume is closed: a second action runs in between.
type pausingLedger struct {
	*store.Store
	once           sync.Once
	paused, resume chan struct{}
}

func (l *pausingLedger) Requeue(ctx context.Context, p store.RequeueParams) (store.RequeueResult, error) {
	res, err := l.Store.Requeue(ctx, p)
	l.once.Do(func() {
		close(l.paused)
		<-l.resume
	})
	return res, err
}

// jetStream starts an embedded JetStream server for the test.
func jetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("embedded NATS not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// Two requeues of a batch at once: the second, run while the first is
// between its ledger transaction and its publishing, is told the first is
// in progress and changes nothing (it said "no job matched", then published
// the first's jobs as left unpublished). A cancel then is refused too; once
// the first has ended, both run.
func TestRequeueWhileAnotherRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.NewDB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	js := jetStream(t)
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	settings, _ := json.Marshal(enqueue.BatchSettings{Provider: "openai", Model: "m", TemplateSHA256: "t", SchemaHash: hash,
		Stream: "RQLOCK", Subject: "fixpoint.rqlock"})
	if err := st.PutBatch(ctx, store.BatchParams{Name: "b", Settings: settings}); err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	var results []store.Result
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("b:%d", i)
		jobs = append(jobs, store.NewJob{ID: id, Batch: "b", RowNo: i, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"})
		results = append(results, store.Result{JobID: id, Status: fixpoint.StatusInvalid, Error: "gave up", FinalClass: "semantic", Deliveries: 1})
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	cfg := enqueue.RequeueConfig{Batch: "b", Statuses: []fixpoint.Status{fixpoint.StatusInvalid}, Queue: queue.Config{}}
	first := &pausingLedger{Store: st, paused: make(chan struct{}), resume: make(chan struct{})}
	type outcome struct {
		rep enqueue.RequeueReport
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		rep, err := enqueue.Requeue(ctx, js, first, cfg)
		done <- outcome{rep, err}
	}()
	select {
	case <-first.paused:
	case o := <-done:
		t.Fatalf("first requeue ended before it published: %+v %v", o.rep, o.err)
	}
	rep, err := enqueue.Requeue(ctx, js, st, cfg)
	if !errors.Is(err, store.ErrActionInProgress) || !strings.Contains(err.Error(), "another requeue of batch b is in progress (started at ") {
		t.Errorf("second requeue while the first runs: %+v, %v; want it refused, naming the requeue in progress", rep, err)
	}
	if rep.Published != 0 {
		t.Errorf("second requeue published %d jobs of the first", rep.Published)
	}
	if n, err := enqueue.Cancel(ctx, st, "b"); !errors.Is(err, store.ErrActionInProgress) {
		t.Errorf("cancel while a requeue runs: %d, %v; want it refused", n, err)
	}
	close(first.resume)
	o := <-done
	if o.err != nil || o.rep.Run != 2 || o.rep.Published != 3 {
		t.Fatalf("first requeue: %+v, %v; want run 2, 3 published", o.rep, o.err)
	}
	// Done, it holds the batch no more.
	if n, err := enqueue.Cancel(ctx, st, "b"); err != nil || n != 3 {
		t.Errorf("cancel after the requeue: %d, %v; want 3 cancelled", n, err)
	}
}
