package poll

import (
	"sync/atomic"
	"testing"
	"time"
)

// Until returns once another goroutine makes the condition hold.
func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	Until(t, 10*time.Second, "three adds", func() bool { return n.Load() == 3 })
	if n.Load() != 3 {
		t.Fatalf("returned at %d", n.Load())
	}
}

// fatalT records a Fatalf instead of ending the test.
type fatalT struct {
	testing.TB
	failed string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

// Until fails the test, naming what it waited for, when the condition
// never holds.
func TestUntilFailsAtTheDeadline(t *testing.T) {
	t.Parallel()
	f := &fatalT{TB: t}
	func() {
		defer func() {
			if r := recover(); r != f {
				t.Fatalf("recovered %v, want the Fatalf", r)
			}
		}()
		Until(f, 20*time.Millisecond, "nothing", func() bool { return false })
	}()
	if f.failed == "" {
		t.Fatal("Until returned without failing the test")
	}
}
