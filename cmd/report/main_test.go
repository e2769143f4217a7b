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

// seed writes a batch of three jobs: one valid on the second attempt, one
// invalid, one still queued.
func seed(t *testing.T) string {
	t.Helper()
	dsn := storetest.NewDB(t)
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutBatch(ctx, store.BatchParams{Name: "b1", Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	for i, id := range []string{"b1:1", "b1:2", "b1:3"} {
		jobs = append(jobs, store.NewJob{ID: id, Batch: "b1", RowNo: i + 1, SchemaHash: hash, Prompt: "p", Provider: "openai",
			Model: "m", Mode: "prompt", Strategy: "conversation", Metadata: json.RawMessage(`{"text":"row ` + id + `"}`)})
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	errs := json.RawMessage(`[{"path":"/priority","keyword":"enum","class":"semantic","message":"/priority: \"x\" is not one of [1,2]"}]`)
	_, err = st.SaveResults(ctx, []store.Result{
		{JobID: "b1:1", Status: "valid", Value: json.RawMessage(`{"ok":true}`), Attempts: 2, Calls: 2, TokensIn: 20, TokensOut: 10,
			StartedAt: now, FinishedAt: now, WallMS: 40, Deliveries: 1, AttemptRows: []store.Attempt{
				{No: 1, Raw: `{"priority":"x"}`, Class: "semantic", Errors: errs, TokensIn: 10, TokensOut: 5, StartedAt: now},
				{No: 2, Raw: `{"ok":true}`, Valid: true, TokensIn: 10, TokensOut: 5, StartedAt: now},
			}},
		{JobID: "b1:2", Status: "invalid", Error: "gave up", FinalClass: "semantic", Attempts: 1, Calls: 1, TokensIn: 10, TokensOut: 5,
			StartedAt: now, FinishedAt: now, WallMS: 20, Deliveries: 1, AttemptRows: []store.Attempt{
				{No: 1, Raw: `{"priority":"x"}`, Class: "semantic", Errors: errs, TokensIn: 10, TokensOut: 5, StartedAt: now},
			}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

func TestReport(t *testing.T) {
	t.Parallel()
	dsn := seed(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{name: "summary", args: []string{"summary", "b1"}, want: []string{"b1", "3", "50.0"}},
		{name: "failures", args: []string{"failures", "b1"}, want: []string{"semantic", "/priority", "enum"}},
		{name: "job cards", args: []string{"job", "b1:1"}, want: []string{"attempt 1", "INVALID", "attempt 2", "VALID", `{"ok": true}`}},
		{name: "export jsonl", args: []string{"export", "b1", "--format", "jsonl"}, want: []string{`"id":"b1:1"`, `"status":"queued"`, `"input":{"text":"row b1:2"}`}},
		{name: "export csv", args: []string{"export", "b1", "--format", "csv"}, want: []string{"job_id,job_status,text,job_value,job_error", `b1:1,valid,row b1:1,"{""ok"": true}",`}},
		{name: "unknown job", args: []string{"job", "nope"}, wantCode: 1},
		{name: "missing argument", args: []string{"failures"}, wantCode: 2},
		{name: "unknown command", args: []string{"frobnicate", "x"}, wantCode: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), append(tt.args, "--database-url", dsn), &out, &errOut)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.wantCode, errOut.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestReportWait(t *testing.T) {
	t.Parallel()
	dsn := seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out, errOut bytes.Buffer
	// b1:3 stays queued, so wait polls until the deadline and fails.
	if code := run(ctx, []string{"wait", "b1", "--interval", "20ms", "--database-url", dsn}, &out, &errOut); code != 1 {
		t.Fatalf("wait on an unfinished batch: exit %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "valid 1, invalid 1") {
		t.Errorf("progress not shown: %s", errOut.String())
	}
}
