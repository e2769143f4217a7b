package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every setting a document strategy cannot run with is a usage error (exit
// 2) naming the fix, before Postgres or NATS is reached.
func TestEnqueueDocumentStrategyUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data, tmpl, schema := file("rows.jsonl", rows), file("t.txt", "Name the parties."), file("s.json", testSchema)
	base := []string{"--schema", schema, "--template", tmpl}
	// Clipped: each case's append copies, instead of writing over the
	// cases before it in one shared array.
	doc := slices.Clip(append(base, "--document-field", "text"))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown strategy", append(base, "--strategy", "chunky"), `--strategy "chunky": want one of conversation, repair, patch, parallel, sequential, agent`},
		{"no document", append(base, "--strategy", "parallel"), "give --document-field F (a row field holding the text) or --document-file-field F"},
		{"agent without document", append(base, "--strategy", "agent"), "strategy agent runs over each job's document"},
		{"mode json_schema", append(doc, "--strategy", "sequential", "--mode", "json_schema"), "strategy sequential needs mode prompt, not json_schema"},
		{"mode tool", append(doc, "--strategy", "parallel", "--mode", "tool"), "needs mode prompt, not tool"},
		{"overlap not below size", append(doc, "--strategy", "parallel", "--chunk-tokens", "500", "--chunk-overlap", "500"), "--chunk-overlap 500 must be less than --chunk-tokens 500"},
		{"overlap over the default size", append(doc, "--strategy", "parallel", "--chunk-overlap", "5000"), "--chunk-overlap 5000 must be less than --chunk-tokens 4000"},
		{"tiny chunks", append(doc, "--strategy", "parallel", "--chunk-tokens", "10"), "--chunk-tokens 10: want 50 or more"},
		{"negative chunks", append(doc, "--strategy", "parallel", "--chunk-tokens", "-1"), "--chunk-tokens -1: want 50 or more"},
		{"negative overlap", append(doc, "--strategy", "parallel", "--chunk-overlap", "-1"), "--chunk-overlap -1: want 0 or more"},
		{"validation attempts", append(doc, "--strategy", "agent", "--max-validation-attempts", "21"), "--max-validation-attempts 21: want 1 to 20"},
		{"chunk flag without a document strategy", append(doc, "--chunk-tokens", "800"), "--chunk-tokens is for the document strategies (parallel, sequential, agent), not --strategy conversation"},
		{"strict without a document strategy", append(doc, "--strategy", "repair", "--strict"), "--strict is for the document strategies"},
		{"merge model under sequential", append(doc, "--strategy", "sequential", "--merge-model", "gpt-4o"), "--merge-model is for --strategy parallel, which merges the values of a document's chunks, not --strategy sequential"},
		{"merge model under the default strategy", append(doc, "--merge-model", "gpt-4o"), "--merge-model is for --strategy parallel, which merges the values of a document's chunks, not --strategy conversation"},
		{"empty merge model", append(doc, "--strategy", "parallel", "--merge-model", " "), "--merge-model is empty"},
		{"merge model in batch waves", append(doc, "--strategy", "parallel", "--merge-model", "gpt-4o", "--delivery", "batch"), "merge_model runs with realtime delivery only"},
		{"negative list passes", append(doc, "--strategy", "sequential", "--list-passes", "-1"), "--list-passes -1: want 0 (none) or more"},
		{"list passes of the agent", append(doc, "--strategy", "agent", "--list-passes", "2"), "--list-passes is for strategies parallel and sequential"},
		{"list passes without a document strategy", append(doc, "--list-passes", "2"), "--list-passes is for the document strategies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantUsageError(t, append(tc.args, data), tc.want)
		})
	}
}

// requeue --merge-model with another --strategy is a usage error before
// the ledger is reached.
func TestRequeueMergeModelUsage(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	args := []string{"requeue", "--database-url", "postgres://nobody@127.0.0.1:1/none", "--nats-url", "nats://127.0.0.1:1",
		"--batch", "u1", "--strategy", "repair", "--merge-model", "gpt-4o"}
	code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	if want := "--merge-model is for --strategy parallel"; code != 2 || !strings.Contains(errOut.String(), want) {
		t.Errorf("exit %d, stderr %q; want 2 naming %q", code, errOut.String(), want)
	}
}

// A document strategy's settings are recorded with the batch, and its dry
// run counts a call per chunk: a document of about 3,000 tokens in chunks
// of 1,000 overlapping by 100 is 4 calls, said to be a lower bound.
func TestEnqueueDocumentStrategy(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	text := strings.Repeat("The parties agree on the terms below. ", 316) // ~12,000 bytes, ~3,000 tokens
	data := w.file("docs.jsonl", `{"id":"a","doc":"`+text+`"}`+"\n")
	args := w.args("docs2", "--document-field", "doc", "--strategy", "parallel", "--chunk-tokens", "1000", "--chunk-overlap", "100", "--strict")
	args[5] = w.file("t.txt", "Name the parties of the contract.")
	code, stdout, stderr := w.run("", append(args, "--dry-run", data)...)
	if code != 0 || !strings.Contains(stdout, "1 job x 4.00 attempts (the chunks of each job's document)") || !strings.Contains(stdout, "a lower bound") {
		t.Fatalf("dry run: exit %d, stdout %q, stderr %q; want 4 chunk calls, a lower bound", code, stdout, stderr)
	}
	if code, _, stderr := w.run("", append(args, data)...); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	b, err := w.st.Batch(context.Background(), "docs2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"strategy":"parallel"`, `"chunk_tokens":1000`, `"chunk_overlap":100`, `"strict":true`, `"list_passes":3`} {
		if !strings.Contains(strings.ReplaceAll(string(b.Settings), " ", ""), want) {
			t.Errorf("batch settings %s lack %s", b.Settings, want)
		}
	}
}
