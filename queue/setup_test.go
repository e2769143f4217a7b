package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/internal/syncbuf"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// TestEnsureRetriesAStoreTheServerCouldNotCreate: when the server
// answers 5xx because it could not create a stream's store at that moment,
// Ensure tries again and succeeds once the cause is gone; when the
// cause stays, it fails after its tries with the server's answer, and the
// server's own reason reaches the log.
func TestEnsureRetriesAStoreTheServerCouldNotCreate(t *testing.T) {
	dir := t.TempDir()
	var logBuf syncbuf.Buffer
	js := serverJS(t, dir, &logBuf)
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
	cfg := queue.Config{Stream: "Q_RECOVERS", Subject: "q.recovers", Consumer: "w"}
	if _, _, err := queue.Ensure(ctx, js, cfg); err != nil {
		t.Fatalf("Ensure after the store became creatable: %v", err)
	}
	if _, err := js.Stream(ctx, "Q_RECOVERS"); err != nil {
		t.Fatalf("stream not there: %v", err)
	}
	if !strings.Contains(logBuf.String(), "Stream create failed for '$G > Q_RECOVERS': storage directory is not a directory") {
		t.Errorf("the server's reason is not in the log:\n%s", logBuf.String())
	}

	// A 4xx is the caller's to fix: another stream on the same subject is
	// refused (TestRetryJS shows a 4xx is not tried again).
	_, _, err := queue.Ensure(ctx, js, queue.Config{Stream: "Q_OTHER", Subject: "q.recovers", Consumer: "w"})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.Code >= 500 {
		t.Fatalf("Ensure with a conflicting stream config = %v, want a 4xx", err)
	}
}

// HoldsBatch tells a batch whose messages the queue holds (waiting or
// in flight) from one whose messages it does not: no stream, an empty one,
// only other batches', its own acked. Past scanMax messages it cannot say
// and reports held.
func TestHoldsBatch(t *testing.T) {
	t.Parallel()
	js := serverJS(t, t.TempDir(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := queue.Config{Stream: "Q_HOLDS", Subject: "q.holds", Consumer: "w"}
	holds := func(batch string, scanMax int) bool {
		t.Helper()
		held, err := queue.HoldsBatch(ctx, js, cfg, batch, scanMax)
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	if holds("a", 100) {
		t.Error("no stream: held, want not")
	}
	_, cons, err := queue.Ensure(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if holds("a", 100) {
		t.Error("an empty stream: held, want not")
	}
	publish := func(batch, id string) {
		t.Helper()
		env := &queue.Envelope{V: queue.EnvelopeVersion, JobID: id, Batch: batch, Prompt: "p", SchemaHash: "h",
			Provider: "openai", Model: "m", Mode: "prompt", Limits: fixpoint.Limits{MaxAttempts: 1}.WithDefaults()}
		if _, err := queue.Publish(ctx, js, cfg, env); err != nil {
			t.Fatal(err)
		}
	}
	publish("b", "b:1")
	publish("a", "a:1")
	if holds("c", 100) {
		t.Error("only other batches' messages: held, want not")
	}
	if !holds("a", 100) || !holds("b", 100) {
		t.Error("a batch's waiting message: not held")
	}
	if !holds("a", 1) {
		t.Error("past scanMax: not held, want held (it cannot say)")
	}
	// In flight (fetched, not acked): held; acked: gone.
	msgs, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range msgs.Messages() {
		got = append(got, m)
	}
	if len(got) != 2 {
		t.Fatalf("fetched %d messages, want 2", len(got))
	}
	if !holds("a", 100) {
		t.Error("a message in flight: not held")
	}
	for _, m := range got {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if holds("a", 100) || holds("b", 100) {
		t.Error("acked messages: held, want not")
	}
}

// Workers started together on a queue that does not exist yet all set it
// up: the server may tell one that its stream's subjects overlap the
// stream another is creating, which is the same stream (one of two workers
// started together exited 1 so).
func TestEnsureTogether(t *testing.T) {
	js := serverJS(t, t.TempDir(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for round := range 10 {
		cfg := queue.Config{Stream: fmt.Sprintf("Q_TOGETHER_%d", round), Subject: fmt.Sprintf("q.together.%d", round), Consumer: "w"}
		errs := make(chan error, 6)
		for range 6 {
			go func() {
				_, _, err := queue.Ensure(ctx, js, cfg)
				errs <- err
			}()
		}
		for range 6 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: Ensure of workers started together: %v", round, err)
			}
		}
	}
}

// Replicas on a server that runs alone: refused at once, not tried again
// until SetupWait, with what to do; 1 replica works there.
func TestEnsureReplicasOnALoneServer(t *testing.T) {
	t.Parallel()
	js := serverJS(t, t.TempDir(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err := queue.Ensure(ctx, js, queue.Config{Stream: "Q_ALONE", Subject: "q.alone", Consumer: "w", Replicas: 3})
	if err == nil || !strings.Contains(err.Error(), "3 replicas need a JetStream cluster") {
		t.Fatalf("Ensure of 3 replicas on a lone server: %v, want an error saying it needs a cluster", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refused after %s: tried again", d)
	}
	if _, _, err := queue.Ensure(ctx, js, queue.Config{Stream: "Q_ALONE", Subject: "q.alone", Consumer: "w", Replicas: 1}); err != nil {
		t.Fatalf("1 replica on a lone server: %v", err)
	}
}
