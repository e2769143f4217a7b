-- 021_wave_missing_since: when a wave's provider batch first answered 404,
-- kept in the ledger. A worker kept it in memory, so each restart (a
-- rolling deploy, a crash loop, a cron-started worker) began the five
-- minutes of grace again: a batch gone for 15 minutes was still polled,
-- its jobs queued. NULL while the provider knows the batch.
ALTER TABLE waves ADD COLUMN missing_since timestamptz;

---- create above / drop below ----

ALTER TABLE waves DROP COLUMN missing_since;
