package repair

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/fixpoint-dev/fixpoint"
)

// Price is what a model costs, in US dollars per million tokens.
//
// A zero CacheWritePerMTok means cache writes cost the input price (OpenAI
// bills none separately). A zero batch price is half the realtime price
// of the same kind (for cache writes, half the realtime cache-write price
// as just defined): both providers document their batch APIs at 50% of
// every realtime price, and Anthropic's caching multipliers stack with it
// (OpenAI: https://help.openai.com/en/articles/9197833-batch-api-faq,
// "50% cost discount vs. the synchronous APIs"; Anthropic:
// https://docs.anthropic.com/en/docs/about-claude/pricing, "Batch
// processing"). A zero CachedInputPerMTok is a price of zero, as before.
type Price struct {
	InputPerMTok       float64 `json:"input_per_mtok"`
	OutputPerMTok      float64 `json:"output_per_mtok"`
	CachedInputPerMTok float64 `json:"cached_input_per_mtok"`
	// CacheWritePerMTok is the price of input written to the prompt cache
	// (Anthropic's 5-minute cache: 1.25× input).
	CacheWritePerMTok float64 `json:"cache_write_per_mtok,omitempty"`

	BatchInputPerMTok       float64 `json:"batch_input_per_mtok,omitempty"`
	BatchOutputPerMTok      float64 `json:"batch_output_per_mtok,omitempty"`
	BatchCachedInputPerMTok float64 `json:"batch_cached_input_per_mtok,omitempty"`
	BatchCacheWritePerMTok  float64 `json:"batch_cache_write_per_mtok,omitempty"`
}

// Rates are the four prices of one basis, defaults applied, in US dollars
// per million tokens.
type Rates struct {
	Input, Output, CachedInput, CacheWrite float64
}

// Rates returns p's prices on basis, its zero fields given their meaning
// (see Price). Flex is priced as batch: OpenAI prices the flex tier "at
// Batch API rates, with additional discounts from prompt caching"
// (https://developers.openai.com/api/docs/guides/flex-processing), which
// is the batch columns, the cached-input one included. Any other basis is
// realtime.
func (p Price) Rates(basis fixpoint.PriceBasis) Rates {
	r := Rates{Input: p.InputPerMTok, Output: p.OutputPerMTok, CachedInput: p.CachedInputPerMTok, CacheWrite: p.CacheWritePerMTok}
	if r.CacheWrite == 0 {
		r.CacheWrite = r.Input
	}
	if basis != fixpoint.PriceBasisBatch && basis != fixpoint.PriceBasisFlex {
		return r
	}
	half := func(batch, realtime float64) float64 {
		if batch != 0 {
			return batch
		}
		return realtime / 2
	}
	return Rates{
		Input:       half(p.BatchInputPerMTok, r.Input),
		Output:      half(p.BatchOutputPerMTok, r.Output),
		CachedInput: half(p.BatchCachedInputPerMTok, r.CachedInput),
		CacheWrite:  half(p.BatchCacheWritePerMTok, r.CacheWrite),
	}
}

// Prices maps a model name to its price. A name ending in "*" is a prefix.
type Prices map[string]Price

// DefaultPrices holds list prices for common models at the time of writing.
// Users override or extend them with a JSON file (see ParsePrices); the
// simulator's models cost nothing.
//
// The OpenAI rows (input, cached input, output) are unchanged; their batch
// prices are the default half (see Price). The Anthropic rows follow
// Anthropic's pricing page, https://docs.anthropic.com/en/docs/about-claude/pricing
// (now platform.claude.com/docs/en/about-claude/pricing): "Model pricing"
// gives base input, 5m cache writes, cache hits and output, "Batch
// processing" the batch input and output written out below. Cache writes
// are the 5-minute writes, 1.25× input (the only cache llm asks for);
// cache hits are 0.1× input. Batch cache prices are the default half.
func DefaultPrices() Prices {
	return Prices{
		"gpt-4o-mini":  {InputPerMTok: 0.15, OutputPerMTok: 0.60, CachedInputPerMTok: 0.075},
		"gpt-4o":       {InputPerMTok: 2.50, OutputPerMTok: 10.00, CachedInputPerMTok: 1.25},
		"gpt-4.1-mini": {InputPerMTok: 0.40, OutputPerMTok: 1.60, CachedInputPerMTok: 0.10},
		"gpt-4.1":      {InputPerMTok: 2.00, OutputPerMTok: 8.00, CachedInputPerMTok: 0.50},
		"claude-3-5-haiku-latest": {InputPerMTok: 0.80, OutputPerMTok: 4.00, CachedInputPerMTok: 0.08, CacheWritePerMTok: 1.00,
			BatchInputPerMTok: 0.40, BatchOutputPerMTok: 2.00},
		"claude-haiku-4-5": {InputPerMTok: 1.00, OutputPerMTok: 5.00, CachedInputPerMTok: 0.10, CacheWritePerMTok: 1.25,
			BatchInputPerMTok: 0.50, BatchOutputPerMTok: 2.50},
		"claude-sonnet-4-5": {InputPerMTok: 3.00, OutputPerMTok: 15.00, CachedInputPerMTok: 0.30, CacheWritePerMTok: 3.75,
			BatchInputPerMTok: 1.50, BatchOutputPerMTok: 7.50},
		"claude-sonnet-4-20250514": {InputPerMTok: 3.00, OutputPerMTok: 15.00, CachedInputPerMTok: 0.30, CacheWritePerMTok: 3.75,
			BatchInputPerMTok: 1.50, BatchOutputPerMTok: 7.50},
		// Mistral: list prices per million tokens as price trackers gave
		// them on 2026-12-07 (margindash.com/mistral-api-pricing,
		// tokenmix.ai/blog/mistral-api-pricing), found with the search
		// tool; Mistral's own page could not be read to check them.
		// Mistral publishes no cache discount: cached input is priced as
		// input. Large 3 (2512), Medium 3.1 (2508), Small 3.2 (2506).
		"mistral-large-latest":  {InputPerMTok: 0.50, OutputPerMTok: 1.50, CachedInputPerMTok: 0.50},
		"mistral-large-2512":    {InputPerMTok: 0.50, OutputPerMTok: 1.50, CachedInputPerMTok: 0.50},
		"mistral-medium-latest": {InputPerMTok: 0.40, OutputPerMTok: 2.00, CachedInputPerMTok: 0.40},
		"mistral-medium-2508":   {InputPerMTok: 0.40, OutputPerMTok: 2.00, CachedInputPerMTok: 0.40},
		"mistral-small-latest":  {InputPerMTok: 0.10, OutputPerMTok: 0.30, CachedInputPerMTok: 0.10},
		"mistral-small-2506":    {InputPerMTok: 0.10, OutputPerMTok: 0.30, CachedInputPerMTok: 0.10},
		"sim-*":                 {},
	}
}

// ParsePrices reads a JSON object of model -> Price and lays it over base:
// a model in data replaces base's whole row, and a key it leaves out is
// zero, with the meaning Price gives zero (the keys are those of Price's
// JSON tags; only input_per_mtok, output_per_mtok and cached_input_per_mtok
// existed before, and a file with only those still reads the same).
//
// A key Price does not have (a typo such as "inptu_per_mtok", which would
// silently price input at zero) or a negative price is an error naming it.
func ParsePrices(base Prices, data []byte) (Prices, error) {
	var over Prices
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&over); err != nil {
		return nil, fmt.Errorf("parse price table: %w", err)
	}
	if dec.More() {
		return nil, errors.New("parse price table: more than one JSON value")
	}
	for model, p := range over {
		for name, v := range map[string]float64{"input_per_mtok": p.InputPerMTok, "output_per_mtok": p.OutputPerMTok,
			"cached_input_per_mtok": p.CachedInputPerMTok, "cache_write_per_mtok": p.CacheWritePerMTok,
			"batch_input_per_mtok": p.BatchInputPerMTok, "batch_output_per_mtok": p.BatchOutputPerMTok,
			"batch_cached_input_per_mtok": p.BatchCachedInputPerMTok, "batch_cache_write_per_mtok": p.BatchCacheWritePerMTok} {
			if v < 0 {
				return nil, fmt.Errorf("parse price table: %s: %s %v is negative", model, name, v)
			}
		}
	}
	out := Prices{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out, nil
}

// Lookup returns the price of model: an exact name first, then the longest
// matching prefix entry. ok is false when the model is unknown (cost 0).
func (p Prices) Lookup(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	best, found := "", false
	var price Price
	for k, v := range p {
		if strings.HasSuffix(k, "*") && strings.HasPrefix(model, strings.TrimSuffix(k, "*")) && len(k) > len(best) {
			best, price, found = k, v, true
		}
	}
	return price, found
}

// LedgerCost rounds a cost to the 8 decimals the ledger keeps
// (numeric(18,8)). An attempt's cost is rounded so, and a job's cost is
// the sum of its attempts' as the ledger holds them: half-price rates give
// costs like $0.000038775, and a job's total rounded once differed from
// the sum of its attempts rounded one by one in the 8th decimal.
//
// It rounds as Postgres does when it stores the float: the shortest
// decimal that reads back as usd, rounded half away from zero ($5.35e-7
// is 0.00000054; math.Round(usd*1e8) gives 53, as the binary product falls
// just under the half).
func LedgerCost(usd float64) float64 {
	if math.IsNaN(usd) || math.IsInf(usd, 0) {
		return usd
	}
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(usd, 'g', -1, 64))
	if !ok {
		return usd
	}
	r.Mul(r, big.NewRat(100_000_000, 1))
	// Half away from zero: add or take a half, then truncate.
	half := big.NewRat(1, 2)
	if r.Sign() < 0 {
		half.Neg(half)
	}
	r.Add(r, half)
	q := new(big.Int).Quo(r.Num(), r.Denom())
	f, _ := new(big.Rat).SetFrac(q, big.NewInt(100_000_000)).Float64()
	return f
}

// Cost is the estimated realtime cost in dollars of the given token
// counts, with no cache writes: CostOn(model, PriceBasisRealtime, in, out,
// cached, 0).
func (p Prices) Cost(model string, in, out, cached int) float64 {
	return p.CostOn(model, fixpoint.PriceBasisRealtime, in, out, cached, 0)
}

// CostOn is the estimated cost in dollars of one call, or of the sum of
// several, on basis. The counts are those of fixpoint.Usage: in is every input
// token, cached (cache reads) and written (cache writes) included; the
// rest of in is billed at the input price, cached at the cached-input
// price, written at the cache-write price, out at the output price (see
// Rates). An unknown model costs 0.
func (p Prices) CostOn(model string, basis fixpoint.PriceBasis, in, out, cached, written int) float64 {
	pr, _ := p.Lookup(model)
	r := pr.Rates(basis)
	uncached := in - cached - written
	if uncached < 0 {
		uncached = 0
	}
	// In this order, with written = 0 the sum is bit for bit the one Cost
	// computed before cache writes were priced.
	return (float64(uncached)*r.Input + float64(cached)*r.CachedInput + float64(out)*r.Output + float64(written)*r.CacheWrite) / 1e6
}
