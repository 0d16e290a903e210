-- Read-only queries of run inspection (`workflow-mcp runs`), every one scoped by host.

-- list_runs --
-- A host's runs, newest first, optionally in one state.
SELECT process_id::text AS process_id, state, execution_class, effect_state,
       cancellation_policy, binding_id::text AS binding_id, created_ts, finished_ts, deadline_ts
FROM workflow_process
WHERE host_id = %(host_id)s AND (%(state)s::text IS NULL OR state = %(state)s::text)
ORDER BY created_ts DESC, process_id
LIMIT %(limit)s;

-- list_tasks --
-- The tasks of one run in step order, with attempts, lease holder and error.
SELECT task_id::text AS task_id, step_no, kind, state, execution_class, attempts, worker_id,
       error, created_ts, updated_ts
FROM workflow_task
WHERE host_id = %(host_id)s AND process_id = %(process_id)s
ORDER BY step_no, created_ts;
