package enqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/llm"
	"github.com/fixpoint-dev/fixpoint/queue"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// Batch delivery is checked before anything is recorded: a provider without
// a batch API falls back to realtime with a warning, a server the probe finds
// without the endpoints too, and what cannot work is a usage error.
func TestCheckDelivery(t *testing.T) {
	t.Parallel()
	one := 1.0
	unsupported := func(context.Context) error {
		return fmt.Errorf("probe: %w", llm.ErrBatchUnsupported)
	}
	down := func(context.Context) error { return errors.New("connection refused") }
	for _, tc := range []struct {
		name     string
		cfg      Config
		want     string // delivery after the check
		warning  string // part of the one warning, "" for none
		badUsage bool
	}{
		{name: "default is realtime", cfg: Config{Provider: "openai"}, want: queue.DeliveryRealtime},
		{name: "openai batch", cfg: Config{Provider: "openai", Delivery: "batch"}, want: queue.DeliveryBatch},
		{name: "anthropic batch", cfg: Config{Provider: "anthropic", Delivery: "batch"}, want: queue.DeliveryBatch},
		// Batch delivery that cannot be had is refused: realtime costs
		// twice as much. Asked for, the fallback is realtime with a word.
		{name: "ollama refused", cfg: Config{Provider: "ollama", Delivery: "batch"}, badUsage: true},
		{name: "ollama falls back when asked", cfg: Config{Provider: "ollama", Delivery: "batch", BatchFallback: BatchFallbackRealtime},
			want: queue.DeliveryRealtime, warning: "ollama has no batch API"},
		{name: "server without endpoints refused", cfg: Config{Provider: "openai", Delivery: "batch", ProbeBatch: unsupported}, badUsage: true},
		{name: "server without endpoints falls back when asked", cfg: Config{Provider: "openai", Delivery: "batch", ProbeBatch: unsupported, BatchFallback: BatchFallbackRealtime},
			want: queue.DeliveryRealtime, warning: "no batch endpoints"},
		{name: "fallback typo", cfg: Config{Provider: "openai", Delivery: "batch", BatchFallback: "realtme"}, badUsage: true},
		{name: "probe fails", cfg: Config{Provider: "openai", Delivery: "batch", ProbeBatch: down},
			want: queue.DeliveryBatch, warning: "could not check"},
		// Workers start no wave this close to the deadline: said at once.
		{name: "deadline within the margin", cfg: Config{Provider: "openai", Delivery: "batch", Deadline: 30 * time.Minute},
			want: queue.DeliveryBatch, warning: "no wave starts and every job runs realtime"},
		{name: "deadline past the margin", cfg: Config{Provider: "openai", Delivery: "batch", Deadline: 3 * time.Hour}, want: queue.DeliveryBatch},
		{name: "typo", cfg: Config{Provider: "openai", Delivery: "btach"}, badUsage: true},
		{name: "negative deadline", cfg: Config{Provider: "openai", Delivery: "batch", Deadline: -time.Hour}, badUsage: true},
		{name: "cap", cfg: Config{Provider: "openai", Delivery: "batch", Cap: store.Cap{MaxCostUSD: &one}}, badUsage: true},
		// Flex is realtime calls on a tier: a cap holds them as any.
		{name: "openai flex", cfg: Config{Provider: "openai", Delivery: "flex"}, want: queue.DeliveryFlex},
		{name: "flex with a cap", cfg: Config{Provider: "openai", Delivery: "flex", Cap: store.Cap{MaxCostUSD: &one}}, want: queue.DeliveryFlex},
		{name: "anthropic has no flex", cfg: Config{Provider: "anthropic", Delivery: "flex"}, badUsage: true},
		{name: "ollama has no flex", cfg: Config{Provider: "ollama", Delivery: "flex"}, badUsage: true},
		{name: "mistral has no flex", cfg: Config{Provider: "mistral", Delivery: "flex"}, badUsage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prog Progress
			cfg := tc.cfg
			err := checkDelivery(context.Background(), &cfg, &prog)
			if tc.badUsage {
				if !errors.Is(err, ErrBadConfig) {
					t.Fatalf("err = %v, want ErrBadConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Delivery != tc.want {
				t.Errorf("delivery %q, want %q", cfg.Delivery, tc.want)
			}
			switch {
			case tc.warning == "" && len(prog.Warnings) != 0:
				t.Errorf("warnings %q, want none", prog.Warnings)
			case tc.warning != "" && (len(prog.Warnings) != 1 || !strings.Contains(prog.Warnings[0], tc.warning)):
				t.Errorf("warnings %q, want one with %q", prog.Warnings, tc.warning)
			}
		})
	}
}

// The settings carry the delivery, the deadline and the cache key into every
// job message, and a re-run that changes any of them is named.
func TestDeliverySettings(t *testing.T) {
	t.Parallel()
	c := Config{Batch: "b", Provider: "openai", Model: "m", Delivery: queue.DeliveryBatch, Deadline: 2 * time.Hour, PromptCache: true}
	before := time.Now()
	s := c.settings("hash1")
	if s.Delivery != queue.DeliveryBatch || s.DeadlineSeconds != 7200 {
		t.Fatalf("settings %+v", s)
	}
	if at := time.Unix(s.DeadlineAt, 0); at.Before(before.Add(2*time.Hour-time.Second)) || at.After(time.Now().Add(2*time.Hour)) {
		t.Errorf("deadline at %s, want two hours from now", at)
	}
	env := s.envelope("b")
	if env.Delivery != queue.DeliveryBatch || env.Deadline != s.DeadlineAt || env.CacheKey == "" || len(env.CacheKey) > 64 {
		t.Errorf("envelope %+v", env)
	}
	if CacheKey("b", "hash1") == CacheKey("b", "hash2") || CacheKey("b", "hash1") == CacheKey("c", "hash1") || CacheKey("b", "hash1") != env.CacheKey {
		t.Error("the cache key is not one per batch and schema")
	}
	// A realtime batch without the cache has neither.
	if r := (&Config{Batch: "b", Provider: "openai", Model: "m"}).settings("hash1"); r.Delivery != "" || r.DeadlineAt != 0 || r.CacheKey != "" {
		t.Errorf("realtime settings %+v", r)
	}
	// Re-run with the same flags later: the same settings (the deadline
	// set at the first run is not compared).
	later := s
	later.DeadlineAt += 3600
	if d := s.diff(later); len(d) != 0 {
		t.Errorf("same flags differ: %q", d)
	}
	other := s
	other.Delivery, other.DeadlineSeconds, other.DeadlineAt, other.CacheKey = "", 0, 0, ""
	d := s.diff(other)
	if len(d) != 2 || d[0] != "delivery: recorded batch, now realtime" || d[1] != "prompt cache: recorded on, now off" {
		t.Errorf("diff = %q", d)
	}
	shorter := s
	shorter.DeadlineSeconds = 3600
	if d := s.diff(shorter); len(d) != 1 || d[0] != "deadline: recorded 2h0m0s, now 1h0m0s" {
		t.Errorf("diff = %q", d)
	}
}

// A dry run prices each delivery on its basis: flex at batch rates, half
// the list price of a realtime batch.
func TestDryRunPricesTheDelivery(t *testing.T) {
	t.Parallel()
	prices := repair.Prices{"m": {InputPerMTok: 2, OutputPerMTok: 8}}
	run := func(delivery string) DryRunReport {
		cfg := Config{Batch: "dr", Schema: []byte(`{"type":"object"}`), Provider: "openai", Model: "m", Format: FormatJSONL,
			Template: `{{.subject}}`, Delivery: delivery}
		rep, err := DryRun(t.Context(), nil, cfg, strings.NewReader(`{"subject":"a"}`+"\n"+`{"subject":"b"}`+"\n"), 0, prices)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rt, flex := run(queue.DeliveryRealtime), run(queue.DeliveryFlex)
	if rt.PriceBasis != fixpoint.PriceBasisRealtime || flex.PriceBasis != fixpoint.PriceBasisFlex {
		t.Fatalf("bases %q, %q; want realtime, flex", rt.PriceBasis, flex.PriceBasis)
	}
	if rt.CostUSD <= 0 || flex.CostUSD*2 < rt.CostUSD*0.999 || flex.CostUSD*2 > rt.CostUSD*1.001 {
		t.Errorf("flex $%v, realtime $%v: want half", flex.CostUSD, rt.CostUSD)
	}
}
