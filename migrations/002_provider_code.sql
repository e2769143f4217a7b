-- The provider's own error code of a failed call (OpenAI's error.code,
-- Anthropic's error.type, e.g. context_length_exceeded, model_not_found,
-- not_found_error), beside provider_class, fixpoint's class of it: a
-- report groups by either. '' for a call that got a reply, or an error
-- without a code (Ollama's).
ALTER TABLE attempts ADD COLUMN provider_code text NOT NULL DEFAULT '';
ALTER TABLE interrupted_attempts ADD COLUMN provider_code text NOT NULL DEFAULT '';

---- create above / drop below ----

ALTER TABLE interrupted_attempts DROP COLUMN provider_code;
ALTER TABLE attempts DROP COLUMN provider_code;
