package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/store"
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

// blockingLedger holds every SaveResults call until release is closed.
type blockingLedger struct {
	Ledger
	saves   chan []store.Result
	release chan struct{}
}

func (l *blockingLedger) SaveResults(ctx context.Context, rs []store.Result) ([]bool, error) {
	l.saves <- rs
	<-l.release
	return make([]bool, len(rs)), nil
}

// TestWriterBudget: results wait for room in the write buffer, so a stalled
// ledger holds back finished jobs instead of letting them pile up in memory.
func TestWriterBudget(t *testing.T) {
	t.Parallel()
	l := &blockingLedger{saves: make(chan []store.Result, 10), release: make(chan struct{})}
	big := store.Result{JobID: "a", Status: fixpoint.StatusValid, AttemptRows: []store.Attempt{{Raw: strings.Repeat("x", 40<<10)}}}
	size := resultBytes(&big)
	// Room for two such results and change, queue room for many.
	w := newWriter(l, 100, 100, 2*size+size/2, time.Millisecond, nil)
	done := make(chan struct{})
	go func() { defer close(done); w.run() }()

	committed := make(chan string, 10)
	submitted := make(chan string, 10)
	for _, id := range []string{"a", "b", "c"} {
		go func() {
			r := big
			r.JobID = id
			w.submit(r, func(_ bool, err error) {
				if err != nil {
					t.Errorf("job %s: %v", id, err)
				}
				committed <- id
			})
			submitted <- id
		}()
	}
	// Two fit in the budget and reach the ledger, which stalls.
	<-submitted
	<-submitted
	got := 0
	for got < 2 {
		got += len(<-l.saves)
	}
	select {
	case id := <-submitted:
		t.Fatalf("job %s was taken while the buffer was full", id)
	case <-time.After(50 * time.Millisecond):
	}
	close(l.release) // the stalled commit ends: room for the third
	if id := <-submitted; id == "" {
		t.Fatal("no third submit")
	}
	for range 3 {
		<-committed
	}
	w.close()
	<-done

	// A result larger than the whole budget still goes, alone.
	huge := big
	huge.AttemptRows = []store.Attempt{{Raw: strings.Repeat("y", 1<<20)}}
	l2 := &blockingLedger{saves: make(chan []store.Result, 10), release: make(chan struct{})}
	close(l2.release)
	w2 := newWriter(l2, 100, 100, 64<<10, time.Millisecond, nil)
	done2 := make(chan struct{})
	go func() { defer close(done2); w2.run() }()
	if err := w2.save(huge); err != nil {
		t.Fatalf("save of a result over the budget: %v", err)
	}
	w2.close()
	<-done2
}

// refusingLedger refuses any save that holds the job "poison", as Postgres
// refuses a value it cannot store, and records the slices it saved.
type refusingLedger struct {
	Ledger
	mu    sync.Mutex
	saved []string
}

func (l *refusingLedger) SaveResults(ctx context.Context, rs []store.Result) ([]bool, error) {
	for _, r := range rs {
		if r.JobID == "poison" {
			return nil, fmt.Errorf("save %d results: %w", len(rs), store.ErrInvalid)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		l.saved = append(l.saved, r.JobID)
	}
	won := make([]bool, len(rs))
	for i := range won {
		won[i] = true
	}
	return won, nil
}

// TestWriterIsolatesRefusedResult: a result the ledger refuses fails alone;
// the results committed with it are saved and get no error.
func TestWriterIsolatesRefusedResult(t *testing.T) {
	t.Parallel()
	l := &refusingLedger{}
	// A long interval and a batch of exactly the four results: they go
	// to the ledger together.
	w := newWriter(l, 4, 4, 1<<20, time.Hour, nil)
	done := make(chan struct{})
	go func() { defer close(done); w.run() }()
	type outcome struct {
		id  string
		err error
	}
	got := make(chan outcome, 4)
	for _, id := range []string{"a", "poison", "b", "c"} {
		w.submit(store.Result{JobID: id, Status: fixpoint.StatusValid}, func(_ bool, err error) { got <- outcome{id, err} })
	}
	errs := map[string]error{}
	for range 4 {
		o := <-got
		errs[o.id] = o.err
	}
	w.close()
	<-done
	if !store.IsRefused(errs["poison"]) {
		t.Errorf("poison: %v, want the refusal", errs["poison"])
	}
	for _, id := range []string{"a", "b", "c"} {
		if errs[id] != nil {
			t.Errorf("%s: %v, want saved", id, errs[id])
		}
	}
	slices.Sort(l.saved)
	if want := []string{"a", "b", "c"}; !slices.Equal(l.saved, want) {
		t.Errorf("saved %v, want %v", l.saved, want)
	}
}
