package llm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/fixpoint-dev/fixpoint"
)

// bigBody is a 5 MiB 200 reply (over the 4 MiB default cap) that starts
// like a real chat completion.
func bigBody() string {
	start := `{"id":"x","choices":[{"message":{"content":"`
	return start + strings.Repeat("é padding ", 5<<20/11) + `"},"finish_reason":"stop"}]}`
}

// TestTooLargeReplyIsPaidAndNotRetried: a 2xx reply over MaxBodyBytes was
// made and billed; the same request would get the same reply, so it fails
// at once with its own permanent class, its size and its first bytes.
func TestTooLargeReplyIsPaidAndNotRetried(t *testing.T) {
	t.Parallel()
	body := bigBody()
	tests := []struct {
		name     string
		chunked  bool
		wantSize int64
		wantMsg  string
	}{
		{"content-length", false, int64(len(body)), strconv.Itoa(len(body)) + " bytes"},
		{"chunked", true, MaxBodyBytesDefault + 1, "more than " + strconv.Itoa(MaxBodyBytesDefault) + " bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("X-Request-Id", "req-big")
				if !tt.chunked {
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				}
				w.WriteHeader(200)
				for i := 0; i < len(body); i += 64 << 10 {
					if _, err := w.Write([]byte(body[i:min(i+64<<10, len(body))])); err != nil {
						return
					}
					if tt.chunked {
						w.(http.Flusher).Flush()
					}
				}
			}))
			t.Cleanup(srv.Close)
			c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, Retry: RetryConfig{NoJitter: true, MaxRetries: 4}})
			_, err := c.Complete(context.Background(), hello)
			var e *fixpoint.ProviderError
			if !errors.As(err, &e) || e.Class != fixpoint.ClassTooLarge {
				t.Fatalf("err = %v, want class %s", err, fixpoint.ClassTooLarge)
			}
			if n := calls.Load(); n != 1 || len(e.Retries) != 0 {
				t.Fatalf("%d calls, retries %+v: a paid, oversized reply was asked for again", n, e.Retries)
			}
			if !e.Permanent() || e.Class.Retryable() {
				t.Fatalf("class %s is retryable", e.Class)
			}
			if e.Status != 200 || e.RequestID != "req-big" || e.Size != tt.wantSize {
				t.Fatalf("status %d, request id %q, size %d; want 200, req-big, %d", e.Status, e.RequestID, e.Size, tt.wantSize)
			}
			if !strings.Contains(e.Message, tt.wantMsg) || !strings.Contains(e.Message, "MaxBodyBytes") {
				t.Fatalf("message %q does not say %q and name the cap", e.Message, tt.wantMsg)
			}
			if len(e.Head) > headBytes || len(e.Head) < headBytes-utf8.UTFMax || !utf8.ValidString(e.Head) || !strings.HasPrefix(body, e.Head) {
				t.Fatalf("Head is %d bytes (valid UTF-8: %v), want the body's first %d bytes cut on a rune: %q",
					len(e.Head), utf8.ValidString(e.Head), headBytes, e.Head)
			}
		})
	}
}

// TestTooLargeErrorStatusKeepsItsClass: a non-2xx reply over the cap is
// classified by its status (a 503 stays retryable), with its size in the
// message.
func TestTooLargeErrorStatusKeepsItsClass(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("<p>busy</p>", 3000)
	h, n := script(replyJSON(503, body, "Retry-After", "1", "Content-Length", strconv.Itoa(len(body))), replyJSON(200, okOpenAI))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, MaxBodyBytes: 2048, Retry: RetryConfig{Disabled: true}})
	_, err := c.Complete(context.Background(), hello)
	var e *fixpoint.ProviderError
	if !errors.As(err, &e) || e.Class != fixpoint.ClassOverloaded || !e.Class.Retryable() {
		t.Fatalf("err = %v, want the retryable overloaded its 503 gives", err)
	}
	if want := strconv.Itoa(len(body)) + " bytes"; !strings.Contains(e.Message, want) || e.Size != int64(len(body)) {
		t.Fatalf("message %q, size %d; want %s", e.Message, e.Size, want)
	}
	if e.RetryAfter.Seconds() != 1 {
		t.Fatalf("RetryAfter = %v, want the 503's hint", e.RetryAfter)
	}
	// With retries on, it is retried like any 503.
	c = testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, MaxBodyBytes: 2048, Retry: RetryConfig{NoJitter: true}})
	n.Store(0)
	if _, err := c.Complete(context.Background(), hello); err != nil || n.Load() != 2 {
		t.Fatalf("err %v after %d calls, want success on the retry", err, n.Load())
	}
}

func TestCutUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short", "héllo", 10, "héllo"},
		{"cut between runes", "héllo", 3, "hé"},
		{"cut inside a rune drops it", "hé", 2, "h"},
		{"cut inside a 4-byte rune", "a😀b", 4, "a"},
		{"invalid bytes replaced", "a\xffb", 10, "a\uFFFDb"},
		{"replacement does not overrun", "\xff\xff\xff\xff", 4, "\uFFFD"},
	}
	for _, tt := range tests {
		got := cutUTF8([]byte(tt.in), tt.n)
		if got != tt.want || len(got) > tt.n || !utf8.ValidString(got) {
			t.Errorf("%s: cutUTF8(%q, %d) = %q, want %q", tt.name, tt.in, tt.n, got, tt.want)
		}
	}
}
