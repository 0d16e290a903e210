-- Named queries of human tasks (runtime/human_tasks): every one scoped by host. The last two
-- write a parked run's scheduler rows (its parked task and WAITING state), the only writes to
-- them outside the scheduler; migration 0080's trigger writes the other side of parking.

-- insert_human_task --
-- Open the human task of a run's ask (a repeat after a reclaim keeps the first row).
INSERT INTO workflow_human_task (
    host_id, process_id, position, ask_key, task_name, wf_def_id, question, assignee_user_id,
    assignee_role_id, assignee_position_id, due_ts
)
VALUES (
    %(host_id)s, %(process_id)s, %(position)s, %(ask_key)s, %(task_name)s, %(wf_def_id)s,
    %(question)s, %(assignee_user_id)s, %(assignee_role_id)s, %(assignee_position_id)s,
    now() + %(timeout_ms)s * interval '1 millisecond'
)
ON CONFLICT (host_id, process_id, position, ask_key) DO NOTHING;

-- select_task_at --
-- The human task of one ask (its key) of the top-level task at a position, locked.
SELECT task_id::text AS task_id, state, due_ts, output, question, due_ts <= now() AS due
FROM workflow_human_task
WHERE host_id = %(host_id)s AND process_id = %(process_id)s AND position = %(position)s
  AND ask_key = %(ask_key)s
FOR UPDATE;

-- select_tasks_at --
-- Every human task the top-level task at a position opened (its asks' keys), locked.
SELECT task_id::text AS task_id, ask_key, state, output, question, due_ts <= now() AS due
FROM workflow_human_task
WHERE host_id = %(host_id)s AND process_id = %(process_id)s AND position = %(position)s
ORDER BY created_ts, task_id
FOR UPDATE;

-- time_out_task --
-- Close an open task whose due time passed, with the timeout's output (NULL: the ask fails).
UPDATE workflow_human_task
SET state = 'timedOut', output = %(output)s, answered_by = 'timeout', answered_ts = now()
WHERE host_id = %(host_id)s AND task_id = %(task_id)s AND state = 'open';

-- list_assigned_tasks --
-- The caller's tasks (by user id, role or position) in one state, oldest first, after a cursor.
SELECT task_id::text AS task_id, process_id::text AS process_id, task_name,
       wf_def_id::text AS wf_def_id, question, state, due_ts, created_ts, output
FROM workflow_human_task
WHERE host_id = %(host_id)s AND state = %(state)s
  AND (assignee_user_id = %(user_id)s OR assignee_role_id = ANY(%(roles)s)
       OR assignee_position_id = ANY(%(positions)s))
  AND (%(process_id)s::uuid IS NULL OR process_id = %(process_id)s::uuid)
  AND (%(after_created)s::timestamptz IS NULL
       OR (created_ts, task_id) > (%(after_created)s::timestamptz, %(after_task)s::uuid))
ORDER BY created_ts, task_id
LIMIT %(limit)s;

-- select_assigned_task --
-- One task if the caller is its assignee (by user id, role or position); locked for an answer.
SELECT task_id::text AS task_id, process_id::text AS process_id, task_name,
       wf_def_id::text AS wf_def_id, question, state, due_ts, created_ts, output,
       operation_id, answer_digest
FROM workflow_human_task
WHERE host_id = %(host_id)s AND task_id = %(task_id)s
  AND (assignee_user_id = %(user_id)s OR assignee_role_id = ANY(%(roles)s)
       OR assignee_position_id = ANY(%(positions)s))
FOR UPDATE;

-- answer_task --
-- Record the answer of an open task.
UPDATE workflow_human_task
SET state = 'answered', output = %(output)s, answered_by = %(answered_by)s,
    answered_ts = now(), operation_id = %(operation_id)s, answer_digest = %(answer_digest)s
WHERE host_id = %(host_id)s AND task_id = %(task_id)s AND state = 'open';

-- open_task_ids --
-- The open human tasks of one run.
SELECT task_id::text AS task_id
FROM workflow_human_task
WHERE host_id = %(host_id)s AND process_id = %(process_id)s AND state = 'open'
ORDER BY position;

-- run_tasks --
-- Every human task of one run, in task order (for operators: `workflow-mcp runs show`).
SELECT task_id::text AS task_id, position, task_name, state,
       coalesce(assignee_user_id, assignee_role_id, assignee_position_id) AS assignee,
       CASE WHEN assignee_user_id IS NOT NULL THEN 'userId'
            WHEN assignee_role_id IS NOT NULL THEN 'roleId'
            ELSE 'positionId' END AS assignee_kind,
       created_ts, due_ts, answered_by, answered_ts
FROM workflow_human_task
WHERE host_id = %(host_id)s AND process_id = %(process_id)s
ORDER BY position;

-- count_open_tasks --
-- The open human tasks of every host (the operators' gauge; no host is named in it).
SELECT count(*) AS open FROM workflow_human_task WHERE state = 'open';

-- wake_parked_task --
-- Make a run's task parked on a human task available now (the answer came); the run runs again.
-- It joins the queue now (migration 0125 had set its enqueued_ts to its due time).
WITH woken AS (
    UPDATE workflow_task t
    SET available_at = now(), enqueued_ts = now(), updated_ts = now()
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
