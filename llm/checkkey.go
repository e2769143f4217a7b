package llm

import (
	"context"
	"errors"
	"net/http"

	"github.com/fixpoint-dev/fixpoint"
	json "github.com/segmentio/encoding/json"
)

// ErrKeyRefused is matched by CheckKey's error when the provider refused
// the client's API key (HTTP 401).
var ErrKeyRefused = errors.New("API key refused")

// CheckKey asks the provider to list its models (GET /models on the Chat
// Completions wire format, GET /v1/models on Anthropic's), which costs
// nothing, to learn before any job is taken whether it accepts the
// client's API key. It returns an error matching ErrKeyRefused (and
// wrapping the *Error) on a 401, the *Error of any other failure (a server
// without the route answers 404, which says nothing of the key), and nil
// for Ollama's wire format, which takes no key.
func (c *Client) CheckKey(ctx context.Context) error {
	if c.wire.modelsPath == "" {
		return nil
	}
	u := c.url(c.wire.modelsPath, nil)
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	err := c.batchJSON(ctx, &batchOp{what: "list models", method: http.MethodGet, url: u}, &list)
	var e *fixpoint.ProviderError
	if errors.As(err, &e) && e.Class == fixpoint.ClassAuth && e.Status == http.StatusUnauthorized {
		return &keyRefused{e}
	}
	return err
}

// MissingKey reports whether the client has no API key for a public API
// that refuses every call without one (the default base URL of a provider
// whose row says KeyRequired). A compatible server elsewhere may take
// calls without a key.
func (c *Client) MissingKey() bool {
	return c.cfg.APIKey == "" && c.row.KeyRequired && c.cfg.BaseURL == trimBaseURL(c.row.BaseURLDefault)
}

// keyRefused is CheckKey's 401.
type keyRefused struct{ e *fixpoint.ProviderError }

func (k *keyRefused) Error() string        { return k.e.Error() }
func (k *keyRefused) Unwrap() error        { return k.e }
func (k *keyRefused) Is(target error) bool { return target == ErrKeyRefused }
