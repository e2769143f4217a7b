package wave

import "time"

// clock is the time a Driver reads and waits on: the system's, or a
// test's fake one, so that deadlines, grace periods, collection windows
// and lease renewals are tested without waiting for them.
type clock interface {
	Now() time.Time
	// After sends the time on the channel it returns once d has passed.
	After(d time.Duration) <-chan time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless
	// stop is called first; stop reports whether it stopped the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// systemClock is the system's clock.
type systemClock struct{}

var _ clock = systemClock{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
