package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// limiter enforces RPM and TPM budgets per lane (model + API key) with token
// buckets that refill continuously, like the providers describe theirs.
type limiter struct {
	rpm, tpm int
	now      func() time.Time
	mu       sync.Mutex
	lanes    map[string]*lane
}

type bucket struct {
	level float64
	last  time.Time
}

type lane struct {
	req, tok bucket
}

// limitResult is the outcome of one take, with what the headers report.
type limitResult struct {
	ok bool
	// which budget ran out: "requests" or "tokens".
	which      string
	retryAfter time.Duration
	reqRemain  int
	tokRemain  int
	reqReset   time.Duration // until the request bucket is full
	tokReset   time.Duration
}

func newLimiter(rpm, tpm int, now func() time.Time) *limiter {
	return &limiter{rpm: rpm, tpm: tpm, now: now, lanes: map[string]*lane{}}
}

func (l *limiter) enabled() bool { return l.rpm > 0 || l.tpm > 0 }

func refill(b *bucket, capacity int, now time.Time) {
	if capacity <= 0 {
		return
	}
	rate := float64(capacity) / 60 // per second
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.level = math.Min(float64(capacity), b.level+el*rate)
	}
	b.last = now
}

func untilFull(b bucket, capacity int) time.Duration {
	if capacity <= 0 {
		return 0
	}
	rate := float64(capacity) / 60
	return time.Duration((float64(capacity) - b.level) / rate * float64(time.Second))
}

// take spends one request and n tokens from the lane's budgets.
func (l *limiter) take(key string, n int) limitResult {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ln, ok := l.lanes[key]
	if !ok {
		ln = &lane{req: bucket{float64(l.rpm), now}, tok: bucket{float64(l.tpm), now}}
		l.lanes[key] = ln
	}
	refill(&ln.req, l.rpm, now)
	refill(&ln.tok, l.tpm, now)
	res := limitResult{ok: true}
	switch {
	case l.rpm > 0 && ln.req.level < 1:
		res.ok, res.which = false, "requests"
		res.retryAfter = time.Duration((1 - ln.req.level) / (float64(l.rpm) / 60) * float64(time.Second))
	case l.tpm > 0 && ln.tok.level < float64(n):
		res.ok, res.which = false, "tokens"
		need := math.Min(float64(n), float64(l.tpm)) - ln.tok.level
		res.retryAfter = time.Duration(need / (float64(l.tpm) / 60) * float64(time.Second))
	default:
		if l.rpm > 0 {
			ln.req.level--
		}
		if l.tpm > 0 {
			ln.tok.level -= float64(n)
		}
	}
	res.reqRemain = int(math.Max(0, math.Floor(ln.req.level)))
	res.tokRemain = int(math.Max(0, math.Floor(ln.tok.level)))
	res.reqReset = untilFull(ln.req, l.rpm)
	res.tokReset = untilFull(ln.tok, l.tpm)
	return res
}

// sample draws a duration with median p50 and 99th percentile p99.
func sample(d Dist, p50, p99 time.Duration, r *rand.Rand) time.Duration {
	if p50 <= 0 && p99 <= 0 {
		return 0
	}
	if p99 <= p50 || d == DistFixed {
		return p50
	}
	switch d {
	case DistUniform:
		w := float64(p99-p50) / 0.49
		a := float64(p50) - w/2
		if a < 0 {
			a, w = 0, 2*float64(p50)
		}
		return time.Duration(a + r.Float64()*w)
	default:
		if p50 <= 0 {
			p50 = 1
		}
		mu := math.Log(float64(p50))
		sigma := (math.Log(float64(p99)) - mu) / 2.3263478740408408
		return time.Duration(math.Exp(mu + sigma*r.NormFloat64()))
	}
}

// delay is the think time of a reply with n completion tokens.
func (l Latency) delay(n int, r *rand.Rand) time.Duration {
	if l.RequestP50 == 0 && l.RequestP99 == 0 && l.TokenP50 == 0 && l.TokenP99 == 0 {
		return 0
	}
	return sample(l.Dist, l.RequestP50, l.RequestP99, r) + time.Duration(n)*sample(l.Dist, l.TokenP50, l.TokenP99, r)
}

// sleep waits d, or until ctx or done ends; it reports whether d elapsed.
func sleep(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-done:
		return false
	}
}
