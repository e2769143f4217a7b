package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// PublishAll with more messages than its window into a stream that holds
// fewer: the stream stores the first ones, each with its result; the rest
// are refused, tried again and reported with the server's error, without
// being counted published; a message over the size limit is a bad job and
// is never sent. Published again, the stored ones are duplicates.
func TestPublishAllReportsEachMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := serverJS(t, t.TempDir(), nil)
	const n, room = queue.PublishWindow*2 + 10, queue.PublishWindow + 50
	cfg := queue.Config{Stream: "PA", Subject: "pa.jobs", Consumer: "pa", MaxMsgs: room, MaxMsgSize: 4096}
	if _, _, err := queue.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	envs := make([]queue.Envelope, n)
	for i := range envs {
		envs[i] = queue.Envelope{JobID: fmt.Sprintf("b:%d", i), Batch: "b", Prompt: "p", Provider: "openai", Model: "m"}
	}
	envs[3].Prompt = strings.Repeat("x", 8192)
	res, err := queue.PublishAll(ctx, js, cfg, envs)
	if err != nil {
		t.Fatal(err)
	}
	stored, refused := 0, 0
	for i, r := range res {
		switch {
		case i == 3:
			if !errors.Is(r.Err, fixpoint.ErrBadJob) {
				t.Errorf("message over the size limit: %v, want ErrBadJob", r.Err)
			}
		case r.Err == nil && !r.Duplicate:
			stored++
		case r.Err != nil && !errors.Is(r.Err, fixpoint.ErrBadJob):
			refused++
		default:
			t.Errorf("message %d: %+v", i, r)
		}
	}
	if stored != room || refused != n-1-room {
		t.Fatalf("stored %d, refused %d; want %d, %d", stored, refused, room, n-1-room)
	}
	s, err := js.Stream(ctx, "PA")
	if err != nil {
		t.Fatal(err)
	}
	if si, err := s.Info(ctx); err != nil || si.State.Msgs != room {
		t.Fatalf("stream holds %v messages (%v), want %d", si.State.Msgs, err, room)
	}
	again, err := queue.PublishAll(ctx, js, cfg, envs[:10])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if i != 3 && (r.Err != nil || !r.Duplicate) {
			t.Errorf("message %d published again: %+v, want a duplicate", i, r)
		}
	}
}
