package store

import (
	"context"
	"fmt"
)

// BasisSpend counts the attempts made at one price basis and what they cost.
type BasisSpend struct {
	// Attempts counts attempt rows, replies or not.
	Attempts int64
	// CostUSD sums their estimated cost (attempts without one count as 0).
	CostUSD float64
}

// CacheDelivery is what prompt caching and batch delivery did for a batch,
// over the attempts of its jobs' current runs (earlier runs' attempts, kept
// after a requeue, are left out, as in batch_summary).
type CacheDelivery struct {
	// PromptTokens sums tokens_in (every input token, cache reads and
	// writes included) of the attempts that got a reply (class other than
	// 'provider'): the tokens the cache could have served.
	PromptTokens int64
	// CachedTokens and CacheWriteTokens sum the same attempts' cache reads
	// (tokens_cached) and cache writes (tokens_cache_write).
	CachedTokens, CacheWriteTokens int64
	// CacheHitRate is CachedTokens / PromptTokens, 0 when PromptTokens is 0.
	CacheHitRate float64
	// Realtime and Batch split every attempt (replies or not) by its price
	// basis: realtime calls, and requests of a provider batch (a wave).
	Realtime, Batch BasisSpend
}

// CacheDelivery returns the prompt-cache and price-basis figures of batch;
// all zero for a batch with no attempts (or no such batch).
func (s *Store) CacheDelivery(ctx context.Context, batch string) (CacheDelivery, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var d CacheDelivery
	err := s.pool.QueryRow(ctx, `
		SELECT coalesce(sum(a.tokens_in) FILTER (WHERE a.class <> 'provider'), 0)::int8,
		       coalesce(sum(a.tokens_cached) FILTER (WHERE a.class <> 'provider'), 0)::int8,
		       coalesce(sum(a.tokens_cache_write) FILTER (WHERE a.class <> 'provider'), 0)::int8,
		       count(*) FILTER (WHERE a.price_basis = 'realtime'),
		       coalesce(sum(a.cost_usd) FILTER (WHERE a.price_basis = 'realtime'), 0)::float8,
		       count(*) FILTER (WHERE a.price_basis = 'batch'),
		       coalesce(sum(a.cost_usd) FILTER (WHERE a.price_basis = 'batch'), 0)::float8
		FROM attempts a JOIN jobs j ON j.id = a.job_id AND j.run = a.run
		WHERE j.batch = $1`, batch).Scan(
		&d.PromptTokens, &d.CachedTokens, &d.CacheWriteTokens,
		&d.Realtime.Attempts, &d.Realtime.CostUSD, &d.Batch.Attempts, &d.Batch.CostUSD)
	if err != nil {
		return CacheDelivery{}, fmt.Errorf("query cache and delivery figures of %s: %w", batch, err)
	}
	if d.PromptTokens > 0 {
		d.CacheHitRate = float64(d.CachedTokens) / float64(d.PromptTokens)
	}
	return d, nil
}
