-- 006_evidence_and_rules: what the stages after the schema record of an
-- attempt. evidence is each string and number of the attempt's value
-- graded against the job's source, [{path, grade, start, end}] with
-- start and end code point offsets into the source (NULL when the stage
-- did not run); warnings are the failures of the schema's rules of
-- severity warn, [{path, keyword, class, message}] (NULL for none); class
-- gains 'evidence', a value the source does not ground under --evidence
-- require. schema_hash is the schema (its rules with it) the reply was
-- checked against, NULL for the job's own.

ALTER TABLE attempts DROP CONSTRAINT attempts_class_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_class_check
    CHECK (class IN ('', 'syntax', 'shape', 'semantic', 'evidence', 'truncated', 'refusal', 'provider'));
ALTER TABLE attempts ADD COLUMN evidence jsonb;
ALTER TABLE attempts ADD COLUMN warnings jsonb;
ALTER TABLE attempts ADD COLUMN schema_hash text;
ALTER TABLE interrupted_attempts ADD COLUMN evidence jsonb;
ALTER TABLE interrupted_attempts ADD COLUMN warnings jsonb;

---- create above / drop below ----

ALTER TABLE interrupted_attempts DROP COLUMN warnings;
ALTER TABLE interrupted_attempts DROP COLUMN evidence;
ALTER TABLE attempts DROP COLUMN schema_hash;
ALTER TABLE attempts DROP COLUMN warnings;
ALTER TABLE attempts DROP COLUMN evidence;
ALTER TABLE attempts DROP CONSTRAINT attempts_class_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_class_check
    CHECK (class IN ('', 'syntax', 'shape', 'semantic', 'truncated', 'refusal', 'provider'));
