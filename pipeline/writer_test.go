package pipeline

import (
	"testing"
	"time"
)

func TestBatchLoop(t *testing.T) {
	t.Parallel()
	in := make(chan int)
	got := make(chan []int, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		batchLoop(in, 3, time.Hour, func(b []int) { got <- b })
	}()
	for i := 1; i <= 7; i++ {
		in <- i
	}
	// Two full batches went at once; the seventh item waits for more, its
	// interval being an hour, and goes when the input closes.
	for _, want := range [][]int{{1, 2, 3}, {4, 5, 6}} {
		b := <-got
		if len(b) != len(want) || b[0] != want[0] || b[2] != want[2] {
			t.Fatalf("batch %v, want %v", b, want)
		}
	}
	select {
	case b := <-got:
		t.Fatalf("partial batch %v flushed before its interval", b)
	default:
	}
	close(in)
	<-done
	if b := <-got; len(b) != 1 || b[0] != 7 {
		t.Fatalf("last batch %v, want [7]", b)
	}

	// A lone item goes after the interval.
	in2 := make(chan int, 1)
	got2 := make(chan []int, 1)
	go batchLoop(in2, 100, 5*time.Millisecond, func(b []int) { got2 <- b })
	in2 <- 42
	select {
	case b := <-got2:
		if len(b) != 1 || b[0] != 42 {
			t.Fatalf("batch %v, want [42]", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lone item was never flushed")
	}
	close(in2)
}
