package pipeline

import (
	"maps"
	"slices"

	"github.com/fixpoint-dev/fixpoint"
	"github.com/fixpoint-dev/fixpoint/repair"
	"github.com/fixpoint-dev/fixpoint/store"
)

// ChargedPrices is the price table as the ledger's model_prices rows: each
// model's rates as charged, defaults applied (Price.Rates), in model order.
func ChargedPrices(p repair.Prices) []store.Price {
	out := make([]store.Price, 0, len(p))
	for _, model := range slices.Sorted(maps.Keys(p)) {
		rt, bt := p[model].Rates(fixpoint.PriceBasisRealtime), p[model].Rates(fixpoint.PriceBasisBatch)
		out = append(out, store.Price{Model: model, InputPerMTok: rt.Input, OutputPerMTok: rt.Output,
			CachedInputPerMTok: rt.CachedInput, CacheWritePerMTok: rt.CacheWrite,
			BatchInputPerMTok: bt.Input, BatchOutputPerMTok: bt.Output, BatchCachedInputPerMTok: bt.CachedInput,
			BatchCacheWritePerMTok: bt.CacheWrite})
	}
	return out
}
