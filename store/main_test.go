package store_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind (a pool or
// connection not closed).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
