-- A run parked on a durable timer (runtime.engine.run.timers: a long `wait` or retry back-off)
-- is a ready task whose available_at is its due time. The claim ages ready tasks from
-- enqueued_ts (its candidates are the oldest by that column, and a task's priority rises one
-- point per aging interval since then); counted from when the run parked, a run resuming from
-- an hour's wait would outrank by hundreds of points every task that became ready while it
-- waited, and, when many timers fall due together, the next steps of the runs resumed just
-- before it: measured with 10,000 timers due over two minutes on two standard slots, the runs'
-- second halves waited until no timer was left due (bench/timers.py, docs/PERFORMANCE.md).
-- So a timer's task joins the queue at its due time: enqueued_ts is set to its available_at.
-- Every reading of the queue's age already takes greatest(enqueued_ts, available_at), so the
-- sojourn and oldest-runnable figures do not change. A cooperative cancel that makes the task
-- available at once (queries.sql request_cancel) sets enqueued_ts to now() with it. Tasks
-- parked on a person's answer are left as they were (their wake-up sets only available_at).

CREATE FUNCTION workflow_task_queue_from_due() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.enqueued_ts := NEW.available_at;
    RETURN NEW;
END
$$;

-- WHEN keeps every other task insert free of the call.
CREATE TRIGGER workflow_task_queue_from_due
    BEFORE INSERT ON workflow_task
    FOR EACH ROW WHEN (
        NEW.available_at > NEW.enqueued_ts AND NEW.payload ? 'timers'
        AND NOT NEW.payload ? 'humanTaskId'
    )
    EXECUTE FUNCTION workflow_task_queue_from_due();
