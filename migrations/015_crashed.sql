-- 015_crashed: interrupted_attempts keeps the replies of a worker that died
-- with them in memory (kill -9, out of memory):
--   reason 'crashed'  a reply the worker had received and written to its
--                     reply journal (in its spill directory) but whose job
--                     it never finished; the next worker started with that
--                     directory records it, unless the ledger already has
--                     the call.
ALTER TABLE interrupted_attempts DROP CONSTRAINT interrupted_attempts_reason_check;
ALTER TABLE interrupted_attempts ADD CONSTRAINT interrupted_attempts_reason_check
    CHECK (reason IN ('handed_back', 'shutdown', 'superseded', 'outage', 'cancelled', 'crashed'));

---- create above / drop below ----

DELETE FROM interrupted_attempts WHERE reason = 'crashed';
ALTER TABLE interrupted_attempts DROP CONSTRAINT interrupted_attempts_reason_check;
ALTER TABLE interrupted_attempts ADD CONSTRAINT interrupted_attempts_reason_check
    CHECK (reason IN ('handed_back', 'shutdown', 'superseded', 'outage', 'cancelled'));
