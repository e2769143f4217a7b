package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// straddleKey is an API key no other text in these tests shares 8 bytes with.
const straddleKey = "sk-q7RZ2mXw9LpT4vNc8HbK3yDf6GsJ1aUe"

// straddle returns text with the key starting a few bytes before offset
// boundary, so that a cut at the boundary would keep part of it.
func straddle(boundary int) string {
	pad := strings.Repeat("x", boundary-12)
	return pad + straddleKey + " and some text after it"
}

// assertNoKeyPiece fails if any 8-byte window of the key appears in dump.
func assertNoKeyPiece(t *testing.T, what, dump string) {
	t.Helper()
	for i := 0; i+8 <= len(straddleKey); i++ {
		if piece := straddleKey[i : i+8]; strings.Contains(dump, piece) {
			t.Errorf("%s: %q (bytes %d-%d of the key) survived redaction:\n%s", what, piece, i, i+8, dump)
			return
		}
	}
}

// dumpResult renders everything Complete returned, as the pipeline could
// store or log it.
func dumpResult(resp *fixpoint.Response, err error) string {
	dump := fmt.Sprintf("%v|%+v|%#v", err, err, resp)
	if resp != nil {
		b, _ := json.Marshal(resp)
		dump += string(b) + fmt.Sprintf("%#v", *resp)
	}
	var e *fixpoint.ProviderError
	if errors.As(err, &e) {
		b, _ := json.Marshal(e)
		dump += string(b) + fmt.Sprintf("%#v", *e)
	}
	return dump
}

// TestSecretsRedactedBeforeTruncation places the key across every cut the
// client makes (the 200-byte snippet of a body, the head of an oversized
// body) and in every stored header and decoded field: no piece of it may
// survive, in the error or in the response.
func TestSecretsRedactedBeforeTruncation(t *testing.T) {
	t.Parallel()
	text := straddle(200)
	quoted, _ := json.Marshal(text)
	handlers := map[string]http.HandlerFunc{
		"500 text body": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(500)
			fmt.Fprint(w, text)
		},
		"429 text body": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(429)
			fmt.Fprint(w, text)
		},
		"200 not json": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			fmt.Fprint(w, text)
		},
		"200 json without an answer": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			q, _ := json.Marshal(straddle(200 - len(`{"note":"`)))
			fmt.Fprintf(w, `{"note":%s}`, q)
		},
		// The JSON decoder quotes 32 bytes of the body at the error.
		"200 json syntax error at the key": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			fmt.Fprint(w, `{"choices": `+straddleKey+`}`)
		},
		"200 json type error quoting the key": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			field := "choices"
			switch {
			case strings.HasSuffix(r.URL.Path, "/v1/messages"):
				field = "content"
			case strings.HasSuffix(r.URL.Path, "/api/chat"):
				field = "message"
			}
			fmt.Fprintf(w, `{%q:%q}`, field, straddleKey)
		},
		"400 json message": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error"}}`, quoted)
		},
		"headers": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", "req-"+straddleKey)
			w.Header().Set("Request-Id", "req-"+straddleKey)
			w.Header().Set("X-Ratelimit-Limit-Requests", straddleKey)
			w.Header().Set("Anthropic-Ratelimit-Requests-Limit", straddleKey)
			w.WriteHeader(502)
			fmt.Fprint(w, `{"error":{"message":"bad gateway"}}`)
		},
		"headers on success": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", "req-"+straddleKey)
			w.Header().Set("Request-Id", "req-"+straddleKey)
			w.Header().Set("X-Ratelimit-Remaining-Tokens", straddleKey)
			w.Header().Set("Anthropic-Ratelimit-Tokens-Remaining", straddleKey)
			w.WriteHeader(200)
			fmt.Fprint(w, answerWith(r, "{}"))
		},
		"answer text": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			fmt.Fprint(w, answerWith(r, text))
		},
	}
	for name, h := range handlers {
		for _, provider := range ProviderNames() {
			t.Run(name+"/"+provider, func(t *testing.T) {
				t.Parallel()
				srv := httptest.NewServer(h)
				t.Cleanup(srv.Close)
				c := testClient(t, Config{Provider: provider, BaseURL: srv.URL, APIKey: straddleKey, Retry: RetryConfig{Disabled: true}})
				resp, err := c.Complete(context.Background(), hello)
				assertNoKeyPiece(t, name, dumpResult(resp, err))
			})
		}
	}
}

// TestSecretsRedactedInRefusal: a refusal echoing the key is redacted too.
func TestSecretsRedactedInRefusal(t *testing.T) {
	t.Parallel()
	quoted, _ := json.Marshal(straddle(200))
	bodies := map[string]string{
		ProviderOpenAI:    `{"model":"m","choices":[{"message":{"content":null,"refusal":` + string(quoted) + `},"finish_reason":"stop"}]}`,
		ProviderAnthropic: `{"model":"m","content":[],"stop_reason":"refusal","stop_details":{"explanation":` + string(quoted) + `}}`,
	}
	for provider, body := range bodies {
		srv := httptest.NewServer(replyJSON(200, body))
		t.Cleanup(srv.Close)
		c := testClient(t, Config{Provider: provider, BaseURL: srv.URL, APIKey: straddleKey})
		resp, err := c.Complete(context.Background(), hello)
		if err != nil || resp.FinishReason != fixpoint.FinishRefusal {
			t.Fatalf("%s: got %+v, %v; want a refusal", provider, resp, err)
		}
		assertNoKeyPiece(t, provider+" refusal", dumpResult(resp, err))
	}
}

// answerWith is a 2xx reply carrying text, in the wire format r was sent in.
func answerWith(r *http.Request, text string) string {
	q, _ := json.Marshal(text)
	switch {
	case strings.HasSuffix(r.URL.Path, "/v1/messages"):
		return `{"id":"x","model":"m","content":[{"type":"text","text":` + string(q) + `}],"stop_reason":"end_turn"}`
	case strings.HasSuffix(r.URL.Path, "/api/chat"):
		return `{"model":"m","message":{"role":"assistant","content":` + string(q) + `},"done":true}`
	}
	return `{"id":"x","model":"m","choices":[{"message":{"content":` + string(q) + `},"finish_reason":"stop"}]}`
}

// TestSecretsRedactedInTooLargeHead: the head kept of an oversized reply is
// redacted before it is cut, so a key across its last byte leaves nothing.
func TestSecretsRedactedInTooLargeHead(t *testing.T) {
	t.Parallel()
	body := straddle(headBytes) + strings.Repeat(" padding", 1000)
	for _, chunked := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if chunked {
				w.WriteHeader(200)
				w.Write([]byte(body[:500]))
				w.(http.Flusher).Flush()
				w.Write([]byte(body[500:]))
				return
			}
			replyJSON(200, body, "Content-Length", strconv.Itoa(len(body)))(w, r)
		}))
		t.Cleanup(srv.Close)
		c := testClient(t, Config{Provider: ProviderOpenAI, BaseURL: srv.URL, APIKey: straddleKey, MaxBodyBytes: 4096})
		resp, err := c.Complete(context.Background(), hello)
		var e *fixpoint.ProviderError
		if !errors.As(err, &e) || e.Class != fixpoint.ClassTooLarge || e.Head == "" {
			t.Fatalf("chunked %v: err = %v, want too_large with a head", chunked, err)
		}
		assertNoKeyPiece(t, "too-large head", dumpResult(resp, err))
	}
}
