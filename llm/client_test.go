package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
)

var hello = fixpoint.Request{Model: "m", Messages: []fixpoint.Message{{Role: fixpoint.RoleUser, Content: "hi"}}}

// script answers the n-th request with steps[n] (the last one repeats).
func script(steps ...http.HandlerFunc) (http.HandlerFunc, *atomic.Int32) {
	var n atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		steps[min(i, len(steps)-1)](w, r)
	}, &n
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfg       Config
		wantField string
	}{
		{"ok openai", Config{Provider: ProviderOpenAI}, ""},
		{"ok anthropic", Config{Provider: ProviderAnthropic}, ""},
		{"unknown provider", Config{Provider: "gemini"}, "Provider"},
		{"bad url", Config{Provider: ProviderOllama, BaseURL: "localhost:11434"}, "BaseURL"},
		{"small body cap", Config{Provider: ProviderOpenAI, MaxBodyBytes: 10}, "MaxBodyBytes"},
		{"negative timeout", Config{Provider: ProviderOpenAI, IdleTimeout: -time.Second}, "IdleTimeout"},
		{"jitter over 1", Config{Provider: ProviderOpenAI, Retry: RetryConfig{RandomizationFactor: 2}}, "Retry.RandomizationFactor"},
		{"burst over tpm", Config{Provider: ProviderOpenAI, Lane: LaneConfig{TPM: 100, TPMBurst: 100}}, "Lane.TPMBurst"},
		{"min over max", Config{Provider: ProviderOpenAI, Lane: LaneConfig{MinConcurrency: 8, MaxConcurrency: 4, InitialConcurrency: 8}}, "Lane.MaxConcurrency"},
		{"bad max tokens param", Config{Provider: ProviderOpenAI, OpenAIMaxTokensParam: "max"}, "OpenAIMaxTokensParam"},
		{"negative hint cap", Config{Provider: ProviderOpenAI, Lane: LaneConfig{MaxHintWait: -time.Second}}, "Lane.MaxHintWait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantField+":") {
				t.Fatalf("err = %v, want ErrConfig naming %s", err, tt.wantField)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg          Config
		wantBase     string
		wantMaxParam string
	}{
		{Config{Provider: ProviderOpenAI}, BaseURLOpenAIDefault, "max_completion_tokens"},
		{Config{Provider: ProviderOpenAI, BaseURL: "http://vllm:8000/v1/"}, "http://vllm:8000/v1", "max_tokens"},
		{Config{Provider: ProviderAnthropic}, BaseURLAnthropicDefault, "max_tokens"},
		{Config{Provider: ProviderOllama}, BaseURLOllamaDefault, "max_tokens"},
	}
	for _, tt := range tests {
		got := tt.cfg.WithDefaults()
		if got.BaseURL != tt.wantBase || got.OpenAIMaxTokensParam != tt.wantMaxParam ||
			got.MaxBodyBytes != MaxBodyBytesDefault || got.Retry.MaxRetries != RetryMaxRetriesDefault ||
			got.AnthropicVersion != AnthropicVersionDefault {
			t.Errorf("%s: WithDefaults = %+v", tt.cfg.Provider, got)
		}
	}
}

func TestRetryPermanentClassesNotRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		provider  string
		status    int
		body      string
		wantClass fixpoint.ErrorClass
	}{
		{"401", ProviderOpenAI, 401, `{"error":{"message":"bad key","code":"invalid_api_key"}}`, fixpoint.ClassAuth},
		{"403", ProviderAnthropic, 403, `{"type":"error","error":{"type":"permission_error","message":"no"}}`, fixpoint.ClassAuth},
		{"400", ProviderOpenAI, 400, `{"error":{"message":"too long","code":"context_length_exceeded"}}`, fixpoint.ClassBadRequest},
		{"404", ProviderOllama, 404, `{"error":"model 'x' not found"}`, fixpoint.ClassModelNotFound},
		{"404 naming no model", ProviderOpenAI, 404, `{"error":{"message":"Invalid URL (POST /v1/chat/completion)","type":"invalid_request_error"}}`, fixpoint.ClassBadRequest},
		{"422", ProviderOpenAI, 422, `{"message":"bad","type":"BadRequestError","code":422}`, fixpoint.ClassBadRequest},
		{"quota", ProviderOpenAI, 429, `{"error":{"message":"quota","type":"insufficient_quota","code":null}}`, fixpoint.ClassQuotaExhausted},
		// An Anthropic 429 without retry-after is a rate limit and retried
		// (TestAnthropicHintless429Retried); running out of credit is this.
		{"anthropic credit balance too low", ProviderAnthropic, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`, fixpoint.ClassQuotaExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, n := script(replyJSON(tt.status, tt.body))
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			c := testClient(t, Config{Provider: tt.provider, BaseURL: srv.URL})
			_, err := c.Complete(context.Background(), hello)
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != tt.wantClass || !e.Permanent() {
				t.Fatalf("err = %v, want permanent %s", err, tt.wantClass)
			}
			if n.Load() != 1 || len(e.Retries) != 0 {
				t.Fatalf("%d requests, %d retries: a permanent class was retried", n.Load(), len(e.Retries))
			}
		})
	}
}

func TestRetryBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		retry     RetryConfig
		wantWaits []time.Duration
	}{
		{"count", RetryConfig{NoJitter: true, InitialInterval: time.Second, MaxRetries: 3},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"elapsed", RetryConfig{NoJitter: true, InitialInterval: time.Second, MaxRetries: 10, MaxElapsedTime: 3 * time.Second},
			[]time.Duration{time.Second, 2 * time.Second}},
		{"max interval", RetryConfig{NoJitter: true, InitialInterval: time.Second, Multiplier: 10, MaxInterval: 5 * time.Second, MaxRetries: 3},
			[]time.Duration{time.Second, 5 * time.Second, 5 * time.Second}},
		{"disabled", RetryConfig{Disabled: true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, n := script(replyJSON(500, `{"error":{"message":"boom","type":"server_error"}}`))
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			clock := newFakeClock(true)
			c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, Retry: tt.retry, Clock: clock})
			start := clock.Now()
			_, err := c.Complete(context.Background(), hello)
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != fixpoint.ClassServer {
				t.Fatalf("err = %v, want server", err)
			}
			var waits []time.Duration
			var total time.Duration
			for _, r := range e.Retries {
				if r.Class != fixpoint.ClassServer || r.Status != 500 {
					t.Fatalf("retry recorded as %+v", r)
				}
				waits = append(waits, r.Wait)
				total += r.Wait
			}
			if fmt.Sprint(waits) != fmt.Sprint(tt.wantWaits) {
				t.Fatalf("waits = %v, want %v", waits, tt.wantWaits)
			}
			if int(n.Load()) != len(tt.wantWaits)+1 {
				t.Fatalf("%d requests, want %d", n.Load(), len(tt.wantWaits)+1)
			}
			if got := clock.Now().Sub(start); got != total {
				t.Fatalf("clock advanced %v, want the sum of waits %v", got, total)
			}
		})
	}
}

func TestRetryJitterWithinBounds(t *testing.T) {
	t.Parallel()
	h, _ := script(replyJSON(503, `{"error":{"message":"busy"}}`))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL,
		Retry: RetryConfig{InitialInterval: time.Second, RandomizationFactor: 0.5, MaxRetries: 4, MaxElapsedTime: time.Hour}})
	distinct := map[time.Duration]bool{}
	for range 5 {
		_, err := c.Complete(context.Background(), hello)
		var e *fixpoint.ProviderError
		if !errors.As(err, &e) || len(e.Retries) != 4 {
			t.Fatalf("err = %v", err)
		}
		base := time.Second
		for _, r := range e.Retries {
			if r.Wait < base/2 || r.Wait > base*3/2 {
				t.Fatalf("wait %v outside [%v, %v]", r.Wait, base/2, base*3/2)
			}
			distinct[r.Wait] = true
			base *= 2
		}
	}
	if len(distinct) < 10 {
		t.Fatalf("only %d distinct waits over 20 retries: no jitter", len(distinct))
	}
}

func TestRetryHonoursServerHint(t *testing.T) {
	t.Parallel()
	ok := replyJSON(200, okOpenAI)
	tests := []struct {
		name     string
		first    http.HandlerFunc
		wantWait time.Duration
		class    fixpoint.ErrorClass
	}{
		{"retry-after seconds", replyJSON(429, `{"error":{"message":"slow down"}}`, "Retry-After", "7"), 7 * time.Second, fixpoint.ClassRateLimited},
		{"retry-after-ms", replyJSON(429, `{"error":{"message":"slow down"}}`, "Retry-After-Ms", "1500", "Retry-After", "9"), 1500 * time.Millisecond, fixpoint.ClassRateLimited},
		// A reset is the time to a full refill: without the limit it does
		// not say when one more request fits, so the backoff decides.
		{"reset header of the spent budget", replyJSON(429, `{"error":{"message":"slow down"}}`,
			"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6m0s",
			"X-Ratelimit-Remaining-Tokens", "100", "X-Ratelimit-Reset-Tokens", "20ms"), 500 * time.Millisecond, fixpoint.ClassRateLimited},
		{"reset and limit of the spent budget: one request's share", replyJSON(429, `{"error":{"message":"slow down"}}`,
			"X-Ratelimit-Limit-Requests", "60", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6m0s",
			"X-Ratelimit-Remaining-Tokens", "100", "X-Ratelimit-Reset-Tokens", "20ms"), 6 * time.Second, fixpoint.ClassRateLimited},
		{"503 retry-after", replyJSON(503, `{"error":{"message":"busy"}}`, "Retry-After", "3"), 3 * time.Second, fixpoint.ClassOverloaded},
		{"backoff larger than hint", replyJSON(429, `{"error":{"message":"slow down"}}`, "Retry-After", "0"), 500 * time.Millisecond, fixpoint.ClassRateLimited},
		// A hint beyond MaxRetryHint is bogus: the call backs off and
		// retries as after a hint-less 429, not handed back for 31 years.
		{"retry-after beyond any window: backoff", replyJSON(429, `{"error":{"message":"slow down"}}`, "Retry-After", "999999999"), 500 * time.Millisecond, fixpoint.ClassRateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, n := script(tt.first, ok)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, Retry: RetryConfig{NoJitter: true, MaxElapsedTime: time.Hour}})
			resp, err := c.Complete(context.Background(), hello)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if len(resp.Retries) != 1 || resp.Retries[0].Wait != tt.wantWait || resp.Retries[0].Class != tt.class || n.Load() != 2 {
				t.Fatalf("Retries = %+v after %d requests, want one %s wait of %v", resp.Retries, n.Load(), tt.class, tt.wantWait)
			}
		})
	}
}

// TestRetryAfterPausesLaneOnce: N callers in flight all get a 429 with
// Retry-After; the lane pauses once, halves once, and every caller retries
// after the pause and succeeds.
func TestRetryAfterPausesLaneOnce(t *testing.T) {
	t.Parallel()
	const n = 8
	var arrived sync.WaitGroup
	arrived.Add(n)
	var calls atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if calls.Add(1) <= n {
			arrived.Done()
			<-release
			replyJSON(429, `{"error":{"message":"rate"}}`, "Retry-After", "2")(w, r)
			return
		}
		replyJSON(200, okOpenAI)(w, r)
	}))
	t.Cleanup(srv.Close)
	var pauses, halvings atomic.Int32
	obs := &funcObserver{
		pause:       func(LaneKey, time.Duration) { pauses.Add(1) },
		concurrency: func(_ LaneKey, l int) { halvingCheck(l, n, &halvings) },
	}
	clock := newFakeClock(false)
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, Clock: clock, Observer: obs,
		Retry: RetryConfig{NoJitter: true, MaxElapsedTime: time.Hour},
		Lane:  LaneConfig{InitialConcurrency: n, MaxConcurrency: 2 * n}})
	start := clock.Now()
	var wg sync.WaitGroup
	var finished atomic.Int32
	resps := make([]*fixpoint.Response, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = c.Complete(context.Background(), hello)
			finished.Add(1)
		}()
	}
	arrived.Wait()
	close(release)
	waitFor(t, "callers to wait for their retry", func() bool { return clock.Pending() == n })
	if got := c.Lane("m").Stats().PausedUntil.Sub(start); got != 2*time.Second {
		t.Fatalf("lane paused for %v, want 2s", got)
	}
	// Each step of the clock, every caller waits on a timer again or has
	// its answer before the next.
	for i := 0; i < 200 && finished.Load() < n; i++ {
		clock.Advance(100 * time.Millisecond)
		waitFor(t, "each caller to wait again or finish", func() bool { return clock.Pending()+int(finished.Load()) == n })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if r := resps[i].Retries; len(r) != 1 || r[0].Class != fixpoint.ClassRateLimited || r[0].Wait < 2*time.Second {
			t.Fatalf("caller %d retries = %+v, want one rate_limited wait >= 2s", i, r)
		}
	}
	if pauses.Load() != 1 {
		t.Fatalf("%d concurrent 429s paused the lane %d times, want 1", n, pauses.Load())
	}
	if halvings.Load() != 1 {
		t.Fatalf("limit halved %d times, want 1", halvings.Load())
	}
}

func halvingCheck(limit, initial int, halvings *atomic.Int32) {
	if limit == initial/2 {
		halvings.Add(1)
	}
}

func TestQuotaExhaustedStopsLane(t *testing.T) {
	t.Parallel()
	h, n := script(replyJSON(429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL})
	for range 3 {
		_, err := c.Complete(context.Background(), hello)
		var e *fixpoint.ProviderError
		if !errors.As(err, &e) || e.Class != fixpoint.ClassQuotaExhausted {
			t.Fatalf("err = %v, want quota_exhausted", err)
		}
	}
	if n.Load() != 1 {
		t.Fatalf("server saw %d requests; a quota-exhausted lane must refuse without calling", n.Load())
	}
	if c.Lane("m").Stats().QuotaUntil.IsZero() {
		t.Fatal("the lane is not marked quota-exhausted")
	}
	// Other models are other lanes.
	if !c.Lane("other").Stats().QuotaUntil.IsZero() {
		t.Fatal("quota leaked to another lane")
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfg       Config
		handler   func(w http.ResponseWriter, r *http.Request)
		wantCause error
	}{
		{
			name: "server never answers",
			cfg:  Config{FirstByteTimeout: 50 * time.Millisecond},
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body) // lets the server see the client hang up
				<-r.Context().Done()
			},
			wantCause: ErrFirstByteTimeout,
		},
		{
			name: "trickle one byte per 200ms with idle 100ms",
			cfg:  Config{IdleTimeout: 100 * time.Millisecond},
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(200)
				for _, b := range []byte(okOpenAI) {
					if _, err := w.Write([]byte{b}); err != nil {
						return
					}
					w.(http.Flusher).Flush()
					select {
					case <-time.After(200 * time.Millisecond):
					case <-r.Context().Done():
						return
					}
				}
			},
			wantCause: ErrIdleTimeout,
		},
		{
			name: "fast trickle past the total timeout",
			cfg:  Config{IdleTimeout: time.Second, TotalTimeout: 150 * time.Millisecond},
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(200)
				for {
					if _, err := w.Write([]byte(" ")); err != nil {
						return
					}
					w.(http.Flusher).Flush()
					select {
					case <-time.After(10 * time.Millisecond):
					case <-r.Context().Done():
						return
					}
				}
			},
			wantCause: ErrTotalTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(tt.handler))
			t.Cleanup(srv.Close)
			cfg := tt.cfg
			cfg.Provider, cfg.BaseURL, cfg.Retry = ProviderOpenAI, srv.URL, RetryConfig{Disabled: true}
			c := testClient(t, cfg)
			_, err := c.Complete(context.Background(), hello)
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != fixpoint.ClassTimeout || !errors.Is(err, tt.wantCause) {
				t.Fatalf("err = %v, want timeout caused by %v", err, tt.wantCause)
			}
			if !e.Class.Retryable() {
				t.Fatal("timeout must be retryable")
			}
		})
	}
}

// silentServer serves a provider that reads each request and never
// answers, until the caller gives up; it returns its URL.
func silentServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestCallerContextCancels(t *testing.T) {
	t.Parallel()
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: silentServer(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := c.Complete(ctx, hello)
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) || e.Class != fixpoint.ClassTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want timeout wrapping context.DeadlineExceeded", err)
	}
}

func TestBodyCap(t *testing.T) {
	t.Parallel()
	big := `{"id":"x","choices":[{"message":{"content":"` + strings.Repeat("a", 4000) + `"},"finish_reason":"stop"}]}`
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"content-length over cap", replyJSON(200, big)},
		{"chunked over cap", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			for i := 0; i < len(big); i += 100 {
				w.Write([]byte(big[i:min(i+100, len(big))]))
				w.(http.Flusher).Flush()
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, MaxBodyBytes: 2048, Retry: RetryConfig{Disabled: true}})
			_, err := c.Complete(context.Background(), hello)
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != fixpoint.ClassTooLarge || !strings.Contains(e.Message, "MaxBodyBytes cap of 2048 bytes") {
				t.Fatalf("err = %v, want too_large naming the 2048-byte cap", err)
			}
		})
	}
	// The same body under a larger cap parses.
	srv := httptest.NewServer(replyJSON(200, big))
	t.Cleanup(srv.Close)
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, MaxBodyBytes: 8192})
	if resp, err := c.Complete(context.Background(), hello); err != nil || len(resp.Text) != 4000 {
		t.Fatalf("under the cap: %v", err)
	}
}

func TestNetworkAndBadResponse(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	hangup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(hangup.Close)
	garbage := httptest.NewServer(replyJSON(200, `<html>gateway</html>`))
	t.Cleanup(garbage.Close)
	noChoices := httptest.NewServer(replyJSON(200, `{"id":"x","choices":[]}`))
	t.Cleanup(noChoices.Close)
	tests := []struct {
		name    string
		url     string
		want    fixpoint.ErrorClass
		retries int
	}{
		{"connection refused", closedURL, fixpoint.ClassNetwork, 2},
		{"connection closed without reply", hangup.URL, fixpoint.ClassNetwork, 2},
		// A 2xx reply was made and billed, readable or not: asked for
		// again, it is paid for again.
		{"html body", garbage.URL, fixpoint.ClassBadResponse, 0},
		{"no choices", noChoices.URL, fixpoint.ClassBadResponse, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: tt.url, Retry: RetryConfig{NoJitter: true, MaxRetries: 2}})
			_, err := c.Complete(context.Background(), hello)
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != tt.want {
				t.Fatalf("err = %v, want %s", err, tt.want)
			}
			if len(e.Retries) != tt.retries {
				t.Fatalf("retries = %+v, want %d", e.Retries, tt.retries)
			}
			if e.Replied() != (tt.retries == 0) {
				t.Fatalf("replied = %v with status %d", e.Replied(), e.Status)
			}
		})
	}
}

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: "http://127.0.0.1:1"})
	tests := []struct {
		name string
		req  fixpoint.Request
	}{
		{"no model", fixpoint.Request{Messages: hello.Messages}},
		{"json_schema without schema", fixpoint.Request{Model: "m", Mode: fixpoint.ModeJSONSchema}},
		{"tool with invalid schema", fixpoint.Request{Model: "m", Mode: fixpoint.ModeTool, Schema: json.RawMessage(`{`)}},
		{"unknown mode", fixpoint.Request{Model: "m", Mode: "xml"}},
	}
	for _, tt := range tests {
		_, err := c.Complete(context.Background(), tt.req)
		var e *fixpoint.ProviderError
		if !errors.As(err, &e) || e.Class != fixpoint.ClassBadRequest {
			t.Errorf("%s: err = %v, want bad_request", tt.name, err)
		}
	}
}

// TestSecretsNeverLeak drives every failure path with a key that servers
// echo back, and checks the key appears in no error and no response.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	const key = "sk-live-0123456789SECRETabcdef"
	echo := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			got := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")
			replyJSON(status, fmt.Sprintf(`{"error":{"message":"Incorrect API key provided: %s","code":"invalid_api_key"}}`, strings.TrimPrefix(got, "Bearer ")),
				"X-Request-Id", "req-1")(w, r)
		}
	}
	handlers := map[string]http.HandlerFunc{
		"401 echo": echo(401),
		"500 echo": echo(500),
		"429 echo": echo(429),
		"garbage echo": func(w http.ResponseWriter, r *http.Request) {
			replyJSON(200, "not json "+r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))(w, r)
		},
		"ok": replyJSON(200, okOpenAI),
	}
	for name, h := range handlers {
		for _, provider := range ProviderNames() {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			c := testClient(t, Config{Provider: provider, BaseURL: srv.URL, APIKey: key, Retry: RetryConfig{NoJitter: true, MaxRetries: 1}})
			resp, err := c.Complete(context.Background(), hello)
			dump := fmt.Sprintf("%v %+v %#v", err, err, resp)
			if resp != nil {
				b, _ := json.Marshal(resp)
				dump += string(b)
			}
			var e *fixpoint.ProviderError
			if errors.As(err, &e) {
				b, _ := json.Marshal(e)
				dump += string(b) + fmt.Sprintf("%#v", *e)
			}
			if strings.Contains(dump, key) {
				t.Errorf("%s/%s: API key leaked: %s", name, provider, dump)
			}
			if strings.Contains(c.Lane("m").Key().String(), key) {
				t.Errorf("API key in lane key")
			}
		}
	}
	// Network errors carry the URL, never the key.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: "http://" + addr, APIKey: key, Retry: RetryConfig{Disabled: true}})
	if _, err := c.Complete(context.Background(), hello); err == nil || strings.Contains(fmt.Sprintf("%+v", err), key) {
		t.Errorf("network error leaked the key or succeeded: %v", err)
	}
}

// A retry check that refuses stops the retries there: no further request is
// sent, the call ends with its last failure (still retryable), the refusal
// in RetriesStopped, and Retries lists only the retries sent.
func TestRetryCheckStopsRetries(t *testing.T) {
	t.Parallel()
	h, n := script(replyJSON(500, `{"error":{"message":"boom","type":"server_error"}}`))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, Clock: newFakeClock(true),
		Retry: RetryConfig{NoJitter: true, InitialInterval: time.Second, MaxRetries: 6}})
	lost := errors.New("the job was cancelled")
	var asked int
	ctx := WithRetryCheck(context.Background(), func(context.Context) error {
		asked++
		if asked >= 2 {
			return lost
		}
		return nil
	})
	_, err := c.Complete(ctx, hello)
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) {
		t.Fatalf("err = %v; want an *Error", err)
	}
	if e.Class != fixpoint.ClassServer || e.Permanent() || !errors.Is(e.RetriesStopped, lost) {
		t.Fatalf("err = %v (stopped: %v); want the last server failure, stopped by the check", err, e.RetriesStopped)
	}
	if n.Load() != 2 || len(e.Retries) != 1 || asked != 2 {
		t.Fatalf("%d requests, %d retries recorded, check asked %d times; want 2, 1, 2", n.Load(), len(e.Retries), asked)
	}
	// Without a check the policy runs to its end.
	_, err = c.Complete(context.Background(), hello)
	if !errors.As(err, &e) || e.RetriesStopped != nil || n.Load() != 2+7 {
		t.Fatalf("without a check: %d requests, stopped %v; want 7 more", n.Load(), e.RetriesStopped)
	}
}

// A response says when its request went out: after the wait for the lane's
// RPM budget, so an attempt's started_at shows the budget as it is (it
// showed when the job began waiting, and 25 calls looked sent at once).
func TestResponseSentAtIsAfterTheLaneWait(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var arrived []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
		io.WriteString(w, `{"model":"m","choices":[{"message":{"content":"{}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	c, err := New(Config{Provider: ProviderOpenAI, BaseURL: srv.URL + "/v1", Lane: LaneConfig{RPM: 240}}) // one each 250ms
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	var resps []*fixpoint.Response
	for range 3 {
		resp, err := c.Complete(context.Background(), hello)
		if err != nil {
			t.Fatal(err)
		}
		resps = append(resps, resp)
	}
	for i, r := range resps {
		if r.SentAt.Before(before) || r.SentAt.After(arrived[i]) || arrived[i].Sub(r.SentAt) > 200*time.Millisecond {
			t.Errorf("response %d: sent at %v, arrived %v; want it sent just before it arrived", i, r.SentAt.Sub(before), arrived[i].Sub(before))
		}
		if i > 0 && r.SentAt.Sub(resps[i-1].SentAt) < 200*time.Millisecond {
			t.Errorf("responses %d and %d sent %v apart; want the RPM spacing (250ms)", i-1, i, r.SentAt.Sub(resps[i-1].SentAt))
		}
	}
}

// A caller that stops waiting (a worker's shutdown cancels its calls) is
// no timeout: the ledger said provider_class timeout and the log
// "timeout: send request: context canceled" for every call a stop cut off.
func TestCallerCancelIsStopped(t *testing.T) {
	t.Parallel()
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: silentServer(t)})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	_, err := c.Complete(ctx, hello)
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) || e.Class != fixpoint.ClassStopped || !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("err = %v (class %v), want stopped wrapping context.Canceled, no word of a timeout", err, e.Class)
	}
	if !e.Class.Retryable() {
		t.Error("a stopped call is not retryable: a job cut off by a shutdown would end failed")
	}
}
