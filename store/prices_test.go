package store_test

import (
	"context"
	"testing"

	"github.com/fixpoint-dev/fixpoint/store"
	"github.com/fixpoint-dev/fixpoint/store/storetest"
)

// PutModelPrices writes the prices a worker charges over the seeded rows
// of the models it names, and leaves the others as they were: SQL that
// reprices attempts found no row for the models the workers priced.
func TestPutModelPrices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.NewStore(t)
	err := st.PutModelPrices(ctx, []store.Price{
		{Model: "gpt-4o-mini", InputPerMTok: 0.15, OutputPerMTok: 0.6, CachedInputPerMTok: 0.075, CacheWritePerMTok: 0.15,
			BatchInputPerMTok: 0.075, BatchOutputPerMTok: 0.3, BatchCachedInputPerMTok: 0.0375, BatchCacheWritePerMTok: 0.075},
		{Model: "claude-haiku-4-5", InputPerMTok: 1, OutputPerMTok: 5, CachedInputPerMTok: 0.1, CacheWritePerMTok: 1.25,
			BatchInputPerMTok: 0.5, BatchOutputPerMTok: 2.5, BatchCachedInputPerMTok: 0.05, BatchCacheWritePerMTok: 0.625},
	})
	if err != nil {
		t.Fatal(err)
	}
	prices, err := st.Prices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]store.Price{}
	for _, p := range prices {
		by[p.Model] = p
	}
	if p := by["claude-haiku-4-5"]; p.Source != "worker" || p.BatchOutputPerMTok != 2.5 || p.CacheWritePerMTok != 1.25 {
		t.Errorf("claude-haiku-4-5: %+v; want the worker's row", p)
	}
	if p := by["gpt-4o-mini"]; p.Source != "worker" || p.BatchInputPerMTok != 0.075 {
		t.Errorf("gpt-4o-mini: %+v; want the worker's row over the seeded one", p)
	}
	// The seeded rows go: one priced a model no worker charges for.
	if p, ok := by["claude-sonnet-4"]; ok {
		t.Errorf("claude-sonnet-4: %+v; want the seeded row gone", p)
	}
}
