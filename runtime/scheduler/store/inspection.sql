-- list_runs --
-- A host's runs, newest first, optionally in one state, of one Tool (its id or name), or with
-- a compensation in one state (migration 0087). A compensation's own run is not listed: its
-- record is shown with the run it compensates.
SELECT p.process_id::text AS process_id, p.state, p.execution_class, p.effect_state,
       p.cancellation_policy, p.binding_id::text AS binding_id, i.operation,
       i.tool_id::text AS tool_id, b.tool_name, p.created_ts, p.finished_ts, p.deadline_ts,
       c.state AS compensation
FROM workflow_process p
LEFT JOIN workflow_invocation_t i ON i.host_id = p.host_id AND i.process_id = p.process_id
LEFT JOIN workflow_tool_binding_t b ON b.host_id = p.host_id AND b.binding_id = p.binding_id
LEFT JOIN workflow_compensation c ON c.host_id = p.host_id AND c.process_id = p.process_id
WHERE p.host_id = %(host_id)s
  AND (%(state)s::text IS NULL OR p.state = %(state)s::text)
  AND (%(tool)s::text IS NULL OR i.tool_id::text = %(tool)s::text OR b.tool_name = %(tool)s::text)
  AND (%(compensation)s::text IS NULL OR c.state = %(compensation)s::text)
  AND NOT EXISTS (
      SELECT 1 FROM workflow_compensation own
      WHERE own.host_id = p.host_id AND own.compensation_process_id = p.process_id
  )
ORDER BY p.created_ts DESC, p.process_id
LIMIT %(limit)s;

-- list_tasks --
-- The tasks of one run in step order, with attempts, lease holder and error.
SELECT task_id::text AS task_id, step_no, kind, state, execution_class, attempts, worker_id,
       error, created_ts, updated_ts
FROM workflow_task
WHERE host_id = %(host_id)s AND process_id = %(process_id)s
ORDER BY step_no, created_ts;

-- list_steps --
-- The effect ledger of one run: each write step's effect state and when it changed.
SELECT step_no, effect_state, possible_ts, confirmed_ts
FROM workflow_step
WHERE host_id = %(host_id)s AND process_id = %(process_id)s
ORDER BY step_no;

-- run_origin --
-- How a run was started (invoke or start), by which Tool, and its pinned runtime bounds.
SELECT i.operation, i.tool_id::text AS tool_id, b.tool_name, b.runtime_bounds
FROM workflow_invocation_t i
LEFT JOIN workflow_tool_binding_t b ON b.host_id = i.host_id AND b.binding_id = i.binding_id
WHERE i.host_id = %(host_id)s AND i.process_id = %(process_id)s;
