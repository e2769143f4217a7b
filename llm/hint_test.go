package llm

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

// fixtureWith is a recorded response with headers changed (set) or
// removed (drop), as the replay server's headers and drop_headers do, and
// its body text edited by replacing old with new pairs.
func fixtureWith(t *testing.T, name string, set map[string]string, drop []string, edits ...string) (*fixture, []byte) {
	t.Helper()
	fx, ok := loadFixtures(t)[name]
	if !ok {
		t.Fatalf("fixture %s missing", name)
	}
	out := *fx
	out.Headers = maps.Clone(fx.Headers)
	for _, k := range drop {
		if _, ok := out.Headers[k]; !ok {
			t.Fatalf("fixture %s has no header %s to drop", name, k)
		}
		delete(out.Headers, k)
	}
	maps.Copy(out.Headers, set)
	body := string(fx.wireBytes(t))
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(body, edits[i]) {
			t.Fatalf("fixture %s body has no %q", name, edits[i])
		}
		body = strings.ReplaceAll(body, edits[i], edits[i+1])
	}
	return &out, []byte(body)
}

// countingServer serves steps in order (the last repeats) and counts calls.
func countingServer(t *testing.T, steps ...http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	h, n := script(steps...)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, n
}

func fixtureHandler(fx *fixture, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range fx.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(fx.Status)
		w.Write(body)
	}
}

func baseFor(provider, url string) string {
	if WireOf(provider) == WireOpenAIChat {
		return url + "/v1"
	}
	return url
}

// pauseLog records the pauses a lane reports.
type pauseLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (p *pauseLog) observer() Observer {
	return &funcObserver{pause: func(_ LaneKey, d time.Duration) { p.mu.Lock(); p.d = append(p.d, d); p.mu.Unlock() }}
}

func (p *pauseLog) get() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.d...)
}

// TestHintOverCapReturnsAtOnce: a 429 (or 529) asking for an hour neither sleeps in
// the retry layer nor pauses the lane for the hour. Complete returns at
// once with the full hint, marked over the cap; the lane pauses for the
// cap only.
func TestHintOverCapReturnsAtOnce(t *testing.T) {
	t.Parallel()
	for name, class := range map[string]fixpoint.ErrorClass{
		"openai_429_rate_limit_tpm": fixpoint.ClassRateLimited,
		"anthropic_429_rate_limit":  fixpoint.ClassRateLimited,
		"anthropic_529_overloaded":  fixpoint.ClassOverloaded,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fx, body := fixtureWith(t, name, map[string]string{"retry-after": "3600"}, nil)
			srv, calls := countingServer(t, fixtureHandler(fx, body))
			clock := newFakeClock(true) // a sleep would show as time passed
			var pauses pauseLog
			c := testClient(t, Config{Provider: fx.Provider, BaseURL: baseFor(fx.Provider, srv.URL), Clock: clock, Observer: pauses.observer(),
				Retry: RetryConfig{NoJitter: true, MaxElapsedTime: 24 * time.Hour}})
			start := clock.Now()
			_, err := c.Complete(context.Background(), hello)
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != class || !e.Class.Retryable() || e.Permanent() {
				t.Fatalf("err = %v, want a retryable %s", err, class)
			}
			if e.RetryAfter != time.Hour || !e.HintOverCap {
				t.Fatalf("RetryAfter = %v, HintOverCap = %v; want the full hour, over the cap", e.RetryAfter, e.HintOverCap)
			}
			if !strings.Contains(e.Error(), "wait 1h0m0s") {
				t.Fatalf("Error() = %q does not name the wait asked for", e.Error())
			}
			if n := calls.Load(); n != 1 || len(e.Retries) != 0 || !clock.Now().Equal(start) {
				t.Fatalf("%d calls, retries %+v, slept %v: the hint was waited out in process", n, e.Retries, clock.Now().Sub(start))
			}
			// The lane is not frozen: the job is handed back instead.
			if until := c.Lane("m").Stats().PausedUntil; until.After(start) {
				t.Fatalf("lane paused until start+%v, want no pause for a hint over the cap", until.Sub(start))
			}
			if got := pauses.get(); len(got) != 0 {
				t.Fatalf("OnPause saw %v, want none", got)
			}
		})
	}
}

// TestHintCapConfigurable: the cap is LaneConfig.MaxHintWait; a hint at or
// under it is slept and retried, one over it is handed back.
func TestHintCapConfigurable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		cap        time.Duration
		retryAfter string
		wantOver   bool
		wantWait   time.Duration
	}{
		{"under a 10s cap", 10 * time.Second, "5", false, 5 * time.Second},
		{"at a 10s cap", 10 * time.Second, "10", false, 10 * time.Second},
		{"over a 10s cap", 10 * time.Second, "11", true, 0},
		{"at the default cap", 0, "120", false, 120 * time.Second},
		{"over the default cap", 0, "121", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx, body := fixtureWith(t, "openai_429_rate_limit_tpm", map[string]string{"retry-after": tt.retryAfter}, nil)
			srv, calls := countingServer(t, fixtureHandler(fx, body), replyJSON(200, okOpenAI))
			clock := newFakeClock(true)
			c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, Clock: clock,
				Retry: RetryConfig{NoJitter: true, MaxElapsedTime: time.Hour}, Lane: LaneConfig{MaxHintWait: tt.cap}})
			start := clock.Now()
			resp, err := c.Complete(context.Background(), hello)
			if tt.wantOver {
				var e *fixpoint.ProviderError
				if !errors.As(err, &e) || !e.HintOverCap || calls.Load() != 1 || !clock.Now().Equal(start) {
					t.Fatalf("err = %v after %d calls and %v: want it handed back at once", err, calls.Load(), clock.Now().Sub(start))
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if len(resp.Retries) != 1 || resp.Retries[0].Wait != tt.wantWait || calls.Load() != 2 {
				t.Fatalf("retries %+v after %d calls, want one wait of %v", resp.Retries, calls.Load(), tt.wantWait)
			}
		})
	}
}

// TestResetHeadersGiveThisRequestsWait replays the TPM 429 without its
// retry-after: x-ratelimit-reset-tokens "6m0s" is the time to a full
// refill, so the lane does not pause six minutes for one request.
func TestResetHeadersGiveThisRequestsWait(t *testing.T) {
	t.Parallel()
	// hello: 1 token in, 1,024 (the output estimate) out; 6m x 1025/150000.
	const derived = 2460 * time.Millisecond
	noHint := []string{"Please try again in 579ms. ", ""}
	tests := []struct {
		name  string
		set   map[string]string
		edits []string
		want  time.Duration
	}{
		{"tokens spent", map[string]string{"x-ratelimit-remaining-tokens": "0"}, noHint, derived},
		{"budgets as recorded, with room: backoff", nil, noHint, 0},
		{"the message's hint", map[string]string{"x-ratelimit-remaining-tokens": "0"}, nil, 579 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx, body := fixtureWith(t, "openai_429_rate_limit_tpm", tt.set, []string{"retry-after"}, tt.edits...)
			srv, _ := countingServer(t, fixtureHandler(fx, body))
			clock := newFakeClock(true)
			c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, Clock: clock, Retry: RetryConfig{Disabled: true}})
			start := clock.Now()
			_, err := c.Complete(context.Background(), hello)
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != fixpoint.ClassRateLimited || e.RetryAfter != tt.want || e.HintOverCap {
				t.Fatalf("err = %v (RetryAfter %v), want rate_limited with %v", err, e.RetryAfter, tt.want)
			}
			paused := c.Lane("m").Stats().PausedUntil.Sub(start)
			if tt.want == 0 {
				paused = max(paused, 0)
			}
			if paused != tt.want {
				t.Fatalf("lane paused %v, want %v", paused, tt.want)
			}
		})
	}
}

// TestAnthropicHintless429Retried: an Anthropic 429 without retry-after is
// a rate limit, retried after the backoff (or the wait its reset headers
// give), not a spent quota that stops the lane.
func TestAnthropicHintless429Retried(t *testing.T) {
	t.Parallel()
	ok := loadFixtures(t)["anthropic_text"]
	for _, name := range []string{"anthropic_429_rate_limit", "anthropic_429_rate_limit_itpm"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fx, body := fixtureWith(t, name, nil, []string{"retry-after"})
			srv, calls := countingServer(t, fixtureHandler(fx, body), fixtureHandler(ok, ok.wireBytes(t)))
			c := testClient(t, Config{Provider: ProviderAnthropic, BaseURL: srv.URL, Retry: RetryConfig{NoJitter: true}})
			resp, err := c.Complete(context.Background(), hello)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			// The recorded resets are in the past: the backoff decides.
			if len(resp.Retries) != 1 || resp.Retries[0].Class != fixpoint.ClassRateLimited || resp.Retries[0].Wait != RetryInitialIntervalDefault || calls.Load() != 2 {
				t.Fatalf("retries %+v after %d calls, want one rate_limited retry after %v", resp.Retries, calls.Load(), RetryInitialIntervalDefault)
			}
			if q := c.Lane("m").Stats().QuotaUntil; !q.IsZero() {
				t.Fatalf("lane refuses calls until %v", q)
			}
		})
	}
	t.Run("live resets", func(t *testing.T) {
		t.Parallel()
		clock := newFakeClock(true)
		reset := clock.Now().Add(time.Minute).UTC().Format(time.RFC3339)
		fx, body := fixtureWith(t, "anthropic_429_rate_limit", map[string]string{
			"anthropic-ratelimit-requests-reset": reset, "anthropic-ratelimit-tokens-reset": reset,
			"anthropic-ratelimit-input-tokens-reset": reset, "anthropic-ratelimit-output-tokens-reset": reset,
		}, []string{"retry-after"})
		srv, _ := countingServer(t, fixtureHandler(fx, body))
		c := testClient(t, Config{Provider: ProviderAnthropic, BaseURL: srv.URL, Clock: clock, Retry: RetryConfig{Disabled: true}})
		_, err := c.Complete(context.Background(), hello)
		var e *fixpoint.ProviderError
		// Requests are spent: one more in 60s/4000.
		if !errors.As(err, &e) || e.Class != fixpoint.ClassRateLimited || e.RetryAfter != 15*time.Millisecond {
			t.Fatalf("err = %v, want rate_limited with the 15ms one request takes to refill", err)
		}
	})
}
