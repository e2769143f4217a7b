package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/llm/sim"
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
