package llm_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/sim"
)

// CheckKey learns from the free model list whether the provider takes the
// key: a 401 matches ErrKeyRefused (the key not in the message), the
// right key passes, Ollama has no key to check, and a server without the
// route says nothing of the key.
func TestCheckKey(t *testing.T) {
	t.Parallel()
	_, url, closeSim, err := sim.Start(sim.Config{APIKey: "sk-right"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeSim)
	check := func(provider, base, key string) error {
		c, err := llm.New(llm.Config{Provider: provider, BaseURL: base, APIKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return c.CheckKey(context.Background())
	}
	for _, p := range []struct{ provider, base string }{{llm.ProviderOpenAI, url + "/v1"}, {llm.ProviderAnthropic, url}} {
		if err := check(p.provider, p.base, "sk-right"); err != nil {
			t.Errorf("%s, the right key: %v", p.provider, err)
		}
		err := check(p.provider, p.base, "sk-wrong-SECRET9")
		if !errors.Is(err, llm.ErrKeyRefused) || strings.Contains(err.Error(), "SECRET9") {
			t.Errorf("%s, a wrong key: %v; want ErrKeyRefused without the key", p.provider, err)
		}
		if err := check(p.provider, p.base, ""); !errors.Is(err, llm.ErrKeyRefused) {
			t.Errorf("%s, no key: %v; want ErrKeyRefused", p.provider, err)
		}
	}
	if err := check(llm.ProviderOllama, url, ""); err != nil {
		t.Errorf("ollama: %v, want nil", err)
	}
	bare := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(bare.Close)
	if err := check(llm.ProviderOpenAI, bare.URL+"/v1", "k"); err == nil || errors.Is(err, llm.ErrKeyRefused) {
		t.Errorf("a server without /models: %v; want an error that is not ErrKeyRefused", err)
	}
}
