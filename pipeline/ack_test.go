package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackMsg answers its acks with errs, one a try, then nil.
type ackMsg struct {
	jetstream.Msg
	errs  []error
	tries int
}

func (m *ackMsg) DoubleAck(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("an ack with no deadline")
	}
	m.tries++
	if m.tries <= len(m.errs) {
		return m.errs[m.tries-1]
	}
	return nil
}

// An ack a consumer's old leader left unanswered is sent again, within
// ackTries; another failure comes back at once.
func TestConfirmAck(t *testing.T) {
	t.Parallel()
	lost := context.DeadlineExceeded
	closed := nats.ErrConnectionClosed
	for _, tc := range []struct {
		name    string
		errs    []error
		tries   int
		wantErr error
	}{
		{"confirmed", nil, 1, nil},
		{"unanswered once", []error{lost}, 2, nil},
		{"timeout once", []error{nats.ErrTimeout}, 2, nil},
		{"unanswered every time", []error{lost, lost, lost, lost}, ackTries, lost},
		{"connection closed", []error{closed}, 1, closed},
	} {
		m := &ackMsg{errs: tc.errs}
		err := confirmAck(context.Background(), m, time.Second)
		if !errors.Is(err, tc.wantErr) || err != nil && tc.wantErr == nil || m.tries != tc.tries {
			t.Errorf("%s: %v after %d tries, want %v after %d", tc.name, err, m.tries, tc.wantErr, tc.tries)
		}
	}
}
