-- 002_model_prices: list prices per model in US dollars per million tokens.
-- The pipeline computes cost from its own (overridable) table; this one is
-- data the user can query and edit. A model ending in '*' is a prefix pattern.
CREATE TABLE model_prices (
    model                  text PRIMARY KEY,
    input_per_mtok         numeric(12, 6) NOT NULL CHECK (input_per_mtok >= 0),
    output_per_mtok        numeric(12, 6) NOT NULL CHECK (output_per_mtok >= 0),
    cached_input_per_mtok  numeric(12, 6) NOT NULL CHECK (cached_input_per_mtok >= 0)
);

INSERT INTO model_prices (model, input_per_mtok, output_per_mtok, cached_input_per_mtok) VALUES
    ('gpt-4o-mini',             0.15,  0.60, 0.075),
    ('gpt-4o',                  2.50, 10.00, 1.25),
    ('claude-3-5-haiku-latest', 0.80,  4.00, 0.08),
    ('claude-sonnet-4',         3.00, 15.00, 0.30),
    ('sim-*',                   0,     0,    0);

---- create above / drop below ----

DROP TABLE model_prices;
