// Package poll waits in tests for a condition another goroutine, a server
// or a process brings about: it checks the condition every few
// milliseconds until a deadline, so that a test says what it waits for
// instead of sleeping for a guess of how long it takes.
package poll

import (
	"testing"
	"time"
)

// Every is how often Until checks its condition.
const Every = 5 * time.Millisecond

// Until returns once cond holds. It fails t, naming what it waited for,
// when cond does not hold within timeout. Call it from the test's
// goroutine.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(Every)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("waited %s for %s", timeout, what)
		}
	}
}
