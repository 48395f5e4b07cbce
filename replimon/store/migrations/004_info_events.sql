-- replimon PostgreSQL schema, version 4: info alerts are events, not firing states
-- (docs/postgres.md, "Tables"; docs/operations.md, "Info alerts are events").
--
-- An info alert (CONFIG_INSTALLED, RECONFIG_REFUSED, INCOMPLETE_HISTORY: every kind of severity
-- info) says something happened; it is never a problem and never resolves. Stored as 'firing' it
-- read as firing forever to anything that asks "what is firing". Its row's status is now 'event',
-- and only an info alert's row may have it (the CHECK below), so `status = 'firing'` means a
-- problem. The alert ids do not change: the key is (run_id, alert_id, status) and an info alert
-- has one row.

ALTER TABLE alerts DROP CONSTRAINT alerts_status_check;

UPDATE alerts SET status = 'event' WHERE severity = 'info' AND status = 'firing';

ALTER TABLE alerts ADD CONSTRAINT alerts_status_check
    CHECK (status IN ('firing', 'resolved', 'event') AND (status = 'event') = (severity = 'info'));
