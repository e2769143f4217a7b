package pipeline

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// progressMsg counts progress reports; every other method is unused.
type progressMsg struct {
	jetstream.Msg
	reports atomic.Int64
}

func (m *progressMsg) InProgress() error { m.reports.Add(1); return nil }

func TestHeartbeats(t *testing.T) {
	t.Parallel()
	h := newHeartbeats(20 * time.Millisecond)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() { defer close(exited); h.run(done) }()
	defer func() { close(done); <-exited }()

	msgs := make([]*progressMsg, 50)
	stops := make([]func(), len(msgs))
	for i := range msgs {
		msgs[i] = &progressMsg{}
		stops[i] = h.add(msgs[i])
	}
	if got := h.held(); got != len(msgs) {
		t.Fatalf("held %d, want %d", got, len(msgs))
	}
	// Every held message gets reports, repeatedly.
	deadline := time.Now().Add(5 * time.Second)
	for _, m := range msgs {
		for m.reports.Load() < 3 {
			if time.Now().After(deadline) {
				t.Fatalf("a message got %d progress reports in 5s at a 20ms period", m.reports.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Not faster than the period: 3 reports take at least 2 periods.
	start := time.Now()
	fresh := &progressMsg{}
	stopFresh := h.add(fresh)
	for fresh.reports.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no reports for a message added later")
		}
		time.Sleep(time.Millisecond)
	}
	if took := time.Since(start); took < 40*time.Millisecond {
		t.Fatalf("3 reports in %s, period 20ms: reports too often", took)
	}
	stopFresh()

	// After stop returns, no report leaves for that message.
	for _, stop := range stops {
		stop()
	}
	if got := h.held(); got != 0 {
		t.Fatalf("held %d after stop, want 0", got)
	}
	before := make([]int64, len(msgs))
	for i, m := range msgs {
		before[i] = m.reports.Load()
	}
	time.Sleep(100 * time.Millisecond) // five periods: any report would show
	for i, m := range msgs {
		if got := m.reports.Load(); got != before[i] {
			t.Fatalf("message %d got %d reports after stop", i, got-before[i])
		}
	}
}
