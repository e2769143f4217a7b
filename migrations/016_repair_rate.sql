-- 016_repair_rate: repair_effectiveness.repair_rate is valid_next / retried:
-- of the jobs whose attempt n failed with a class and that were asked again,
-- the share valid at attempt n+1; NULL when none was asked again (the last
-- attempt a job was allowed, or jobs that ended another way). It was
-- valid_next / failed, which read 0% at every job's last attempt and
-- counted jobs never asked again as feedback that did not work.
CREATE OR REPLACE VIEW repair_effectiveness AS
SELECT
    coalesce(j.batch, '')                                                      AS batch,
    a.attempt_no,
    a.class,
    count(*)                                                                   AS failed,
    count(n.job_id)                                                            AS retried,
    count(*) FILTER (WHERE n.valid)                                            AS valid_next,
    (count(*) FILTER (WHERE n.valid))::float8 / nullif(count(n.job_id), 0)     AS repair_rate
FROM attempts a
JOIN jobs j ON j.id = a.job_id
LEFT JOIN attempts n ON n.job_id = a.job_id AND n.run = a.run AND n.attempt_no = a.attempt_no + 1
WHERE NOT a.valid
GROUP BY 1, 2, 3;

---- create above / drop below ----

CREATE OR REPLACE VIEW repair_effectiveness AS
SELECT
    coalesce(j.batch, '')                                   AS batch,
    a.attempt_no,
    a.class,
    count(*)                                                AS failed,
    count(n.job_id)                                         AS retried,
    count(*) FILTER (WHERE n.valid)                         AS valid_next,
    (count(*) FILTER (WHERE n.valid))::float8 / count(*)    AS repair_rate
FROM attempts a
JOIN jobs j ON j.id = a.job_id
LEFT JOIN attempts n ON n.job_id = a.job_id AND n.run = a.run AND n.attempt_no = a.attempt_no + 1
WHERE NOT a.valid
GROUP BY 1, 2, 3;
