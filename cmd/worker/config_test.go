package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestEmbeddedNATSOnNoPortIsOurs: with --nats-listen on port 0 the embedded
// server listens nowhere, and the worker must still talk to it (in process),
// not to whatever server holds the default port on this machine.
func TestEmbeddedNATSOnNoPortIsOurs(t *testing.T) {
	t.Parallel()
	n := natsFlags{dir: t.TempDir(), addr: "127.0.0.1:0"}
	js, closeFn, err := n.connect(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const name = "FIXPOINT_TEST_IN_PROCESS"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"fixpoint.test.in-process"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(n.dir, "jetstream", "$G", "streams", name)); err != nil {
		_ = js.DeleteStream(ctx, name) // wherever it went
		t.Fatalf("the stream is not in the embedded server's store: %v", err)
	}
}
