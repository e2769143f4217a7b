package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

const cliSchema = `{"type":"object","properties":{"sentiment":{"enum":["negative","neutral","positive"]},"score":{"type":"number","minimum":0,"maximum":1}},"required":["sentiment","score"],"additionalProperties":false}`

func cliFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckCommand(t *testing.T) {
	t.Parallel()
	schema := cliFile(t, "s.json", cliSchema)
	tests := []struct {
		name      string
		args      []string
		stdin     string
		wantCode  int
		wantValid bool
		wantClass string
		wantSrc   string
		wantInErr string
	}{
		{name: "fenced and repaired", args: []string{"--schema", schema}, stdin: "Sure:\n```json\n{'sentiment': 'positive', 'score': 0.9,}\n```",
			wantCode: 0, wantValid: true, wantSrc: "fence"},
		{name: "enum violation", args: []string{"--schema", schema}, stdin: `{"sentiment": "great", "score": 0.9}`,
			wantCode: 1, wantClass: "semantic", wantSrc: "raw"},
		{name: "missing property", args: []string{"--schema", schema}, stdin: `{"score": 0.9}`, wantCode: 1, wantClass: "shape", wantSrc: "raw"},
		{name: "no JSON", args: []string{"--schema", schema}, stdin: "I'm sorry, I can't help with that.", wantCode: 1, wantClass: "syntax"},
		{name: "truncated is never valid", args: []string{"--schema", schema}, stdin: `{"sentiment": "positive", "score": 0.`, wantCode: 1, wantClass: "syntax", wantSrc: "raw"},
		{name: "no schema: any value", stdin: `text {"a": 1} text`, wantCode: 0, wantValid: true, wantSrc: "scan"},
		{name: "unreadable schema", args: []string{"--schema", cliFile(t, "bad.json", "{nope")}, stdin: "{}", wantCode: 2, wantInErr: "schema"},
		{name: "missing schema file", args: []string{"--schema", "/nonexistent/s.json"}, stdin: "{}", wantCode: 2, wantInErr: "read schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"check"}, tt.args...), strings.NewReader(tt.stdin), &out, &errOut)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.wantCode, errOut.String())
			}
			if tt.wantInErr != "" {
				if !strings.Contains(errOut.String(), tt.wantInErr) {
					t.Errorf("stderr %q lacks %q", errOut.String(), tt.wantInErr)
				}
				return
			}
			var got struct {
				Valid     bool              `json:"valid"`
				Value     any               `json:"value"`
				Class     string            `json:"class"`
				Errors    []json.RawMessage `json:"errors"`
				Repairs   []json.RawMessage `json:"repairs"`
				Source    string            `json:"source"`
				Truncated bool              `json:"truncated"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
			}
			if got.Valid != tt.wantValid || got.Class != tt.wantClass || got.Source != tt.wantSrc {
				t.Errorf("valid=%v class=%q source=%q, want %v %q %q\n%s", got.Valid, got.Class, got.Source, tt.wantValid, tt.wantClass, tt.wantSrc, out.String())
			}
			if got.Errors == nil || got.Repairs == nil {
				t.Errorf("errors and repairs must be arrays, never null: %s", out.String())
			}
			if got.Valid != (len(got.Errors) == 0) {
				t.Errorf("valid=%v with %d errors", got.Valid, len(got.Errors))
			}
		})
	}
}

func TestCheckJSONL(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"id": 1, "text": "{\"sentiment\": \"positive\", \"score\": 1}"}`,
		`{"id": "b", "text": "nope"}`,
		`not json at all`,
		`{"id": 4, "text": "{\"x\": 1}", "schema": {"type": "object", "required": ["y"]}}`,
	}, "\n")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"check", "--jsonl", "--schema", cliFile(t, "s.json", cliSchema), "-"}, strings.NewReader(in), &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1: line 3 could not be read (stderr %q)", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d output lines, want 4 in input order:\n%s", len(lines), out.String())
	}
	want := []struct {
		id    string
		valid bool
		class string
	}{{"1", true, ""}, {`"b"`, false, "syntax"}, {"null", false, ""}, {"4", false, "shape"}}
	for i, w := range want {
		var got map[string]json.RawMessage
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if string(got["id"]) != w.id {
			t.Errorf("line %d id = %s, want %s", i+1, got["id"], w.id)
		}
		if i == 2 {
			if _, ok := got["error"]; !ok || string(got["line"]) != "3" {
				t.Errorf("unreadable line 3 not reported with its number: %s", lines[i])
			}
			continue
		}
		if string(got["valid"]) != map[bool]string{true: "true", false: "false"}[w.valid] || string(got["class"]) != `"`+w.class+`"` {
			t.Errorf("line %d = %s, want valid=%v class=%q", i+1, lines[i], w.valid, w.class)
		}
	}
}

func TestTryCommand(t *testing.T) {
	t.Parallel()
	schema := cliFile(t, "s.json", cliSchema)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
		wantErr  string
	}{
		{name: "clean converges", args: []string{"--sim", "clean", "--prompt", "Rate: great product"}, wantCode: 0,
			want: []string{"attempt 1", "VALID on first attempt"}},
		{name: "json result", args: []string{"--sim", "messy", "--prompt", "Rate: meh", "--json", "--max-attempts", "4", "--provider", "anthropic", "--mode", "tool"},
			want: []string{`"status": "valid"`, `"attempts": [`}},
		{name: "no prompt", args: []string{"--sim", "clean"}, wantCode: 2},
		{name: "bad mode", args: []string{"--sim", "clean", "--prompt", "x", "--mode", "yaml"}, wantCode: 2},
		{name: "bad provider", args: []string{"--sim", "clean", "--prompt", "x", "--provider", "cohere"}, wantCode: 2},
		{name: "stray argument", args: []string{"--sim", "clean", "--prompt", "x", "oops", "--json"}, wantCode: 2, wantErr: `unexpected argument "oops"`},
		{name: "negative max tokens", args: []string{"--sim", "clean", "--prompt", "x", "--max-tokens", "-5"}, wantCode: 2, wantErr: "max_tokens -5"},
		{name: "blank prompt", args: []string{"--sim", "clean", "--prompt", " \n"}, wantCode: 2, wantErr: "the prompt is empty"},
		{name: "empty prompt", args: []string{"--sim", "clean", "--prompt", ""}, wantCode: 2, wantErr: "--prompt is empty"},
		{name: "prompt not UTF-8", args: []string{"--sim", "clean", "--prompt", "caf\xe9"}, wantCode: 2, wantErr: "not UTF-8"},
		{name: "prompt over the workers' limit", args: []string{"--sim", "clean", "--prompt", strings.Repeat("x", 300<<10)}, wantCode: 2, wantErr: "over the workers' limit"},
		{name: "unsatisfiable schema", args: []string{"--sim", "clean", "--prompt", "x", "--schema", cliFile(t, "self.json", `{"$ref":"#"}`)}, wantCode: 2, wantErr: "no value satisfies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			args := append([]string{"try", "--schema", schema}, tt.args...)
			code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
			if code != tt.wantCode || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Fatalf("exit %d, want %d naming %q\nstdout: %s\nstderr: %s", code, tt.wantCode, tt.wantErr, out.String(), errOut.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestTryShowsFeedback runs a model that never gets it right (the
// simulator writes no integer a "not" excludes, here every one from 0 up)
// and checks the cards show the errors and the exact feedback sent next,
// and exit 1.
func TestTryShowsFeedback(t *testing.T) {
	t.Parallel()
	schema := cliFile(t, "s.json", `{"type":"object","properties":{"n":{"type":"integer","not":{"minimum":0}}},"required":["n"]}`)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"try", "--schema", schema, "--sim", "clean", "--prompt", "x", "--max-attempts", "2"}, strings.NewReader(""), &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1 for a schema the simulator cannot meet\n%s%s", code, out.String(), errOut.String())
	}
	for _, w := range []string{"── attempt 1 ── INVALID", "feedback sent next:", "/n", "── attempt 2 ── INVALID", "INVALID after 2 attempts"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

// A --jsonl line that is not a record, or whose inline schema no value
// satisfies, is reported by what is wrong with it.
func TestCheckJSONLBadLines(t *testing.T) {
	t.Parallel()
	in := `{"id":1,"text":42}` + "\nnull\n" + `{"id":3,"text":"{}","schema":{"$ref":"#"}}` + "\n"
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"check", "--jsonl"}, strings.NewReader(in), &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1 (lines could not be read)", code)
	}
	for _, want := range []string{`"text\" is a JSON number, want a string`, `"not a JSON object"`, `no value satisfies the schema`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// worker try --sim keys the simulator's draws on the job's input: several
// prompts do not all get the same first reply, the preset's fault mix shows
// (messy gets some first reply wrong), and one prompt gets the same reply
// each time (for one --sim-seed), another seed other draws.
func TestTrySimDrawsVaryByPrompt(t *testing.T) {
	t.Parallel()
	schema := cliFile(t, "s.json", cliSchema)
	type attempt struct {
		Raw     string            `json:"raw"`
		Valid   bool              `json:"valid"`
		Repairs []fixpoint.Repair `json:"repairs"`
	}
	first := func(prompt string, extra ...string) attempt {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"try", "--schema", schema, "--sim", "messy", "--json", "--prompt", prompt}, extra...)
		if code := run(context.Background(), args, strings.NewReader(""), &out, &errOut); code > 1 {
			t.Fatalf("worker try --prompt %q: exit %d\n%s", prompt, code, errOut.String())
		}
		var res struct{ Attempts []attempt }
		if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Attempts) == 0 {
			t.Fatalf("worker try --prompt %q: %v, %d attempts\n%s", prompt, err, len(res.Attempts), out.String())
		}
		return res.Attempts[0]
	}
	replies := map[string]bool{}
	faulty := 0
	for i := range 8 {
		a := first(fmt.Sprintf("Review %d: the product is fine", i))
		replies[a.Raw] = true
		if !a.Valid || len(a.Repairs) > 0 {
			faulty++
		}
	}
	if len(replies) < 4 {
		t.Errorf("8 prompts got %d distinct first replies, want them to vary with the prompt", len(replies))
	}
	if faulty == 0 {
		t.Error("messy gave 8 clean first replies: the preset's fault mix does not show")
	}
	if a, b := first("Review 0: the product is fine"), first("Review 0: the product is fine"); a.Raw != b.Raw {
		t.Errorf("one prompt got two first replies:\n%s\n%s", a.Raw, b.Raw)
	}
	seeds := map[string]bool{}
	for _, seed := range []string{"1", "2", "3", "4"} {
		seeds[first("Review 0: the product is fine", "--sim-seed", seed).Raw] = true
	}
	if len(seeds) < 2 {
		t.Error("4 simulator seeds gave one prompt the same first reply")
	}
}
