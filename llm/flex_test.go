package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

var flexReq = fixpoint.Request{Model: "m", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}, ServiceTier: fixpoint.ServiceTierFlex}

const capacity429 = `{"error":{"message":"Resource Unavailable: flex processing capacity is not available right now.","type":"resource_unavailable","param":null,"code":"resource_unavailable"}}`

// okTier is a chat completion served on tier.
func okTier(tier string) string {
	return `{"id":"x","model":"m","service_tier":"` + tier + `","choices":[{"message":{"content":"{}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`
}

// sentTier is the service_tier a captured request body carried, "" when none.
func sentTier(t *testing.T, c captured) string {
	t.Helper()
	var b struct {
		ServiceTier *string `json:"service_tier"`
	}
	if err := json.Unmarshal(c.Body, &b); err != nil {
		t.Fatalf("request body: %v", err)
	}
	if b.ServiceTier == nil {
		return ""
	}
	if *b.ServiceTier == "" {
		t.Fatalf("service_tier sent empty: %s", c.Body)
	}
	return *b.ServiceTier
}

func TestFlexTierOnTheWire(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, replyJSON(200, okTier("flex")))
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL})
	resp, err := c.Complete(context.Background(), flexReq)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ServiceTier != "flex" {
		t.Errorf("ServiceTier = %q, want flex (the tier served)", resp.ServiceTier)
	}
	plain := flexReq
	plain.ServiceTier = ""
	if _, err := c.Complete(context.Background(), plain); err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	if got := sentTier(t, reqs[0]); got != "flex" {
		t.Errorf("flex request sent service_tier %q", got)
	}
	if got := sentTier(t, reqs[1]); got != "" {
		t.Errorf("default-tier request sent service_tier %q, want none", got)
	}
}

func TestFlexRefusedWhereTheRowLacksIt(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, replyJSON(200, okTier("flex")))
	c := testClient(t, Config{Provider: "mistral", BaseURL: rec.srv.URL})
	_, err := c.Complete(context.Background(), flexReq)
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) || e.Class != fixpoint.ClassBadRequest || !strings.Contains(e.Message, "mistral has no flex tier") {
		t.Fatalf("err = %v, want a bad request naming mistral", err)
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
	odd := flexReq
	odd.ServiceTier = "priority"
	c = testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL})
	if _, err := c.Complete(context.Background(), odd); err == nil || !strings.Contains(err.Error(), `unknown service tier "priority"`) {
		t.Fatalf("err = %v, want unknown service tier", err)
	}
}

// TestCapacityIsNotARateLimit: a capacity 429 leaves the lane's
// concurrency and pause alone; a rate-limit 429 halves and pauses it.
func TestCapacityIsNotARateLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		body      string
		class     fixpoint.ErrorClass
		wantLimit int
	}{
		{"capacity", capacity429, fixpoint.ClassCapacity, 8},
		{"rate limit", `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, fixpoint.ClassRateLimited, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t, replyJSON(429, tc.body, "Retry-After", "3"))
			c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL, Retry: RetryConfig{Disabled: true},
				Lane: LaneConfig{InitialConcurrency: 8, MaxConcurrency: 8}})
			_, err := c.Complete(context.Background(), flexReq)
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != tc.class {
				t.Fatalf("err = %v, want class %s", err, tc.class)
			}
			st := c.Lane("m").Stats()
			if st.Limit != tc.wantLimit {
				t.Errorf("lane limit = %d, want %d", st.Limit, tc.wantLimit)
			}
			paused := st.PausedUntil.After(c.cfg.Clock.Now())
			if paused != (tc.class == fixpoint.ClassRateLimited) {
				t.Errorf("lane paused = %v after a %s", paused, tc.class)
			}
		})
	}
}

func TestFlexFallbackAfter(t *testing.T) {
	t.Parallel()
	var rec *recorder
	rec = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		reqs := rec.requests() // the recorder read the body; this request is the last
		w.Header().Set("Content-Type", "application/json")
		if sentTier(t, reqs[len(reqs)-1]) == "flex" {
			w.WriteHeader(429)
			w.Write([]byte(capacity429))
			return
		}
		w.Write([]byte(okTier("default")))
	})
	clock := newFakeClock(true)
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL, Clock: clock, FlexFallbackAfter: 10 * time.Minute,
		Retry: RetryConfig{MaxRetries: 2}})
	start := clock.Now()
	resp, err := c.Complete(context.Background(), flexReq)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ServiceTier != "default" {
		t.Errorf("ServiceTier = %q, want default (fell back)", resp.ServiceTier)
	}
	if waited := clock.Now().Sub(start); waited < 10*time.Minute {
		t.Errorf("fell back after %v, before FlexFallbackAfter", waited)
	}
	reqs := rec.requests()
	if len(reqs) < 4 {
		t.Fatalf("%d requests: capacity retries are not bounded by Retry.MaxRetries (2)", len(reqs))
	}
	for i, r := range reqs[:len(reqs)-1] {
		if got := sentTier(t, r); got != "flex" {
			t.Errorf("request %d sent tier %q before the fallback", i, got)
		}
	}
	if got := sentTier(t, reqs[len(reqs)-1]); got != "" {
		t.Errorf("fallback request sent tier %q, want none", got)
	}
	for _, r := range resp.Retries {
		if r.Class != fixpoint.ClassCapacity {
			t.Errorf("retry %+v, want class capacity", r)
		}
		if r.Wait > FlexRetryMaxInterval+FlexRetryMaxInterval/2 {
			t.Errorf("retry waited %v, over the capacity backoff's cap", r.Wait)
		}
	}
}

func TestFlexNoFallbackKeepsWaiting(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1) <= 40 {
			w.WriteHeader(429)
			w.Write([]byte(capacity429))
			return
		}
		w.Write([]byte(okTier("flex")))
	})
	clock := newFakeClock(true)
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL, Clock: clock, FlexFallbackAfter: FlexNoFallback})
	start := clock.Now()
	resp, err := c.Complete(context.Background(), flexReq)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ServiceTier != "flex" || len(resp.Retries) != 40 {
		t.Errorf("ServiceTier = %q after %d retries, want flex after 40", resp.ServiceTier, len(resp.Retries))
	}
	if waited := clock.Now().Sub(start); waited <= FlexFallbackAfterDefault {
		t.Errorf("waited %v, want past the default fallback (it kept waiting)", waited)
	}
	for i, r := range rec.requests() {
		if got := sentTier(t, r); got != "flex" {
			t.Fatalf("request %d sent tier %q, want flex throughout", i, got)
		}
	}
}

// TestCapacityWithoutFlexIsBounded: a capacity refusal of a call not asked
// for flex (a compatible server) is retried like any failure, within
// Retry.MaxRetries.
func TestCapacityWithoutFlexIsBounded(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, replyJSON(429, capacity429))
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL, Retry: RetryConfig{MaxRetries: 2}})
	plain := flexReq
	plain.ServiceTier = ""
	_, err := c.Complete(context.Background(), plain)
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) || e.Class != fixpoint.ClassCapacity {
		t.Fatalf("err = %v, want capacity", err)
	}
	if n := len(rec.requests()); n != 3 {
		t.Errorf("%d requests, want 3 (one and MaxRetries 2)", n)
	}
}

// TestFlexTimeout: a flex attempt is bounded by FlexTimeout, not by
// TotalTimeout or FirstByteTimeout.
func TestFlexTimeout(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		replyJSON(200, okTier("flex"))(w, r)
	})
	cfg := Config{Provider: ProviderOpenAI, BaseURL: rec.srv.URL, Retry: RetryConfig{Disabled: true},
		TotalTimeout: 50 * time.Millisecond, FirstByteTimeout: 50 * time.Millisecond, FlexTimeout: time.Minute}
	c := testClient(t, cfg)
	if _, err := c.Complete(context.Background(), flexReq); err != nil {
		t.Fatalf("flex call cut off: %v", err)
	}
	plain := flexReq
	plain.ServiceTier = ""
	_, err := c.Complete(context.Background(), plain)
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) || e.Class != fixpoint.ClassTimeout {
		t.Fatalf("err = %v, want the default tier's timeout", err)
	}
}
