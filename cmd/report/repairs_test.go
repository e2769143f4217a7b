package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// report summary says what a batch's local repairs saved and how its
// patches went, and nothing for a batch that had neither.
func TestReportSummaryRepairs(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	ctx := context.Background()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	for _, b := range []string{"fixed", "none"} {
		if err := st.PutBatch(ctx, store.BatchParams{Name: b, Settings: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ {
			jobs = append(jobs, store.NewJob{ID: fmt.Sprintf("%s-%d", b, i), Batch: b, RowNo: i, SchemaHash: hash,
				Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt", Strategy: "patch", Metadata: json.RawMessage(`{}`)})
		}
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	res := func(id string, as ...store.Attempt) store.Result {
		for i := range as {
			as[i].No, as[i].Raw, as[i].StartedAt = i+1, "{}", now
		}
		return store.Result{JobID: id, Status: fixpoint.StatusValid, Value: json.RawMessage(`{}`), Attempts: len(as), Calls: len(as), AttemptRows: as}
	}
	fix := json.RawMessage(`[{"kind":"enum_case","offset":0,"pointer":"/t","before":"\"A\"","after":"\"a\""}]`)
	results := []store.Result{
		res("fixed-1", store.Attempt{Valid: true, Coerced: 1, RepairedLocally: true, Repairs: fix}),
		res("fixed-2", store.Attempt{Class: "shape"}, store.Attempt{Class: "shape", PatchOutcome: "out_of_scope"},
			store.Attempt{Valid: true, PatchOutcome: "applied", RepairedLocally: true, Repairs: json.RawMessage(`[{"kind":"trailing_comma","offset":3}]`)}),
		res("none-1", store.Attempt{Valid: true}),
		res("none-2", store.Attempt{Valid: true}),
	}
	if _, err := st.SaveResults(ctx, results); err != nil {
		t.Fatal(err)
	}
	summary := func(batch string) string {
		var out, errOut bytes.Buffer
		if code := run(ctx, []string{"summary", batch, "--database-url", dsn}, &out, &errOut); code != 0 {
			t.Fatalf("summary %s: exit %d: %s", batch, code, errOut.String())
		}
		return out.String()
	}
	want := "fixed: local repairs saved 2 of the 4 calls the latest runs made: 1 by text repairs alone, 1 by schema-guided fixes (enum_case 1); patches applied 1 of 2 (out_of_scope 1)\n"
	if got := summary("fixed"); !strings.HasSuffix(got, want) {
		t.Errorf("summary fixed ends:\n%s\nwant it to end with:\n%s", got, want)
	}
	if got := summary("none"); strings.Contains(got, "local repairs") || strings.Contains(got, "patches") {
		t.Errorf("summary of a batch with neither:\n%s", got)
	}
}
