package enqueue

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint/queue"
)

// The dry run refuses a delivery the run would refuse, and asks no
// server: a provider whose table row has no batch API, and a cap with
// batch delivery.
func TestDryRunChecksTheDelivery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, provider string
		fallback       string
		want           string // "" for no refusal
	}{
		{"no batch API", "mistral", "", "mistral has no batch API"},
		{"no batch API, realtime fallback", "mistral", "realtime", ""},
		{"batch API", "openai", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Batch: "dry-delivery", Schema: []byte(`{"type":"object"}`), Provider: tc.provider, Model: "m", Format: FormatJSONL,
				Template: "{{.subject}}", Delivery: queue.DeliveryBatch, BatchFallback: tc.fallback}
			cfg.ProbeBatch = func(context.Context) error { t.Error("the dry run asked a server"); return nil }
			_, err := DryRun(t.Context(), nil, cfg, strings.NewReader(`{"subject":"a"}`+"\n"), 0, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%v, want no refusal", err)
			case tc.want != "" && (!errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("%v, want ErrBadConfig saying %q", err, tc.want)
			}
		})
	}
}
