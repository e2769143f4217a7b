-- 010_unpriced: an attempt whose model had no price in the worker's table.
-- Its cost_usd is 0 because the price is unknown, not because the call was
-- free; reports say so instead of showing a batch on a new model as free.
ALTER TABLE attempts ADD COLUMN unpriced boolean NOT NULL DEFAULT false;

---- create above / drop below ----

ALTER TABLE attempts DROP COLUMN unpriced;
