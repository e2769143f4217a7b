package llm

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/internal/poll"
)

// fakeClock is a manual clock. Timers fire when Advance passes their
// deadline. In auto mode every new timer moves the clock to its deadline
// and fires at once, so serial code runs without waiting.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	auto   bool
	timers []*fakeTimer
}

var _ Clock = (*fakeClock)(nil)

func newFakeClock(auto bool) *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), auto: auto}
}

type fakeTimer struct {
	c     *fakeClock
	at    time.Time
	ch    chan time.Time
	fired bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired {
		return false
	}
	t.fired = true
	t.c.removeLocked(t)
	return true
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 || c.auto {
		if t.at.After(c.now) {
			c.now = t.at
		}
		t.fired = true
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

func (c *fakeClock) removeLocked(t *fakeTimer) {
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return
		}
	}
}

// Advance moves the clock forward by d, firing due timers in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			break
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		c.now = t.at
		t.fired = true
		t.ch <- t.at
	}
	c.now = end
	c.mu.Unlock()
}

// Pending returns the number of timers not yet fired.
func (c *fakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// waitFor polls cond (real time, for goroutine hand-off only) and fails the
// test if it does not hold within 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, cond)
}
