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
	// batch_rollup_current (migration 010) keeps these sums over the
	// attempts of the jobs' current runs.
	err := s.pool.QueryRow(ctx, `
		SELECT coalesce(sum(prompt_tokens), 0)::int8, coalesce(sum(cached_tokens), 0)::int8,
		       coalesce(sum(cache_write_tokens), 0)::int8,
		       coalesce(sum(realtime_attempts), 0)::int8, coalesce(sum(realtime_cost_usd), 0)::float8,
		       coalesce(sum(batch_attempts), 0)::int8, coalesce(sum(batch_cost_usd), 0)::float8
		FROM batch_rollup_current WHERE batch = $1`, batch).Scan(
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
