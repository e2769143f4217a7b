package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"golang.org/x/time/rate"
)

// LaneKey identifies a lane: every call to the same provider, base URL,
// model and API key shares one lane, hence one set of budgets.
type LaneKey struct {
	Provider string
	BaseURL  string
	Model    string
	// KeyHash is a short SHA-256 prefix of the API key ("" without a key),
	// so keys never appear in labels or logs.
	KeyHash string
}

// String returns "provider|base URL|model|key hash", usable as a label.
func (k LaneKey) String() string {
	return k.Provider + "|" + RedactURL(k.BaseURL) + "|" + k.Model + "|" + k.KeyHash
}

// KeyHash returns the hash of an API key used in LaneKey: the first 12 hex
// digits of its SHA-256, or "" for no key.
func KeyHash(apiKey string) string {
	if apiKey == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:6])
}

// CallEvent describes one HTTP attempt, for metrics.
type CallEvent struct {
	Lane LaneKey
	// Class is "" on success.
	Class   fixpoint.ErrorClass
	Status  int
	Latency time.Duration
	// Attempt is 0 for the first attempt, 1 for the first retry, and so on.
	Attempt int
}

// Observer receives metrics events from clients and lanes. Methods are
// called synchronously and must not block. llm never logs; hook this instead.
type Observer interface {
	// OnCall is called after every HTTP attempt.
	OnCall(ev CallEvent)
	// OnPause is called when a lane starts a pause of d (not when a pause
	// already running is extended).
	OnPause(lane LaneKey, d time.Duration)
	// OnConcurrency is called when a lane's concurrency limit changes.
	OnConcurrency(lane LaneKey, limit int)
}

// NopObserver ignores every event. Embed it to implement part of Observer.
type NopObserver struct{}

var _ Observer = NopObserver{}

// OnCall does nothing.
func (NopObserver) OnCall(CallEvent) {}

// OnPause does nothing.
func (NopObserver) OnPause(LaneKey, time.Duration) {}

// OnConcurrency does nothing.
func (NopObserver) OnConcurrency(LaneKey, int) {}

// Registry holds the lanes of a process so that every client calling the
// same lane shares its limiter. It is safe for concurrent use.
type Registry struct {
	clock   Clock
	obs     Observer
	granter Granter

	mu    sync.Mutex
	lanes map[LaneKey]*Lane
}

// NewRegistry returns an empty registry. A nil clock means the real clock;
// a nil observer means none.
func NewRegistry(clock Clock, obs Observer) *Registry {
	if clock == nil {
		clock = RealClock{}
	}
	if obs == nil {
		obs = NopObserver{}
	}
	return &Registry{clock: clock, obs: obs, lanes: make(map[LaneKey]*Lane)}
}

// SetGranter makes the RPM and TPM of the lanes created from now on a
// budget shared with other processes through g (see Granter); nil keeps
// them this process's own. Call it before the first Get.
func (r *Registry) SetGranter(g Granter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.granter = g
}

// Get returns the lane for key, creating it with cfg (defaults applied) if
// it does not exist yet. The first configuration of a lane wins.
func (r *Registry) Get(key LaneKey, cfg LaneConfig) (*Lane, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.lanes[key]; ok {
		return l, nil
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := newLane(key, cfg, r.clock, r.obs)
	if r.granter != nil && (cfg.RPM > 0 || cfg.TPM > 0) {
		l.book = newGrantBook(r.granter, key, Budget{RPM: cfg.RPM, TPM: cfg.TPM}, r.clock)
	}
	r.lanes[key] = l
	return l, nil
}

// Lanes returns the registered lanes ordered by key.
func (r *Registry) Lanes() []*Lane {
	r.mu.Lock()
	out := make([]*Lane, 0, len(r.lanes))
	for _, l := range r.lanes {
		out = append(out, l)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].key.String() < out[j].key.String() })
	return out
}

// Lane is the shared budget of one (provider, base URL, model, API key): a
// request-per-minute and a token-per-minute limiter, an adaptive
// concurrency limit (AIMD: +1 per success, halved on 429 or overload), a
// pause set by the server's retry hint, and a quota flag.
type Lane struct {
	key   LaneKey
	cfg   LaneConfig
	clock Clock
	obs   Observer
	rpm   *rate.Limiter // nil when unlimited
	tpm   *rate.Limiter // nil when unlimited
	// book holds the grants of a budget shared with other processes; nil
	// when the budgets are this process's own. The limiters above still
	// space the calls granted.
	book *grantBook

	mu          sync.Mutex
	limit       int
	inFlight    int
	gen         uint64          // bumped on every decrease of limit
	waiters     []chan struct{} // acquirers waiting for a slot, oldest first
	pausedUntil time.Time
	resumeN     int // waiters given a resume slot since the pause began
	quotaUntil  time.Time
	quotaErr    *fixpoint.ProviderError
}

func newLane(key LaneKey, cfg LaneConfig, clock Clock, obs Observer) *Lane {
	l := &Lane{key: key, cfg: cfg, clock: clock, obs: obs, limit: cfg.InitialConcurrency}
	if cfg.RPM > 0 {
		// Burst 1: requests are spaced 60s/RPM apart, so any 60s window
		// (half-open) holds at most RPM of them.
		l.rpm = rate.NewLimiter(rate.Limit(float64(cfg.RPM)/60), 1)
	}
	if cfg.TPM > 0 {
		// A bucket of b refilled at r admits less than b + 60r per minute;
		// r = (TPM-b)/60 keeps that under TPM.
		l.tpm = rate.NewLimiter(rate.Limit(float64(cfg.TPM-cfg.TPMBurst)/60), cfg.TPMBurst)
	}
	return l
}

// Key returns the lane's identity.
func (l *Lane) Key() LaneKey { return l.key }

// Config returns the lane's configuration, defaults applied.
func (l *Lane) Config() LaneConfig { return l.cfg }

// LaneStats is a snapshot of a lane, for metrics.
type LaneStats struct {
	// Limit is the current adaptive concurrency limit.
	Limit    int
	InFlight int
	// PausedUntil is the end of the current pause; zero or past when none.
	PausedUntil time.Time
	// QuotaUntil is when a quota_exhausted lane accepts calls again.
	QuotaUntil time.Time
}

// Stats returns a snapshot of the lane.
func (l *Lane) Stats() LaneStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LaneStats{Limit: l.limit, InFlight: l.inFlight, PausedUntil: l.pausedUntil, QuotaUntil: l.quotaUntil}
}

func (l *Lane) quotaLocked(now time.Time) *fixpoint.ProviderError {
	if l.quotaErr == nil || !now.Before(l.quotaUntil) {
		return nil
	}
	e := *l.quotaErr
	e.Retries = nil
	e.RetryAfter = l.quotaUntil.Sub(now)
	e.Message = fmt.Sprintf("lane %s refuses calls for %v after quota exhausted: %s",
		l.key.Model, e.RetryAfter.Round(time.Second), l.quotaErr.Message)
	return &e
}

// wakeLocked wakes as many waiters as there are free slots, oldest first.
// A woken waiter takes its slot when it gets the lock, or queues again if a
// newcomer took it first; that newcomer's release wakes the next.
func (l *Lane) wakeLocked() {
	for free := l.limit - l.inFlight; free > 0 && len(l.waiters) > 0; free-- {
		close(l.waiters[0])
		l.waiters = l.waiters[1:]
	}
}

// wakeAllLocked wakes every waiter, for a change each must see at once
// (the quota running out).
func (l *Lane) wakeAllLocked() {
	for _, w := range l.waiters {
		close(w)
	}
	l.waiters = nil
}

// dropWaiterLocked removes w from the queue; false if it was already woken.
func (l *Lane) dropWaiterLocked(w chan struct{}) bool {
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// permit is a granted slot on a lane; done must be called exactly once.
type permit struct {
	lane   *Lane
	gen    uint64
	tokens int
}

// acquire waits for the lane: quota, pause, concurrency slot, then the RPM
// and TPM budgets for tokens estimated tokens.
func (l *Lane) acquire(ctx context.Context, tokens int) (*permit, error) {
	l.mu.Lock()
	for {
		now := l.clock.Now()
		if e := l.quotaLocked(now); e != nil {
			l.mu.Unlock()
			return nil, e
		}
		if now.Before(l.pausedUntil) {
			// Take a resume slot so that waiters leave the pause spread out.
			wake := l.pausedUntil.Add(time.Duration(l.resumeN) * l.cfg.ResumeSpacing)
			l.resumeN++
			l.mu.Unlock()
			if err := sleep(ctx, l.clock, wake.Sub(now)); err != nil {
				return nil, err
			}
			l.mu.Lock()
			if l.clock.Now().Before(l.pausedUntil) {
				continue // extended meanwhile
			}
		}
		if l.inFlight < l.limit {
			l.inFlight++
			break
		}
		// Queue for a slot. Each release wakes only as many waiters as
		// there are free slots: a broadcast would wake every waiting job
		// for each call that ends, hundreds of times over.
		w := make(chan struct{})
		l.waiters = append(l.waiters, w)
		l.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			l.mu.Lock()
			if !l.dropWaiterLocked(w) {
				l.wakeLocked() // woken as we left: pass the slot on
			}
			l.mu.Unlock()
			return nil, context.Cause(ctx)
		}
		l.mu.Lock()
	}
	p := &permit{lane: l, gen: l.gen, tokens: tokens}
	l.mu.Unlock()

	if err := l.waitBudgets(ctx, tokens); err != nil {
		l.mu.Lock()
		l.inFlight--
		l.wakeLocked()
		l.mu.Unlock()
		return nil, err
	}
	return p, nil
}

func (l *Lane) waitBudgets(ctx context.Context, tokens int) error {
	if l.book != nil {
		if err := l.book.take(ctx, tokens); err != nil {
			return err
		}
	}
	if l.rpm != nil {
		if err := waitLimiter(ctx, l.clock, l.rpm, 1); err != nil {
			return err
		}
	}
	if l.tpm != nil {
		for n := tokens; n > 0; n -= l.cfg.TPMBurst {
			if err := waitLimiter(ctx, l.clock, l.tpm, min(n, l.cfg.TPMBurst)); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitLimiter reserves n (<= burst) on lim at the clock's time and sleeps
// the delay on the clock.
func waitLimiter(ctx context.Context, clock Clock, lim *rate.Limiter, n int) error {
	now := clock.Now()
	r := lim.ReserveN(now, n)
	if !r.OK() {
		return fmt.Errorf("reserve %d tokens: exceeds burst %d", n, lim.Burst())
	}
	if d := r.DelayFrom(now); d > 0 {
		if err := sleep(ctx, clock, d); err != nil {
			r.CancelAt(clock.Now())
			return err
		}
	}
	return nil
}

// done releases the permit. class is "" on success; hint is the server's
// retry hint (the lane pauses for it unless it is over MaxHintWait); used is the
// tokens the provider reported (0 if unknown).
func (p *permit) done(class fixpoint.ErrorClass, hint time.Duration, used int, perr *fixpoint.ProviderError) {
	l := p.lane
	now := l.clock.Now()
	l.mu.Lock()
	l.inFlight--
	limit := -1
	pause := time.Duration(0)
	switch class {
	case "":
		if l.limit < l.cfg.MaxConcurrency {
			l.limit++
			limit = l.limit
		}
	case fixpoint.ClassRateLimited, fixpoint.ClassOverloaded:
		if class == fixpoint.ClassRateLimited && l.book != nil {
			l.book.shrink(Shrink{Factor: Shrink429, Until: now.Add(min(max(hint, ShrinkFor429), shrinkMax)), Left: &Grant{}})
		}
		// Halve once per congestion event: a permit granted before the last
		// decrease saw the same congestion and does not halve again.
		if p.gen == l.gen {
			l.gen++
			if nl := max(l.limit/2, l.cfg.MinConcurrency); nl != l.limit {
				l.limit = nl
				limit = nl
			}
		}
		// A hint over MaxHintWait does not pause the lane: a server may ask
		// one request for an hour, and the caller, told the full hint,
		// hands that job back for it instead of every call of the lane
		// waiting (the concurrency halving above still slows the lane).
		if hint > 0 && hint <= l.cfg.MaxHintWait {
			until := now.Add(hint)
			if until.After(l.pausedUntil) {
				if !now.Before(l.pausedUntil) {
					pause = hint
				}
				l.pausedUntil = until
				l.resumeN = 0
			}
		}
	case fixpoint.ClassQuotaExhausted:
		l.quotaUntil = now.Add(l.cfg.QuotaCooldown)
		e := *perr
		e.Retries = nil
		l.quotaErr = &e
		l.wakeAllLocked()
	}
	l.wakeLocked()
	l.mu.Unlock()

	if l.book != nil {
		l.book.reconcile(p.tokens, used)
	}
	if extra := used - p.tokens; extra > 0 && l.tpm != nil {
		// Charge what the estimate missed; it delays later requests.
		for ; extra > 0; extra -= l.cfg.TPMBurst {
			l.tpm.ReserveN(now, min(extra, l.cfg.TPMBurst))
		}
	}
	if limit >= 0 {
		l.obs.OnConcurrency(l.key, limit)
	}
	if pause > 0 {
		l.obs.OnPause(l.key, pause)
	}
}

// observeRemaining tells a shared budget what a reply's rate-limit
// headers say of the provider's (fromHeaders).
func (l *Lane) observeRemaining(rl map[string]string) {
	if l.book == nil {
		return
	}
	l.book.observe(rl, l.clock.Now())
}

// sleep waits d on clock, or until ctx ends.
func sleep(ctx context.Context, clock Clock, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
