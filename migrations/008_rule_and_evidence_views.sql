-- 008_rule_and_evidence_views: what a batch's rules and evidence stage
-- found, for SQL and `report failures`: the rule failures by rule, and the
-- grades of each field of the final values (which fields the model
-- invents). Both are read one batch at a time (WHERE batch = ...): the
-- filter reaches jobs (its index on batch) and each job's attempts are
-- read by the attempts' primary key.
--
-- A job's final check is what last checked its value (jobs.value): when
-- its latest run is a revalidation (enqueue revalidate), that run's
-- revalidations row; else its final attempt, the run's valid attempt,
-- else the run's last attempt. A job with neither in its latest run
-- (queued, or requeued and not yet run) has none.

-- rule_failures: the failures of the schema's rules (keyword
-- x-fixpoint-rules) by batch, rule, path and severity, in the attempts
-- and the revalidations. rule is the rule's CEL text (the error's
-- "rule"); path the JSON pointer the error names, array indices folded to
-- '*' as in error_paths; severity 'error' (in errors: the value was not
-- valid, and an attempt's message went back to the model) or 'warn' (in
-- warnings: recorded, not repaired).
--   failures     entries across every attempt and revalidation of every run
--   jobs         distinct jobs with at least one
--   final_jobs   jobs whose final check has it: for 'error', the jobs it
--                left not valid; for 'warn', the values delivered with it
-- Example: SELECT rule, path, severity, failures, jobs, final_jobs FROM rule_failures WHERE batch = 'demo' ORDER BY failures DESC;
CREATE VIEW rule_failures AS
SELECT
    j.batch,
    f.e->>'rule'                                                            AS rule,
    regexp_replace(coalesce(f.e->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
    f.severity,
    count(*)                                                                AS failures,
    count(DISTINCT j.id)                                                    AS jobs,
    count(DISTINCT j.id) FILTER (WHERE c.run = j.run AND (c.attempt_no IS NULL OR c.attempt_no = fin.attempt_no)) AS final_jobs
FROM jobs j
-- Every check of a job's values: its attempts, and its revalidations
-- (attempt_no NULL; a revalidation's run has no attempt).
JOIN (
    SELECT job_id, run, attempt_no, errors, warnings FROM attempts
    UNION ALL
    SELECT job_id, run, NULL, errors, warnings FROM revalidations
) c ON c.job_id = j.id
CROSS JOIN LATERAL (
    SELECT 'error' AS severity, e FROM jsonb_array_elements(c.errors) e
    WHERE e->>'keyword' = 'x-fixpoint-rules'
    UNION ALL
    SELECT 'warn', w FROM jsonb_array_elements(c.warnings) w
    WHERE w->>'keyword' = 'x-fixpoint-rules'
) f
-- Read for the checks with a failure only (the lateral comes after f).
LEFT JOIN LATERAL (
    SELECT l.attempt_no FROM attempts l
    WHERE l.job_id = j.id AND l.run = j.run
    ORDER BY l.valid DESC, l.attempt_no DESC LIMIT 1
) fin ON true
WHERE j.batch IS NOT NULL
GROUP BY 1, 2, 3, 4;

-- evidence_grades: the grades of the strings and numbers of the jobs'
-- final checks (attempts.evidence, revalidations.evidence), by batch and
-- field. path is the leaf's JSON pointer in the value, array indices
-- folded to '*' (/lines/3/sku counts as /lines/*/sku); a final check the
-- evidence stage did not grade (evidence off, a value the schema or its
-- rules refused, no value) adds nothing.
--   leaves                               leaves graded (an array field
--                                        counts each element)
--   exact, normalized, fuzzy, none       of them, by grade
--   *_share                              each of those / leaves
-- Example: SELECT path, leaves, none_share FROM evidence_grades WHERE batch = 'demo' ORDER BY none_share DESC;
CREATE VIEW evidence_grades AS
SELECT batch, path, leaves, exact, normalized, fuzzy, none,
       exact::float8 / leaves      AS exact_share,
       normalized::float8 / leaves AS normalized_share,
       fuzzy::float8 / leaves      AS fuzzy_share,
       none::float8 / leaves       AS none_share
FROM (
    SELECT
        j.batch,
        regexp_replace(coalesce(g->>'path', ''), '/[0-9]+(?=/|$)', '/*', 'g') AS path,
        count(*)                                                 AS leaves,
        count(*) FILTER (WHERE g->>'grade' = 'exact')            AS exact,
        count(*) FILTER (WHERE g->>'grade' = 'normalized')       AS normalized,
        count(*) FILTER (WHERE g->>'grade' = 'fuzzy')            AS fuzzy,
        count(*) FILTER (WHERE g->>'grade' = 'none')             AS none
    FROM jobs j
    CROSS JOIN LATERAL (
        SELECT r.evidence FROM revalidations r WHERE r.job_id = j.id AND r.run = j.run
        UNION ALL
        (SELECT a.evidence FROM attempts a
         WHERE a.job_id = j.id AND a.run = j.run
         ORDER BY a.valid DESC, a.attempt_no DESC LIMIT 1)
        LIMIT 1
    ) f
    CROSS JOIN LATERAL jsonb_array_elements(f.evidence) g
    WHERE j.batch IS NOT NULL
    GROUP BY 1, 2
) c;

---- create above / drop below ----

DROP VIEW evidence_grades;
DROP VIEW rule_failures;
