package llm

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// TestBaseURLWithQuery: a base URL with a query (?api-version=...) gets the
// endpoint's path joined to its path, and keeps its query, on every call
// the client makes: realtime, batch listing (whose own query is merged)
// and the key check.
func TestBaseURLWithQuery(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		switch r.URL.Path {
		case "/openai/v1/chat/completions":
			replyJSON(200, okOpenAI)(w, r)
		case "/openai/v1/batches":
			replyJSON(200, `{"object":"list","data":[],"has_more":false}`)(w, r)
		case "/openai/v1/models":
			replyJSON(200, `{"object":"list","data":[]}`)(w, r)
		default:
			replyJSON(404, `{"error":{"message":"no route"}}`)(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	for _, base := range []string{srv.URL + "/openai/v1?api-version=2024-06-01", srv.URL + "/openai/v1/?api-version=2024-06-01"} {
		mu.Lock()
		got = nil
		mu.Unlock()
		c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: base, APIKey: "sk-test-key-12345"})
		if _, err := c.Complete(context.Background(), hello); err != nil {
			t.Fatalf("%s: Complete: %v", base, err)
		}
		if _, err := c.ListBatches(context.Background(), 5); err != nil {
			t.Fatalf("%s: ListBatches: %v", base, err)
		}
		if err := c.CheckKey(context.Background()); err != nil {
			t.Fatalf("%s: CheckKey: %v", base, err)
		}
		want := []string{
			"POST /openai/v1/chat/completions?api-version=2024-06-01",
			"GET /openai/v1/batches?api-version=2024-06-01&limit=5",
			"GET /openai/v1/models?api-version=2024-06-01",
		}
		mu.Lock()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: requests\n got %q\nwant %q", base, got, want)
		}
		mu.Unlock()
	}
}

// TestBaseURLQueryRedacted: the values of a base URL's query (a key, a
// signature) appear in no error, message or lane name; the names do.
func TestBaseURLQueryRedacted(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-sig-value"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: the call fails with a network error quoting the URL
	base := "http://" + addr + "/v1?api-version=1&sig=" + secret
	c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: base, Retry: RetryConfig{Disabled: true}})
	_, cerr := c.Complete(context.Background(), hello)
	if cerr == nil {
		t.Fatal("Complete succeeded with nothing listening")
	}
	var texts []string
	texts = append(texts, cerr.Error(), fmt.Sprintf("%+v", cerr), c.Lane("m").Key().String())
	if pe, ok := cerr.(*fixpoint.ProviderError); ok {
		texts = append(texts, pe.Message)
		if pe.Class != fixpoint.ClassNetwork {
			t.Errorf("class %s, want network: %v", pe.Class, cerr)
		}
	}
	if !strings.Contains(cerr.Error(), "sig=redacted") {
		t.Errorf("error does not name the redacted parameter: %v", cerr)
	}
	_, berr := New(Config{Provider: ProviderOpenAI, BaseURL: "ftp://host/v1?sig=" + secret})
	if berr == nil {
		t.Fatal("New accepted an ftp base URL")
	}
	texts = append(texts, berr.Error())
	for _, s := range texts {
		if strings.Contains(s, secret) {
			t.Errorf("query value not redacted: %s", s)
		}
	}
	for in, want := range map[string]string{
		"https://h/v1?api-key=abc&x=1":     "https://h/v1?api-key=redacted&x=redacted",
		"https://u:pw@h/v1":                "https://u:redacted@h/v1",
		"https://h/v1":                     "https://h/v1",
		"https://h/v1?flag":                "https://h/v1?flag",
		"http://h/%zz?token=abc":           "http://h/%zz?" + redacted,
		"https://h/openai/v1?api-version=": "https://h/openai/v1?api-version=redacted",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestServerOf: a span names a base URL's server by host and port only,
// the port from the scheme when the URL names none.
func TestServerOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		base, host string
		port       int
	}{
		{"https://api.openai.com/v1", "api.openai.com", 443},
		{"http://127.0.0.1:11434", "127.0.0.1", 11434},
		{"http://[::1]:8089/v1?api-version=2024-10-21", "::1", 8089},
		{"http://user:hunter2@gateway.internal/v1", "gateway.internal", 80},
		{"not a url", "", 0},
	} {
		if host, port := ServerOf(tc.base); host != tc.host || port != tc.port {
			t.Errorf("ServerOf(%q) = %q, %d; want %q, %d", tc.base, host, port, tc.host, tc.port)
		}
	}
}
