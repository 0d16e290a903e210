-- wake_parked_task --
-- Make a run's task parked on a human task available now (the answer came); the run runs again.
WITH woken AS (
    UPDATE workflow_task t
    SET available_at = now(), updated_ts = now()
    WHERE t.host_id = %(host_id)s AND t.process_id = %(process_id)s AND t.state = 'ready'
      AND t.payload ->> 'humanTaskId' = %(human_task_id)s
    RETURNING t.task_id, t.execution_class
),
resumed AS (
    UPDATE workflow_process p
    SET state = 'RUNNING', updated_ts = now()
    WHERE p.host_id = %(host_id)s AND p.process_id = %(process_id)s AND p.state = 'WAITING'
      AND EXISTS (SELECT 1 FROM woken)
)
SELECT task_id::text AS task_id, execution_class FROM woken;

-- resume_waiting_run --
-- A parked run's task was claimed (answered or timed out): the run is RUNNING again.
UPDATE workflow_process
SET state = 'RUNNING', updated_ts = now()
WHERE host_id = %(host_id)s AND process_id = %(process_id)s AND state = 'WAITING';
