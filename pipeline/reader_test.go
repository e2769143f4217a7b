package pipeline

import (
	"slices"
	"testing"
	"time"
)

func TestGroupLoop(t *testing.T) {
	t.Parallel()
	in := make(chan int, 100)
	release := make(chan struct{})
	got := make(chan []int, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		groupLoop(in, 10, 2, func(b []int) {
			got <- b
			<-release
		})
	}()

	// A lone item goes at once: there is no timer to wait out.
	in <- 1
	select {
	case b := <-got:
		if !slices.Equal(b, []int{1}) {
			t.Fatalf("first batch %v, want [1]", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a lone item was not flushed")
	}
	// The second slot takes the next lone item.
	in <- 2
	if b := <-got; !slices.Equal(b, []int{2}) {
		t.Fatalf("second batch %v, want [2]", b)
	}
	// Both slots are busy: what arrives now waits, and goes as one batch
	// (at most 10) when a slot frees.
	for i := 3; i <= 15; i++ {
		in <- i
	}
	select {
	case b := <-got:
		t.Fatalf("batch %v flushed while both slots were busy", b)
	case <-time.After(50 * time.Millisecond):
	}
	release <- struct{}{} // the first flush returns
	b := <-got
	if want := []int{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; !slices.Equal(b, want) {
		t.Fatalf("batch after a slot freed: %v, want %v", b, want)
	}
	close(release) // every flush returns from now on
	close(in)
	var rest []int
	for b := range got {
		rest = append(rest, b...)
		if len(rest) == 3 {
			break
		}
	}
	if want := []int{13, 14, 15}; !slices.Equal(rest, want) {
		t.Fatalf("the rest: %v, want %v", rest, want)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("groupLoop did not return after in was closed")
	}
}
