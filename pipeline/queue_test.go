package pipeline

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsureQueueRetriesAStoreTheServerCouldNotCreate: when the server
// answers 5xx because it could not create a stream's store at that moment,
// EnsureQueue tries again and succeeds once the cause is gone; when the
// cause stays, it fails after its tries with the server's answer, and the
// server's own reason reaches the log.
func TestEnsureQueueRetriesAStoreTheServerCouldNotCreate(t *testing.T) {
	dir := t.TempDir()
	var logBuf syncBuffer
	ns, err := StartEmbeddedNATS(EmbeddedNATSConfig{StoreDir: dir, Port: -1,
		Logger: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelWarn}))})
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
	cfg := QueueConfig{Stream: "Q_RECOVERS", Subject: "q.recovers", Consumer: "w"}
	if _, _, err := EnsureQueue(ctx, js, cfg); err != nil {
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
	_, _, err = EnsureQueue(ctx, js, QueueConfig{Stream: "Q_OTHER", Subject: "q.recovers", Consumer: "w"})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.Code >= 500 {
		t.Fatalf("EnsureQueue with a conflicting stream config = %v, want a 4xx", err)
	}
}

// TestRetryJS: what is tried again, how often, and what comes back.
func TestRetryJS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		err   error
		tries int
	}{
		{"server error", &jetstream.APIError{Code: 500, ErrorCode: 10049, Description: "error creating store for stream"}, queueSetupTries},
		{"unavailable", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, queueSetupTries},
		{"no responders", nats.ErrNoResponders, queueSetupTries},
		{"timeout", nats.ErrTimeout, queueSetupTries},
		{"bad request", &jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"}, 1},
		{"other", errors.New("boom"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tries := 0
			_, err := retryJS(ctx, func() (int, error) { tries++; return 0, tc.err })
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if tries != tc.tries {
				t.Fatalf("%d tries, want %d", tries, tc.tries)
			}
		})
	}
	tries := 0
	v, err := retryJS(ctx, func() (int, error) {
		if tries++; tries < 3 {
			return 0, nats.ErrNoResponders
		}
		return 7, nil
	})
	if v != 7 || err != nil || tries != 3 {
		t.Fatalf("retryJS = %d, %v after %d tries, want 7, nil after 3", v, err, tries)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	tries = 0
	if _, err := retryJS(done, func() (int, error) { tries++; return 0, nats.ErrNoResponders }); err == nil || tries > 1 {
		t.Fatalf("with ctx done: %v after %d tries", err, tries)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
