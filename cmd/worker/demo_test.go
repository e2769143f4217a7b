package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// lockedBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Finding 6 of issue 13: an interrupted demo keeps its queue, and the
// command its last line prints finishes the batch.
func TestDemoInterruptedIsFinished(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDB(t)
	dir := filepath.Join(t.TempDir(), "demo-nats")
	st, err := store.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--database-url", dsn, "--nats-dir", dir, "--rows", "400",
			"--concurrency", "2", "--latency", "20ms"}, strings.NewReader(""), &stdout, &stderr)
	}()
	// Interrupt once some jobs are final and many are left.
	var batch string
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the demo finished no job in time:\n%s\n%s", stdout.String(), stderr.String())
		}
		rows, err := st.Summary(context.Background(), "")
		if err == nil && len(rows) == 1 && rows[0].Jobs == 400 && rows[0].Finished >= 20 {
			batch = rows[0].Batch
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	var code int
	select {
	case code = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the demo did not stop after the interrupt")
	}
	msg := stderr.String()
	if code != 1 || !strings.Contains(msg, "interrupted") || !strings.Contains(msg, "--nats-dir "+dir) {
		t.Fatalf("interrupted demo: exit %d, stderr %q; want exit 1 and how to finish", code, msg)
	}
	p, err := st.Progress(context.Background(), batch)
	if err != nil || p.Queued == 0 {
		t.Fatalf("after the interrupt: %+v %v; want jobs left", p, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatalf("the demo's queue is gone: %v", err)
	}
	// The printed worker command, on the same ledger, finishes the batch.
	m := regexp.MustCompile(`worker (--drain --batch \S+ --sim \S+ --nats-dir \S+)`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no worker command in %q", msg)
	}
	args := append(strings.Fields(m[1]), "--database-url", dsn, "--nats-listen", "127.0.0.1:0", "--metrics-addr", "off")
	var wout, werr lockedBuffer
	if code := run(context.Background(), args, strings.NewReader(""), &wout, &werr); code != 0 {
		t.Fatalf("worker %v: exit %d\n%s", args, code, werr.String())
	}
	p, err = st.Progress(context.Background(), batch)
	if err != nil || p.Queued != 0 || p.Total != 400 {
		t.Fatalf("after the worker: %+v %v; want all 400 final", p, err)
	}
}

// The demo's settings are checked before anything starts: a typo is a usage
// error naming the flag, not a half-run demo (Postgres is unreachable
// here, so a check made later would exit 1 about the connection).
func TestDemoRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--concurrency", "-3"}, {"--latency", "-1s"}, {"--provider", "openia"}, {"--mode", "jsn"}, {"--rows", "0"},
		{"--strategy", "foo"}, {"--strategy", "patch", "--mode", "json_schema"}, {"--concurrency", "100000"}, {"stray"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"demo", "--database-url", "postgres://nobody@127.0.0.1:1/none"}, args...), strings.NewReader(""), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), strings.TrimPrefix(args[0], "-")) {
			t.Errorf("demo %v: exit %d, stderr %q; want 2 naming %s", args, code, errOut.String(), args[0])
		}
	}
}

// The psql line the demo prints points at the ledger it used, without its
// password.
func TestWithoutPassword(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable": "postgres://postgres@127.0.0.1:5432/fixpoint?sslmode=disable",
		"postgres://u:s3cret@db:5432/ledger":                          "postgres://u@db:5432/ledger",
		"postgresql://db/ledger":                                      "postgresql://db/ledger",
		"host=db user=u password=s3cret dbname=ledger":                "host=db user=u dbname=ledger",
		"host=db password='s3 cret' dbname=ledger":                    "host=db dbname=ledger",
	} {
		if got := withoutPassword(in); got != want {
			t.Errorf("withoutPassword(%q) = %q, want %q", in, got, want)
		}
	}
}
