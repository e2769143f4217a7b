package queue_test

import (
	"testing"

	"github.com/fixpoint-dev/fixpoint/queue"
)

// A MAX_DELIVERIES advisory names the message the server gave up on; one
// that names none, or is not JSON, is refused (the worker terminates it).
func TestDecodeMaxDeliveries(t *testing.T) {
	t.Parallel()
	// The fields the server sends besides the two read here are ignored.
	a, err := queue.DecodeMaxDeliveries([]byte(`{"type":"io.nats.jetstream.advisory.v1.max_deliver","stream":"S","consumer":"C","stream_seq":42,"deliveries":5}`))
	if err != nil || a.StreamSeq != 42 || a.Deliveries != 5 {
		t.Fatalf("DecodeMaxDeliveries = %+v, %v; want seq 42 after 5 deliveries", a, err)
	}
	for _, bad := range []string{`{"deliveries":5}`, `{"stream_seq":0}`, `not json`, ``} {
		if _, err := queue.DecodeMaxDeliveries([]byte(bad)); err == nil {
			t.Errorf("DecodeMaxDeliveries(%q): no error, want one", bad)
		}
	}
}
