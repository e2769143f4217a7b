-- 012_interruptions: two more kinds of interrupted call.
--   reason 'outage'     a call that failed (after its transport retries)
--                       while the provider was down; the job waited inside
--                       its delivery and went on. It got no reply and was
--                       not paid for; keeping it among the job's attempts
--                       made a job valid after an outage read "valid on
--                       attempt 9" and skewed mean_attempts and
--                       failure_classes.
--   reason 'cancelled'  a call of a job whose batch enqueue cancel ended
--                       while it ran (they were recorded as superseded).
--   hold                for 'outage', which wait of the delivery the call
--                       came before (1, 2, ...); 0 for every other reason.
--                       A resumed job numbers its next call as the one that
--                       failed, so the hold keeps the rows apart.
ALTER TABLE interrupted_attempts ADD COLUMN hold integer NOT NULL DEFAULT 0 CHECK (hold >= 0);
ALTER TABLE interrupted_attempts DROP CONSTRAINT interrupted_attempts_pkey;
ALTER TABLE interrupted_attempts ADD PRIMARY KEY (job_id, run, delivery, hold, attempt_no);
ALTER TABLE interrupted_attempts DROP CONSTRAINT interrupted_attempts_reason_check;
ALTER TABLE interrupted_attempts ADD CONSTRAINT interrupted_attempts_reason_check
    CHECK (reason IN ('handed_back', 'shutdown', 'superseded', 'outage', 'cancelled'));

-- waves.home: where a wave can be driven: the queue stream its realtime
-- remainder is published to and the provider endpoint it was submitted
-- to. A worker claims only waves of its own homes ('' = any): a worker on
-- another queue published a wave's remainder into it, and one on the
-- simulator polled a real provider's batch it could not know.
ALTER TABLE waves ADD COLUMN home text NOT NULL DEFAULT '';

---- create above / drop below ----

ALTER TABLE waves DROP COLUMN home;

-- The old key cannot hold two waits' calls of one number: the outage rows
-- (unpaid calls without a reply) go, and the cancelled ones become
-- superseded again.
DELETE FROM interrupted_attempts WHERE reason = 'outage' OR hold > 0;
UPDATE interrupted_attempts SET reason = 'superseded' WHERE reason = 'cancelled';
ALTER TABLE interrupted_attempts DROP CONSTRAINT interrupted_attempts_reason_check;
ALTER TABLE interrupted_attempts ADD CONSTRAINT interrupted_attempts_reason_check
    CHECK (reason IN ('handed_back', 'shutdown', 'superseded'));
ALTER TABLE interrupted_attempts DROP CONSTRAINT interrupted_attempts_pkey;
ALTER TABLE interrupted_attempts ADD PRIMARY KEY (job_id, run, delivery, attempt_no);
ALTER TABLE interrupted_attempts DROP COLUMN hold;
