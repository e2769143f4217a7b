package llm

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Granter hands out a lane's budget shared with other processes: a lane
// given one spends only what it was granted, so every process calling
// the same key together stays within the key's RPM and TPM. The budget
// package implements it on a NATS KV bucket; llm knows no coordinator.
//
// A Granter must be safe for concurrent use. An error means the
// coordinator could not be asked: the lane keeps its callers waiting and
// asks again at its next renewal; it never fails a call for it.
type Granter interface {
	// Lease asks for up to want of the lane's budget. It returns what
	// was granted, possibly nothing (the budget is spent for now), with
	// the time its unspent remainder expires.
	Lease(ctx context.Context, lane LaneKey, budget Budget, want Grant) (Grant, error)
	// Shrink lowers the lane's budget for every process sharing it: the
	// provider refused a call (429) or reported its budget nearly spent.
	Shrink(ctx context.Context, lane LaneKey, budget Budget, s Shrink) error
}

// Budget is a lane's budget across every process sharing it; 0 means
// unlimited.
type Budget struct {
	RPM, TPM int
}

// Grant is a share of a lane's budget: requests and tokens to spend
// before Expires.
type Grant struct {
	Requests, Tokens int
	Expires          time.Time
}

// Shrink lowers a lane's budget: Factor (0 < Factor < 1; 1 for none)
// scales its rate until Until, and Left, when set, caps what its buckets
// hold now (a negative count caps nothing).
type Shrink struct {
	Factor float64
	Until  time.Time
	Left   *Grant
}

// The lane's side of a shared budget. A lane renews its grants ahead of
// need, every GrantRenewEvery at most (a call never asks the coordinator
// itself, so the coordinator's messages a second do not grow with the
// call rate): it asks for what its recent rate spends in grantAhead plus
// what its waiting callers need, less what it holds.
const (
	// GrantRenewEvery is the shortest time between two leases of a lane
	// in one process.
	GrantRenewEvery = 500 * time.Millisecond
	grantAhead      = 2 * GrantRenewEvery
	// grantIdle ends a lane's renewals after a spell without callers;
	// the next call starts them again.
	grantIdle = 30 * time.Second
	// shrinkEvery spaces a process's shrink reports of one lane: a 429
	// seen by many calls at once is one congestion event.
	shrinkEvery = time.Second
	// Shrink429 is the factor a 429 applies, for ShrinkFor429 at least.
	Shrink429    = 0.5
	ShrinkFor429 = 10 * time.Second
	// shrinkMax bounds a shrink's length whatever the retry hint.
	shrinkMax = time.Minute
	// lowRemaining is the share of a budget's limit under which what the
	// provider reports left caps the shared buckets.
	lowRemaining = 0.05
)

// grantBook holds a lane's grants in one process: callers take from it,
// a pump goroutine renews it while there is demand.
type grantBook struct {
	g      Granter
	key    LaneKey
	budget Budget
	clock  Clock

	mu      sync.Mutex
	grants  []Grant // unexpired, oldest first; what is left of each
	debt    int     // tokens used beyond their estimates, paid from the next grants
	waitReq int     // callers waiting for a grant
	waitTok int     // and the tokens they need
	// taken and takenTok count what callers took since the last renewal;
	// rate and tokRate (per second) are their moving averages.
	taken, takenTok int
	rate, tokRate   float64
	lastRenew       time.Time
	lastUse         time.Time
	lastShrink      time.Time
	lastCap         time.Time
	pumping         bool
	wake            chan struct{} // closed when a grant arrives
}

func newGrantBook(g Granter, key LaneKey, b Budget, clock Clock) *grantBook {
	return &grantBook{g: g, key: key, budget: b, clock: clock, wake: make(chan struct{})}
}

// take waits until the book holds a request and tokens (estimated), and
// spends them. It never fails but for ctx: a missing grant is waited for.
func (b *grantBook) take(ctx context.Context, tokens int) error {
	counted := false
	defer func() {
		if counted {
			b.mu.Lock()
			b.waitReq--
			b.waitTok -= tokens
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		now := b.clock.Now()
		b.lastUse = now
		b.dropExpiredLocked(now)
		if b.haveLocked(tokens) {
			b.spendLocked(tokens)
			b.mu.Unlock()
			return nil
		}
		if !counted {
			counted = true
			b.waitReq++
			b.waitTok += tokens
		}
		b.startPumpLocked()
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// reconcile charges what a call used beyond its estimate, or gives back
// what it did not use.
func (b *grantBook) reconcile(estimate, used int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.budget.TPM == 0 || used <= 0 || used == estimate {
		return
	}
	b.takenTok += used - estimate
	if used > estimate {
		b.debt += used - estimate
		return
	}
	back := estimate - used
	if pay := min(back, b.debt); pay > 0 {
		b.debt -= pay
		back -= pay
	}
	if back > 0 && len(b.grants) > 0 {
		// To the newest grant: it is the one that lives longest.
		b.grants[len(b.grants)-1].Tokens += back
	}
}

// shrink reports the provider's refusal or low budget to the coordinator,
// at most once per shrinkEvery, without holding up the caller.
func (b *grantBook) shrink(s Shrink) {
	b.mu.Lock()
	now := b.clock.Now()
	last := &b.lastShrink // a cap (Factor 1) does not hold up a 429's shrink
	if s.Factor >= 1 {
		last = &b.lastCap
	}
	if now.Sub(*last) < shrinkEvery {
		b.mu.Unlock()
		return
	}
	*last = now
	// What is held locally is part of the budget that proved too large.
	for i := range b.grants {
		if s.Factor >= 1 {
			break
		}
		b.grants[i].Requests = int(float64(b.grants[i].Requests) * s.Factor)
		b.grants[i].Tokens = int(float64(b.grants[i].Tokens) * s.Factor)
	}
	budget := b.budget
	b.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.g.Shrink(ctx, b.key, budget, s) // the Granter reports its own failures
	}()
}

// observe applies what a reply's rate-limit headers say (fromHeaders):
// a lower limit becomes the budget this process leases by, and a budget
// nearly spent caps the shared buckets.
func (b *grantBook) observe(rl map[string]string, now time.Time) {
	b.mu.Lock()
	limit, left, low := fromHeaders(b.budget, rl)
	if limit.RPM > 0 {
		b.budget.RPM = limit.RPM
	}
	if limit.TPM > 0 {
		b.budget.TPM = limit.TPM
	}
	b.mu.Unlock()
	if low {
		b.shrink(Shrink{Factor: 1, Until: now, Left: &left})
	}
}

func (b *grantBook) dropExpiredLocked(now time.Time) {
	i := 0
	for i < len(b.grants) && !now.Before(b.grants[i].Expires) {
		i++
	}
	b.grants = b.grants[i:]
}

func (b *grantBook) heldLocked() (req, tok int) {
	for _, g := range b.grants {
		req += g.Requests
		tok += g.Tokens
	}
	return req, tok - b.debt
}

// haveLocked reports whether the book holds a request and tokens: all of
// them, or for a call over a second of the budget that second's worth
// (the rest becomes debt, paid from the next grants).
func (b *grantBook) haveLocked(tokens int) bool {
	req, tok := b.heldLocked()
	if b.budget.RPM > 0 && req < 1 {
		return false
	}
	return b.budget.TPM == 0 || tok >= min(tokens, max(1, b.budget.TPM/60))
}

// spendLocked takes a request and tokens, from the oldest grants first.
func (b *grantBook) spendLocked(tokens int) {
	b.taken++
	b.takenTok += tokens
	needReq := b.budget.RPM > 0
	for i := range b.grants {
		g := &b.grants[i]
		if needReq && g.Requests > 0 {
			g.Requests--
			needReq = false
		}
		if b.budget.TPM > 0 && tokens > 0 {
			n := min(tokens, g.Tokens)
			g.Tokens -= n
			tokens -= n
		}
	}
	if b.budget.TPM > 0 {
		b.debt += tokens
	}
}

func (b *grantBook) startPumpLocked() {
	if b.pumping {
		return
	}
	b.pumping = true
	go b.pump()
}

// wantLocked is what a renewal at now asks for: the recent rate over
// grantAhead plus what waiting callers need, less what is held.
func (b *grantBook) wantLocked(now time.Time) Grant {
	if el := now.Sub(b.lastRenew).Seconds(); !b.lastRenew.IsZero() && el > 0 {
		b.rate = (b.rate + float64(b.taken)/el) / 2
		b.tokRate = (b.tokRate + float64(b.takenTok)/el) / 2
	}
	b.taken, b.takenTok = 0, 0
	req, tok := b.heldLocked()
	ahead := grantAhead.Seconds()
	var w Grant
	if b.budget.RPM > 0 {
		w.Requests = max(0, int(math.Ceil(b.rate*ahead))+b.waitReq-req)
	}
	if b.budget.TPM > 0 {
		w.Tokens = max(0, int(math.Ceil(b.tokRate*ahead))+b.waitTok-tok)
	}
	return w
}

// pump renews the book while the lane is used: a lease at most every
// GrantRenewEvery, and none once grantIdle passed without a caller (the
// next caller starts the pump again, and its first lease goes at once).
func (b *grantBook) pump() {
	ctx := context.Background()
	for {
		b.mu.Lock()
		now := b.clock.Now()
		b.dropExpiredLocked(now)
		want, budget := b.wantLocked(now), b.budget
		b.lastRenew = now
		if want == (Grant{}) && b.waitReq == 0 && now.Sub(b.lastUse) >= grantIdle {
			b.pumping = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		if want != (Grant{}) {
			b.lease(ctx, budget, want)
		}
		<-b.clock.NewTimer(GrantRenewEvery).C()
	}
}

func (b *grantBook) lease(ctx context.Context, budget Budget, want Grant) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	g, err := b.g.Lease(lctx, b.key, budget, want)
	cancel()
	if err != nil || g.Requests <= 0 && g.Tokens <= 0 {
		return // the Granter reports its failures; callers wait for the next renewal
	}
	if budget.RPM == 0 {
		g.Requests = 0
	}
	if budget.TPM == 0 {
		g.Tokens = 0
	}
	b.mu.Lock()
	b.grants = append(b.grants, g)
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// providerBudget reads a reply's rate-limit headers (lower-cased, as
// Response.RateLimit keeps them): the limit and what is left of the
// request and the token budget, -1 where a header is missing.
// OpenAI-style servers send x-ratelimit-{limit,remaining}-{requests,tokens},
// Anthropic anthropic-ratelimit-{requests,tokens}-{limit,remaining}.
func providerBudget(rl map[string]string) (limit, left Grant) {
	num := func(keys ...string) int {
		for _, k := range keys {
			if v, ok := rl[k]; ok {
				if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
					return n
				}
			}
		}
		return -1
	}
	limit.Requests = num("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit")
	limit.Tokens = num("x-ratelimit-limit-tokens", "anthropic-ratelimit-tokens-limit")
	left.Requests = num("x-ratelimit-remaining-requests", "anthropic-ratelimit-requests-remaining")
	left.Tokens = num("x-ratelimit-remaining-tokens", "anthropic-ratelimit-tokens-remaining")
	return limit, left
}

// fromHeaders is what a reply's rate-limit headers say of a shared
// budget. A limit under the budget configured is the key's real budget:
// limit holds it (0 where the headers say nothing of the sort). What is
// left is the level of a bucket the provider refills as it goes, near 0
// whenever the key is used at its full rate, so it does not slow the
// budget; but under lowRemaining of the limit it caps what the shared
// buckets hold (left, ok), so that no burst is granted the provider has
// not got.
func fromHeaders(b Budget, rl map[string]string) (limit Budget, left Grant, ok bool) {
	lim, rem := providerBudget(rl)
	left = Grant{Requests: -1, Tokens: -1}
	for _, x := range []struct {
		budget, limit, left int
		lower, cap          *int
	}{{b.RPM, lim.Requests, rem.Requests, &limit.RPM, &left.Requests}, {b.TPM, lim.Tokens, rem.Tokens, &limit.TPM, &left.Tokens}} {
		if x.budget == 0 || x.limit <= 0 {
			continue
		}
		if x.limit < x.budget {
			*x.lower = x.limit
		}
		if x.left >= 0 && float64(x.left) < lowRemaining*float64(x.limit) {
			*x.cap, ok = x.left, true
		}
	}
	return limit, left, ok
}
