package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/internal/syncbuf"
	"github.com/fixpoint-dev/fixpoint/queue"
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
				{No: 1, Raw: `{"priority":"x"}`, Class: "semantic", Errors: errs, TokensIn: 10, TokensOut: 5, StartedAt: now, Unpriced: true,
					Feedback: "Fix /priority: it must be 1 or 2."},
				{No: 2, Raw: `{"ok":true}`, Valid: true, TokensIn: 10, TokensOut: 5, StartedAt: now, Unpriced: true},
			}},
		{JobID: "b1:2", Status: "invalid", Error: "gave up", FinalClass: "semantic", Attempts: 1, Calls: 1, TokensIn: 10, TokensOut: 5,
			StartedAt: now, FinishedAt: now, WallMS: 20, Deliveries: 1, AttemptRows: []store.Attempt{
				{No: 1, Raw: `{"priority":"x"}`, Class: "semantic", Errors: errs, TokensIn: 10, TokensOut: 5, StartedAt: now},
			}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// b1:1 waited out an outage before its first reply: its failed call
	// is kept apart from its attempts.
	if err := st.SaveInterrupted(ctx, []store.Interruption{{JobID: "b1:1", Delivery: 1, Hold: 1, Reason: store.InterruptOutage,
		Attempts: []store.Attempt{{No: 1, Class: "provider", ProviderStatus: 503, ProviderError: "openai: 503 overloaded", StartedAt: now}}}}); err != nil {
		t.Fatal(err)
	}
	// b1:2's first delivery died with a reply in memory: its journal kept it.
	if err := st.SaveInterrupted(ctx, []store.Interruption{{JobID: "b1:2", Delivery: 1, Reason: store.InterruptCrashed,
		Attempts: []store.Attempt{{No: 1, Raw: `{"x":1}`, Class: "shape", TokensIn: 10, TokensOut: 5, CostUSD: 0.25, StartedAt: now.Add(-time.Minute)}}}}); err != nil {
		t.Fatal(err)
	}
	// Batch d1: two jobs dead without ever reaching the provider.
	for _, id := range []string{"d1:1", "d1:2"} {
		if _, err := st.Reject(ctx, store.Rejection{JobID: id, Batch: "d1", Status: fixpoint.StatusDead, Deliveries: 5,
			Reason: "delivered 5 times without a final result; last error: dial tcp 127.0.0.1:18095: connect: connection refused"}); err != nil {
			t.Fatal(err)
		}
	}
	// Batch c1: two jobs cancelled before they ran.
	if err := st.PutBatch(ctx, store.BatchParams{Name: "c1", Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.InsertJobs(ctx, []store.NewJob{{ID: "c1:1", Batch: "c1", RowNo: 1, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"},
		{ID: "c1:2", Batch: "c1", RowNo: 2, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	capUSD := 0.5
	if err := st.SetCap(ctx, "c1", store.Cap{MaxCostUSD: &capUSD}); err != nil {
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
		wantErr  string // on stderr
	}{
		// Model m has no price: its $0 is said to be unknown, not free.
		{name: "summary", args: []string{"summary", "b1"}, want: []string{"b1", "3", "50.0", "cost unknown: 2 attempts of batch b1 on m had no price",
			// What the results do not show is in the cost line, with what a valid row cost in all.
			"batch b1 cost $0.250000 in all ($0.250000 a valid row): $0.000000 in recorded attempts (of which $0.000000 in runs a requeue replaced) and $0.250000 in 2 calls (1 of them answered) kept apart"}},
		// A capped batch says its cap (summary never mentioned it).
		{name: "summary of a capped batch", args: []string{"summary", "c1"}, want: []string{"batch c1 spent $0.000000 of its $0.5 cost cap"}},
		// summary, failures and job write text or json; csv is export's.
		{name: "summary in csv", args: []string{"summary", "b1", "--format", "csv"}, wantCode: 2, wantErr: `--format "csv": want text or json (see report summary --help)`},
		{name: "job in jsonl", args: []string{"job", "b1:1", "--format", "jsonl"}, wantCode: 2, wantErr: `--format "jsonl": want text or json (see report job --help)`},
		{name: "failures as json", args: []string{"failures", "b1", "--format", "json"}, want: []string{`"batch": "b1"`, `"keyword": "enum"`}},
		{name: "wait has no format", args: []string{"wait", "b1", "--format", "json"}, wantCode: 2, wantErr: "flag provided but not defined: -format (see report wait --help)"},
		{name: "failures", args: []string{"failures", "b1"}, want: []string{"semantic", "/priority", "enum"}},
		{name: "failures of jobs that never reached the provider", args: []string{"failures", "d1"},
			want: []string{"jobs that ended without a result", "dead    2     delivered 5 times without a final result; last error: dial tcp"}},
		// Cancelled jobs are said (it said "no job ended without a result").
		{name: "failures of a cancelled batch", args: []string{"failures", "c1"},
			want: []string{"jobs that ended without a result", "cancelled  2     cancelled by enqueue cancel"}},
		{name: "job cards", args: []string{"job", "b1:1"}, want: []string{"attempt 1", "INVALID", "attempt 2", "VALID", `{"ok": true}`,
			"feedback sent next:\n  │ Fix /priority: it must be 1 or 2.",
			"run 1, delivery 1, before wait 1: 1 call outage (failed while the provider was unavailable; the job waited), none paid: openai: 503 overloaded"}},
		{name: "job card of a crashed delivery", args: []string{"job", "b1:2"},
			want: []string{"1 call crashed (made by a worker that died before it wrote them, kept by its reply journal)"}},
		{name: "export jsonl", args: []string{"export", "b1", "--format", "jsonl"}, want: []string{`"id":"b1:1"`, `"status":"queued"`, `"input":{"text":"row b1:2"}`}},
		{name: "export csv", args: []string{"export", "b1", "--format", "csv"}, want: []string{"text,job_id,job_status,job_value,job_error,job_errors\n", `row b1:1,b1:1,valid,"{""ok"":true}",,`,
			// The invalid job's last reply's errors, as compact JSON.
			`row b1:2,b1:2,invalid,,gave up,"[{""path"":""/priority"",""class"":""semantic"",""keyword"":""enum""`},
			wantErr: "batch b1 is not done: 1 of 3 jobs is still queued"},
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
			if !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("stderr lacks %q: %s", tt.wantErr, errOut.String())
			}
		})
	}
}

func TestReportWait(t *testing.T) {
	t.Parallel()
	dsn := seed(t)
	// Long enough for the ledger to be reached on a loaded machine under
	// -race (300 ms ended it in store.Open once).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	// b1:3 stays queued, so wait polls until the deadline and fails.
	if code := run(ctx, []string{"wait", "b1", "--interval", "20ms", "--database-url", dsn}, &out, &errOut); code != 1 {
		t.Fatalf("wait on an unfinished batch: exit %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "valid 1, invalid 1") {
		t.Errorf("progress not shown: %s", errOut.String())
	}
	// --timeout ends the wait itself, saying what is left.
	errOut.Reset()
	if code := run(context.Background(), []string{"wait", "b1", "--interval", "20ms", "--timeout", "150ms", "--database-url", dsn}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "not done after 150ms: 1 of") {
		t.Errorf("wait --timeout on an unfinished batch: exit %d, stderr %q; want 1 saying 1 job is still queued", code, errOut.String())
	}
	for _, bad := range [][]string{{"--interval", "0s"}, {"--timeout", "-1s"}, {"--max-failure-rate", "5"}, {"--max-failure-rate", "NaN"}} {
		errOut.Reset()
		if code := run(context.Background(), append([]string{"wait", "b1", "--database-url", dsn}, bad...), &out, &errOut); code != 2 {
			t.Errorf("wait %v: exit %d, want 2 (%s)", bad, code, errOut.String())
		}
	}
}

// newLedger returns the URL of a fresh ledger and a Store open on it.
func newLedger(t *testing.T) (string, *store.Store) {
	t.Helper()
	dsn := storetest.NewDB(t)
	st, err := store.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return dsn, st
}

// TestReportMissingBatch: a batch name that is not in the ledger (a typo in
// a nightly script) is an error for every command that takes one, never an
// empty success.
func TestReportMissingBatch(t *testing.T) {
	t.Parallel()
	dsn := seed(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "summary", args: []string{"summary", "x"}, wantErr: `report: no batch "x" in the ledger`},
		{name: "failures", args: []string{"failures", "x"}, wantErr: `report: no batch "x" in the ledger`},
		{name: "export jsonl", args: []string{"export", "x"}, wantErr: `report: no batch "x" in the ledger`},
		{name: "export csv", args: []string{"export", "x", "--format", "csv"}, wantErr: `report: no batch "x" in the ledger`},
		{name: "wait", args: []string{"wait", "x", "--interval", "10ms"}, wantErr: `report: no batch "x" in the ledger`},
		{name: "job", args: []string{"job", "x"}, wantErr: `report: no job "x" in the ledger`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			if code := run(ctx, append(tt.args, "--database-url", dsn), &out, &errOut); code != 1 {
				t.Fatalf("exit %d, want 1; stdout %q, stderr %q", code, out.String(), errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tt.wantErr)
			}
			if out.Len() != 0 {
				t.Errorf("stdout not empty for a missing batch:\n%s", out.String())
			}
		})
	}
	// A name enqueue would not take is a typo: exit 2, naming what is wrong.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"summary", "bad name", "--database-url", dsn}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), `batch name "bad name" has ' '`) {
		t.Errorf("summary 'bad name': exit %d, stderr %q; want 2 naming the space", code, errOut.String())
	}
}

// TestReportEmptyBatch: a batch that exists but holds no jobs (a dataset
// with no usable rows) is reported as such, not as an error.
func TestReportEmptyBatch(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	if err := st.PutBatch(context.Background(), store.BatchParams{Name: "e"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string // exact stdout when wantIn is empty
		// wantIn lists substrings of stdout instead.
		wantIn []string
		code   int
	}{
		{name: "summary", args: []string{"summary", "e"}, wantIn: []string{"e   ", " 0 "}},
		{name: "failures", args: []string{"failures", "e"}, wantIn: []string{"Failure classes", "no failed attempt and no job ended without a result in batch e (yet)"}},
		{name: "export jsonl", args: []string{"export", "e"}, want: ""},
		{name: "export csv", args: []string{"export", "e", "--format", "csv"}, want: "job_id,job_status,job_value,job_error,job_errors\n"},
		// A batch of no job is one whose enqueue failed: not a success.
		{name: "wait", args: []string{"wait", "e", "--interval", "10ms"}, wantIn: []string{"batch e done: 0 jobs"}, code: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			if code := run(ctx, append(tt.args, "--database-url", dsn), &out, &errOut); code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.code, errOut.String())
			}
			if tt.wantIn == nil && out.String() != tt.want {
				t.Errorf("stdout = %q, want %q", out.String(), tt.want)
			}
			for _, w := range tt.wantIn {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestExportCSVShape: the CSV has the input's columns in the file's order
// (recorded by enqueue), then the job's, then one column per property of
// the schema, a property named like an input or job column prefixed with
// "value.".
func TestExportCSVShape(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	ctx := context.Background()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object","properties":{"text":{"type":"string"},"label":{"enum":["spam","ham"]},`+
		`"score":{"type":"number"},"tags":{"type":"array"},"job_status":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutBatch(ctx, store.BatchParams{Name: "c1"}); err != nil {
		t.Fatal(err)
	}
	metas := []string{
		`{"text":"hello, world","amount":12.5,"id":7,"note":"not in the header"}`,
		`{"text":"bye","amount":3,"id":8}`,
		`{"text":"later","amount":null,"id":9}`,
	}
	var jobs []store.NewJob
	for i, m := range metas {
		jobs = append(jobs, store.NewJob{ID: fmt.Sprintf("c1:%d", i+1), Batch: "c1", RowNo: i + 1, SchemaHash: hash, Prompt: "p",
			Provider: "openai", Model: "m", Mode: "prompt", Strategy: "conversation", Metadata: json.RawMessage(m)})
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	// What enqueue records for a file whose header is text,amount,id (the
	// batch's schema is left to the jobs' schema_hash).
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE batches SET input_columns = '["text","amount","id"]' WHERE name = 'c1'`); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := st.SaveResults(ctx, []store.Result{
		{JobID: "c1:1", Status: "valid", Value: json.RawMessage(`{"label":"spam","score":0.9,"tags":["a", "b"],"text":"a greeting","job_status":"x","extra":1}`),
			Attempts: 1, Calls: 1, FirstAttemptValid: true, StartedAt: now, FinishedAt: now, Deliveries: 1,
			AttemptRows: []store.Attempt{{No: 1, Raw: "{}", Valid: true, StartedAt: now}}},
		{JobID: "c1:2", Status: "invalid", Error: "gave up", FinalClass: "semantic", Attempts: 1, Calls: 1, StartedAt: now, FinishedAt: now, Deliveries: 1,
			AttemptRows: []store.Attempt{{No: 1, Raw: "nope", Class: "syntax", StartedAt: now}}},
	}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"export", "c1", "--format", "csv", "--database-url", dsn}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d; stderr %q", code, errOut.String())
	}
	want := strings.Join([]string{
		"text,amount,id,note,job_id,job_status,value.job_status,label,score,tags,value.text,job_error,job_errors",
		`"hello, world",12.5,7,not in the header,c1:1,valid,x,spam,0.9,"[""a"",""b""]",a greeting,,`,
		"bye,3,8,,c1:2,invalid,,,,,,gave up,",
		"later,,9,,c1:3,queued,,,,,,,",
	}, "\n") + "\n"
	if out.String() != want {
		t.Errorf("csv export:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestCSVColumnsHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		shape    store.ExportShape
		evidence bool
		want     string
	}{
		{name: "no clash", shape: store.ExportShape{InputColumns: []string{"b", "a"}, Properties: []string{"x", "y"}},
			want: "b,a,job_id,job_status,x,y,job_error,job_errors"},
		{name: "clash with an input and a job column", shape: store.ExportShape{InputColumns: []string{"text"}, Properties: []string{"job_error", "text"}},
			want: "text,job_id,job_status,value.job_error,value.text,job_error,job_errors"},
		{name: "the new name is taken too", shape: store.ExportShape{InputColumns: []string{"text", "value.text"}, Properties: []string{"text"}},
			want: "text,value.text,job_id,job_status,value.value.text,job_error,job_errors"},
		// An input column named like a job column was written twice.
		{name: "an input named job_id", shape: store.ExportShape{InputColumns: []string{"id", "job_id", "input.job_status", "job_status"}, Properties: []string{"job_id"}},
			want: "id,input.job_id,input.job_status,input.input.job_status,job_id,job_status,value.job_id,job_error,job_errors"},
		{name: "no properties: the whole value", shape: store.ExportShape{InputColumns: []string{"a"}},
			want: "a,job_id,job_status,job_value,job_error,job_errors"},
		{name: "an input and a property named job_errors", shape: store.ExportShape{InputColumns: []string{"job_errors"}, Properties: []string{"job_errors"}},
			want: "input.job_errors,job_id,job_status,value.job_errors,job_error,job_errors"},
		// --evidence: its column last, an input and a property of its name
		// renamed; without it, the name is theirs.
		{name: "evidence", shape: store.ExportShape{InputColumns: []string{"job_evidence"}, Properties: []string{"job_evidence", "x"}}, evidence: true,
			want: "input.job_evidence,job_id,job_status,value.job_evidence,x,job_error,job_errors,job_evidence"},
		{name: "no evidence", shape: store.ExportShape{InputColumns: []string{"job_evidence"}, Properties: []string{"x"}},
			want: "job_evidence,job_id,job_status,x,job_error,job_errors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			header := newCSVColumns(tt.shape, exportOpts{evidence: tt.evidence}).header
			if got := strings.Join(header, ","); got != tt.want {
				t.Errorf("header = %s, want %s", got, tt.want)
			}
			seen := map[string]bool{}
			for _, h := range header {
				if seen[h] {
					t.Errorf("header %q names %s twice", header, h)
				}
				seen[h] = true
			}
		})
	}
}

// A database URL that does not parse is a usage error (exit 2), and its
// password stays out of the message.
func TestReportBadDatabaseURL(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"notaurl", "postgres://u:s3cr3t@127.0.0.1:99999999/x"} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"summary", "--database-url", url}, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "bad database URL") || strings.Contains(errOut.String(), "s3cr3t") {
			t.Errorf("%s: exit %d, stderr %q; want 2, naming the URL as bad, no password", url, code, errOut.String())
		}
	}
}

// A ledger behind the report's migrations is named as such: report reads
// and does not migrate, and it failed with "relation batch_summary does
// not exist" (never migrated). A ledger made by an unreleased build is
// said to be one, in one line.
func TestReportOnALedgerNotMigrated(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDB(t)
	if err := store.MigrateTo(context.Background(), dsn, 0); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"summary", "--database-url", dsn}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "at migration 0 of the") || !strings.Contains(errOut.String(), "run worker migrate") {
		t.Errorf("not migrated: exit %d, stderr %q; want 1 saying to run worker migrate", code, errOut.String())
	}

	dsn = storetest.NewEmptyDB(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `CREATE TABLE fixpoint_schema_version (version int4 NOT NULL); INSERT INTO fixpoint_schema_version VALUES (21)`); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	code = run(context.Background(), []string{"summary", "--database-url", dsn}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "made by an unreleased build") || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("unreleased: exit %d, stderr %q; want 1 and one line saying so", code, errOut.String())
	}
}

// An empty argument (an unset shell variable) is a usage error: summary ”
// listed every batch.
func TestReportEmptyArgument(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"summary", "wait", "export", "job", "failures", "steps"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{cmd, "", "--database-url", "postgres://nobody@127.0.0.1:1/none"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "an argument is empty") {
			t.Errorf("report %s '': exit %d, stderr %q; want 2", cmd, code, errOut.String())
		}
	}
}

// A mistyped command, argument count or another command's flag is a usage
// error said in one line, before the ledger is reached (here unreachable:
// a connection error hid the typo), and a flag another command reads is an
// unknown flag of this one, pointing at its help (report export --timeout
// 5s exited 0).
func TestReportUsageErrorsBeforeTheLedger(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"nosuch":                       `unknown command "nosuch"`,
		"--format csv export b":        `"export" comes first, before any flag: report export [flags]`,
		"--format csv":                 "a command comes first, before any flag (--format is a flag)",
		"wait":                         "wait wants one argument, got 0",
		"summary a b":                  "summary takes at most one batch",
		"export b --timeout 5s":        "flag provided but not defined: -timeout (see report export --help)",
		"failures b --interval 5s":     "flag provided but not defined: -interval (see report failures --help)",
		"summary --max-failure-rate 1": "flag provided but not defined: -max-failure-rate (see report summary --help)",
		"summary b --format csv":       `--format "csv": want text or json (see report summary --help)`,
		"wait b --format json":         "flag provided but not defined: -format (see report wait --help)",
		"job x --database-ulr u":       "flag provided but not defined: -database-ulr: did you mean --database-url? (see report job --help)",
		"sumary b":                     `unknown command "sumary": did you mean summary?`,
		"wait b c":                     "wait wants one argument, got 2 (see report wait --help)",
		"export b --format xml":        `--format "xml": want jsonl or csv`,
		"wait b --interval 0s":         "--interval 0s: want a positive duration",
		"wait b --max-failure-rate 2":  "--max-failure-rate 2: want a share between 0 and 1",
		"wait b --nats-url garbage://": "--nats-url (env NATS_URL): bad NATS URL",
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(strings.Fields(args), "--database-url", "postgres://nobody@127.0.0.1:1/none"), &out, &errOut)
		msg := errOut.String()
		if code != 2 || !strings.Contains(msg, want) || strings.Count(msg, "\n") != 1 {
			t.Errorf("report %s: exit %d, stderr %q; want 2 and one line saying %q", args, code, msg, want)
		}
	}
}

// report wait on a batch an enqueue is still recording keeps waiting, even
// when the jobs recorded so far are final (it failed a live enqueue as
// killed); once the enqueue's run has stopped, it fails at once, even with
// jobs queued that will never be published (it waited for ever).
func TestReportWaitWhileRecording(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	ctx := context.Background()
	if err := st.PutBatch(ctx, store.BatchParams{Name: "r1", Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.InsertJobs(ctx, []store.NewJob{{ID: "r1:1", Batch: "r1", RowNo: 1, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"},
		{ID: "r1:2", Batch: "r1", RowNo: 2, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveResults(ctx, []store.Result{{JobID: "r1:1", Status: "valid", Value: json.RawMessage(`{}`), Deliveries: 1}}); err != nil {
		t.Fatal(err)
	}
	token, err := st.StartRecording(ctx, "r1", "d")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	// r1:2 queued and the run live: still waiting at the timeout.
	if code := run(ctx, []string{"wait", "r1", "--interval", "20ms", "--timeout", "200ms", "--database-url", dsn}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "not done after 200ms") {
		t.Errorf("wait while recording: exit %d, stderr %q; want 1 at the timeout", code, errOut.String())
	}
	if _, err := st.SaveResults(ctx, []store.Result{{JobID: "r1:2", Status: "valid", Value: json.RawMessage(`{}`), Deliveries: 1}}); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := run(ctx, []string{"wait", "r1", "--interval", "20ms", "--timeout", "200ms", "--database-url", dsn}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "an enqueue is still recording its rows") {
		t.Errorf("wait while recording, every recorded job final: exit %d, stderr %q; want 1 at the timeout, not a verdict", code, errOut.String())
	}
	if err := st.StopRecording(ctx, token); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	start := time.Now()
	if code := run(ctx, []string{"wait", "r1", "--interval", "20ms", "--database-url", dsn}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "stopped before it had recorded them all") || time.Since(start) > 5*time.Second {
		t.Errorf("wait after the run stopped: exit %d, stderr %q; want 1 at once, saying so", code, errOut.String())
	}
}

// Jobs recorded but never published, with no enqueue recording the batch,
// cannot finish: report wait says so and names --resume, once that has
// held for its grace (it waited for ever; a requeue publishes a moment
// after it queues).
func TestReportWaitOnUnpublishedJobs(t *testing.T) {
	t.Parallel()
	dsn := seed(t) // b1:3 is queued and was never published
	st, err := store.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out, errOut bytes.Buffer
	err = wait(context.Background(), &out, &errOut, st, "b1", 1, 20*time.Millisecond, 0, 200*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "never published") || !strings.Contains(err.Error(), "enqueue --batch b1 --resume") {
		t.Errorf("wait on unpublished jobs: %v; want it to end naming --resume", err)
	}
}

// Each command's --help shows that command and the flags it reads (every
// command printed the whole usage and every flag: report job --help listed
// --format and --interval).
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd           string
		want, notWant []string
	}{
		{"wait", []string{"report wait BATCH", "-timeout", "-max-failure-rate", "-interval", "-database-url"}, []string{"report job ID", "-format"}},
		{"export", []string{"report export BATCH", "-format", "Export formats:", "csv    the input's columns"}, []string{"report wait", "-interval"}},
		{"job", []string{"report job ID", "-database-url", "-format", "docs/report.md"}, []string{"report failures", "-interval", "-require-done"}},
		{"summary", []string{"report summary [BATCH]", "-format"}, []string{"report job ID", "-timeout"}},
		{"failures", []string{"report failures BATCH", "-database-url", "-format"}, []string{"report summary", "-timeout", "-csv-raw"}},
		{"steps", []string{"report steps BATCH", "-database-url", "-format", "-top", "docs/report.md"}, []string{"report failures BATCH", "-timeout", "-csv-raw"}},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{tc.cmd, "--help"}, &out, &errOut); code != 0 {
			t.Errorf("%s --help: exit %d", tc.cmd, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s --help lacks %q:\n%s", tc.cmd, w, out.String())
			}
		}
		// What it does, with an example, and its exit status.
		if !strings.Contains(out.String(), "\n  report "+tc.cmd+" ") && !strings.Contains(out.String(), " report "+tc.cmd+" b1") || !strings.Contains(out.String(), "Exit status:") {
			t.Errorf("%s --help has no example or no exit status:\n%s", tc.cmd, out.String())
		}
		for _, w := range tc.notWant {
			if strings.Contains(out.String(), w) {
				t.Errorf("%s --help shows %q, which is not its own", tc.cmd, w)
			}
		}
	}
}

// report wait on published jobs that stop finishing looks in their queue:
// while it holds one of the batch's messages (waiting or in flight) it
// waits on; once it holds none it fails naming --resume (it waited for
// ever, blaming the workers). A queue it cannot reach is said once, and it
// waits on.
func TestReportWaitOnJobsTheQueueLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, st := newLedger(t)
	settings := json.RawMessage(`{"stream":"LOST_T","subject":"lost.t"}`)
	if err := st.PutBatch(ctx, store.BatchParams{Name: "lost", Settings: settings}); err != nil {
		t.Fatal(err)
	}
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	for _, id := range []string{"lost:1", "lost:2"} {
		jobs = append(jobs, store.NewJob{ID: id, Batch: "lost", SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"})
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkPublished(ctx, []string{"lost:1", "lost:2"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ns, err := natsconn.StartServer(natsconn.ServerConfig{StoreDir: dir, Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
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
	q := queue.Config{Stream: "LOST_T", Subject: "lost.t", Consumer: "w"}
	_, cons, err := queue.Ensure(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	env := &queue.Envelope{V: queue.EnvelopeVersion, JobID: "lost:1", Batch: "lost", Prompt: "p", SchemaHash: hash,
		Provider: "openai", Model: "m", Mode: "prompt", Limits: fixpoint.Limits{MaxAttempts: 1}.WithDefaults()}
	if _, err := queue.Publish(ctx, js, q, env); err != nil {
		t.Fatal(err)
	}
	check := queueCheck(st, "lost", "", dir) // the running server, found through its lock file
	const grace = 100 * time.Millisecond

	// The queue holds job 1's message: waiting on, to the timeout.
	var out, errOut bytes.Buffer
	err = wait(ctx, &out, &errOut, st, "lost", 1, 10*time.Millisecond, time.Second, grace, check)
	if err == nil || !strings.Contains(err.Error(), "not done after 1s") {
		t.Errorf("queue holding a message: %v; want the timeout", err)
	}
	// Unreachable queue: said once, then the timeout.
	errOut.Reset()
	err = wait(ctx, &out, &errOut, st, "lost", 1, 10*time.Millisecond, time.Second, grace, queueCheck(st, "lost", "nats://127.0.0.1:1", dir))
	if err == nil || !strings.Contains(err.Error(), "not done after 1s") || strings.Count(errOut.String(), "cannot be checked") != 1 {
		t.Errorf("queue unreachable: %v, stderr %q; want the timeout and one note", err, errOut.String())
	}
	// The message taken and acked without a result (lost): it says so.
	msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	err = wait(ctx, &out, &errOut, st, "lost", 1, 10*time.Millisecond, 30*time.Second, grace, check)
	if err == nil || !strings.Contains(err.Error(), "2 of its queued jobs were published, but the queue (stream LOST_T at nats://") ||
		!strings.Contains(err.Error(), "enqueue --batch lost --resume") {
		t.Errorf("queue holding none: %v; want it to end naming --resume", err)
	}
}

// A wait that times out while workers finish jobs says at what pace, not
// whether workers run on this ledger (it asked that of a batch finishing
// 1,800 jobs a second); one during which none finished still asks.
func TestReportWaitTimeoutSaysThePace(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	ctx := context.Background()
	if err := st.PutBatch(ctx, store.BatchParams{Name: "p1", Settings: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	var jobs []store.NewJob
	var ids []string
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("p1:%d", i)
		jobs = append(jobs, store.NewJob{ID: id, Batch: "p1", RowNo: i, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"})
		ids = append(ids, id)
	}
	if _, err := st.InsertJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkPublished(ctx, ids); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"wait", "p1", "--interval", "20ms", "--timeout", "300ms", "--database-url", dsn}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "none finished while waiting (are workers running on this ledger?)") {
		t.Errorf("wait with nothing finishing: exit %d, stderr %q", code, errOut.String())
	}
	// A job finishes once the wait has read the batch (a fixed delay raced
	// a slow start under load: the wait read it already finished).
	var waitErr syncbuf.Buffer
	read, waited := waitErr.Written("queued 4"), make(chan struct{})
	defer close(waited)
	go func() {
		select {
		case <-read:
		case <-waited:
			return
		}
		if _, err := st.SaveResults(ctx, []store.Result{{JobID: "p1:1", Status: "valid", Value: json.RawMessage(`{}`), Deliveries: 1}}); err != nil {
			t.Error(err)
		}
	}()
	if code := run(ctx, []string{"wait", "p1", "--interval", "20ms", "--timeout", "2s", "--database-url", dsn}, &out, &waitErr); code != 1 ||
		!strings.Contains(waitErr.String(), "3 of 4 jobs still queued; 1 finished while waiting") || strings.Contains(waitErr.String(), "are workers running") {
		t.Errorf("wait while a job finished: exit %d, stderr %q; want the pace", code, waitErr.String())
	}
}

// A batch short of rows its datasets had says so in its summary and beside
// its export: an enqueue killed while recording (18,000 of 20,000 rows:
// the export exited 0 and looked complete), and bad rows --max-bad-rows
// let enqueue leave out.
func TestReportSaysWhatTheBatchIsShortOf(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	ctx := context.Background()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"short", "whole"} {
		if err := st.PutBatch(ctx, store.BatchParams{Name: b, Settings: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.InsertJobs(ctx, []store.NewJob{{ID: b + ":1", Batch: b, RowNo: 1, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt",
			Metadata: json.RawMessage(`{"t":"<b>&"}`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.SaveResults(ctx, []store.Result{{JobID: b + ":1", Status: "valid", Value: json.RawMessage(`{}`), Deliveries: 1}}); err != nil {
			t.Fatal(err)
		}
		token, err := st.StartRecording(ctx, b, "d1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.FinishRecording(ctx, b, token, "d1", 3, map[string][]string{"short": {"", "short:9", "short:8"}}[b]); err != nil {
			t.Fatal(err)
		}
	}
	// A second dataset of "short" whose enqueue stopped part way.
	token, err := st.StartRecording(ctx, "short", "d2")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.StopRecording(ctx, token); err != nil {
		t.Fatal(err)
	}
	// A later dataset (the file fixed) recorded one of the bad rows.
	if _, err := st.InsertJobs(ctx, []store.NewJob{{ID: "short:9", Batch: "short", RowNo: 9, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"}}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"summary", "--database-url", dsn}, &out, &errOut); code != 0 {
		t.Fatalf("summary: exit %d, %s", code, errOut.String())
	}
	for _, want := range []string{"batch short is short of 2 rows its datasets had", "batch short is not fully enqueued", "sha256 d2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary does not say %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "batch whole is") {
		t.Errorf("summary notes a whole batch:\n%s", out.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run(ctx, []string{"export", "short", "--database-url", dsn}, &out, &errOut); code != 0 || strings.Count(out.String(), "\n") != 2 {
		t.Fatalf("export: exit %d, %d lines, %s", code, strings.Count(out.String(), "\n"), errOut.String())
	}
	if !strings.Contains(errOut.String(), "warning: batch short is short of 2 rows") || !strings.Contains(errOut.String(), "warning: batch short is not fully enqueued") {
		t.Errorf("export's warnings: %q; want both", errOut.String())
	}
	errOut.Reset()
	out.Reset()
	if code := run(ctx, []string{"export", "whole", "--database-url", dsn}, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Errorf("export of a whole batch: exit %d, stderr %q; want no warning", code, errOut.String())
	}
	if !strings.Contains(out.String(), `"input":{"t":"<b>&"}`) {
		t.Errorf("export: %s; want the input's <b>& as written, not escaped", out.String())
	}
}

// Jobs that finish after the wait's last poll, before its --timeout,
// count: a wait polling less often than its timeout said "none finished
// while waiting" of a batch that had finished 6 jobs meanwhile. A batch
// that finished in that window gets its verdict, not a timeout.
func TestReportWaitTimeoutCountsJobsSinceTheLastPoll(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	ctx := context.Background()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"q1", "q2"} {
		if err := st.PutBatch(ctx, store.BatchParams{Name: b, Settings: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		var jobs []store.NewJob
		var ids []string
		for i := 1; i <= 3; i++ {
			id := fmt.Sprintf("%s:%d", b, i)
			jobs = append(jobs, store.NewJob{ID: id, Batch: b, RowNo: i, SchemaHash: hash, Prompt: "p", Provider: "openai", Model: "m", Mode: "prompt"})
			ids = append(ids, id)
		}
		if _, err := st.InsertJobs(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkPublished(ctx, ids); err != nil {
			t.Fatal(err)
		}
	}
	// finishAfterFirstPoll saves results for ids once the wait has read
	// their batch (its progress line says so).
	finishAfterFirstPoll := func(waitErr *syncbuf.Buffer, ids ...string) {
		<-waitErr.Written("queued 3")
		var rs []store.Result
		for _, id := range ids {
			rs = append(rs, store.Result{JobID: id, Status: "valid", Value: json.RawMessage(`{}`), Deliveries: 1})
		}
		if _, err := st.SaveResults(ctx, rs); err != nil {
			t.Error(err)
		}
	}
	// The interval (a minute) is far past the timeout: the wait polls once
	// before its timeout ends it.
	var out bytes.Buffer
	var waitErr syncbuf.Buffer
	go finishAfterFirstPoll(&waitErr, "q1:1", "q1:2")
	if code := run(ctx, []string{"wait", "q1", "--interval", "1m", "--timeout", "1s", "--database-url", dsn}, &out, &waitErr); code != 1 ||
		!strings.Contains(waitErr.String(), "1 of 3 jobs still queued; 2 finished while waiting") {
		t.Errorf("wait --timeout 1s while 2 jobs finished: exit %d, stderr %q; want 2 finished while waiting", code, waitErr.String())
	}
	// Every job finishes after the wait's only poll: the batch is done.
	var waitErr2 syncbuf.Buffer
	out.Reset()
	go finishAfterFirstPoll(&waitErr2, "q2:1", "q2:2", "q2:3")
	if code := run(ctx, []string{"wait", "q2", "--interval", "1m", "--timeout", "1s", "--database-url", dsn}, &out, &waitErr2); code != 0 ||
		strings.Contains(waitErr2.String(), "not done after") || !strings.Contains(out.String(), "q2") {
		t.Errorf("wait --timeout 1s on a batch done before it: exit %d, stdout %q, stderr %q; want its verdict, exit 0", code, out.String(), waitErr2.String())
	}
}

// export --require-done fails a batch with a job still queued, writing
// nothing (it exited 0 with a warning on stderr only), and exports a
// batch whose every job is final.
func TestExportRequireDone(t *testing.T) {
	t.Parallel()
	dsn := seed(t)
	for _, format := range []string{"jsonl", "csv"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"export", "b1", "--format", format, "--require-done", "--database-url", dsn}, &out, &errOut); code != 1 ||
			out.Len() != 0 || !strings.Contains(errOut.String(), "batch b1 is not done: 1 of 3 jobs is still queued (--require-done)") {
			t.Errorf("export --require-done --format %s of an unfinished batch: exit %d, stdout %q, stderr %q; want exit 1, nothing written", format, code, out.String(), errOut.String())
		}
		out.Reset()
		errOut.Reset()
		// c1's jobs are all cancelled: final.
		if code := run(context.Background(), []string{"export", "c1", "--format", format, "--require-done", "--database-url", dsn}, &out, &errOut); code != 0 ||
			!strings.Contains(out.String(), "c1:2") {
			t.Errorf("export --require-done --format %s of a done batch: exit %d, stdout %q, stderr %q", format, code, out.String(), errOut.String())
		}
	}
	// Without the flag the unfinished batch is exported, with a warning.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"export", "b1", "--database-url", dsn}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "b1:3") {
		t.Errorf("export of an unfinished batch: exit %d, stderr %q", code, errOut.String())
	}
}

// The CSV export puts a ' before a text cell a spreadsheet would run as a
// formula (it wrote "=HYPERLINK(...)" as it was); numbers, a JSON -3 or
// the text "-4.5" of a CSV dataset, stay numbers. --csv-raw writes the
// cells as they are.
func TestExportCSVEscapesFormulas(t *testing.T) {
	t.Parallel()
	dsn, st := newLedger(t)
	ctx := context.Background()
	hash, err := st.PutSchema(ctx, []byte(`{"type":"object","properties":{"note":{"type":"string"},"score":{"type":"number"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutBatch(ctx, store.BatchParams{Name: "f1"}); err != nil {
		t.Fatal(err)
	}
	meta := `{"=cmd":"x","link":"=HYPERLINK(\"http://evil\",\"a\")","amount":-3,"neg":"-4.5","at":"@SUM(A1)","tab":"\tx","cr":"\rx","plus":"+1+1","dash":"- item","safe":"a=b"}`
	if _, err := st.InsertJobs(ctx, []store.NewJob{{ID: "f1:1", Batch: "f1", RowNo: 1, SchemaHash: hash, Prompt: "p",
		Provider: "openai", Model: "m", Mode: "prompt", Metadata: json.RawMessage(meta)}}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE batches SET input_columns = '["=cmd","link","amount","neg","at","tab","cr","plus","dash","safe"]' WHERE name = 'f1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveResults(ctx, []store.Result{{JobID: "f1:1", Status: "invalid", Value: json.RawMessage(`{"note":"=1+1","score":-3}`),
		Error: "-1 is not allowed", Deliveries: 1}}); err != nil {
		t.Fatal(err)
	}
	read := func(args ...string) [][]string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, append([]string{"export", "f1", "--format", "csv", "--database-url", dsn}, args...), &out, &errOut); code != 0 {
			t.Fatalf("export %v: exit %d, %s", args, code, errOut.String())
		}
		recs, err := csv.NewReader(&out).ReadAll()
		if err != nil || len(recs) != 2 {
			t.Fatalf("export %v: %d records, %v:\n%s", args, len(recs), err, out.String())
		}
		return recs
	}
	cells := func(recs [][]string) map[string]string {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = recs[1][i]
		}
		return m
	}
	got := cells(read())
	want := map[string]string{"'=cmd": "x", "link": `'=HYPERLINK("http://evil","a")`, "amount": "-3", "neg": "-4.5", "at": "'@SUM(A1)",
		"tab": "'\tx", "cr": "'\rx", "plus": "'+1+1", "dash": "'- item", "safe": "a=b", "note": "'=1+1", "score": "-3", "job_error": "'-1 is not allowed"}
	for h, w := range want {
		if got[h] != w {
			t.Errorf("cell %q = %q, want %q", h, got[h], w)
		}
	}
	got = cells(read("--csv-raw"))
	want = map[string]string{"=cmd": "x", "link": `=HYPERLINK("http://evil","a")`, "amount": "-3", "at": "@SUM(A1)", "tab": "\tx", "note": "=1+1", "job_error": "-1 is not allowed"}
	for h, w := range want {
		if got[h] != w {
			t.Errorf("--csv-raw: cell %q = %q, want %q", h, got[h], w)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"export", "f1", "--csv-raw", "--database-url", dsn}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--csv-raw is for --format csv") {
		t.Errorf("--csv-raw with jsonl: exit %d, %s; want 2", code, errOut.String())
	}
}

// Every batch's summary has the same columns and a cost line, with what a
// valid row cost: a plain batch had neither the action columns nor the
// cost line its legend points to.
func TestSummarySameColumnsAndCostLine(t *testing.T) {
	t.Parallel()
	dsn := seed(t)
	summary := func(batch string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"summary", batch, "--database-url", dsn}, &out, &errOut); code != 0 {
			t.Fatalf("summary %s: exit %d, %s", batch, code, errOut.String())
		}
		return out.String()
	}
	b1, c1 := summary("b1"), summary("c1")
	if h1, h2 := strings.SplitN(b1, "\n", 2)[0], strings.SplitN(c1, "\n", 2)[0]; h1 != h2 || !strings.Contains(h1, "CANCELLED  OVER BUDGET  RUNS") {
		t.Errorf("headers of b1 and c1:\n%s\n%s\nwant the same, with the action columns", h1, h2)
	}
	// c1: two jobs cancelled before they ran, nothing spent.
	if want := "batch c1 cost $0.000000 in all (no valid row): $0.000000 in recorded attempts (of which $0.000000 in runs a requeue replaced) and $0.000000 in 0 calls kept apart"; !strings.Contains(c1, want) {
		t.Errorf("summary c1 lacks its cost line %q:\n%s", want, c1)
	}
	// The legend's COST/VALID points to the cost line below it.
	if !strings.Contains(c1, "in the cost line below") || strings.Index(c1, "in the cost line below") > strings.Index(c1, "batch c1 cost") {
		t.Errorf("the cost line is not below the legend:\n%s", c1)
	}
}
