package repair

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InputPerMTok       float64 `json:"input_per_mtok"`
	OutputPerMTok      float64 `json:"output_per_mtok"`
	CachedInputPerMTok float64 `json:"cached_input_per_mtok"`
}

// Prices maps a model name to its price. A name ending in "*" is a prefix.
type Prices map[string]Price

// DefaultPrices holds list prices for common models at the time of writing.
// Users override or extend them with a JSON file (see ParsePrices); the
// simulator's models cost nothing.
func DefaultPrices() Prices {
	return Prices{
		"gpt-4o-mini":              {0.15, 0.60, 0.075},
		"gpt-4o":                   {2.50, 10.00, 1.25},
		"gpt-4.1-mini":             {0.40, 1.60, 0.10},
		"gpt-4.1":                  {2.00, 8.00, 0.50},
		"claude-3-5-haiku-latest":  {0.80, 4.00, 0.08},
		"claude-haiku-4-5":         {1.00, 5.00, 0.10},
		"claude-sonnet-4-5":        {3.00, 15.00, 0.30},
		"claude-sonnet-4-20250514": {3.00, 15.00, 0.30},
		"sim-*":                    {},
	}
}

// ParsePrices reads a JSON object of model -> Price and lays it over base.
func ParsePrices(base Prices, data []byte) (Prices, error) {
	var over Prices
	if err := json.Unmarshal(data, &over); err != nil {
		return nil, fmt.Errorf("parse price table: %w", err)
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

// Cost is the estimated cost in dollars of the given token counts. Cached
// input tokens are part of in and are charged at the cached rate.
func (p Prices) Cost(model string, in, out, cached int) float64 {
	pr, _ := p.Lookup(model)
	uncached := in - cached
	if uncached < 0 {
		uncached = 0
	}
	return (float64(uncached)*pr.InputPerMTok + float64(cached)*pr.CachedInputPerMTok + float64(out)*pr.OutputPerMTok) / 1e6
}
