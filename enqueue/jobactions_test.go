package enqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// A requeue of chosen jobs runs them alone, whatever final status they
// have (a valid one too), and publishes them alone; a cancel of chosen jobs
// ends the ones not final yet, and waits its turn behind another action.
func TestRequeueAndCancelChosenJobs(t *testing.T) {
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
		Stream: "RQJOBS", Subject: "fixpoint.rqjobs"})
	if err := st.PutBatch(ctx, store.BatchParams{Name: "c", Settings: settings}); err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	var results []store.Result
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("c:%d", i)
		jobs = append(jobs, store.NewJob{ID: id, Batch: "c", RowNo: i, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"})
		status := map[bool]fixpoint.Status{true: fixpoint.StatusValid, false: fixpoint.StatusInvalid}[i == 1]
		results = append(results, store.Result{JobID: id, Status: status, Error: "gave up", Deliveries: 1})
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	rep, err := enqueue.Requeue(ctx, js, st, enqueue.RequeueConfig{Batch: "c", Jobs: []string{"c:1", "c:2"}, Model: "m2", Queue: queue.Config{}})
	if err != nil || rep.Run != 2 || rep.Jobs["valid"] != 1 || rep.Jobs["invalid"] != 1 || rep.Published != 2 {
		t.Fatalf("requeue of c:1 (valid) and c:2 (invalid): %+v, %v; want both as run 2, 2 published", rep, err)
	}
	s, err := js.Stream(ctx, "RQJOBS")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Errorf("the stream holds %v messages (%v), want the 2 requeued", info.State.Msgs, err)
	}
	if j, _, _ := st.Job(ctx, "c:3"); j.Status != fixpoint.StatusInvalid || j.Run != 1 {
		t.Errorf("c:3, not chosen, is %s at run %d; want invalid at run 1", j.Status, j.Run)
	}
	if _, err := enqueue.Requeue(ctx, js, st, enqueue.RequeueConfig{Batch: "c", Jobs: []string{"c:1", ""}}); !errors.Is(err, enqueue.ErrBadConfig) {
		t.Errorf("requeue of an empty job id: %v, want ErrBadConfig", err)
	}

	// Another action holds the batch: the cancel of a job waits its turn.
	release, err := st.LockBatch(ctx, "c", "requeue")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := enqueue.CancelJobs(ctx, st, "c", []string{"c:1"}); !errors.Is(err, store.ErrActionInProgress) || n != 0 {
		t.Errorf("cancel of a job while a requeue holds the batch: %d, %v; want it refused", n, err)
	}
	release()
	if n, err := enqueue.CancelJobs(ctx, st, "c", []string{"c:1", "c:3"}); err != nil || n != 1 {
		t.Errorf("cancel of c:1 (queued) and c:3 (invalid): %d, %v; want 1 cancelled", n, err)
	}
	if _, err := enqueue.CancelJobs(ctx, st, "c", nil); !errors.Is(err, enqueue.ErrBadConfig) {
		t.Errorf("cancel of no job: %v, want ErrBadConfig", err)
	}
	if _, err := enqueue.CancelJobs(ctx, st, "nope", []string{"x"}); !errors.Is(err, enqueue.ErrNoBatch) {
		t.Errorf("cancel of a job of no batch: %v, want ErrNoBatch", err)
	}
}
