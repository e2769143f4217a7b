package repair_test

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
)

// near compares dollar amounts to a few ulps: a wrong rate is off by far
// more.
func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-12*math.Max(1, math.Abs(want))
}

func TestCostOn(t *testing.T) {
	t.Parallel()
	prices := repair.Prices{
		"plain":   {InputPerMTok: 2, OutputPerMTok: 8, CachedInputPerMTok: 0.5},
		"writes":  {InputPerMTok: 2, OutputPerMTok: 8, CachedInputPerMTok: 0.5, CacheWritePerMTok: 2.5},
		"listed":  {InputPerMTok: 2, OutputPerMTok: 8, CachedInputPerMTok: 0.5, CacheWritePerMTok: 2.5, BatchInputPerMTok: 0.9, BatchOutputPerMTok: 3, BatchCachedInputPerMTok: 0.2, BatchCacheWritePerMTok: 1.1},
		"acme-*":  {InputPerMTok: 10, OutputPerMTok: 20},
		"sim-*":   {},
		"nocache": {InputPerMTok: 2, OutputPerMTok: 8},
	}
	const (
		rt = fixpoint.PriceBasisRealtime
		bt = fixpoint.PriceBasisBatch
	)
	tests := []struct {
		name                     string
		model                    string
		basis                    fixpoint.PriceBasis
		in, out, cached, written int
		want                     float64 // dollars
	}{
		{"realtime, no cache", "plain", rt, 1000, 100, 0, 0, (1000*2 + 100*8) / 1e6},
		{"realtime, cache reads at the cached price", "plain", rt, 1000, 100, 400, 0, (600*2 + 400*0.5 + 100*8) / 1e6},
		{"realtime, cache writes at their price", "writes", rt, 1000, 100, 0, 600, (400*2 + 600*2.5 + 100*8) / 1e6},
		{"realtime, cache writes without a price cost the input price", "plain", rt, 1000, 100, 0, 600, (1000*2 + 100*8) / 1e6},
		{"realtime, reads and writes", "writes", rt, 1000, 100, 300, 600, (100*2 + 300*0.5 + 600*2.5 + 100*8) / 1e6},
		{"realtime ignores batch prices", "listed", rt, 1000, 100, 300, 600, (100*2 + 300*0.5 + 600*2.5 + 100*8) / 1e6},
		{"batch, no cache: half", "plain", bt, 1000, 100, 0, 0, (1000*1 + 100*4) / 1e6},
		{"batch, reads and writes: half of each", "writes", bt, 1000, 100, 400, 100, (500*1 + 400*0.25 + 100*1.25 + 100*4) / 1e6},
		{"batch, writes without a price: half the input price", "plain", bt, 1000, 100, 0, 600, (400*1 + 600*1 + 100*4) / 1e6},
		{"batch, listed prices", "listed", bt, 1000, 100, 400, 100, (500*0.9 + 400*0.2 + 100*1.1 + 100*3) / 1e6},
		{"batch, no cached price: zero stays zero", "nocache", bt, 1000, 100, 400, 0, (600*1 + 100*4) / 1e6},
		{"flex is priced as batch", "writes", fixpoint.PriceBasisFlex, 1000, 100, 400, 100, (500*1 + 400*0.25 + 100*1.25 + 100*4) / 1e6},
		{"flex, listed batch prices", "listed", fixpoint.PriceBasisFlex, 1000, 100, 400, 100, (500*0.9 + 400*0.2 + 100*1.1 + 100*3) / 1e6},
		{"an empty basis is realtime", "plain", "", 1000, 100, 400, 0, (600*2 + 400*0.5 + 100*8) / 1e6},
		{"a prefix row", "acme-large-2", bt, 1000, 100, 0, 0, (1000*5 + 100*10) / 1e6},
		{"the simulator is free", "sim-messy", rt, 1000, 100, 400, 100, 0},
		{"an unknown model is free", "nobody", bt, 1000, 100, 0, 0, 0},
		// Counts that do not add up bill no uncached input, never less.
		{"reads and writes over the input", "writes", rt, 500, 0, 400, 200, (400*0.5 + 200*2.5) / 1e6},
	}
	for _, tt := range tests {
		got := prices.CostOn(tt.model, tt.basis, tt.in, tt.out, tt.cached, tt.written)
		if !near(got, tt.want) {
			t.Errorf("%s: CostOn(%s, %q, %d, %d, %d, %d) = %.12f, want %.12f", tt.name, tt.model, tt.basis, tt.in, tt.out, tt.cached, tt.written, got, tt.want)
		}
	}
}

// TestCostKeepsItsNumber: Cost is still the realtime cost without cache
// writes, bit for bit the number it gave before prices knew about bases.
func TestCostKeepsItsNumber(t *testing.T) {
	t.Parallel()
	prices := repair.DefaultPrices()
	old := func(model string, in, out, cached int) float64 {
		pr, _ := prices.Lookup(model)
		uncached := max(in-cached, 0)
		return (float64(uncached)*pr.InputPerMTok + float64(cached)*pr.CachedInputPerMTok + float64(out)*pr.OutputPerMTok) / 1e6
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for model := range prices {
		if prefix, ok := strings.CutSuffix(model, "*"); ok {
			model = prefix + "x"
		}
		for range 200 {
			in, out := rng.IntN(200_000), rng.IntN(20_000)
			cached := rng.IntN(in + 1)
			got, want := prices.Cost(model, in, out, cached), old(model, in, out, cached)
			if got != want {
				t.Fatalf("Cost(%s, %d, %d, %d) = %v, want %v", model, in, out, cached, got, want)
			}
			if on := prices.CostOn(model, fixpoint.PriceBasisRealtime, in, out, cached, 0); on != got {
				t.Fatalf("CostOn realtime = %v, Cost = %v", on, got)
			}
		}
	}
}

// TestDefaultPricesRows checks the built-in rows against the providers'
// published rules: Anthropic's 5-minute cache writes at 1.25× input and
// reads at 0.1×, every batch price half the realtime one; OpenAI bills no
// cache write of its own; Mistral no cache at all.
func TestDefaultPricesRows(t *testing.T) {
	t.Parallel()
	prices := repair.DefaultPrices()
	for model, p := range prices {
		rt, bt := p.Rates(fixpoint.PriceBasisRealtime), p.Rates(fixpoint.PriceBasisBatch)
		for what, pair := range map[string][2]float64{
			"input": {bt.Input, rt.Input}, "output": {bt.Output, rt.Output},
			"cached input": {bt.CachedInput, rt.CachedInput}, "cache write": {bt.CacheWrite, rt.CacheWrite},
		} {
			if !near(pair[0], pair[1]/2) {
				t.Errorf("%s: batch %s = %v, want half of %v", model, what, pair[0], pair[1])
			}
		}
		switch {
		case strings.HasPrefix(model, "claude-"):
			if !near(p.CacheWritePerMTok, 1.25*p.InputPerMTok) || !near(p.CachedInputPerMTok, 0.1*p.InputPerMTok) {
				t.Errorf("%s: cache write %v, read %v; want 1.25× and 0.1× input %v", model, p.CacheWritePerMTok, p.CachedInputPerMTok, p.InputPerMTok)
			}
			if p.BatchInputPerMTok == 0 || p.BatchOutputPerMTok == 0 {
				t.Errorf("%s: the listed batch prices are missing: %+v", model, p)
			}
		case strings.HasPrefix(model, "gpt-"):
			if rt.CacheWrite != rt.Input || p.InputPerMTok == 0 {
				t.Errorf("%s: cache writes at %v, want the input price %v", model, rt.CacheWrite, rt.Input)
			}
		case strings.HasPrefix(model, "mistral-"):
			// No cache discount is published: a cached token is an input one.
			if rt.CachedInput != rt.Input || rt.CacheWrite != rt.Input || p.InputPerMTok == 0 || p.OutputPerMTok == 0 {
				t.Errorf("%s = %+v, want input, output, and cached input at the input price", model, p)
			}
		}
	}
	if p := prices["claude-sonnet-4-5"]; p != (repair.Price{InputPerMTok: 3, OutputPerMTok: 15, CachedInputPerMTok: 0.3, CacheWritePerMTok: 3.75, BatchInputPerMTok: 1.5, BatchOutputPerMTok: 7.5}) {
		t.Errorf("claude-sonnet-4-5 = %+v", p)
	}
}

func TestParsePrices(t *testing.T) {
	t.Parallel()
	base := repair.DefaultPrices()
	keep := repair.DefaultPrices()

	// A file from before: only the three old keys.
	old := `{"gpt-4o-mini": {"input_per_mtok": 1, "output_per_mtok": 2, "cached_input_per_mtok": 0.5},
	         "claude-sonnet-4-5": {"input_per_mtok": 3, "output_per_mtok": 15, "cached_input_per_mtok": 0.3},
	         "local-*": {"input_per_mtok": 0.01, "output_per_mtok": 0.02, "cached_input_per_mtok": 0}}`
	got, err := repair.ParsePrices(base, []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if p := got["gpt-4o-mini"]; p != (repair.Price{InputPerMTok: 1, OutputPerMTok: 2, CachedInputPerMTok: 0.5}) {
		t.Errorf("gpt-4o-mini = %+v", p)
	}
	// A row of the file replaces the built-in row whole: the new keys it
	// leaves out take their defaults, not the built-in values.
	if p := got["claude-sonnet-4-5"]; p != (repair.Price{InputPerMTok: 3, OutputPerMTok: 15, CachedInputPerMTok: 0.3}) {
		t.Errorf("claude-sonnet-4-5 = %+v, want the file's row alone", p)
	}
	if r := got["claude-sonnet-4-5"].Rates(fixpoint.PriceBasisBatch); r != (repair.Rates{Input: 1.5, Output: 7.5, CachedInput: 0.15, CacheWrite: 1.5}) {
		t.Errorf("claude-sonnet-4-5 batch rates = %+v", r)
	}
	if c := got.CostOn("local-7b", fixpoint.PriceBasisBatch, 1_000_000, 1_000_000, 0, 0); !near(c, 0.005+0.01) {
		t.Errorf("local-7b batch cost = %v", c)
	}
	if got["gpt-4o"] != base["gpt-4o"] || len(got) != len(base)+1 {
		t.Errorf("rows not in the file changed: %d rows, gpt-4o = %+v", len(got), got["gpt-4o"])
	}
	if !reflect.DeepEqual(base, keep) {
		t.Errorf("ParsePrices changed its base")
	}

	// Every key.
	full := `{"m": {"input_per_mtok": 4, "output_per_mtok": 20, "cached_input_per_mtok": 0.4, "cache_write_per_mtok": 5,
	               "batch_input_per_mtok": 1.9, "batch_output_per_mtok": 9, "batch_cached_input_per_mtok": 0.15, "batch_cache_write_per_mtok": 2.4}}`
	got, err = repair.ParsePrices(base, []byte(full))
	if err != nil {
		t.Fatal(err)
	}
	want := repair.Price{InputPerMTok: 4, OutputPerMTok: 20, CachedInputPerMTok: 0.4, CacheWritePerMTok: 5,
		BatchInputPerMTok: 1.9, BatchOutputPerMTok: 9, BatchCachedInputPerMTok: 0.15, BatchCacheWritePerMTok: 2.4}
	if got["m"] != want {
		t.Errorf("m = %+v, want %+v", got["m"], want)
	}
	if c := got.CostOn("m", fixpoint.PriceBasisBatch, 1_000_000, 1_000_000, 300_000, 200_000); !near(c, 0.5*1.9+0.3*0.15+0.2*2.4+9) {
		t.Errorf("m batch cost = %v", c)
	}
	if c := got.CostOn("m", fixpoint.PriceBasisRealtime, 1_000_000, 1_000_000, 300_000, 200_000); !near(c, 0.5*4+0.3*0.4+0.2*5+20) {
		t.Errorf("m realtime cost = %v", c)
	}

	for _, bad := range []struct{ file, want string }{
		{`{"m": {"input_per_mtok": "cheap"}}`, "input_per_mtok"},
		// A typo would price input at zero without a word.
		{`{"m": {"inptu_per_mtok": 1, "output_per_mtok": 2}}`, "inptu_per_mtok"},
		{`{"m": {"input_per_mtok": 1, "output_per_mtok": -2}}`, "m: output_per_mtok -2 is negative"},
		{`{"m": {"input_per_mtok": 1}} {"n": {}}`, "more than one JSON value"},
	} {
		if _, err := repair.ParsePrices(base, []byte(bad.file)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParsePrices(%s) = %v; want an error naming %q", bad.file, err, bad.want)
		}
	}
}

// LedgerCost rounds to 8 decimals as Postgres rounds the float it is given
// into numeric(18,8): from the float's shortest decimal, half away from
// zero. A job's cost, the sum of its attempts rounded so, is then the sum
// the ledger holds of them (it differed in the 8th decimal for half-price
// batch attempts).
func TestLedgerCost(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]float64{
		0.000038775:  0.00003878,
		5.35e-7:      0.00000054, // 53.4999... as a binary product
		2.95e-7:      0.0000003,
		0.000028495:  0.0000285,
		0.00003712:   0.00003712,
		0.0000371249: 0.00003712,
		-0.000000005: -0.00000001,
		0:            0,
		12.5:         12.5,
	} {
		if got := repair.LedgerCost(in); got != want {
			t.Errorf("LedgerCost(%v) = %v, want %v", in, got, want)
		}
	}
}
