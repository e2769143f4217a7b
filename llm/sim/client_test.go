package sim_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/llm/sim"
)

// simClient starts a simulator and a real client of provider against it.
func simClient(t *testing.T, provider string, cfg sim.Config, ccfg llm.Config) (*sim.Server, *llm.Client) {
	t.Helper()
	s, url, closeSim, err := sim.Start(cfg)
	if err != nil {
		t.Fatalf("start simulator: %v", err)
	}
	t.Cleanup(closeSim)
	if provider == llm.ProviderOpenAI {
		url += "/v1"
	}
	ccfg.Provider, ccfg.BaseURL = provider, url
	c, err := llm.New(ccfg)
	if err != nil {
		t.Fatalf("llm.New: %v", err)
	}
	return s, c
}

var providers = []string{llm.ProviderOpenAI, llm.ProviderAnthropic, llm.ProviderOllama}

// TestClientHugeReplyCalledOnce: the simulator's 5 MiB reply is over the
// client's 4 MiB cap; the client makes exactly one call, for any wire
// format, and reports its size and first bytes.
func TestClientHugeReplyCalledOnce(t *testing.T) {
	t.Parallel()
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			s, c := simClient(t, provider, sim.Config{Seed: 1, Transport: sim.Transport{Huge: 1}},
				llm.Config{Retry: llm.RetryConfig{NoJitter: true, MaxRetries: 4}, Clock: newInstantClock()})
			_, err := c.Complete(context.Background(), llm.Request{Model: "m", Mode: llm.ModePrompt,
				Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			var e *llm.Error
			if !errors.As(err, &e) || e.Class != llm.ClassTooLarge || e.Status != 200 {
				t.Fatalf("err = %v, want too_large (HTTP 200)", err)
			}
			if n := s.Stats().Requests; n != 1 {
				t.Fatalf("the simulator got %d calls, want 1", n)
			}
			if e.Size <= sim.HugeBytesDefault || e.Size > sim.HugeBytesDefault+64<<10 {
				t.Fatalf("Size = %d, want the reply's length, a little over %d", e.Size, sim.HugeBytesDefault)
			}
			if len(e.Head) < 512 || len(e.Head) > 1024 || e.Head[0] != '{' {
				t.Fatalf("Head = %q, want the reply's first KiB", e.Head)
			}
		})
	}
}

// instantClock is an llm.Clock whose timers fire at once and move its time
// forward, so the client's backoff and lane waits cost no real time.
type instantClock struct{ c *autoClock }

type autoClock struct {
	mu  sync.Mutex
	now time.Time
}

func newInstantClock() instantClock {
	return instantClock{&autoClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}}
}

func (k instantClock) Now() time.Time {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	return k.c.now
}

func (k instantClock) NewTimer(d time.Duration) llm.Timer {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	k.c.now = k.c.now.Add(max(d, 0))
	ch := make(chan time.Time, 1)
	ch <- k.c.now
	return firedTimer(ch)
}

type firedTimer chan time.Time

func (t firedTimer) C() <-chan time.Time { return t }
func (t firedTimer) Stop() bool          { return false }

// TestClientQuotaExhausted: the simulator's quota error is what the client
// takes for a spent quota, for each provider that has one: one call, and
// the lane refuses the next without calling.
func TestClientQuotaExhausted(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			s, c := simClient(t, provider, sim.Config{Seed: 1, QuotaExhausted: true},
				llm.Config{Retry: llm.RetryConfig{NoJitter: true}, Clock: newInstantClock()})
			for range 2 {
				_, err := c.Complete(context.Background(), llm.Request{Model: "m",
					Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
				var e *llm.Error
				if !errors.As(err, &e) || e.Class != llm.ClassQuotaExhausted {
					t.Fatalf("err = %v, want quota_exhausted", err)
				}
			}
			if n := s.Stats().Requests; n != 1 {
				t.Fatalf("the simulator got %d calls, want 1", n)
			}
		})
	}
}
