package llm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

func testLane(t *testing.T, clock Clock, cfg LaneConfig, obs Observer) *Lane {
	t.Helper()
	l, err := NewRegistry(clock, obs).Get(LaneKey{Provider: ProviderOpenAI, BaseURL: "http://x", Model: "m"}, cfg)
	if err != nil {
		t.Fatalf("Get lane: %v", err)
	}
	return l
}

// maxInWindow returns the largest sum of weights of events inside any
// half-open window [t, t+w).
func maxInWindow(times []time.Time, weights []int, w time.Duration) int {
	best := 0
	for i := range times {
		sum := 0
		for j := i; j < len(times) && times[j].Sub(times[i]) < w; j++ {
			sum += weights[j]
		}
		best = max(best, sum)
	}
	return best
}

func TestLaneRPMNeverExceeded(t *testing.T) {
	t.Parallel()
	for _, rpm := range []int{1, 7, 60, 600} {
		clock := newFakeClock(true)
		l := testLane(t, clock, LaneConfig{RPM: rpm}, nil)
		var times []time.Time
		var ones []int
		for range 3*rpm + 5 {
			p, err := l.acquire(context.Background(), 10)
			if err != nil {
				t.Fatal(err)
			}
			times = append(times, clock.Now())
			ones = append(ones, 1)
			p.done("", 0, 0, nil)
		}
		if got := maxInWindow(times, ones, time.Minute); got != rpm {
			t.Errorf("RPM %d: busiest minute held %d requests, want exactly %d", rpm, got, rpm)
		}
	}
}

func TestLaneTPMNeverExceeded(t *testing.T) {
	t.Parallel()
	const tpm = 10_000
	clock := newFakeClock(true)
	l := testLane(t, clock, LaneConfig{TPM: tpm}, nil)
	var times []time.Time
	var tokens []int
	sizes := []int{300, 1000, 50, 700, 999, 1}
	var total int
	for i := range 200 {
		n := sizes[i%len(sizes)]
		p, err := l.acquire(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		times = append(times, clock.Now())
		tokens = append(tokens, n)
		total += n
		p.done("", 0, 0, nil)
	}
	got := maxInWindow(times, tokens, time.Minute)
	if got > tpm {
		t.Fatalf("busiest minute held %d tokens, over TPM %d", got, tpm)
	}
	// The budget is used, not just respected: the run takes about
	// total/TPM minutes.
	elapsed := times[len(times)-1].Sub(times[0])
	if minimum := time.Duration(float64(total-tpm) / tpm * float64(time.Minute)); elapsed < minimum || elapsed > minimum*3/2 {
		t.Fatalf("%d tokens took %v, want about %v", total, elapsed, minimum)
	}
}

func TestLaneTPMRequestBiggerThanBurst(t *testing.T) {
	t.Parallel()
	clock := newFakeClock(true)
	l := testLane(t, clock, LaneConfig{TPM: 6000, TPMBurst: 600}, nil)
	start := clock.Now()
	p, err := l.acquire(context.Background(), 6000)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	p.done("", 0, 0, nil)
	// 600 from the bucket, the other 5400 at (6000-600)/60 = 90 per second.
	if got, want := clock.Now().Sub(start), 60*time.Second; got < want-time.Millisecond || got > want+time.Millisecond {
		t.Fatalf("waited %v, want %v", got, want)
	}
}

func TestLaneConcurrencyHalvesAndRecovers(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []int
	obs := &funcObserver{concurrency: func(_ LaneKey, n int) { mu.Lock(); seen = append(seen, n); mu.Unlock() }}
	clock := newFakeClock(true)
	l := testLane(t, clock, LaneConfig{InitialConcurrency: 8, MinConcurrency: 2, MaxConcurrency: 10}, obs)
	ctx := context.Background()

	// Three requests in flight when the first 429 arrives: one halving.
	var ps []*permit
	for range 3 {
		p, err := l.acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.done(fixpoint.ClassRateLimited, 0, 0, &fixpoint.ProviderError{Class: fixpoint.ClassRateLimited})
	}
	if got := l.Stats().Limit; got != 4 {
		t.Fatalf("after one congestion event limit = %d, want 4 (halved once)", got)
	}
	// A later overload halves again, down to the floor.
	for range 2 {
		p, _ := l.acquire(ctx, 1)
		p.done(fixpoint.ClassOverloaded, 0, 0, &fixpoint.ProviderError{Class: fixpoint.ClassOverloaded})
	}
	if got := l.Stats().Limit; got != 2 {
		t.Fatalf("limit = %d, want MinConcurrency 2", got)
	}
	// +1 per success up to the ceiling.
	for i := range 12 {
		p, _ := l.acquire(ctx, 1)
		p.done("", 0, 0, nil)
		if want := min(3+i, 10); l.Stats().Limit != want {
			t.Fatalf("after %d successes limit = %d, want %d", i+1, l.Stats().Limit, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{4, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !equalInts(seen, want) {
		t.Fatalf("OnConcurrency saw %v, want %v", seen, want)
	}
}

func TestLaneConcurrencyLimitBlocks(t *testing.T) {
	t.Parallel()
	l := testLane(t, newFakeClock(true), LaneConfig{InitialConcurrency: 2, MaxConcurrency: 2}, nil)
	ctx := context.Background()
	p1, _ := l.acquire(ctx, 1)
	p2, _ := l.acquire(ctx, 1)
	got := make(chan *permit)
	go func() {
		p, err := l.acquire(ctx, 1)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	select {
	case <-got:
		t.Fatal("third acquire passed a limit of 2")
	case <-time.After(20 * time.Millisecond):
	}
	p1.done("", 0, 0, nil)
	p3 := <-got
	p2.done("", 0, 0, nil)
	p3.done("", 0, 0, nil)
	if s := l.Stats(); s.InFlight != 0 {
		t.Fatalf("InFlight = %d after all released", s.InFlight)
	}

	// A cancelled waiter gives up without taking a slot.
	l2 := testLane(t, newFakeClock(true), LaneConfig{InitialConcurrency: 1, MaxConcurrency: 1}, nil)
	held, _ := l2.acquire(ctx, 1)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l2.acquire(cctx, 1); err == nil {
		t.Fatal("acquire on a cancelled context succeeded")
	}
	held.done("", 0, 0, nil)
	if s := l2.Stats(); s.InFlight != 0 {
		t.Fatalf("InFlight = %d, want 0", s.InFlight)
	}
}

func TestLanePauseOncePerLaneAndSpreadResume(t *testing.T) {
	t.Parallel()
	var pauses atomic.Int32
	obs := &funcObserver{pause: func(LaneKey, time.Duration) { pauses.Add(1) }}
	clock := newFakeClock(false)
	const n = 6
	l := testLane(t, clock, LaneConfig{InitialConcurrency: 16, MaxConcurrency: 16, ResumeSpacing: 100 * time.Millisecond}, obs)
	ctx := context.Background()
	start := clock.Now()

	// n concurrent 429s with the same hint: one pause.
	var ps []*permit
	for range n {
		p, _ := l.acquire(ctx, 1)
		ps = append(ps, p)
	}
	late, _ := l.acquire(ctx, 1) // answers after the others, below
	for _, p := range ps {
		p.done(fixpoint.ClassRateLimited, 2*time.Second, 0, &fixpoint.ProviderError{Class: fixpoint.ClassRateLimited})
	}
	if got := pauses.Load(); got != 1 {
		t.Fatalf("%d concurrent 429s caused %d pauses, want 1", n, got)
	}
	if got := l.Stats().PausedUntil; !got.Equal(start.Add(2 * time.Second)) {
		t.Fatalf("PausedUntil = %v, want start+2s", got.Sub(start))
	}

	// n waiters resume spread out, not at one instant.
	var mu sync.Mutex
	var resumed []time.Duration
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := l.acquire(ctx, 1)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			resumed = append(resumed, clock.Now().Sub(start))
			mu.Unlock()
			p.done("", 0, 0, nil)
		}()
	}
	waitFor(t, "waiters to sleep on the pause", func() bool { return clock.Pending() == n })
	// A later 429 with a longer hint extends the pause without a new one.
	late.done(fixpoint.ClassRateLimited, 3*time.Second, 0, &fixpoint.ProviderError{Class: fixpoint.ClassRateLimited})
	if got := pauses.Load(); got != 1 {
		t.Fatalf("extension counted as a new pause (%d)", got)
	}
	nResumed := func() int { mu.Lock(); defer mu.Unlock(); return len(resumed) }
	// Each step of the clock, every waiter sleeps on the pause again or has
	// resumed before the next.
	for i := 0; i < 100 && nResumed() < n; i++ {
		clock.Advance(50 * time.Millisecond)
		waitFor(t, "each waiter to sleep again or resume", func() bool { return clock.Pending()+nResumed() == n })
	}
	wg.Wait()
	if len(resumed) != n {
		t.Fatalf("%d of %d waiters resumed", len(resumed), n)
	}
	seen := map[time.Duration]bool{}
	for _, d := range resumed {
		if d < 3*time.Second {
			t.Fatalf("a waiter resumed at %v, inside the extended pause", d)
		}
		if seen[d] {
			t.Fatalf("two waiters resumed at the same instant %v (all: %v)", d, resumed)
		}
		seen[d] = true
	}
}

func TestLaneQuotaExhausted(t *testing.T) {
	t.Parallel()
	clock := newFakeClock(true)
	l := testLane(t, clock, LaneConfig{QuotaCooldown: time.Minute}, nil)
	p, _ := l.acquire(context.Background(), 1)
	p.done(fixpoint.ClassQuotaExhausted, 0, 0, &fixpoint.ProviderError{Class: fixpoint.ClassQuotaExhausted, Code: "insufficient_quota", Message: "no credit"})
	_, err := l.acquire(context.Background(), 1)
	e, ok := err.(*fixpoint.ProviderError)
	if !ok || e.Class != fixpoint.ClassQuotaExhausted || e.RetryAfter != time.Minute || e.Code != "insufficient_quota" {
		t.Fatalf("acquire on a quota-exhausted lane = %#v, want quota_exhausted with 1m left", err)
	}
	clock.Advance(time.Minute)
	p, err = l.acquire(context.Background(), 1)
	if err != nil {
		t.Fatalf("after the cooldown acquire = %v, want a permit", err)
	}
	p.done("", 0, 0, nil)
}

type funcObserver struct {
	NopObserver
	call        func(CallEvent)
	pause       func(LaneKey, time.Duration)
	concurrency func(LaneKey, int)
}

var _ Observer = (*funcObserver)(nil)

func (f *funcObserver) OnCall(ev CallEvent) {
	if f.call != nil {
		f.call(ev)
	}
}

func (f *funcObserver) OnPause(k LaneKey, d time.Duration) {
	if f.pause != nil {
		f.pause(k, d)
	}
}

func (f *funcObserver) OnConcurrency(k LaneKey, n int) {
	if f.concurrency != nil {
		f.concurrency(k, n)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Waiters get freed slots oldest first, one release waking one waiter, and
// a waiter that gives up leaves the queue without taking or losing a slot.
func TestLaneWaitersServedInOrder(t *testing.T) {
	t.Parallel()
	l := testLane(t, newFakeClock(true), LaneConfig{InitialConcurrency: 1, MaxConcurrency: 1}, nil)
	ctx := context.Background()
	queued := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.waiters)
	}
	waitQueued := func(n int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d waiters queued", n), func() bool { return queued() == n })
	}
	held, err := l.acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	type grant struct {
		i int
		p *permit
	}
	got := make(chan grant, n)
	cctx, cancel := context.WithCancel(ctx)
	for i := range n {
		wctx := ctx
		if i == 5 {
			wctx = cctx
		}
		go func() {
			p, err := l.acquire(wctx, 1)
			if err != nil {
				got <- grant{i: -i}
				return
			}
			got <- grant{i: i, p: p}
		}()
		waitQueued(i + 1) // each queues before the next starts
	}
	cancel() // waiter 5 gives up while queued
	if g := <-got; g.i != -5 {
		t.Fatalf("first out after the cancel: waiter %d, want waiter 5 giving up", g.i)
	}
	waitQueued(n - 1)

	prev := held
	for _, want := range []int{0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19} {
		prev.done("", 0, 0, nil)
		g := <-got
		if g.i != want {
			t.Fatalf("slot went to waiter %d, want %d (oldest first)", g.i, want)
		}
		if s := l.Stats(); s.InFlight != 1 {
			t.Fatalf("InFlight = %d with one permit held", s.InFlight)
		}
		prev = g.p
	}
	prev.done("", 0, 0, nil)
	if s := l.Stats(); s.InFlight != 0 || queued() != 0 {
		t.Fatalf("InFlight = %d, %d queued after all released", s.InFlight, queued())
	}
}

// TestLanePauseCapped: a hint up to MaxHintWait pauses the lane for it; a
// longer one does not pause the lane at all (issue 13: a retry-after of an
// hour for one request must not freeze every call of the lane; the caller
// hands that job back instead).
func TestLanePauseCapped(t *testing.T) {
	t.Parallel()
	var pauses []time.Duration
	obs := &funcObserver{pause: func(_ LaneKey, d time.Duration) { pauses = append(pauses, d) }}
	clock := newFakeClock(false)
	l := testLane(t, clock, LaneConfig{MaxHintWait: 30 * time.Second}, obs)
	start := clock.Now()
	p, _ := l.acquire(context.Background(), 1)
	p.done(fixpoint.ClassRateLimited, time.Hour, 0, &fixpoint.ProviderError{Class: fixpoint.ClassRateLimited})
	if until := l.Stats().PausedUntil; until.After(start) {
		t.Fatalf("a 1h hint paused the lane until start+%v, want no pause", until.Sub(start))
	}
	p, _ = l.acquire(context.Background(), 1)
	p.done(fixpoint.ClassOverloaded, 30*time.Second, 0, &fixpoint.ProviderError{Class: fixpoint.ClassOverloaded})
	if got := l.Stats().PausedUntil.Sub(start); got != 30*time.Second {
		t.Fatalf("a 30s hint paused the lane for %v, want 30s", got)
	}
	if len(pauses) != 1 || pauses[0] != 30*time.Second {
		t.Fatalf("OnPause saw %v, want one pause of 30s", pauses)
	}
}
