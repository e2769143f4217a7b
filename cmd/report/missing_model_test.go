package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
)

// A batch whose jobs met a missing model (the provider answered
// model_not_found) says so in its summary, naming the lane, the model and
// its jobs still queued, in the text and in --format json
// (missing_models); a batch without such calls says nothing of it.
func TestSummarySaysTheModelWasNotFound(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	ctx := context.Background()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"typo", "fine"} {
		if err := st.PutBatch(ctx, store.BatchParams{Name: b, Settings: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		var jobs []store.NewJob
		for _, id := range []string{":1", ":2"} {
			jobs = append(jobs, store.NewJob{ID: b + id, Batch: b, RowNo: 1, SchemaHash: hash, Prompt: "p", Provider: "ollama", Model: map[string]string{"typo": "llama9", "fine": "llama3"}[b], Mode: "prompt"})
		}
		if _, err := st.InsertJobs(ctx, jobs); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	miss := store.Attempt{No: 1, Class: "provider", ProviderStatus: 404, ProviderClass: "model_not_found", ProviderError: `model "llama9" not found, try pulling it first`, Model: "llama9", StartedAt: at}
	if err := st.SaveInterrupted(ctx, []store.Interruption{{JobID: "typo:1", Delivery: 1, Reason: store.InterruptHandedBack, Attempts: []store.Attempt{miss}}}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"summary", "--database-url", dsn}, &out, &errOut); code != 0 {
		t.Fatalf("summary: exit %d, %s", code, errOut.String())
	}
	want := `model not found: batch typo, lane ollama/llama9: the provider has no model "llama9" (1 call answered model_not_found, the last at 2026-12-03 12:00:00 UTC); 2 jobs of it wait queued`
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary does not say %q:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "batch fine, lane") {
		t.Errorf("summary says a model was not found for a batch whose calls found it:\n%s", out.String())
	}

	var sum summaryJSON
	reportJSON(t, dsn, &sum, "summary", "typo")
	if len(sum.Batches) != 1 {
		t.Fatalf("summary typo --format json: %d batches", len(sum.Batches))
	}
	got := sum.Batches[0].MissingModels
	if len(got) != 1 || got[0].Provider != "ollama" || got[0].Model != "llama9" || got[0].Calls != 1 || got[0].Queued != 2 ||
		got[0].LastCallAt == nil || !got[0].LastCallAt.Equal(at) {
		t.Errorf("missing_models = %+v; want the lane ollama/llama9, 1 call, 2 queued, last at %s", got, at)
	}
	reportJSON(t, dsn, &sum, "summary", "fine")
	if got := sum.Batches[0].MissingModels; got == nil || len(got) != 0 {
		t.Errorf("missing_models of a batch that found its model = %#v; want []", got)
	}
}
