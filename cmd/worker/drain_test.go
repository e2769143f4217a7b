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
	if err == nil || !strings.Contains(err.Error(), "1 of them is in open provider batches this worker does not drive (driven from stream J, openai http://other:8331/v1)") ||
		strings.Contains(err.Error(), "--resume") {
		t.Errorf("a job in another home's wave: %v; want the wave's home named, not --resume", err)
	}
}

// worker --drain --batch on a batch its spend cap stopped fails naming the
// cap, what the batch spent and how to go on, in the error a cron mail
// shows (issue 36, finding 6: it said only "75% of batch b not valid,
// limit 5%").
func TestDrainCheckNamesTheCap(t *testing.T) {
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
	for i, id := range []string{"b:1", "b:2", "b:3", "b:4"} {
		jobs = append(jobs, store.NewJob{ID: id, Batch: "b", RowNo: i + 1, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"})
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	results := []store.Result{{JobID: "b:1", Status: "valid", Value: json.RawMessage(`{}`), Attempts: 1, Calls: 1, CostUSD: 0.75, StartedAt: now, Deliveries: 1,
		AttemptRows: []store.Attempt{{No: 1, Raw: "{}", Valid: true, CostUSD: 0.75, TokensIn: 10, StartedAt: now}}}}
	for _, id := range []string{"b:2", "b:3", "b:4"} {
		results = append(results, store.Result{JobID: id, Status: "over_budget", FinalClass: "budget", Error: "batch b: spend cap reached", Deliveries: 1})
	}
	if _, err := st.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	usd := 0.5
	if err := st.SetCap(ctx, "b", store.Cap{MaxCostUSD: &usd}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = drainCheck{batch: "b", maxFailureRate: 0.05}.check(ctx, st, &out)
	for _, want := range []string{"75% of batch b not valid, limit 5%",
		"3 jobs of batch b ended over_budget: the batch's spend cap stopped them ($0.750000 spent of its $0.5 cost cap)",
		"enqueue cap --batch b --max-cost-usd N", "then enqueue requeue --batch b --status over_budget"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("drain check of a capped batch: %v; want it to say %q", err, want)
		}
	}
	if !strings.Contains(out.String(), "over_budget 3") {
		t.Errorf("drain check's line %q does not count the over_budget jobs", out.String())
	}
}
