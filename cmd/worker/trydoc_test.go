package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/sim"
)

// simAgreement writes a simulated 50,000-character agreement and its
// schema, and returns their paths.
func simAgreement(t *testing.T) (doc, schema string) {
	t.Helper()
	d, err := sim.NewDocument(3, 0, "en", sim.DocumentMinChars)
	if err != nil {
		t.Fatal(err)
	}
	return cliFile(t, "agreement.md", d.Text), cliFile(t, "schema.json", sim.DocumentSchema)
}

func runTry(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"try"}, args...), strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// worker try under the parallel strategy prints a card per chunk call
// with its offsets (a list pass's with its number: the simulator lists 50
// items a call, a chunk holds more), the merge as no call, and the
// verdict.
func TestTryDocumentCards(t *testing.T) {
	t.Parallel()
	doc, schema := simAgreement(t)
	code, out, errOut := runTry(t, "--sim", "clean", "--strategy", "parallel", "--document-file", doc, "--schema", schema,
		"--prompt", "Extract the agreement", "--max-tokens", "4000")
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, w := range []string{"chunk 0 [0, ", "chunk 0 pass 1 [", " merge ── ", " ── no call", "value: {", " steps, ", " calls, "} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// worker try --json under a document strategy prints the value and one
// attempt per call, each chunk call naming its chunk, and the merge
// marked as no call; the agent's turns list their tool calls.
func TestTryDocumentJSON(t *testing.T) {
	t.Parallel()
	doc, schema := simAgreement(t)
	type step struct {
		Step      string           `json:"step"`
		Call      bool             `json:"call"`
		Chunk     *struct{ N int } `json:"chunk"`
		ToolCalls []struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"tool_calls"`
	}
	var got struct {
		Status   string              `json:"status"`
		Value    json.RawMessage     `json:"value"`
		Attempts []step              `json:"attempts"`
		Totals   struct{ Calls int } `json:"totals"`
	}
	for _, s := range []string{"parallel", "agent"} {
		code, out, errOut := runTry(t, "--sim", "clean", "--strategy", s, "--document-file", doc, "--schema", schema,
			"--prompt", "Extract the agreement", "--max-tokens", "4000", "--json")
		if code != 0 && code != 1 {
			t.Fatalf("%s: exit %d\n%s%s", s, code, out, errOut)
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: --json printed no JSON object: %v\n%s", s, err, out)
		}
		calls, merges, tools := 0, 0, 0
		for _, a := range got.Attempts {
			switch {
			case a.Step == "merge" && !a.Call:
				merges++
			case a.Call:
				calls++
			}
			if a.Step == "chunk" && a.Chunk == nil {
				t.Errorf("%s: a chunk attempt names no chunk", s)
			}
			tools += len(a.ToolCalls)
		}
		if calls != got.Totals.Calls {
			t.Errorf("%s: %d attempts are calls, the totals say %d", s, calls, got.Totals.Calls)
		}
		switch s {
		case "parallel":
			if merges != 1 || calls < 2 {
				t.Errorf("parallel: %d calls and %d merges without a call, want a call per chunk and one merge", calls, merges)
			}
		case "agent":
			if tools == 0 || merges != 0 {
				t.Errorf("agent: %d tool calls, %d merges; want its turns' tool calls and no merge", tools, merges)
			}
		}
	}
}

// worker try --merge-model under parallel merges by a call: the merge
// step is a call, counted in the totals.
func TestTryMergeModel(t *testing.T) {
	t.Parallel()
	doc, schema := simAgreement(t)
	code, out, errOut := runTry(t, "--sim", "clean", "--strategy", "parallel", "--merge-model", "sim-merge", "--document-file", doc,
		"--schema", schema, "--prompt", "Extract the agreement", "--max-tokens", "4000", "--json")
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var got struct {
		Attempts []struct {
			Step      string `json:"step"`
			Call      bool   `json:"call"`
			TokensOut int    `json:"tokens_out"`
		} `json:"attempts"`
		Totals struct{ Calls int } `json:"totals"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json printed no JSON object: %v\n%s", err, out)
	}
	calls, mergeCalls := 0, 0
	for _, a := range got.Attempts {
		if a.Call {
			calls++
		}
		if a.Step == "merge" && a.Call && a.TokensOut > 0 {
			mergeCalls++
		}
	}
	if mergeCalls != 1 || calls != got.Totals.Calls {
		t.Errorf("%d merge calls, %d calls against totals of %d; want one merge call, counted\n%s", mergeCalls, calls, got.Totals.Calls, out)
	}
}

// Every setting a document strategy cannot run with is a usage error
// (exit 2) naming the fix.
func TestTryDocumentUsage(t *testing.T) {
	t.Parallel()
	doc, schema := simAgreement(t)
	base := []string{"--sim", "clean", "--schema", schema, "--prompt", "Extract the agreement"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown strategy", []string{"--strategy", "chunky"}, `--strategy "chunky": want one of conversation, repair, patch, parallel, sequential, agent`},
		{"no document", []string{"--strategy", "parallel"}, "--strategy parallel runs over a document: give --document-file F"},
		{"chunk flag without a document strategy", []string{"--chunk-tokens", "500"}, "--chunk-tokens is for the document strategies"},
		{"overlap not below size", []string{"--strategy", "sequential", "--document-file", doc, "--chunk-tokens", "500", "--chunk-overlap", "600"}, "--chunk-overlap 600 must be less than --chunk-tokens 500"},
		{"tiny chunks", []string{"--strategy", "parallel", "--document-file", doc, "--chunk-tokens", "3"}, "--chunk-tokens 3: want 50 or more"},
		{"validation attempts", []string{"--strategy", "agent", "--document-file", doc, "--max-validation-attempts", "-1"}, "--max-validation-attempts -1: want 1 to 20"},
		{"negative list passes", []string{"--strategy", "parallel", "--document-file", doc, "--list-passes", "-2"}, "--list-passes -2: want 0 (none) or more"},
		{"list passes of the agent", []string{"--strategy", "agent", "--document-file", doc, "--list-passes", "1"}, "--list-passes is for strategies parallel and sequential"},
		{"list passes without a document strategy", []string{"--list-passes", "1"}, "--list-passes is for the document strategies"},
		{"mode tool", []string{"--strategy", "parallel", "--document-file", doc, "--mode", "tool"}, "strategy parallel needs mode prompt, not tool"},
		{"merge model under sequential", []string{"--strategy", "sequential", "--document-file", doc, "--merge-model", "sim-merge"}, "--merge-model is for --strategy parallel"},
		{"missing file", []string{"--strategy", "parallel", "--document-file", "/nonexistent/doc.md"}, "read --document-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runTry(t, append(base, tc.args...)...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 naming %q\n%s", code, errOut, tc.want, out)
			}
		})
	}
}
