package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint/pipeline"
)

// TestEnsureQueueRetriesAStoreTheServerCouldNotCreate: when the server
// answers 5xx because it could not create a stream's store at that moment,
// EnsureQueue tries again and succeeds once the cause is gone; when the
// cause stays, it fails after its tries with the server's answer, and the
// server's own reason reaches the log.
func TestEnsureQueueRetriesAStoreTheServerCouldNotCreate(t *testing.T) {
	dir := t.TempDir()
	var logBuf syncBuffer
	ns, err := startServer(dir, -1, &logBuf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A file where the stream's directory must go: the server cannot
	// create the store, and says so only in its log.
	block := func(stream string) string {
		streams := filepath.Join(dir, "jetstream", "$G", "streams")
		if err := os.MkdirAll(streams, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(streams, stream)
		if err := os.WriteFile(p, []byte("in the way"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// The server gives up on the store and removes what it made at the
	// path (here, the file in the way): the next try succeeds.
	block("Q_RECOVERS")
	cfg := pipeline.QueueConfig{Stream: "Q_RECOVERS", Subject: "q.recovers", Consumer: "w"}
	if _, _, err := pipeline.EnsureQueue(ctx, js, cfg); err != nil {
		t.Fatalf("EnsureQueue after the store became creatable: %v", err)
	}
	if _, err := js.Stream(ctx, "Q_RECOVERS"); err != nil {
		t.Fatalf("stream not there: %v", err)
	}
	if !strings.Contains(logBuf.String(), "Stream create failed for '$G > Q_RECOVERS': storage directory is not a directory") {
		t.Errorf("the server's reason is not in the log:\n%s", logBuf.String())
	}

	// A 4xx is the caller's to fix: another stream on the same subject is
	// refused (TestRetryJS shows a 4xx is not tried again).
	_, _, err = pipeline.EnsureQueue(ctx, js, pipeline.QueueConfig{Stream: "Q_OTHER", Subject: "q.recovers", Consumer: "w"})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.Code >= 500 {
		t.Fatalf("EnsureQueue with a conflicting stream config = %v, want a 4xx", err)
	}
}
