-- 017_model_prices_charged: model_prices holds what the workers charge.
-- Each worker writes its price table (the built-in one, and --prices over
-- it) at start, with the rates as charged: cache writes, and the batch
-- prices of the providers' batch APIs, defaults applied (a cache write not
-- given costs the input price, a batch price not given is half the
-- realtime one). A model no worker knows keeps the row it has. source says
-- who wrote a row ('migration' or 'worker'), updated_at when.
ALTER TABLE model_prices
    ADD COLUMN cache_write_per_mtok        numeric(12, 6) NOT NULL DEFAULT 0 CHECK (cache_write_per_mtok >= 0),
    ADD COLUMN batch_input_per_mtok        numeric(12, 6) NOT NULL DEFAULT 0 CHECK (batch_input_per_mtok >= 0),
    ADD COLUMN batch_output_per_mtok       numeric(12, 6) NOT NULL DEFAULT 0 CHECK (batch_output_per_mtok >= 0),
    ADD COLUMN batch_cached_input_per_mtok numeric(12, 6) NOT NULL DEFAULT 0 CHECK (batch_cached_input_per_mtok >= 0),
    ADD COLUMN batch_cache_write_per_mtok  numeric(12, 6) NOT NULL DEFAULT 0 CHECK (batch_cache_write_per_mtok >= 0),
    ADD COLUMN source                      text NOT NULL DEFAULT 'migration',
    ADD COLUMN updated_at                  timestamptz NOT NULL DEFAULT now();

UPDATE model_prices SET
    cache_write_per_mtok        = input_per_mtok,
    batch_input_per_mtok        = input_per_mtok / 2,
    batch_output_per_mtok       = output_per_mtok / 2,
    batch_cached_input_per_mtok = cached_input_per_mtok / 2,
    batch_cache_write_per_mtok  = input_per_mtok / 2;

---- create above / drop below ----

ALTER TABLE model_prices
    DROP COLUMN updated_at,
    DROP COLUMN source,
    DROP COLUMN batch_cache_write_per_mtok,
    DROP COLUMN batch_cached_input_per_mtok,
    DROP COLUMN batch_output_per_mtok,
    DROP COLUMN batch_input_per_mtok,
    DROP COLUMN cache_write_per_mtok;
