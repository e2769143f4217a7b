package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/internal/poll"
	"github.com/fixpoint-dev/fixpoint/sim"
	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// buildCommands builds enqueue and worker into a directory of the test.
func buildCommands(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir, "github.com/fixpoint-dev/fixpoint/cmd/enqueue", "github.com/fixpoint-dev/fixpoint/cmd/worker")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// ticketsDir is a fresh directory holding the demo's schema.json and
// template.txt, and tickets as tickets.jsonl.
func ticketsDir(t *testing.T, tickets string) string {
	t.Helper()
	work := t.TempDir()
	for name, body := range map[string]string{"schema.json": demoSchema, "template.txt": demoTemplate, "tickets.jsonl": tickets} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return work
}

// The nightly path of issue 13: on a machine with Postgres and no NATS
// server, one cron line of two commands, run in a clean directory,
// enqueues a dataset, processes it to the end and exits non-zero when the
// failure rate passes the threshold.
func TestNightlyCronLine(t *testing.T) {
	t.Parallel()
	bin := buildCommands(t)
	const rows = 60
	var data strings.Builder
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&data, `{"ticket_id":"T%03d","customer":"Ada","plan":"pro","order_id":"ORD-%05d","subject":"Charged twice","body":"Refund me, ticket %d."}`+"\n", i, i, i)
	}
	for _, tc := range []struct {
		name, preset, maxFail string
		wantCode              int
	}{
		{"under the threshold", "clean", "0.05", 0},
		{"over the threshold", "messy", "0", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			work := ticketsDir(t, data.String()) // a clean data directory: no .fixpoint yet
			dsn := storetest.NewDB(t)
			line := fmt.Sprintf(`%[1]s/enqueue --batch nightly --schema schema.json --template template.txt --model sim-%[2]s --id-field ticket_id tickets.jsonl &&
%[1]s/worker --drain --batch nightly --max-failure-rate %[3]s --sim %[2]s`, bin, tc.preset, tc.maxFail)
			cmd := exec.Command("sh", "-c", line)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "NATS_URL=", "FIXPOINT_NATS_LISTEN=127.0.0.1:0",
				"FIXPOINT_METRICS_ADDR=off", "LOG_LEVEL=warn")
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode || !strings.Contains(string(out), "batch nightly done") {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.wantCode, out)
			}
			st, err := store.Open(context.Background(), dsn, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			p, err := st.Progress(context.Background(), "nightly")
			if err != nil || p.Total != rows || p.Queued != 0 {
				t.Fatalf("ledger after the cron line: %+v %v; want %d jobs, all final", p, err, rows)
			}
			if _, err := os.Stat(filepath.Join(work, ".fixpoint", "nats", "jetstream")); err != nil {
				t.Errorf("the embedded queue is not in the working directory: %v", err)
			}
			// model_prices holds what the worker charges (SQL that reprices
			// attempts found no row for the models it priced).
			prices, err := st.Prices(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range prices {
				if p.Model == "claude-haiku-4-5" {
					found = p.Source == "worker" && p.InputPerMTok == 1 && p.BatchOutputPerMTok == 2.5
				}
			}
			if !found {
				t.Errorf("model_prices after the worker ran: %+v; want the worker's claude-haiku-4-5 row", prices)
			}
		})
	}
}

// A drained queue with jobs of the batch not final (their messages lost
// with the queue's directory) is exit 1 with the way out, which works.
func TestDrainedButLost(t *testing.T) {
	t.Parallel()
	bin := buildCommands(t)
	work, dsn := ticketsDir(t, demoDataset(30, 1)), storetest.NewDB(t)
	sh := func(line string) (int, string) {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "NATS_URL=", "FIXPOINT_NATS_LISTEN=127.0.0.1:0", "FIXPOINT_METRICS_ADDR=off", "LOG_LEVEL=warn")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := sh(bin + "/enqueue --batch b --schema schema.json --template template.txt --model sim-clean --id-field ticket_id tickets.jsonl"); code != 0 {
		t.Fatalf("enqueue: %d\n%s", code, out)
	}
	if err := os.RemoveAll(filepath.Join(work, ".fixpoint")); err != nil {
		t.Fatal(err)
	}
	code, out := sh(bin + "/worker --drain --batch b --sim clean")
	if code != 1 || !strings.Contains(out, "30 of 30 jobs of batch b are not final") || !strings.Contains(out, "enqueue --batch b --resume") {
		t.Fatalf("drain with the queue lost: exit %d, want 1 naming the lost jobs and --resume:\n%s", code, out)
	}
	if code, out := sh(bin + "/enqueue --batch b --resume && " + bin + "/worker --drain --batch b --sim clean --max-failure-rate 0"); code != 0 ||
		!strings.Contains(out, "30 republished") {
		t.Fatalf("resume then drain: exit %d\n%s", code, out)
	}
}

// A --drain run stopped before the queue is drained (a cron line's timeout,
// an operator's SIGTERM) exits 1 saying how much of the batch is left: it
// was asked to finish the work, and did not.
func TestDrainStoppedEarlyFails(t *testing.T) {
	t.Parallel()
	bin := buildCommands(t)
	dsn, st := newStore(t)
	work := ticketsDir(t, demoDataset(200, 1))
	env := append(os.Environ(), "DATABASE_URL="+dsn, "NATS_URL=", "FIXPOINT_NATS_LISTEN=127.0.0.1:0", "FIXPOINT_METRICS_ADDR=off", "LOG_LEVEL=warn")
	enq := exec.Command(bin+"/enqueue", "--batch", "b", "--schema", "schema.json", "--template", "template.txt", "--model", "sim-typical", "--id-field", "ticket_id", "tickets.jsonl")
	enq.Dir, enq.Env = work, env
	if out, err := enq.CombinedOutput(); err != nil {
		t.Fatalf("enqueue: %v\n%s", err, out)
	}
	w := exec.Command(bin+"/worker", "--drain", "--batch", "b", "--sim", "typical", "--sim-latency-p50", "200ms", "--concurrency", "2", "--grace", "5s")
	w.Dir, w.Env = work, env
	var out strings.Builder
	w.Stdout, w.Stderr = &out, &out
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	// Stop it once it runs the batch: 200 jobs at 2 calls at a time of
	// 200 ms each leave most of them to do.
	poll.Until(t, time.Minute, "the worker to finish a job", func() bool {
		p, err := st.Progress(context.Background(), "b")
		return err == nil && p.Total-p.Queued > 0
	})
	if err := w.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := w.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out.String(), "stopped before the queue was drained") ||
		!strings.Contains(out.String(), "of 200 jobs of batch b are not final yet") {
		t.Fatalf("drain stopped early: %v, want exit 1 saying what is left:\n%s", err, out.String())
	}
}

// A worker given a key the provider refuses exits 1 at start, before it
// pulls a job (the check lists the provider's models, which costs nothing):
// no job spends a delivery or gets a call. With the right key the batch runs.
func TestWorkerChecksTheKeyAtStart(t *testing.T) {
	t.Parallel()
	bin := buildCommands(t)
	work, dsn := ticketsDir(t, demoDataset(5, 1)), storetest.NewDB(t)
	srv, url, closeSim, err := sim.Start(sim.Config{APIKey: "sk-right"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeSim)
	env := append(os.Environ(), "DATABASE_URL="+dsn, "NATS_URL=", "FIXPOINT_NATS_LISTEN=127.0.0.1:0", "FIXPOINT_METRICS_ADDR=off", "LOG_LEVEL=warn")
	sh := func(key string, args ...string) (int, string) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = work, append(env, "OPENAI_API_KEY="+key)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := sh("", bin+"/enqueue", "--batch", "b", "--schema", "schema.json", "--template", "template.txt", "--model", "sim-clean", "--id-field", "ticket_id", "tickets.jsonl"); code != 0 {
		t.Fatalf("enqueue: %d\n%s", code, out)
	}
	worker := []string{bin + "/worker", "--drain", "--batch", "b", "--openai-base-url", url + "/v1"}
	code, out := sh("sk-wrong-SECRET7", worker...)
	if code != 1 || !strings.Contains(out, "openai refused the API key (asked for its model list at start)") || strings.Contains(out, "SECRET7") {
		t.Fatalf("worker with a wrong key: exit %d, want 1 saying the key was refused, without it:\n%s", code, out)
	}
	if st := srv.Stats(); st.Replies != 0 {
		t.Errorf("%d replies before the key was known good", st.Replies)
	}
	if code, out := sh("sk-right", worker...); code != 0 || !strings.Contains(out, "5 jobs, 0.0% not valid (valid 5,") {
		t.Fatalf("worker with the right key: exit %d\n%s", code, out)
	}
}
