package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRetryJS: what is tried again, until when, and what comes back.
func TestRetryJS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		err   error
		again bool
	}{
		{"server error", &jetstream.APIError{Code: 500, ErrorCode: 10049, Description: "error creating store for stream"}, true},
		{"unavailable", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{"no peers", &jetstream.APIError{Code: 400, ErrorCode: jsErrNoPeers, Description: "no suitable peers for placement"}, true},
		{"no responders", nats.ErrNoResponders, true},
		{"timeout", nats.ErrTimeout, true},
		{"a try's deadline", context.DeadlineExceeded, true},
		{"not clustered", &jetstream.APIError{Code: 500, ErrorCode: jsErrReplicasNotClustered, Description: "replicas > 1 not supported in non-clustered mode"}, false},
		{"jetstream off", jetstream.ErrJetStreamNotEnabled, false},
		{"bad request", &jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"}, false},
		{"other", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
			defer cancel()
			tries := 0
			_, err := retryJS(ctx, func(tctx context.Context) (int, error) {
				if d, ok := tctx.Deadline(); !ok || time.Until(d) > setupTryWait {
					t.Errorf("a try's deadline is %v (set %v), want within %s", time.Until(d), ok, setupTryWait)
				}
				tries++
				return 0, tc.err
			})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if tc.again && tries < 2 || !tc.again && tries != 1 {
				t.Fatalf("%d tries; tried again: want %v", tries, tc.again)
			}
		})
	}
	tries := 0
	v, err := retryJS(context.Background(), func(context.Context) (int, error) {
		if tries++; tries < 3 {
			return 0, nats.ErrNoResponders
		}
		return 7, nil
	})
	if v != 7 || err != nil || tries != 3 {
		t.Fatalf("retryJS = %d, %v after %d tries, want 7, nil after 3", v, err, tries)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tries = 0
	if _, err := retryJS(done, func(context.Context) (int, error) { tries++; return 0, nats.ErrNoResponders }); err == nil || tries > 1 {
		t.Fatalf("with ctx done: %v after %d tries", err, tries)
	}
}

// The set-up's errors say what to do about a cluster that cannot take
// the stream.
func TestSetupErr(t *testing.T) {
	t.Parallel()
	cfg := Config{Replicas: 3}.WithDefaults()
	start := time.Now().Add(-45 * time.Second)
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{&jetstream.APIError{Code: 500, ErrorCode: jsErrReplicasNotClustered, Description: "replicas > 1 not supported in non-clustered mode"},
			[]string{"create stream S: ", "not supported", "3 replicas need a JetStream cluster", "runs alone"}},
		{&jetstream.APIError{Code: 400, ErrorCode: jsErrNoPeers, Description: "no suitable peers for placement"},
			[]string{"no suitable peers", "still after 45s", "3 replicas need 3 JetStream servers"}},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"},
			[]string{"temporarily unavailable", "still after 45s", "majority of the JetStream cluster's servers"}},
		{context.DeadlineExceeded, []string{"deadline exceeded", "majority"}},
		{&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use"}, []string{"create stream S: nats: API error", "stream name already in use"}},
	} {
		err := setupErr("create stream S", cfg, start, tc.err)
		if !errors.Is(err, tc.err) {
			t.Errorf("%v does not wrap %v", err, tc.err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q does not say %q", err, w)
			}
		}
		if msg := err.Error(); strings.Contains(msg, "majority") && !transientJS(tc.err) || strings.Contains(msg, "still after") && tc.err.Error() == "stream name already in use" {
			t.Errorf("%q: a hint for another failure", msg)
		}
	}
}
