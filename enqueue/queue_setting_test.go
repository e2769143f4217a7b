package enqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/enqueue"
	"github.com/fixpoint-dev/fixpoint/queue"
)

// A queue setting NATS cannot take is a configuration error of the run
// (ErrBadConfig, a usage error in the command), named by the queue's one
// setting error, before anything is connected to or read.
func TestRunRefusesAQueueSettingAsBadConfig(t *testing.T) {
	t.Parallel()
	cfg := enqueue.Config{Batch: "b", Schema: []byte(`{"type":"object"}`), Template: "{{.text}}", Model: "m",
		Provider: "openai", Format: enqueue.FormatJSONL, Queue: queue.Config{Stream: "a/b"}}
	_, err := enqueue.Run(context.Background(), nil, nil, cfg, strings.NewReader(`{"text":"x"}`+"\n"))
	var se *fixpoint.SettingError
	if !errors.Is(err, enqueue.ErrBadConfig) || !errors.As(err, &se) || se.Setting != "Stream" {
		t.Fatalf("enqueue with --stream a/b: %v; want ErrBadConfig with the queue's setting error naming Stream", err)
	}
	if !strings.Contains(err.Error(), `queue setting Stream = "a/b" is not a stream name`) {
		t.Errorf("error %q does not name the queue setting as before", err)
	}
}
