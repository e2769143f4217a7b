-- 009_cheaper_repairs: schema-guided local repair and patch re-asks.
-- coerced counts the schema-guided fixes applied to the attempt's value
-- (each is also in repairs, with its pointer, kind, before and after); an
-- attempt made valid by them is a call saved. patch_outcome says how a reply
-- to a patch request went: applied, parse_error, apply_error, out_of_scope
-- ('' when the attempt answered no patch request).
ALTER TABLE attempts ADD COLUMN coerced integer NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN patch_outcome text NOT NULL DEFAULT '';

---- create above / drop below ----

ALTER TABLE attempts DROP COLUMN patch_outcome;
ALTER TABLE attempts DROP COLUMN coerced;
