-- 016_flex: the flex tier (docs/delivery.md). price_basis gains 'flex', a
-- realtime call the provider says it served on its flex tier, priced at
-- batch rates; service_tier is the tier the provider says it served a
-- call asked for flex on ('flex', 'default'), NULL for a call asked for
-- no tier or whose reply named none. Rollups group by
-- price_basis already (009), so a flex call's cost shows under its own
-- basis with no change to them.
--
-- The new check is added NOT VALID: every row already in the ledger is
-- realtime or batch, and validating would read the whole attempts table
-- under its lock for nothing. New rows are checked.

ALTER TABLE attempts DROP CONSTRAINT attempts_price_basis_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_price_basis_check
    CHECK (price_basis IN ('realtime', 'batch', 'flex')) NOT VALID;
ALTER TABLE attempts ADD COLUMN service_tier text;

---- create above / drop below ----

ALTER TABLE attempts DROP COLUMN service_tier;
UPDATE attempts SET price_basis = 'realtime' WHERE price_basis = 'flex';
ALTER TABLE attempts DROP CONSTRAINT attempts_price_basis_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_price_basis_check
    CHECK (price_basis IN ('realtime', 'batch'));
