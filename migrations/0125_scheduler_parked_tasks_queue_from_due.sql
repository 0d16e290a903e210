-- Every task inserted to run later (a run parked on a person's answer, like a timer's since
-- migration 0089, or a compensation's back-off) joins the queue when it becomes available:
-- enqueued_ts is set to its available_at. Before, a run parked on an `ask` kept the time it
-- parked, so its task sat at the head of the ready indexes (ordered by enqueued_ts, and by
-- priority then enqueued_ts) for as long as it waited: every claim's per-tenant scans walked
-- past all the tasks parked on open asks before reaching one that could run (10,000 open asks
-- made an answered run take 222 ms to resume against 56 ms with 200; bench/mcp_tasks.py,
-- docs/PERFORMANCE.md), and once answered it outranked, by the hours or days it waited, every
-- task that became ready meanwhile. The answer's wake-up (runtime/human_tasks/queries.sql
-- wake_parked_task) now sets enqueued_ts to now() with available_at, as a cancel does for a
-- timer. Every reading of the queue's age takes greatest(enqueued_ts, available_at), so the
-- sojourn and oldest-runnable figures do not change.

DROP TRIGGER workflow_task_queue_from_due ON workflow_task;

-- WHEN keeps every other task insert free of the call.
CREATE TRIGGER workflow_task_queue_from_due
    BEFORE INSERT ON workflow_task
    FOR EACH ROW WHEN (NEW.available_at > NEW.enqueued_ts)
    EXECUTE FUNCTION workflow_task_queue_from_due();

-- Tasks already parked on an open ask join the queue at their due time too.
UPDATE workflow_task
SET enqueued_ts = available_at
WHERE state = 'ready' AND available_at > now() AND enqueued_ts < available_at;
