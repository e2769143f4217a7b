package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/jackc/pgx/v5"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsaddr"
	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

const testSchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`

// world is one test's ledger and embedded queue directory.
type world struct {
	t   *testing.T
	dsn string
	dir string
	st  *store.Store
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, dsn: storetest.NewDB(t), dir: t.TempDir()}
	st, err := store.Open(context.Background(), w.dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	w.st = st
	return w
}

func (w *world) file(name, body string) string {
	w.t.Helper()
	p := filepath.Join(w.t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// run runs enqueue on the world's ledger and queue.
func (w *world) run(stdin string, args ...string) (code int, stdout, stderr string) {
	w.t.Helper()
	var out, errOut bytes.Buffer
	all := append([]string{"--database-url", w.dsn, "--nats-url", "", "--nats-dir", w.dir, "--nats-listen", "127.0.0.1:1", "--progress=false"}, args...)
	code = run(context.Background(), all, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func (w *world) args(batch string, extra ...string) []string {
	return append([]string{"--batch", batch, "--schema", w.file("s.json", testSchema),
		"--template", w.file("t.txt", "Name the person in: {{.text}}"), "--model", "sim-typical", "--id-field", "id"}, extra...)
}

func (w *world) noBatch(batch string) {
	w.t.Helper()
	if _, err := w.st.Batch(context.Background(), batch); !errors.Is(err, store.ErrNotFound) {
		w.t.Errorf("batch %s recorded: %v", batch, err)
	}
}

const rows = `{"id":"a","text":"Ada wrote this"}
{"id":"b","text":"Bo wrote that"}
`

// Typos and settings that cannot work are usage errors (exit 2) and create
// no batch; a failure that is not the caller's (bad rows) is exit 1.
func TestEnqueueExitStatus(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	data := w.file("rows.jsonl", rows)
	for _, tc := range []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		wantErr  string
	}{
		{"flag typo", append(w.args("t1", "--max-atempts", "3"), data), "", 2, "max-atempts"},
		{"unknown provider", append(w.args("t2", "--provider", "gemini"), data), "", 2, `provider "gemini"`},
		{"unknown mode", append(w.args("t3", "--mode", "json"), data), "", 2, "mode"},
		{"unknown strategy", append(w.args("t4", "--strategy", "retry"), data), "", 2, "strategy"},
		{"template parse error", append([]string{"--batch", "t5", "--schema", w.file("s.json", testSchema),
			"--template", w.file("t.txt", "Hello {{.text"), "--model", "m"}, data), "", 2, "template"},
		{"unsatisfiable schema", append([]string{"--batch", "t6", "--schema", w.file("s.json", `{"$ref":"#"}`),
			"--template", w.file("t.txt", "x {{.text}}"), "--model", "m"}, data), "", 2, "no value satisfies"},
		{"resume with settings", []string{"--batch", "t7", "--resume", "--model", "other"}, "", 2, "--model"},
		{"resume of no batch", []string{"--batch", "t8", "--resume"}, "", 1, "no such batch"},
		{"bad rows", append(w.args("t9"), "-", "--format", "jsonl"), `{"id":"a","text":"x"}` + "\nnope\n", 1, "line 2"},
		// The refusal names the flag that lets bad rows pass, and its value.
		{"bad rows over the limit", append(w.args("t31", "--max-bad-rows", "1"), "-", "--format", "jsonl"), `{"id":"a","text":"x"}` + "\nnope\n[]\n", 1,
			"too many bad rows: 2 bad rows, over --max-bad-rows 1 (raise it to skip them, -1 for no limit), first: line 2"},
		{"bad rows over the limit, dry run", append(w.args("t32", "--dry-run"), "-", "--format", "jsonl"), `{"id":"a","text":"x"}` + "\nnope\n", 1,
			"too many bad rows: 1 bad row, over --max-bad-rows 0 (raise it to skip them, -1 for no limit)"},
		{"empty dataset", append(w.args("t10"), "-", "--format", "jsonl"), "", 1, "no rows"},
		{"every row bad, bad rows allowed", append(w.args("t19", "--max-bad-rows", "-1"), "-", "--format", "jsonl"), "nope\n[1]\n", 1, "every one of the dataset's 2 rows is bad"},
		{"negative limit", append(w.args("t11", "--dry-run", "--limit", "-1"), data), "", 2, "--limit -1"},
		{"temperature out of range", append(w.args("t12", "--temperature", "5"), data), "", 2, "temperature 5"},
		{"temperature not a number", append(w.args("t27", "--temperature", "hot"), data), "", 2, `--temperature "hot": want a number`},
		{"a header name with a space", append(w.args("t29"), w.file("sp.csv", "id, text\n1,hello\n")), "", 2, `(its fields: "id", " text")`},
		{"template calls an undefined template", append([]string{"--batch", "t30", "--schema", w.file("s.json", testSchema),
			"--template", w.file("t.txt", `{{if .text}}{{template "x"}}{{end}}`), "--model", "m"}, data), "", 2, `calls {{template "x"}}, which it does not define`},
		{"empty dataset, dry run", append(w.args("t28", "--dry-run"), "-", "--format", "jsonl"), "", 1, "no rows"},
		{"deadline of a realtime batch", append(w.args("t14", "--deadline", "2h"), data), "", 2, "--deadline is for --delivery batch"},
		{"colon in the batch name", append(w.args("t15:x"), data), "", 2, `batch name "t15:x" has ':'`},
		{"space in the batch name", append(w.args("t16 x", "--dry-run"), data), "", 2, `batch name "t16 x" has ' '`},
		{"batch name too long", append(w.args(strings.Repeat("t", 129)), data), "", 2, "want 1 to 128 characters"},
		{"tool mode, schema of a string", append([]string{"--batch", "t23", "--schema", w.file("str.json", `{"type":"string"}`),
			"--template", w.file("t.txt", "x {{.text}}"), "--model", "m", "--mode", "tool"}, data), "", 2, `needs "type": "object"`},
		{"semicolon CSV", append(w.args("t22"), w.file("semi.csv", "id;text\n1;hello\n")), "", 2, "is this file separated by ';'"},
		{"batch name starting with a dash", append(w.args("-x"), data), "", 2, `batch name "-x": start it with`},
		{"stream name with a slash", append(w.args("t24", "--stream", "a/b"), data), "", 2, `--stream "a/b" is not a stream name`},
		{"subject past 255 bytes", append(w.args("t25", "--subject", strings.Repeat("a", 300)), data), "", 2, "is not a subject"},
		{"duplicates window under 100ms", append(w.args("t26", "--duplicates-window", "1ns"), data), "", 2, "under NATS's minimum"},
		{"wildcard subject", append(w.args("t20", "--subject", "fixpoint.*"), data), "", 2, `--subject "fixpoint.*" is not a subject`},
		{"two stream replicas", append(w.args("t34", "--stream-replicas", "2"), data), "", 2, "--stream-replicas 2 must be 1, 3 or 5"},
		{"replicas on the embedded queue", append(w.args("t35", "--stream-replicas", "3"), data), "", 2, "--stream-replicas 3 needs a JetStream cluster"},
		{"negative duplicates window", append(w.args("t21", "--duplicates-window", "-1s"), data), "", 2, "--duplicates-window -1s is negative"},
		{"NaN cost cap", append(w.args("t17", "--max-cost-usd", "NaN"), data), "", 2, `--max-cost-usd "NaN"`},
		{"cost cap past the ledger's numeric", append(w.args("t18", "--max-cost-usd", "1e12"), data), "", 2, `--max-cost-usd "1e12"`},
		// A rule that does not compile is said before any call, naming it.
		{"rule that does not compile", append([]string{"--batch", "t33", "--schema", w.file("r.json",
			`{"type":"object","properties":{"text":{"type":"string"}},"x-fixpoint-rules":[{"rule":"self.txet == 'x'","message":"m"}]}`),
			"--template", w.file("t.txt", "x {{.text}}"), "--model", "m"}, data), "", 2, "x-fixpoint-rules/0 (self.txet == 'x'): undefined field 'txet'"},
		{"unknown evidence mode", append(w.args("t34", "--evidence", "strict"), data), "", 2, `--evidence: unknown evidence mode "strict"`},
		{"unknown evidence source", append(w.args("t35", "--evidence-source", "file"), data), "", 2, `evidence source "file": want row, prompt, field:NAME or document`},
		{"both document flags", append(w.args("t37", "--document-field", "text", "--document-file-field", "path"), data), "", 2,
			"--document-field and --document-file-field: a job has one document, give one of them"},
		{"document field no row has", append(w.args("t38", "--document-file-field", "pth"), data), "", 2, `--document-file-field "pth": no row of the dataset has it`},
		{"document evidence without documents", append(w.args("t39", "--evidence-source", "document"), data), "", 2, "the jobs have no document"},
		{"evidence field no row has", append(w.args("t36", "--evidence-source", "field:vendor"), data), "", 1, `the input row has no field "vendor"`},
		{"template field no row has", append([]string{"--batch", "t13", "--schema", w.file("s.json", testSchema),
			"--template", w.file("t.txt", "Hello {{.txet}}"), "--model", "m"}, data), "", 2, "the template uses .txet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := w.run(tc.stdin, tc.args...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d naming %q", code, stderr, tc.wantCode, tc.wantErr)
			}
			w.noBatch(tc.args[1])
		})
	}
}

// With no NATS_URL, enqueue writes into the embedded queue's directory (the
// one a worker without NATS_URL serves), from a file or from stdin.
func TestEnqueueIntoTheEmbeddedQueue(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	code, stdout, stderr := w.run(rows, append(w.args("e1"), "-", "--format", "jsonl")...)
	if code != 0 || !strings.Contains(stdout, "2 published") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = w.run("", append(w.args("e1"), w.file("rows.jsonl", rows))...)
	if code != 0 || !strings.Contains(stdout, "0 published, 2 already enqueued") {
		t.Fatalf("second run: exit %d, stdout %q", code, stdout)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "jetstream")); err != nil {
		t.Errorf("no JetStream store in %s: %v", w.dir, err)
	}
	code, stdout, _ = w.run("", "--batch", "e1", "--resume")
	if code != 0 || !strings.Contains(stdout, "0 republished") {
		t.Fatalf("resume: exit %d, stdout %q; want nothing to republish", code, stdout)
	}
}

// --dry-run checks the rows, prints a full prompt and an estimate, and
// records or publishes nothing; with earlier batches of the same schema and
// model, the estimate uses what they measured.
func TestEnqueueDryRun(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	data := w.file("rows.jsonl", rows)
	code, stdout, stderr := w.run("", append(w.args("d1", "--model", "gpt-4o-mini", "--dry-run"), data)...)
	if code != 0 {
		t.Fatalf("dry run: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"read 2 rows: 2 would be jobs", "--- system prompt", "Name the person in: Ada wrote this",
		"x 1.00 attempts (no earlier batch", "gpt-4o-mini list prices"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, stdout)
		}
	}
	w.noBatch("d1")
	if _, err := os.Stat(filepath.Join(w.dir, "jetstream")); !os.IsNotExist(err) {
		t.Errorf("a dry run touched the queue: %v", err)
	}
	// The estimate names its basis: a flex batch is priced at batch rates.
	code, stdout, stderr = w.run("", append(w.args("d1", "--model", "gpt-4o-mini", "--delivery", "flex", "--dry-run"), data)...)
	if code != 0 || !strings.Contains(stdout, "gpt-4o-mini flex prices (batch rates;") {
		t.Errorf("flex dry run: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = w.run("", append(w.args("d1", "--dry-run", "--limit", "1"), data)...)
	if code != 0 || !strings.Contains(stdout, "the first 1 row (--limit)") {
		t.Errorf("--limit 1: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = w.run("", append(w.args("d1", "--dry-run"), w.file("bad.jsonl", rows+"nope\n"))...)
	if code != 1 || !strings.Contains(stdout, "bad row: line 3") {
		t.Errorf("dry run with a bad row: exit %d, want 1 naming line 3\n%s", code, stdout)
	}

	// History: an earlier batch of the schema and model took 2 attempts a job.
	if code, out, errOut := w.run("", append(w.args("h1"), data)...); code != 0 {
		t.Fatalf("enqueue h1: %d %s %s", code, out, errOut)
	}
	var results []store.Result
	for _, id := range []string{"h1:a", "h1:b"} {
		results = append(results, store.Result{JobID: id, Status: fixpoint.StatusValid, Attempts: 2, Calls: 2, TokensIn: 300, TokensOut: 60,
			AttemptRows: []store.Attempt{{No: 1, Class: "shape", TokensIn: 150, TokensOut: 30}, {No: 2, Valid: true, TokensIn: 150, TokensOut: 30}}})
	}
	if _, err := w.st.SaveResults(context.Background(), results); err != nil {
		t.Fatal(err)
	}
	_, stdout, _ = w.run("", append(w.args("d2", "--dry-run"), data)...)
	if !strings.Contains(stdout, "x 2.00 attempts (measured on 2 jobs of 1 earlier batch") || !strings.Contains(stdout, "~30 output tokens") {
		t.Errorf("dry run with history:\n%s", stdout)
	}

	// Of a batch that exists, a dry run refuses what the real run refuses
	// and counts what the batch holds apart from the new jobs.
	more := w.file("more.jsonl", rows+`{"id":"c","text":"Cy wrote more"}`+"\n")
	code, stdout, _ = w.run("", append(w.args("h1", "--dry-run"), more)...)
	if code != 0 || !strings.Contains(stdout, "1 would be jobs, 2 already enqueued, 0 bad") || !strings.Contains(stdout, "Cy wrote more") {
		t.Errorf("dry run of an enqueued batch with one row more: exit %d\n%s", code, stdout)
	}
	code, _, stderr = w.run("", append(w.args("h1", "--dry-run", "--max-attempts", "5"), data)...)
	if code != 2 || !strings.Contains(stderr, "max attempts: recorded 3, now 5") {
		t.Errorf("dry run with other settings: exit %d, want 2 listing them\n%s", code, stderr)
	}
	edited := w.file("edited.jsonl", strings.Replace(rows, "Bo wrote that", "Bo wrote this", 1))
	code, stdout, _ = w.run("", append(w.args("h1", "--dry-run"), edited)...)
	if code != 1 || !strings.Contains(stdout, `bad row: line 2: id "b" was enqueued in batch h1 before with another prompt`) {
		t.Errorf("dry run with an edited row: exit %d, want 1 naming line 2\n%s", code, stdout)
	}
	code, _, stderr = w.run("", append(w.args("d3", "--dry-run", "--max-bad-rows", "-1"), w.file("allbad.jsonl", "nope\n[]\n"))...)
	if code != 1 || !strings.Contains(stderr, "every one of the dataset's 2 rows is bad") {
		t.Errorf("dry run of a dataset of bad rows only: exit %d, want 1\n%s", code, stderr)
	}
}

// The batch actions at the command line: usage errors are 2, a batch the
// ledger does not hold is 1, and each prints what it did.
func TestEnqueueActions(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if code, out, errOut := w.run("", append(w.args("a1"), w.file("rows.jsonl", rows))...); code != 0 {
		t.Fatalf("enqueue: %d %s %s", code, out, errOut)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"requeue bad status", []string{"requeue", "--batch", "a1", "--status", "queued"}, 2, `--status "queued"`},
		{"requeue bad provider", []string{"requeue", "--batch", "a1", "--provider", "gemini"}, 2, "gemini"},
		{"requeue no match", []string{"requeue", "--batch", "a1"}, 0, "no job matched"},
		{"requeue of no status", []string{"requeue", "--batch", "a1", "--status", ""}, 2, `--status "" names no status`},
		{"requeue no batch", []string{"requeue", "--batch", "nope"}, 1, "no such batch"},
		{"requeue strategy typo, no batch", []string{"requeue", "--batch", "nope", "--strategy", "pach"}, 2, `strategy "pach"`},
		{"cap bad value", []string{"cap", "--batch", "a1", "--max-cost-usd", "-1"}, 2, "--max-cost-usd"},
		{"cap NaN", []string{"cap", "--batch", "a1", "--max-cost-usd", "NaN"}, 2, `--max-cost-usd "NaN"`},
		{"cap infinite", []string{"cap", "--batch", "a1", "--max-cost-usd", "Inf"}, 2, `--max-cost-usd "Inf"`},
		{"cap shown", []string{"cap", "--batch", "a1"}, 0, "batch a1: cap none; spent 0 tokens"},
		{"cap", []string{"cap", "--batch", "a1", "--max-total-tokens", "5000"}, 0, "cap 5000 tokens; spent 0 tokens"},
		{"cap shown after it is set", []string{"cap", "--batch", "a1"}, 0, "batch a1: cap 5000 tokens; spent 0 tokens"},
		{"cap shown, no batch", []string{"cap", "--batch", "nope"}, 1, "no such batch"},
		{"cap already spent", []string{"cap", "--batch", "a1", "--max-total-tokens", "0"}, 0, "has already spent what the new cap allows"},
		{"cap removed", []string{"cap", "--batch", "a1", "--max-total-tokens", "none"}, 0, "cap none"},
		{"cap no batch", []string{"cap", "--batch", "nope", "--max-cost-usd", "1"}, 1, "no such batch"},
		{"cancel", []string{"cancel", "--batch", "a1"}, 0, "cancelled 2 jobs"},
		{"cancel again", []string{"cancel", "--batch", "a1"}, 0, "cancelled 0 jobs"},
		{"requeue cancelled, dry run", []string{"requeue", "--batch", "a1", "--status", "cancelled", "--dry-run"}, 0, "would requeue 2 jobs (2 cancelled) as run 2"},
		{"requeue cancelled", []string{"requeue", "--batch", "a1", "--status", "cancelled", "--model", "sim-other"}, 0, "requeued 2 jobs (2 cancelled) as run 2: openai/sim-other"},
		{"cancel no batch", []string{"cancel", "--batch", "nope"}, 1, "no such batch"},
		{"cancel typo", []string{"cancel", "--bach", "a1"}, 2, "flag provided but not defined: -bach: did you mean --batch? (see enqueue cancel --help)"},
		// A flag of another action is unknown to this one.
		{"cap given a requeue flag", []string{"cap", "--batch", "a1", "--status", "invalid"}, 2, "flag provided but not defined: -status (see enqueue cap --help)"},
		{"command typo", []string{"requeu", "--batch", "a1"}, 2, `unknown command "requeu": did you mean requeue?`},
		{"command typo, short", []string{"cpa", "--batch", "a1"}, 2, "did you mean cap?"},
		{"unknown command", []string{"frobnicate", "--batch", "a1"}, 2, `unknown command "frobnicate" (the commands are requeue, cancel and cap`},
		// The flags went to the enqueue command, which said cancel was an
		// unknown command while listing it.
		{"flags before the command", []string{"--progress=false", "cancel", "--batch", "a1"}, 2, `"cancel" comes first, before any flag: enqueue cancel [flags]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{tc.args[0], "--database-url", w.dsn}, tc.args[1:]...)
			if tc.args[0] == "requeue" {
				args = append(args, "--nats-url", "", "--nats-dir", w.dir, "--nats-listen", "127.0.0.1:1")
			}
			code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
			if code != tc.wantCode || !strings.Contains(out.String()+errOut.String(), tc.want) {
				t.Errorf("exit %d, output %q%q; want %d naming %q", code, out.String(), errOut.String(), tc.wantCode, tc.want)
			}
		})
	}
}

// A dollar cap on a model fixpoint has no price for is recorded with a
// warning: a worker enforces it only when its --prices lists the model.
func TestEnqueueWarnsOfAnUnpricedCap(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	data := w.file("rows.jsonl", rows)
	code, _, stderr := w.run("", append(w.args("u1", "--model", "fresh-model-2027", "--max-cost-usd", "1"), data)...)
	if code != 0 || !strings.Contains(stderr, "fresh-model-2027 has no price in fixpoint's table") {
		t.Errorf("exit %d, stderr %q; want 0 and a warning naming the model", code, stderr)
	}
	if code, _, stderr := w.run("", append(w.args("u2", "--max-cost-usd", "1"), data)...); code != 0 || strings.Contains(stderr, "no price") {
		t.Errorf("a priced model: exit %d, stderr %q; want no warning", code, stderr)
	}
}

// A setting, template or schema that cannot work is a usage error even
// when Postgres and NATS are out of reach: it is found before either is
// tried (had it tried them first, it would exit 1 about the connection).
func TestEnqueueUsageBeforeConnecting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data, tmpl, schema := file("rows.jsonl", rows), file("t.txt", "Name: {{.text}}"), file("s.json", testSchema)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"YAML schema", []string{"--schema", file("s.yaml", "type: object\n"), "--template", tmpl}, "YAML must be converted"},
		{"empty schema file", []string{"--schema", file("e.json", "\n"), "--template", tmpl}, "e.json is empty"},
		{"empty template file", []string{"--schema", schema, "--template", file("e.txt", " ")}, "e.txt is empty"},
		{"template syntax", []string{"--schema", schema, "--template", file("b.txt", "{{.text")}, "bad template"},
		{"unknown mode", []string{"--schema", schema, "--template", tmpl, "--mode", "yaml"}, `mode "yaml"`},
		{"unsatisfiable schema", []string{"--schema", file("self.json", `{"$ref":"#"}`), "--template", tmpl}, "no value satisfies"},
		// Named as typed, not as the job fields (token_budget) they set.
		{"negative token budget", []string{"--schema", schema, "--template", tmpl, "--token-budget", "-3"}, "--token-budget -3: want 0 or more"},
		{"negative retry budget", []string{"--schema", schema, "--template", tmpl, "--retry-budget", "-1"}, "--retry-budget -1: want 0 or more"},
		// Every job would fail before its first call (it enqueued 2,000
		// jobs that all failed, no attempt made).
		{"token budget below max tokens", []string{"--schema", schema, "--template", tmpl, "--token-budget", "1000"}, "token budget 1000 is not above max tokens 1024"},
		// The provider's row lacks the flex tier: named, before connecting.
		{"flex on anthropic", []string{"--schema", schema, "--template", tmpl, "--provider", "anthropic", "--delivery", "flex"}, "--delivery flex: provider anthropic has no flex tier (flex: openai)"},
		{"flex on mistral", []string{"--schema", schema, "--template", tmpl, "--provider", "mistral", "--delivery", "flex"}, "provider mistral has no flex tier"},
		{"delivery typo", []string{"--schema", schema, "--template", tmpl, "--delivery", "flx"}, `--delivery "flx": want realtime, batch or flex`},
		{"deadline of a flex batch", []string{"--schema", schema, "--template", tmpl, "--delivery", "flex", "--deadline", "2h"}, "--deadline is for --delivery batch"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantUsageError(t, append(tc.args, data), tc.want) })
	}
}

// wantUsageError runs enqueue with args (after a batch, a model and
// services nobody listens on) and wants exit 2 with want in its stderr.
func wantUsageError(t *testing.T, args []string, want string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"--database-url", "postgres://nobody@127.0.0.1:1/none", "--nats-url", "nats://127.0.0.1:1",
		"--batch", "u1", "--model", "m", "--progress=false"}, args...)
	code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), want) {
		t.Errorf("exit %d, stderr %q; want 2 naming %q", code, errOut.String(), want)
	}
}

// Each command's --help lists the environment it reads: cancel and cap
// touch only the ledger (cancel listed NATS_URL), enqueue and requeue
// the queue too.
func TestHelpListsTheCommandsEnvironment(t *testing.T) {
	t.Parallel()
	for args, wantNATS := range map[string]bool{"--help": true, "help": true, "requeue --help": true, "cancel --help": false, "cap --help": false} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), strings.Fields(args), strings.NewReader(""), &out, &errOut); code != 0 {
			t.Errorf("enqueue %s: exit %d", args, code)
		}
		if !strings.Contains(out.String(), "DATABASE_URL") || strings.Contains(out.String(), "NATS_URL ") != wantNATS {
			t.Errorf("enqueue %s lists NATS_URL %v, want %v:\n%s", args, !wantNATS, wantNATS, out.String())
		}
	}
}

// A dry run migrates nothing: on a ledger behind this binary it says so
// and estimates without it (a newer binary's dry run moved a shared ledger
// to a schema the running workers refused).
func TestEnqueueDryRunMigratesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	empty := storetest.NewEmptyDB(t)
	data := w.file("rows.jsonl", rows)
	var out, errOut bytes.Buffer
	args := append([]string{"--database-url", empty, "--nats-url", "", "--nats-dir", w.dir, "--nats-listen", "127.0.0.1:1", "--progress=false"},
		append(w.args("d1", "--dry-run"), data)...)
	if code := run(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("dry run on an empty ledger: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "the ledger is at migration 0 of this binary's") || !strings.Contains(out.String(), "read 2 rows: 2 would be jobs") {
		t.Errorf("dry run on an empty ledger:\nstdout %s\nstderr %s", out.String(), errOut.String())
	}
	st, err := store.Open(context.Background(), empty, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if applied, _, err := st.SchemaVersion(context.Background()); err != nil || applied != 0 {
		t.Errorf("after a dry run the ledger is at migration %d (%v), want 0: migrated nothing", applied, err)
	}
}

// A ledger made by an unreleased build is refused in one line, by a dry run
// as by a real run, and left as it is.
func TestEnqueueRefusesAnUnreleasedLedger(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dsn := storetest.NewEmptyDB(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `CREATE TABLE fixpoint_schema_version (version int4 NOT NULL); INSERT INTO fixpoint_schema_version VALUES (21)`); err != nil {
		t.Fatal(err)
	}
	data := w.file("rows.jsonl", rows)
	for _, extra := range [][]string{{"--dry-run"}, nil} {
		var out, errOut bytes.Buffer
		args := append([]string{"--database-url", dsn, "--nats-url", "", "--nats-dir", w.dir, "--nats-listen", "127.0.0.1:1", "--progress=false"},
			append(w.args("u1", extra...), data)...)
		code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
		if code != 1 || !strings.Contains(errOut.String(), "made by an unreleased build") || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 1 and one line saying so", extra, code, errOut.String())
		}
	}
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d tables after the refusals (%v); want the 1 it had", n, err)
	}
}

// enqueue --help lists every flag once, under its topic; a flag added to
// no group lands under "Other flags".
func TestHelpGroupsTheFlags(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, strings.NewReader(""), &out, &out); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	help := out.String()
	if strings.Contains(help, "Other flags") {
		t.Errorf("flags in no group:\n%s", help[strings.Index(help, "Other flags"):])
	}
	fs := newEnqueueFlags(&bytes.Buffer{}).fs
	n := 0
	for _, g := range enqueueFlagGroups {
		if !strings.Contains(help, "\n"+g.Title+":\n") {
			t.Errorf("no group %q", g.Title)
		}
		for _, name := range g.Flags {
			n++
			if fs.Lookup(name) == nil {
				t.Errorf("group %q names --%s, which enqueue does not have", g.Title, name)
			}
		}
	}
	if got := strings.Count(help, "\n  -"); got != n {
		t.Errorf("--help lists %d flags, the groups %d", got, n)
	}
}

// Two setups on one machine keeping the default listen address: an enqueue
// whose directory's server does not listen must not publish into the other
// setup's worker; it refuses (exit 2) and records nothing.
func TestEnqueueRefusesAnotherSetupsQueue(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	otherDir := t.TempDir()
	other, err := natsconn.StartServer(natsconn.ServerConfig{StoreDir: otherDir, Port: port, Ledger: "127.0.0.1:5432/other"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { other.Shutdown(); other.WaitForShutdown() }()
	hold, err := natsconn.StartServer(natsconn.ServerConfig{StoreDir: w.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { hold.Shutdown(); hold.WaitForShutdown() }()

	code, _, stderr := w.run("", append(w.args("misroute"), "--nats-listen", fmt.Sprintf("127.0.0.1:%d", port), w.file("rows.jsonl", rows))...)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{otherDir, w.dir, "FIXPOINT_NATS_LISTEN"} {
		if !strings.Contains(stderr, natsaddr.AbsDir(want)) && !strings.Contains(stderr, want) {
			t.Errorf("stderr does not name %s:\n%s", want, stderr)
		}
	}
	w.noBatch("misroute")
}

// The nightly cron line's first night: enqueue on a database that does
// not exist yet creates and migrates it, says so, and records the batch.
func TestEnqueueCreatesAMissingDatabase(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dsn, name := storetest.MissingDB(t)
	var out, errOut bytes.Buffer
	args := append([]string{"--database-url", dsn, "--nats-url", "", "--nats-dir", w.dir, "--nats-listen", "127.0.0.1:1", "--progress=false"},
		append(w.args("first"), w.file("rows.jsonl", rows))...)
	if code := run(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("enqueue on a missing database: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), "created the database "+name) {
		t.Errorf("stderr does not say it created %s:\n%s", name, errOut.String())
	}
	st, err := store.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if p, err := st.Progress(context.Background(), "first"); err != nil || p.Total != 2 {
		t.Errorf("batch first after enqueue: %+v %v; want 2 jobs", p, err)
	}
}

// A dry run against a database not made yet estimates without it, says
// so, and creates nothing.
func TestEnqueueDryRunOnAMissingDatabase(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dsn, name := storetest.MissingDB(t)
	var out, errOut bytes.Buffer
	args := append([]string{"--database-url", dsn, "--nats-url", "", "--nats-dir", w.dir, "--nats-listen", "127.0.0.1:1", "--progress=false"},
		append(w.args("dry", "--dry-run"), w.file("rows.jsonl", rows))...)
	if code := run(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("dry run on a missing database: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(errOut.String(), name+" does not exist") || !strings.Contains(out.String(), "read 2 rows: 2 would be jobs") {
		t.Errorf("dry run on a missing database:\nstdout %s\nstderr %s", out.String(), errOut.String())
	}
	if _, err := pgx.Connect(context.Background(), dsn); !store.IsNoDatabase(err) {
		t.Errorf("after a dry run, connecting to %s: %v; want it still missing", name, err)
	}
}

// A model with no price in fixpoint's table is enqueued with a warning
// naming it and how to price it; a priced model has none. A dry run says
// so in its estimate instead.
func TestEnqueueWarnsOfAnUnpricedModel(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	data := w.file("rows.jsonl", rows)
	code, _, stderr := w.run("", append(w.args("np1", "--model", "fresh-model-2027"), data)...)
	if code != 0 || !strings.Contains(stderr, "warning: fresh-model-2027 has no price in fixpoint's table") || !strings.Contains(stderr, "--prices") {
		t.Errorf("exit %d, stderr %q; want 0 and a warning naming the model and --prices", code, stderr)
	}
	if code, _, stderr := w.run("", append(w.args("np2", "--model", "gpt-4o-mini"), data)...); code != 0 || strings.Contains(stderr, "price") {
		t.Errorf("a priced model: exit %d, stderr %q; want no warning", code, stderr)
	}
}

// Asked for batch delivery, a batch that cannot have it (ollama has no
// batch API) is refused, exit 2, nothing recorded; --batch-fallback
// realtime runs it realtime with a warning.
func TestEnqueueRefusesBatchDeliveryItCannotHave(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	data := w.file("rows.jsonl", rows)
	code, _, stderr := w.run("", append(w.args("bd1", "--provider", "ollama", "--delivery", "batch"), data)...)
	if code != 2 || !strings.Contains(stderr, "ollama has no batch API") || !strings.Contains(stderr, "--batch-fallback realtime") {
		t.Errorf("exit %d, stderr %q; want 2 naming the reason and --batch-fallback", code, stderr)
	}
	w.noBatch("bd1")
	code, _, stderr = w.run("", append(w.args("bd2", "--provider", "ollama", "--delivery", "batch", "--batch-fallback", "realtime"), data)...)
	if code != 0 || !strings.Contains(stderr, "delivered realtime") {
		t.Errorf("with --batch-fallback realtime: exit %d, stderr %q; want 0 and a warning", code, stderr)
	}
	if code, _, stderr := w.run("", append(w.args("bd3", "--batch-fallback", "realtime"), data)...); code != 2 || !strings.Contains(stderr, "--batch-fallback is for --delivery batch") {
		t.Errorf("--batch-fallback without --delivery batch: exit %d, stderr %q; want 2", code, stderr)
	}
}

// The same rows enqueued from CSV into a batch first enqueued from JSONL
// are the same jobs: nothing changed, nothing new is enqueued.
func TestEnqueueSameRowsFromCSV(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	jsonl := w.file("rows.jsonl", `{"id":"a","text":"Ada wrote this","n":1.50,"ok":true}
{"id":"b","text":"Bo wrote that","n":null,"ok":false}
{"id":3,"text":"Cy, 3","n":2}
`)
	csv := w.file("rows.csv", "id,text,n,ok\na,Ada wrote this,1.50,true\nb,Bo wrote that,,false\n3,\"Cy, 3\",2,\n")
	if code, out, stderr := w.run("", append(w.args("fmt"), jsonl)...); code != 0 || !strings.Contains(out, "3 jobs recorded") {
		t.Fatalf("from JSONL: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := w.run("", append(w.args("fmt"), csv)...)
	if code != 0 || !strings.Contains(out, "3 already enqueued") {
		t.Errorf("the same rows from CSV: exit %d\n%s%s; want 0 and 3 already enqueued", code, out, stderr)
	}
	// A value the prompt does not show, changed, is still a change.
	edited := w.file("edited.csv", "id,text,n,ok\na,Ada wrote this,1.5,true\nb,Bo wrote that,,false\n3,\"Cy, 3\",2,\n")
	code, _, stderr = w.run("", append(w.args("fmt"), edited)...)
	if code != 1 || !strings.Contains(stderr, `id "a" was enqueued in batch fmt before with another input row`) {
		t.Errorf("a changed value from CSV: exit %d\n%s; want 1 naming row a", code, stderr)
	}
}

// A schema file with a syntax error is refused naming its line and column.
func TestEnqueueSchemaSyntaxErrorSaysWhere(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	schema := w.file("bad.json", "{\n  \"type\": \"object\",\n  \"properties\": {\n    \"name\": {\"type\": \"string\"},\n  }\n}\n")
	args := []string{"--batch", "syn", "--schema", schema, "--template", w.file("t.txt", "{{.text}}"), "--model", "sim-typical", "--id-field", "id",
		w.file("rows.jsonl", rows)}
	code, _, stderr := w.run("", args...)
	if code != 2 || !strings.Contains(stderr, "line 5, column 3") {
		t.Errorf("exit %d, stderr %q; want 2 naming line 5, column 3", code, stderr)
	}
}

// A property no value satisfies deep in a schema (a required self-loop
// under an optional property) leaves the schema satisfiable, and every
// reply that gives it fails: enqueue warns, naming where, before the run.
func TestEnqueueWarnsOfAnUnsatisfiableProperty(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	schema := w.file("loop.json", `{"type":"object","required":["name"],"properties":{"name":{"type":"string"},`+
		`"boss":{"type":"object","required":["boss"],"properties":{"boss":{"$ref":"#/properties/boss"}}}}}`)
	args := []string{"--batch", "loop", "--schema", schema, "--template", w.file("t.txt", "{{.text}}"), "--model", "sim-typical", "--id-field", "id",
		"--dry-run", w.file("rows.jsonl", rows)}
	code, _, stderr := w.run("", args...)
	if code != 0 || !strings.Contains(stderr, "warning: the schema at /properties/boss: no value satisfies") {
		t.Errorf("exit %d, stderr %q; want 0 and a warning naming /properties/boss", code, stderr)
	}
	if _, _, stderr := w.run("", append(w.args("fine", "--dry-run"), w.file("rows.jsonl", rows))...); strings.Contains(stderr, "no value satisfies") {
		t.Errorf("a schema with no such part: stderr %q", stderr)
	}
}

// --document-file-field reads a relative path from the dataset's
// directory, not the working directory, and the dry run counts the
// documents.
func TestEnqueueDocumentFilesBesideTheDataset(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dir := t.TempDir()
	doc := "Agreement between Ada Lovelace and Charles Babbage.\r\n"
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docs", "a.md"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(data, []byte(`{"id":"1","path":"docs/a.md"}`+"\n"+`{"id":"2","path":"docs/a.md"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--batch", "docs1", "--schema", w.file("s.json", testSchema), "--template", w.file("t.txt", "name a party of contract {{.id}}."),
		"--model", "sim-typical", "--id-field", "id", "--document-file-field", "path"}
	code, stdout, stderr := w.run("", append(args, "--dry-run", data)...)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("documents: 1 document, %d bytes", len(doc))) {
		t.Fatalf("dry run: exit %d, stdout %q, stderr %q; want 0 counting 1 document", code, stdout, stderr)
	}
	if code, _, stderr := w.run("", append(args, data)...); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	j, _, err := w.st.Job(context.Background(), "docs1:2")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := w.st.Document(context.Background(), j.DocumentHash); err != nil || got != doc {
		t.Fatalf("document of docs1:2: %q, %v; want %q", got, err, doc)
	}
}
