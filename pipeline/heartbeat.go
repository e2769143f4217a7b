package pipeline

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// heartbeats reports progress on every message a worker holds, from one
// goroutine and one ticker, instead of one of each per job: a thousand jobs
// in flight, plus those waiting for their commit, cost a map entry each.
type heartbeats struct {
	every time.Duration

	mu    sync.Mutex
	beats map[*beat]struct{}
}

// beat is one held message. mu orders the report with stop, so no
// progress report leaves after stop has returned (after the ack).
type beat struct {
	msg     jetstream.Msg
	mu      sync.Mutex
	next    time.Time
	stopped bool
}

func newHeartbeats(every time.Duration) *heartbeats {
	return &heartbeats{every: every, beats: map[*beat]struct{}{}}
}

// add starts reporting progress on msg every h.every until stop is called.
func (h *heartbeats) add(msg jetstream.Msg) (stop func()) {
	b := &beat{msg: msg, next: time.Now().Add(h.every)}
	h.mu.Lock()
	h.beats[b] = struct{}{}
	h.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		h.mu.Lock()
		delete(h.beats, b)
		h.mu.Unlock()
	}
}

// run reports progress on the messages that are due, checking four times
// per period, until done is closed. A report thus leaves at most 1.25
// periods after the last.
func (h *heartbeats) run(done <-chan struct{}) {
	t := time.NewTicker(max(h.every/4, time.Millisecond))
	defer t.Stop()
	var due []*beat
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			due = due[:0]
			h.mu.Lock()
			for b := range h.beats {
				if !now.Before(b.next) {
					b.next = now.Add(h.every)
					due = append(due, b)
				}
			}
			h.mu.Unlock()
			for _, b := range due {
				b.mu.Lock()
				if !b.stopped {
					_ = b.msg.InProgress()
				}
				b.mu.Unlock()
			}
			clear(due)
		}
	}
}

// held is how many messages are being reported on.
func (h *heartbeats) held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.beats)
}
