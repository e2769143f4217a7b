package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// worker --drain --batch, with the batch's jobs held by a wave another home
// drives, says so and where, instead of advising --resume (which
// republishes nothing: a tester ran it and got "0 republished", exit 0).
// Jobs in no wave are still advised --resume.
func TestDrainCheckNamesTheWaveHome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	if err := st.PutBatch(ctx, store.BatchParams{Name: "b", Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	for _, id := range []string{"b:1", "b:2"} {
		jobs = append(jobs, store.NewJob{ID: id, Batch: "b", RowNo: 1, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"})
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	c := drainCheck{batch: "b", maxFailureRate: 1}
	if err := c.check(ctx, st, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "enqueue --batch b --resume") {
		t.Fatalf("jobs in no wave: %v; want --resume advised", err)
	}
	if _, _, err := st.RecordWave(ctx, store.WaveParams{Batch: "b", Run: 1, Provider: "openai", Model: "m",
		Requests: []store.WaveRequest{{JobID: "b:1", Run: 1, AttemptNo: 1, Request: json.RawMessage(`{"model":"m"}`), Envelope: json.RawMessage(`{"job_id":"b:1"}`)}},
		Owner:    "other", Lease: time.Minute, Home: "stream J, openai http://other:8331/v1"}); err != nil {
		t.Fatal(err)
	}
	err = c.check(ctx, st, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "1 of them are in open provider batches this worker does not drive (driven from stream J, openai http://other:8331/v1)") ||
		strings.Contains(err.Error(), "--resume") {
		t.Errorf("a job in another home's wave: %v; want the wave's home named, not --resume", err)
	}
}
