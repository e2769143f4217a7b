package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/cmd/internal/natsconn"
	"github.com/fixpoint-dev/fixpoint/internal/poll"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Finding 11 of issue 13: a worker started before NATS keeps trying (with
// /readyz not ready meanwhile) and runs once NATS is up; with
// --start-timeout 0 it fails at once, as before.
func TestWorkerWaitsForNATSAtStart(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDB(t)
	natsPort, opsPort := freePort(t), freePort(t)
	args := []string{"--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", natsPort), "--database-url", dsn, "--sim", "typical",
		"--stream", "START_T", "--subject", "fixpoint.start.t", "--consumer", "start-t", "--drain"}

	var out lockedBuffer
	if code := run(context.Background(), append(args, "--start-timeout", "0", "--metrics-addr", "off"), strings.NewReader(""), &out, &out); code != 1 {
		t.Fatalf("--start-timeout 0 with NATS down: exit %d, want 1\n%s", code, out.String())
	}

	var logs lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), append(args, "--start-timeout", "60s", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", opsPort)),
			strings.NewReader(""), &logs, &logs)
	}()
	readyz := func() (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", opsPort))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var code int
	var body string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last /readyz: %d %q\n%s", code, body, logs.String())
		}
	})
	poll.Until(t, 20*time.Second, "a not-ready /readyz and a log line while NATS is down", func() bool {
		code, body = readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "starting") && strings.Contains(logs.String(), "NATS not reachable yet")
	})
	select {
	case code := <-done:
		t.Fatalf("the worker gave up while NATS was down: exit %d\n%s", code, logs.String())
	default:
	}
	ns, err := natsconn.StartServer(natsconn.ServerConfig{StoreDir: t.TempDir(), Port: natsPort})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("worker exit %d once NATS was up, want 0 (drained)\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker did not run once NATS was up\n%s", logs.String())
	}
}

// Postgres down at start is retried the same way, up to --start-timeout.
func TestWorkerRetriesPostgresAtStart(t *testing.T) {
	t.Parallel()
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/fixpoint?sslmode=disable&connect_timeout=1", freePort(t))
	var logs lockedBuffer
	code := run(context.Background(), []string{"--database-url", dsn, "--start-timeout", "2s", "--metrics-addr", "off", "--sim", "typical"},
		strings.NewReader(""), &logs, &logs)
	if tries := strings.Count(logs.String(), "Postgres not reachable yet"); code != 1 || tries < 2 {
		t.Fatalf("exit %d after %d retries; want 1 after retrying within the start timeout\n%s", code, tries, logs.String())
	}
}

// A metrics address the operator chose and the worker cannot listen on
// ends the start (their scrapes and probes would fail unseen); a malformed
// one is a usage error. Both are said before Postgres or NATS is tried.
func TestWorkerChosenMetricsAddrTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	unreachable := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none", "--nats-url", "nats://127.0.0.1:1", "--start-timeout", "0", "--sim", "clean"}

	var out lockedBuffer
	code := run(context.Background(), append(unreachable, "--metrics-addr", taken.Addr().String()), strings.NewReader(""), &out, &out)
	if code != 1 || !strings.Contains(out.String(), "metrics address") || !strings.Contains(out.String(), taken.Addr().String()) ||
		strings.Contains(out.String(), "Postgres") {
		t.Errorf("taken --metrics-addr: exit %d, want 1 naming the address before Postgres is tried\n%s", code, out.String())
	}
	out = lockedBuffer{}
	for _, bad := range []string{"localhost", "127.0.0.1:99999"} {
		out = lockedBuffer{}
		code = run(context.Background(), append(unreachable, "--metrics-addr", bad), strings.NewReader(""), &out, &out)
		if code != 2 || !strings.Contains(out.String(), `--metrics-addr "`+bad+`"`) {
			t.Errorf("--metrics-addr %s: exit %d, want 2 naming it\n%s", bad, code, out.String())
		}
	}
}
