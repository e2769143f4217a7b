package queue

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

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
