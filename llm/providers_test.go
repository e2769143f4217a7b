package llm

import (
	"net/url"
	"slices"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
)

// Every row of the provider table is whole and consistent: a client can
// be built from its name alone, at its default base URL; what it says it
// has, the client has.
func TestProviderRows(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, p := range Providers() {
		if p.Name == "" || seen[p.Name] {
			t.Errorf("row %+v: empty or repeated name", p)
		}
		seen[p.Name] = true
		if _, ok := wires[p.Wire]; !ok {
			t.Errorf("%s: wire format %q has no wireInfo", p.Name, p.Wire)
		}
		if u, err := url.Parse(p.BaseURLDefault); err != nil || u.Host == "" {
			t.Errorf("%s: default base URL %q", p.Name, p.BaseURLDefault)
		}
		if p.BaseURLEnv == "" || p.Description == "" || p.DefaultModel == "" {
			t.Errorf("%s: base URL variable %q, description %q, default model %q: none may be empty", p.Name, p.BaseURLEnv, p.Description, p.DefaultModel)
		}
		if p.KeyRequired && p.KeyEnv == "" {
			t.Errorf("%s needs a key and names no variable for it", p.Name)
		}
		if len(p.Deliveries) == 0 || p.Deliveries[0] != DeliveryRealtime {
			t.Errorf("%s: deliveries %v, want realtime first", p.Name, p.Deliveries)
		}
		for _, f := range p.Omit {
			if !slices.Contains(omittable, f) || p.Wire != WireOpenAIChat {
				t.Errorf("%s omits %q, which its encoder (%s) cannot leave out", p.Name, f, p.Wire)
			}
		}
		for _, m := range []fixpoint.Mode{fixpoint.ModeJSONSchema, fixpoint.ModeTool} {
			if p.Modes[m] == "" {
				t.Errorf("%s: no native form of mode %s", p.Name, m)
			}
		}

		c, err := New(Config{Provider: p.Name})
		if err != nil {
			t.Errorf("%s: New: %v", p.Name, err)
			continue
		}
		if got := c.Config().BaseURL; got != p.BaseURLDefault {
			t.Errorf("%s: base URL %q, want the row's %q", p.Name, got, p.BaseURLDefault)
		}
		if c.SupportsBatch() != p.Has(DeliveryBatch) || HasBatchAPI(p.Name) != p.Has(DeliveryBatch) {
			t.Errorf("%s: SupportsBatch %v, HasBatchAPI %v, row says batch %v", p.Name, c.SupportsBatch(), HasBatchAPI(p.Name), p.Has(DeliveryBatch))
		}
		if n, _ := c.BatchLimits(); (n > 0) != p.Has(DeliveryBatch) {
			t.Errorf("%s: batch limit %d, row says batch %v", p.Name, n, p.Has(DeliveryBatch))
		}
		if c.MissingKey() != p.KeyRequired {
			t.Errorf("%s without a key at its default URL: MissingKey %v, want %v", p.Name, c.MissingKey(), p.KeyRequired)
		}
	}
	if names := ProviderNames(); len(names) != len(seen) {
		t.Errorf("ProviderNames %v, table has %d rows", names, len(seen))
	}
	if _, err := New(Config{Provider: "nonesuch"}); err == nil {
		t.Error("New took a provider the table lacks")
	}
}
