package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/sim"
)

func TestHelpListsPresets(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	err := run(context.Background(), []string{"--help"}, io.Discard, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run --help = %v, want flag.ErrHelp", err)
	}
	for _, p := range sim.PresetNames() {
		if !strings.Contains(stderr.String(), p.Name) || !strings.Contains(stderr.String(), p.Description) {
			t.Errorf("--help lacks preset %q: %s", p.Name, stderr.String())
		}
	}
	if exitCode(err, io.Discard) != 0 {
		t.Errorf("exit code of --help = %d, want 0", exitCode(err, io.Discard))
	}
}

func TestBadArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
	}{
		{"unknown preset", []string{"--preset", "nope"}},
		{"unknown flag", []string{"--nope"}},
		{"extra argument", []string{"serve"}},
		{"bad latency", []string{"--latency-p50", "-1s"}},
		{"expired share over 1", []string{"--batch-expired-share", "1.5"}},
		{"shares over 1", []string{"--batch-expired-share", "0.6", "--batch-errored-share", "0.6"}},
		{"no deadline", []string{"--batch-deadline", "0s"}},
		{"negative delay", []string{"--batch-completion-delay", "-1s"}},
		{"negative cancel delay", []string{"--batch-cancel-delay", "-1s"}},
		{"hit probability over 1", []string{"--batch-cache-hit-prob", "2"}},
		{"no cache ttl", []string{"--cache-ttl", "0s"}},
		{"unknown fault kind", []string{"--fault", "nope=0.1"}},
		{"fault without probability", []string{"--fault", "enum_case"}},
		{"fault probability not a number", []string{"--fault", "enum_case=lots"}},
		{"fault probability over 1", []string{"--fault", "number_prose=1.5"}},
		{"outcome faults over 1", []string{"--fault", "refusal=0.6,empty=0.6"}},
		{"negative rpm", []string{"--rpm", "-5"}},
		{"negative tpm", []string{"--tpm", "-7"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := run(context.Background(), tc.args, io.Discard, io.Discard)
			if !errors.Is(err, errUsage) {
				t.Fatalf("run(%v) = %v, want errUsage", tc.args, err)
			}
			if got := exitCode(err, io.Discard); got != 2 {
				t.Errorf("exit code = %d, want 2", got)
			}
		})
	}
}

func TestServesUntilCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--preset", "clean", "--seed", "5"}, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatal("no listening line")
	}
	var url string
	if _, err := fmt.Sscanf(lines.Text(), "simllm listening on %s", &url); err != nil {
		t.Fatalf("parse %q: %v", lines.Text(), err)
	}
	body := `{"model":"llama3","stream":false,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(url+"/api/chat", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"done":true`) {
		t.Fatalf("status %d body %s", resp.StatusCode, b)
	}
	hz, err := http.Get(url + "/healthz")
	if err != nil || hz.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", hz, err)
	}
	hz.Body.Close()
	// The counters while it runs (testers could read them only at its stop).
	st, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	var stats struct{ Requests, Replies int64 }
	if err := json.NewDecoder(st.Body).Decode(&stats); err != nil || stats.Requests != 1 || stats.Replies != 1 {
		t.Errorf("/stats: %+v (%v), want 1 request and 1 reply", stats, err)
	}
	st.Body.Close()
	cancel()
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run = %v, want nil after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestHelpListsBatchFlags(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	_ = run(context.Background(), []string{"--help"}, io.Discard, &stderr)
	for _, f := range []string{"batch-completion-delay", "batch-deadline", "batch-cancel-delay", "batch-expired-share",
		"batch-errored-share", "batch-cache-hit-prob", "prompt-cache", "cache-ttl", "anthropic-cache-min-tokens", "/v1/messages/batches"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("--help lacks %s", f)
		}
	}
}

// startRun runs simllm with args on a free port until the test ends and
// returns its URL.
func startRun(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatal("no listening line")
	}
	var url string
	if _, err := fmt.Sscanf(lines.Text(), "simllm listening on %s", &url); err != nil {
		t.Fatalf("parse %q: %v", lines.Text(), err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run = %v", err)
		}
	})
	return url
}

// TestBatchFlagsReachTheSimulator: with --batch-completion-delay 0 a batch
// has ended by its first poll, and --batch-errored-share 1 errors every
// request; without them a batch is still running at its first poll.
func TestBatchFlagsReachTheSimulator(t *testing.T) {
	t.Parallel()
	create := func(url string) map[string]any {
		params := `{"model":"sim-sonnet","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
		body := `{"requests":[{"custom_id":"a","params":` + params + `},{"custom_id":"b","params":` + params + `}]}`
		resp, err := http.Post(url+"/v1/messages/batches", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil || resp.StatusCode != 200 {
			t.Fatalf("create: %d %v", resp.StatusCode, err)
		}
		resp, err = http.Get(url + "/v1/messages/batches/" + b["id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b = nil
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := create(startRun(t, "--preset", "clean", "--batch-completion-delay", "0", "--batch-errored-share", "1"))
	if b["processing_status"] != "ended" || b["request_counts"].(map[string]any)["errored"] != 2.0 {
		t.Fatalf("with the flags: %v", b)
	}
	b = create(startRun(t, "--preset", "clean", "--batch-completion-delay", "1h"))
	if b["processing_status"] != "in_progress" {
		t.Fatalf("with a 1h delay: %v", b)
	}
	// A restart with the same seed hands out new batch ids: a worker still
	// polling the first run's batch gets a 404, not another batch.
	again := create(startRun(t, "--preset", "clean", "--batch-completion-delay", "1h"))
	if again["id"] == b["id"] {
		t.Fatalf("two runs with the same seed gave batch id %v twice", b["id"])
	}
}

func TestHelpListsFaultKinds(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	_ = run(context.Background(), []string{"--help"}, io.Discard, &stderr)
	help := stderr.String()
	for _, k := range sim.FaultKindInfos() {
		if !strings.Contains(help, "  "+string(k.Kind)+" ") || !strings.Contains(help, k.Description) {
			t.Errorf("--help lacks fault kind %s (%s)", k.Kind, k.Description)
		}
	}
	for _, want := range []string{"-fault", "kind=p", `"` + sim.PatchMarker + `"`} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestFaultFlagReachesTheSimulator: --fault scalar_as_string=1 on the clean
// preset writes the number as a string in every reply, and the last
// setting of a kind wins.
func TestFaultFlagReachesTheSimulator(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","required":["n"],"properties":{"n":{"type":"integer","minimum":1,"maximum":9}},"additionalProperties":false}`
	ask := func(url string) (string, string) {
		body := `{"model":"m","user":"u1","messages":[{"role":"user","content":"go"}],` +
			`"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":` + schema + `}}}`
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) != 1 {
			t.Fatalf("decode: %v", err)
		}
		return r.Choices[0].Message.Content, resp.Header.Get("X-Sim-Faults")
	}
	text, faults := ask(startRun(t, "--preset", "clean", "--fault", "enum_case=0.5,scalar_as_string=0.3", "--fault", "scalar_as_string=1"))
	if faults != "scalar_as_string:/n" || !strings.Contains(text, `"n":"`) {
		t.Fatalf("with --fault scalar_as_string=1: %s (faults %q)", text, faults)
	}
	if text, faults = ask(startRun(t, "--preset", "clean")); faults != "" || strings.Contains(text, `"n":"`) {
		t.Fatalf("without --fault: %s (faults %q)", text, faults)
	}
}
