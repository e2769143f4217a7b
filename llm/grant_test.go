package llm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// fakeGranter grants what it is asked, at most per a lease, after failing
// the first fail leases (a coordinator down).
type fakeGranter struct {
	clock Clock
	per   int // requests a lease grants at most; 0: what is asked
	life  time.Duration

	mu      sync.Mutex
	fail    int
	leases  []Grant // what each lease granted
	wants   []Grant
	shrinks []Shrink
}

func (f *fakeGranter) Lease(_ context.Context, _ LaneKey, _ Budget, want Grant) (Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wants = append(f.wants, want)
	if f.fail > 0 {
		f.fail--
		return Grant{}, errors.New("coordinator down")
	}
	g := want
	if f.per > 0 {
		g.Requests = min(g.Requests, f.per)
	}
	g.Expires = f.clock.Now().Add(cmpOr(f.life, 5*time.Second))
	f.leases = append(f.leases, g)
	return g, nil
}

func (f *fakeGranter) Shrink(_ context.Context, _ LaneKey, _ Budget, s Shrink) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shrinks = append(f.shrinks, s)
	return nil
}

func (f *fakeGranter) counts() (wants, leases, shrinks int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.wants), len(f.leases), len(f.shrinks)
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func grantLane(t *testing.T, clock Clock, g Granter, cfg LaneConfig) *Lane {
	t.Helper()
	r := NewRegistry(clock, nil)
	r.SetGranter(g)
	l, err := r.Get(LaneKey{Provider: ProviderOpenAI, BaseURL: "http://x", Model: "m"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l.book == nil {
		t.Fatal("a lane with an RPM and a granter has no grant book")
	}
	return l
}

// takers starts n callers of b.take and returns a count of those done.
func takers(b *grantBook, n, tokens int) *atomic.Int64 {
	var done atomic.Int64
	for range n {
		go func() {
			if b.take(context.Background(), tokens) == nil {
				done.Add(1)
			}
		}()
	}
	return &done
}

func waitingCallers(b *grantBook) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waitReq
}

// settle waits until every caller is done or waiting, and the pump is
// parked on its renewal timer.
func settle(t *testing.T, clock *fakeClock, b *grantBook, done *atomic.Int64, callers int) {
	t.Helper()
	waitFor(t, "callers done or waiting, the pump parked", func() bool {
		return int(done.Load())+waitingCallers(b) == callers && clock.Pending() == 1
	})
}

func TestGrantNeverSpentBeyond(t *testing.T) {
	t.Parallel()
	clock := newFakeClock(false)
	fg := &fakeGranter{clock: clock, per: 3}
	l := grantLane(t, clock, fg, LaneConfig{RPM: 600})
	done := takers(l.book, 10, 0)
	for period := 0; done.Load() < 10; period++ {
		if period > 10 {
			t.Fatalf("10 callers, 3 a grant: %d through after %d renewals", done.Load(), period)
		}
		settle(t, clock, l.book, done, 10)
		granted := 0
		fg.mu.Lock()
		for _, g := range fg.leases {
			granted += g.Requests
		}
		leases := len(fg.wants)
		fg.mu.Unlock()
		if int(done.Load()) > granted {
			t.Fatalf("%d requests granted, %d callers through: a call went beyond its grant", granted, done.Load())
		}
		// A caller woken by the grant counts as waiting until it runs, so
		// the grant may still be being spent: with the pump parked no new
		// grant comes, and every request granted must be taken.
		waitFor(t, "every request granted taken", func() bool { return int(done.Load()) == min(granted, 10) })
		if leases != period+1 {
			t.Fatalf("%d leases after %d renewal periods, want one a period (none a call)", leases, period)
		}
		clock.Advance(GrantRenewEvery)
	}
}

func TestGrantOutageHoldsCallsWithoutError(t *testing.T) {
	t.Parallel()
	clock := newFakeClock(false)
	fg := &fakeGranter{clock: clock, fail: 3}
	l := grantLane(t, clock, fg, LaneConfig{RPM: 600})
	errc := make(chan error, 1)
	go func() {
		p, err := l.acquire(context.Background(), 10)
		if err == nil {
			p.done("", 0, 0, nil)
		}
		errc <- err
	}()
	for range 3 {
		waitFor(t, "a failed lease, the pump parked", func() bool { return clock.Pending() == 1 && waitingCallers(l.book) == 1 })
		select {
		case err := <-errc:
			t.Fatalf("the call ended while the coordinator was down: %v", err)
		default:
		}
		clock.Advance(GrantRenewEvery)
	}
	if err := <-errc; err != nil {
		t.Fatalf("the call failed once the coordinator answered: %v", err)
	}
	if w, leases, _ := fg.counts(); w != 4 || leases != 1 {
		t.Errorf("%d leases asked, %d granted; want 4 and 1 (one a renewal period)", w, leases)
	}
}

func TestGrantExpires(t *testing.T) {
	t.Parallel()
	clock := newFakeClock(false)
	fg := &fakeGranter{clock: clock, fail: 1 << 30} // no grant but the one below
	l := grantLane(t, clock, fg, LaneConfig{RPM: 600})
	l.book.grants = []Grant{{Requests: 4, Expires: clock.Now().Add(time.Second)}}
	clock.Advance(time.Second)
	done := takers(l.book, 1, 0)
	settle(t, clock, l.book, done, 1)
	if done.Load() != 0 {
		t.Error("a call spent a grant past its expiry")
	}
}

// TestLeasesIndependentOfCallRate drives one lane at two call rates for
// 30 simulated seconds: the leases are as many, their grants scale.
func TestLeasesIndependentOfCallRate(t *testing.T) {
	t.Parallel()
	leases := map[int]int{}
	mean := map[int]float64{}
	for _, perSecond := range []int{10, 40} {
		clock := newFakeClock(false)
		fg := &fakeGranter{clock: clock}
		l := grantLane(t, clock, fg, LaneConfig{RPM: 6000})
		var dones []*atomic.Int64
		callers := 0
		finished := func() int {
			n := 0
			for _, d := range dones {
				n += int(d.Load())
			}
			return n
		}
		for range 300 { // steps of 100ms
			dones = append(dones, takers(l.book, perSecond/10, 0))
			callers += perSecond / 10
			waitFor(t, "callers done or waiting, the pump parked", func() bool {
				return finished()+waitingCallers(l.book) == callers && clock.Pending() == 1
			})
			clock.Advance(100 * time.Millisecond)
		}
		fg.mu.Lock()
		n, sum := len(fg.leases), 0
		for _, g := range fg.leases {
			sum += g.Requests
		}
		fg.mu.Unlock()
		leases[perSecond] = n
		mean[perSecond] = float64(sum) / float64(n)
	}
	if a, b := leases[10], leases[40]; b > a*5/4 || a > b*5/4 || b > 61 {
		t.Errorf("leases in 30s: %d at 10 calls/s, %d at 40 calls/s; want about equal and at most 61 (one a renewal)", a, b)
	}
	if r := mean[40] / mean[10]; r < 3 || r > 5 {
		t.Errorf("mean grant %.1f at 40 calls/s, %.1f at 10: ratio %.1f, want about 4", mean[40], mean[10], r)
	}
}

func TestGrantTokensReconciled(t *testing.T) {
	t.Parallel()
	clock := newFakeClock(false)
	b := newGrantBook(&fakeGranter{clock: clock}, LaneKey{}, Budget{TPM: 60_000}, clock)
	b.grants = []Grant{{Tokens: 1000, Expires: clock.Now().Add(time.Minute)}}
	b.spendLocked(400)
	b.reconcile(400, 900) // the reply used 500 more than estimated
	if _, tok := b.heldLocked(); tok != 100 {
		t.Errorf("held %d tokens after a call estimated 400 used 900 of 1000, want 100", tok)
	}
	b.spendLocked(100)
	b.reconcile(100, 20)
	if _, tok := b.heldLocked(); tok != 80 {
		t.Errorf("held %d tokens after a call estimated 100 used 20, want 80 back", tok)
	}
	b.spendLocked(300) // 220 beyond what is held: debt
	if _, tok := b.heldLocked(); tok != -220 {
		t.Errorf("held %d tokens, want -220 (a debt paid from the next grants)", tok)
	}
}

func TestRateLimitedShrinksOncePerSecond(t *testing.T) {
	t.Parallel()
	clock := newFakeClock(false)
	fg := &fakeGranter{clock: clock}
	l := grantLane(t, clock, fg, LaneConfig{RPM: 600, MaxHintWait: time.Minute})
	l.book.grants = []Grant{{Requests: 10, Expires: clock.Now().Add(time.Minute)}}
	for range 3 {
		p := &permit{lane: l, gen: l.gen}
		l.inFlight++
		p.done(fixpoint.ClassRateLimited, 0, 0, &fixpoint.ProviderError{Class: fixpoint.ClassRateLimited})
	}
	waitFor(t, "the shrink reported", func() bool { _, _, s := fg.counts(); return s == 1 })
	clock.Advance(shrinkEvery)
	p := &permit{lane: l, gen: l.gen}
	l.inFlight++
	p.done(fixpoint.ClassRateLimited, 2*time.Second, 0, &fixpoint.ProviderError{Class: fixpoint.ClassRateLimited})
	waitFor(t, "the second shrink reported", func() bool { _, _, s := fg.counts(); return s == 2 })
	fg.mu.Lock()
	s := fg.shrinks[0]
	fg.mu.Unlock()
	if s.Factor != Shrink429 || s.Left == nil || s.Left.Requests != 0 || s.Until.Sub(clock.Now()) < ShrinkFor429-shrinkEvery {
		t.Errorf("shrink on a 429: %+v; want factor %v, nothing left, for %s", s, Shrink429, ShrinkFor429)
	}
	if req, _ := l.book.heldLocked(); req > 5 {
		t.Errorf("%d requests still held after a 429, want at most half of 10", req)
	}
}

func TestFromHeaders(t *testing.T) {
	t.Parallel()
	b := Budget{RPM: 600, TPM: 1_000_000}
	for _, c := range []struct {
		name  string
		rl    map[string]string
		limit Budget
		left  Grant
		low   bool
	}{
		{"plenty left", map[string]string{"x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "300"}, Budget{}, Grant{Requests: -1, Tokens: -1}, false},
		{"nearly spent", map[string]string{"x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "2"}, Budget{}, Grant{Requests: 2, Tokens: -1}, true},
		{"a lower limit", map[string]string{"x-ratelimit-limit-requests": "300", "x-ratelimit-remaining-requests": "200"}, Budget{RPM: 300}, Grant{Requests: -1, Tokens: -1}, false},
		{"anthropic tokens", map[string]string{"anthropic-ratelimit-tokens-limit": "1000000", "anthropic-ratelimit-tokens-remaining": "10"}, Budget{}, Grant{Requests: -1, Tokens: 10}, true},
		{"none", nil, Budget{}, Grant{Requests: -1, Tokens: -1}, false},
	} {
		limit, left, low := fromHeaders(b, c.rl)
		if limit != c.limit || left != c.left || low != c.low {
			t.Errorf("%s: got %+v %+v %v, want %+v %+v %v", c.name, limit, left, low, c.limit, c.left, c.low)
		}
	}
}
