package sim_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/sim"
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
			_, err := c.Complete(context.Background(), fixpoint.Request{Model: "m", Mode: fixpoint.ModePrompt,
				Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}})
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != fixpoint.ClassTooLarge || e.Status != 200 {
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
				_, err := c.Complete(context.Background(), fixpoint.Request{Model: "m",
					Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}})
				var e *fixpoint.ProviderError
				if !errors.As(err, &e) || e.Class != fixpoint.ClassQuotaExhausted {
					t.Fatalf("err = %v, want quota_exhausted", err)
				}
			}
			if n := s.Stats().Requests; n != 1 {
				t.Fatalf("the simulator got %d calls, want 1", n)
			}
		})
	}
}

// TestClientSelfReferentSchemas sends schemas that refer to themselves
// through the real client to the simulator, in every mode on every wire
// format, then a correction turn: every call is answered, with a bounded
// reply, before the test's deadline.
func TestClientSelfReferentSchemas(t *testing.T) {
	t.Parallel()
	schemas := map[string]string{
		"items cycle to a node with properties": `{"$defs":{"node":{"type":["object","array"],"properties":{"name":{"type":"string"}},"items":{"$ref":"#/$defs/node"}}},"$ref":"#/$defs/node"}`,
		"root self-reference":                   `{"$ref":"#"}`,
		"mutual recursion":                      `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		"required self-reference":               `{"type":"object","required":["c"],"properties":{"c":{"$ref":"#"}}}`,
		"two required self-references":          `{"type":"object","required":["a","b"],"properties":{"a":{"$ref":"#"},"b":{"$ref":"#"}}}`,
	}
	mix := sim.Mix{WrongType: 0.5, MissingRequired: 0.5, ExtraProperty: 0.5, Fence: 0.3, Truncation: 0.1}
	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			_, c := simClient(t, provider, sim.Config{Seed: 7, Mix: mix, NewFaultProb: 0.5},
				llm.Config{Retry: llm.RetryConfig{Disabled: true}, Clock: newInstantClock()})
			for name, schema := range schemas {
				for _, mode := range []fixpoint.Mode{fixpoint.ModePrompt, fixpoint.ModeJSONSchema, fixpoint.ModeTool} {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					req := fixpoint.Request{Model: "m", Mode: mode, MaxTokens: 1 << 20, User: name,
						Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "task: " + name}}}
					if mode == fixpoint.ModePrompt {
						req.System = "Answer with JSON matching:\n" + fixpoint.SchemaMarkerOpen + "\n" + schema + "\n" + fixpoint.SchemaMarkerClose
					} else {
						req.Schema = []byte(schema)
					}
					resp, err := c.Complete(ctx, req)
					if err != nil || len(resp.Text) > 1<<20 {
						cancel()
						t.Fatalf("%s, %s: %v", name, mode, err)
					}
					req.Messages = append(req.Messages, fixpoint.Message{Role: fixpoint.RoleAssistant, Content: resp.Text},
						fixpoint.Message{Role: fixpoint.RoleUser, Content: "Fix /c, /a, /b, /0 and /name."})
					resp, err = c.Complete(ctx, req)
					cancel()
					if err != nil || len(resp.Text) > 1<<20 {
						t.Fatalf("%s, %s, correction: %v", name, mode, err)
					}
				}
			}
		})
	}
}
