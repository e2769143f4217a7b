package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// TestCheckJSONLExitStatus: with --jsonl, a line that cannot be read still
// gets its output line, and then the exit status is 1 with a one-line count
// on stderr; replies that are merely not valid do not change the status.
func TestCheckJSONLExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		lines      []string
		wantCode   int
		wantStderr string // "" = stderr must be empty
		wantErrAt  []int  // output lines (1-based) that are error records
	}{
		{name: "every line read, some not valid", lines: []string{
			`{"id": 1, "text": "{\"sentiment\": \"positive\", \"score\": 1}"}`,
			`{"id": 2, "text": "nope"}`,
		}, wantCode: 0},
		{name: "unreadable lines", lines: []string{
			`{"id": 1, "text": "{\"sentiment\": \"positive\", \"score\": 1}"}`,
			``, // blank lines are skipped, not counted
			`not json at all`,
			`{"id": 3}`,
			`{"id": 4, "text": "{}", "schema": {"type": 12}}`,
		}, wantCode: 1, wantStderr: "worker check: 3 of 4 lines could not be read", wantErrAt: []int{2, 3, 4}},
		// A field written twice or in another case: the decoder kept the
		// last schema and read "Schema" as schema, in silence.
		{name: "fields twice or in another case", lines: []string{
			`{"id": 1, "text": "1", "id": 2}`,
			`{"id": 3, "text": "1", "schema": {"type": "integer"}, "schema": {"type": "string"}}`,
			`{"id": 4, "text": "1", "Schema": {"type": "string"}}`,
			`{"id": 5, "text": "{\"sentiment\": \"positive\", \"score\": 1}"}`,
			// A key twice inside another field is that field's business.
			`{"id": 6, "text": "{\"sentiment\": \"positive\", \"score\": 1}", "usage": {"n": 1, "n": 2}}`,
		}, wantCode: 1, wantStderr: "worker check: 3 of 5 lines could not be read", wantErrAt: []int{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"check", "--jsonl", "--schema", cliFile(t, "s.json", cliSchema), "-"},
				strings.NewReader(strings.Join(tt.lines, "\n")), &out, &errOut)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.wantCode, errOut.String())
			}
			if tt.wantStderr == "" && errOut.Len() != 0 {
				t.Errorf("stderr = %q, want nothing", errOut.String())
			}
			if tt.wantStderr != "" {
				if got := strings.TrimSuffix(errOut.String(), "\n"); !strings.HasPrefix(got, tt.wantStderr) || strings.Contains(got, "\n") {
					t.Errorf("stderr = %q, want one line starting %q", errOut.String(), tt.wantStderr)
				}
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			nonBlank := 0
			for _, l := range tt.lines {
				if strings.TrimSpace(l) != "" {
					nonBlank++
				}
			}
			if len(lines) != nonBlank {
				t.Fatalf("%d output lines, want %d:\n%s", len(lines), nonBlank, out.String())
			}
			for i, l := range lines {
				var got map[string]json.RawMessage
				if err := json.Unmarshal([]byte(l), &got); err != nil {
					t.Fatalf("output line %d is not JSON: %v", i+1, err)
				}
				_, isErr := got["error"]
				wantErr := false
				for _, n := range tt.wantErrAt {
					wantErr = wantErr || n == i+1
				}
				if isErr != wantErr {
					t.Errorf("output line %d error record = %v, want %v: %s", i+1, isErr, wantErr, l)
				}
			}
		})
	}
}

// worker check applies a batch's schema-guided repairs (safe by default) and
// lists each with its pointer, kind, before and after; --coerce none does
// not; a mode it does not know is a usage error.
func TestCheckCoerce(t *testing.T) {
	t.Parallel()
	schema := cliFile(t, "s.json", `{"type":"object","properties":{"n":{"type":"integer"},"tier":{"enum":["free","pro"]}},"required":["n","tier"]}`)
	reply := `{"n": "42", "tier": "Pro"}`
	check := func(args ...string) (int, map[string]any) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"check", "--schema", schema}, append(args, "-")...), strings.NewReader(reply), &out, &errOut)
		var res map[string]any
		if code != 2 {
			if err := json.Unmarshal(out.Bytes(), &res); err != nil {
				t.Fatalf("output %q: %v", out.String(), err)
			}
		}
		return code, res
	}
	code, res := check()
	if code != 0 || res["valid"] != true {
		t.Fatalf("default coerce: exit %d, %v; want valid", code, res)
	}
	repairs, _ := json.Marshal(res["repairs"])
	for _, want := range []string{`"pointer":"/n"`, `"before":"42"`, `"after":42`, `"pointer":"/tier"`, `"after":"pro"`} {
		if !strings.Contains(string(repairs), want) {
			t.Errorf("repairs %s lack %s", repairs, want)
		}
	}
	if v, _ := json.Marshal(res["value"]); string(v) != `{"n":42,"tier":"pro"}` {
		t.Errorf("value %s", v)
	}
	if code, res := check("--coerce", "none"); code != 1 || res["valid"] != false {
		t.Errorf("--coerce none: exit %d, %v; want not valid", code, res)
	}
	if code, _ := check("--coerce", "most"); code != 2 {
		t.Errorf("--coerce most: exit %d, want 2", code)
	}
}

// A setting that cannot work is a usage error naming the flag typed, found
// before the worker reaches for Postgres or NATS (both unreachable here: had
// it tried them first, it would exit 1 about the connection).
func TestRunRefusesSettingsThatCannotWork(t *testing.T) {
	t.Parallel()
	for flag, bad := range map[string]string{
		"--concurrency 100000000":     "", // ran out of memory sizing the write buffer
		"--jobs-ahead":                "-2",
		"--rpm":                       "-1",
		"--tpm":                       "-5",
		"--transport-retries":         "-1",
		"--lane-max-concurrency":      "-3",
		"--lane-initial-concurrency":  "-1",
		"--max-hint-wait":             "-1s",
		"--provider-timeout":          "0s",
		"--flex-timeout":              "0s",
		"--flex-fallback":             "realtime",
		"--flex-fallback-after":       "-1m",
		"--sim-latency-p50":           "-1s",
		"--sim-latency-p99 1ms":       "--sim-latency-p50=1s",
		"--max-deliver 0":             "",
		"--ack-wait 0s":               "",
		"--max-ack-pending 0":         "",
		"--wave-max-requests 0":       "",
		"--max-prompt-bytes 0":        "",
		"--transport-retries 1000000": "",
		"--stream-replicas 3":         "--nats-url=", // the embedded queue is one server
		"--budget":                    "clsuter",
	} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			args := append(strings.Fields(flag), bad)
			if bad == "" {
				args = strings.Fields(flag)
			}
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"run", "--sim", "clean", "--drain", "--metrics-addr", "off", "--start-timeout", "0",
				"--database-url", "postgres://nobody@127.0.0.1:1/none", "--nats-url", "nats://127.0.0.1:1"}, args...), strings.NewReader(""), &out, &errOut)
			name := strings.Fields(flag)[0]
			if code != 2 || !strings.Contains(errOut.String(), name+" ") {
				t.Errorf("%s %s: exit %d, stderr %q; want 2 naming %s", flag, bad, code, errOut.String(), name)
			}
		})
	}
	for flag, bad := range map[string]string{
		"--concurrency":          "0",
		"--grace":                "-1s",
		"--max-prompt-bytes":     "-1",
		"--write-buffer-bytes":   "-5",
		"--start-timeout":        "-1s",
		"--ack-wait":             "500ms",
		"--max-deliver":          "1",
		"--max-ack-pending":      "-1",
		"--duplicates-window":    "-1s",
		"--wave-max-requests":    "-5",
		"--wave-collect":         "-2s",
		"--wave-poll-min":        "-1s",
		"--wave-lease":           "10ms",
		"--wave-deadline-margin": "-1h",
		"--stream":               "a.b",
		"--subject":              "jobs.>",
		"--consumer":             "two words",
		"--stream-replicas":      "2",
		"--max-failure-rate":     "NaN",
		"--spill-dir":            "/dev/null/spill",
	} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"run", "--sim", "clean", "--drain", "--metrics-addr", "off", "--start-timeout", "0",
				"--database-url", "postgres://nobody@127.0.0.1:1/none", "--nats-url", "nats://127.0.0.1:1", flag, bad}, strings.NewReader(""), &out, &errOut)
			if code != 2 || !strings.Contains(errOut.String(), flag+" ") {
				t.Errorf("%s %s: exit %d, stderr %q; want 2 naming %s", flag, bad, code, errOut.String(), flag)
			}
		})
	}
}

// A word where a flag was expected is a usage error naming it: Go's flag
// package stops there, and the flags after it (here a --concurrency 0 the
// worker would refuse) were dropped while the worker ran and exited 0.
func TestCommandsRefuseStrayArguments(t *testing.T) {
	t.Parallel()
	unreachable := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none", "--nats-url", "nats://127.0.0.1:1", "--metrics-addr", "off", "--start-timeout", "0"}
	for _, args := range [][]string{
		append([]string{"run", "--sim", "clean", "--drain", "stray", "--concurrency", "0"}, unreachable...),
		append([]string{"--sim", "clean", "check", "reply.txt"}, unreachable...),
		{"migrate", "--database-url", "postgres://nobody@127.0.0.1:1/none", "stray"},
		{"demo", "--database-url", "postgres://nobody@127.0.0.1:1/none", "--rows", "5", "stray"},
		{"try", "--sim", "clean", "stray"},
		{"check", "a.txt", "b.txt"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "unexpected argument") && !strings.Contains(errOut.String(), "at most one input file") {
			t.Errorf("worker %q: exit %d, stderr %q; want 2 naming the stray argument", args, code, errOut.String())
		}
	}
}

// worker check reads flags after its input file too.
func TestCheckFlagsAfterTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reply, schema := dir+"/reply.txt", dir+"/schema.json"
	os.WriteFile(reply, []byte(`{"n": "42"}`), 0o644)
	os.WriteFile(schema, []byte(`{"type":"object","properties":{"n":{"type":"integer"}}}`), 0o644)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"check", reply, "--schema", schema, "--coerce", "none"}, strings.NewReader(""), &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), `"keyword":"type"`) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 with the type error (--coerce none read after the file)", code, out.String(), errOut.String())
	}
}

// --max-failure-rate without a batch to check would check nothing.
func TestRunFailureRateNeedsABatch(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"run", "--sim", "clean", "--drain", "--metrics-addr", "off", "--start-timeout", "0",
		"--database-url", "postgres://nobody@127.0.0.1:1/none", "--nats-url", "nats://127.0.0.1:1", "--max-failure-rate", "0.05"}, strings.NewReader(""), &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "it needs --drain --batch") {
		t.Errorf("exit %d, stderr %q; want 2 saying it needs --drain --batch", code, errOut.String())
	}
}

// worker check has nothing to finish at a stop: one SIGTERM ends it, as
// timeout(1) sends, even while it waits for its input or validates.
func TestCheckStopsAtTheFirstSignal(t *testing.T) {
	t.Parallel()
	bin := buildCommands(t)
	cmd := exec.Command(bin+"/worker", "check", "--jsonl", "-")
	stdin, err := cmd.StdinPipe() // never closed: check waits for more
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, w, err := os.Pipe() // read apart from Wait, which closes the pipes it made
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Results of more lines than its output buffer holds: the first bytes
	// out say it is reading its input, past the signal set-up (main's,
	// before any command runs), and it then waits for more.
	go func() {
		for range 200 {
			if _, err := io.WriteString(stdin, `{"id":1,"text":"{\"a\": 1}"}`+"\n"); err != nil {
				return
			}
		}
	}()
	read := make(chan error, 1)
	go func() {
		_, err := stdout.Read(make([]byte, 1))
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("worker check --jsonl wrote nothing: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("worker check --jsonl wrote no result in 30 s")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("worker check after SIGTERM: %v, want exit 130", err)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("worker check still running 10 s after SIGTERM")
	}
}

// --drain --batch with a batch the ledger does not have says so before it
// touches the queue (it drained the whole queue first): the NATS URL here
// has nothing behind it, so only a check made first can answer.
func TestRunDrainOfAnUnknownBatch(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDB(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"run", "--sim", "clean", "--drain", "--batch", "nosuch", "--metrics-addr", "off", "--start-timeout", "0",
		"--database-url", dsn, "--nats-url", "nats://127.0.0.1:1"}, strings.NewReader(""), &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), `no batch "nosuch" in the ledger`) {
		t.Errorf("exit %d, stderr %q; want 1 naming the batch", code, errOut.String())
	}
}

// --drain --batch on another queue than the batch's is refused before the
// queue is touched: it drained that queue and then called the batch's
// jobs lost, with a --resume that republished nothing.
func TestRunDrainOfABatchOnAnotherQueue(t *testing.T) {
	t.Parallel()
	dsn, st := newStore(t)
	for name, settings := range map[string]string{"dflt": `{}`, "own": `{"stream":"OWN","subject":"own.jobs"}`} {
		if err := st.PutBatch(context.Background(), store.BatchParams{Name: name, Settings: json.RawMessage(settings)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		batch string
		flags []string
		want  string
	}{
		{"dflt", []string{"--stream", "OTHER", "--subject", "other.jobs"}, "was enqueued on stream FIXPOINT_JOBS"},
		{"own", nil, "run it with --stream OWN --subject own.jobs"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"run", "--sim", "clean", "--drain", "--batch", tc.batch, "--metrics-addr", "off", "--start-timeout", "0",
			"--database-url", dsn, "--nats-url", "nats://127.0.0.1:1"}, tc.flags...), strings.NewReader(""), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%s %v: exit %d, stderr %q; want 2 saying %q", tc.batch, tc.flags, code, errOut.String(), tc.want)
		}
	}
}

// A schema file and a JSONL input saved with a byte order mark are read
// (the mark is not text): they failed with "invalid character 'ï'" and
// "not a JSON object" while enqueue read datasets with one.
func TestCheckReadsFilesWithABOM(t *testing.T) {
	t.Parallel()
	schema := filepath.Join(t.TempDir(), "schema.json")
	os.WriteFile(schema, []byte("\ufeff{\"type\":\"object\",\"required\":[\"n\"]}"), 0o644)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"check", "--schema", schema}, strings.NewReader(`{"n":1}`), &out, &errOut); code != 0 {
		t.Errorf("schema with a BOM: exit %d, stderr %q; want 0", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"check", "--jsonl"}, strings.NewReader("\ufeff{\"id\":1,\"text\":\"{}\"}\n"), &out, &errOut); code != 0 || !strings.Contains(out.String(), `"valid":true`) {
		t.Errorf("JSONL with a BOM: exit %d, stdout %q; want 0 and the line read", code, out.String())
	}
}

// A reply that is not UTF-8 is refused, naming the byte: read as it was,
// each bad byte became U+FFFD and the value was reported valid.
func TestCheckRefusesAReplyNotUTF8(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"check"}, strings.NewReader("{\"summary\":\"caf\xe9\"}"), &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "not UTF-8 (byte 0xe9 at offset 15)") || out.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 naming the byte, no result", code, out.String(), errOut.String())
	}
}

// worker check --jsonl keeps at most checkSchemaCacheMax compiled schemas,
// the most recent ones, however many distinct schemas the file brings.
func TestCheckSchemaCacheBounded(t *testing.T) {
	t.Parallel()
	c := newSchemaCache(4)
	for i := range 100 {
		src := fmt.Sprintf(`{"type":"object","properties":{"p%d":{"type":"integer"}}}`, i)
		s, err := afterSchema{}.compile([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		c.put(src, s)
		if len(c.m) > 4 || len(c.order) > 4 {
			t.Fatalf("after %d schemas the cache holds %d (%d in order), want at most 4", i+1, len(c.m), len(c.order))
		}
	}
	if _, ok := c.get(`{"type":"object","properties":{"p99":{"type":"integer"}}}`); !ok {
		t.Error("the last schema compiled is not cached")
	}
	if _, ok := c.get(`{"type":"object","properties":{"p0":{"type":"integer"}}}`); ok {
		t.Error("the first schema compiled is still cached")
	}
}
