package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
)

// An invalid job is exported with its last candidate and the validation
// errors of its last reply, in both formats, so that a near-valid row can
// be salvaged (issue 36, finding 4: the export had one line of error and
// no value). A valid job, and a failed one whose last call got no reply,
// have no errors.
func TestExportInvalidJobErrors(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	ctx := context.Background()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object","properties":{"label":{"enum":["spam","ham"]},"score":{"type":"number"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutBatch(ctx, store.BatchParams{Name: "e1"}); err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	for i, id := range []string{"e1:1", "e1:2", "e1:3"} {
		jobs = append(jobs, store.NewJob{ID: id, Batch: "e1", RowNo: i + 1, SchemaHash: hash, Prompt: "p", Provider: "openai",
			Model: "m", Mode: "prompt", Metadata: json.RawMessage(`{"text":"t"}`)})
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	firstErrs := json.RawMessage(`[{"path":"/score","keyword":"type","class":"shape","message":"/score: want number"}]`)
	lastErrs := json.RawMessage(`[{"path":"/label","keyword":"enum","class":"semantic","message":"/label: \"maybe\" is not one of [\"spam\",\"ham\"]"}]`)
	if _, err := st.SaveResults(ctx, []store.Result{
		{JobID: "e1:1", Status: "valid", Value: json.RawMessage(`{"label":"ham","score":0.1}`), Attempts: 1, Calls: 1, StartedAt: now, Deliveries: 1,
			AttemptRows: []store.Attempt{{No: 1, Raw: `{"label":"ham","score":0.1}`, Valid: true, StartedAt: now}}},
		{JobID: "e1:2", Status: "invalid", Value: json.RawMessage(`{"label":"maybe","score":0.4}`), Error: `/label: "maybe" is not one of ["spam","ham"]`,
			FinalClass: "semantic", Attempts: 2, Calls: 2, StartedAt: now, Deliveries: 1, AttemptRows: []store.Attempt{
				{No: 1, Raw: `{"label":"spam","score":"high"}`, Class: "shape", Errors: firstErrs, StartedAt: now},
				{No: 2, Raw: `{"label":"maybe","score":0.4}`, Class: "semantic", Errors: lastErrs, StartedAt: now},
			}},
		{JobID: "e1:3", Status: "failed", Error: "openai: 500", FinalClass: "provider", Attempts: 2, Calls: 2, StartedAt: now, Deliveries: 1,
			AttemptRows: []store.Attempt{
				{No: 1, Raw: `{"label":"x"}`, Class: "semantic", Errors: lastErrs, StartedAt: now},
				{No: 2, Class: "provider", ProviderStatus: 500, ProviderError: "openai: 500", StartedAt: now},
			}},
	}); err != nil {
		t.Fatal(err)
	}
	export := func(format string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, []string{"export", "e1", "--format", format, "--database-url", dsn}, &out, &errOut); code != 0 {
			t.Fatalf("export --format %s: exit %d, %s", format, code, errOut.String())
		}
		return out.String()
	}

	type line struct {
		ID     string                     `json:"id"`
		Value  json.RawMessage            `json:"value"`
		Errors []fixpoint.ValidationError `json:"errors"`
	}
	got := map[string]line{}
	sc := bufio.NewScanner(bytes.NewReader([]byte(export("jsonl"))))
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("jsonl line %q: %v", sc.Text(), err)
		}
		got[l.ID] = l
	}
	if l := got["e1:2"]; string(l.Value) != `{"label":"maybe","score":0.4}` && string(l.Value) != `{"label": "maybe", "score": 0.4}` {
		t.Errorf("jsonl: the invalid job's value %s, want its last candidate", l.Value)
	}
	if l := got["e1:2"]; len(l.Errors) != 1 || l.Errors[0].Path != "/label" || l.Errors[0].Keyword != "enum" || l.Errors[0].Class != "semantic" {
		t.Errorf("jsonl: the invalid job's errors %#v, want its last reply's (/label enum)", l.Errors)
	}
	for _, id := range []string{"e1:1", "e1:3"} {
		if l := got[id]; l.Errors == nil || len(l.Errors) != 0 {
			t.Errorf("jsonl: job %s errors %#v, want [] (valid, or the last call got no reply)", id, l.Errors)
		}
	}

	recs, err := csv.NewReader(bytes.NewReader([]byte(export("csv")))).ReadAll()
	if err != nil || len(recs) != 4 {
		t.Fatalf("csv: %d records, %v", len(recs), err)
	}
	cells := map[string]map[string]string{}
	for _, rec := range recs[1:] {
		row := map[string]string{}
		for i, h := range recs[0] {
			row[h] = rec[i]
		}
		cells[row["job_id"]] = row
	}
	inv := cells["e1:2"]
	var errs []fixpoint.ValidationError
	if err := json.Unmarshal([]byte(inv["job_errors"]), &errs); err != nil || len(errs) != 1 || errs[0].Path != "/label" {
		t.Errorf("csv: the invalid job's job_errors %q (%v), want its last reply's errors; header %q", inv["job_errors"], err, recs[0])
	}
	if inv["label"] != "maybe" || inv["score"] != "0.4" {
		t.Errorf("csv: the invalid job's value columns label %q score %q, want its last candidate's", inv["label"], inv["score"])
	}
	for _, id := range []string{"e1:1", "e1:3"} {
		if c := cells[id]["job_errors"]; c != "" && c != "[]" {
			t.Errorf("csv: job %s job_errors %q, want none", id, c)
		}
	}
}
