-- Named queries of compensation (runtime/execution/compensation.py, migration 0087). Writes
-- of a compensation run are fenced on its task's lease like every other write.

-- select_compensation --
-- A compensated run's compensation record (None: the run needed none).
SELECT compensation_process_id::text AS compensation_process_id, state, steps
FROM workflow_compensation
WHERE host_id = %(host_id)s AND process_id = %(process_id)s;

-- select_compensated_step --
-- One ledger row of the compensated run: the write's effect state, recorded output and mark.
SELECT effect_state, output, compensation
FROM workflow_step
WHERE host_id = %(host_id)s AND process_id = %(process_id)s AND step_no = %(step_no)s;

-- record_compensation_step --
-- Under the compensation task's lease, replace one step of the record and set its state.
UPDATE workflow_compensation c
SET steps = jsonb_set(c.steps, ARRAY[%(index)s::text], %(step)s::jsonb),
    state = %(state)s, updated_ts = now(),
    finished_ts = CASE WHEN %(state)s = 'running' THEN NULL ELSE now() END
WHERE c.host_id = %(host_id)s AND c.process_id = %(compensated_id)s
  AND c.compensation_process_id = %(process_id)s
  AND EXISTS (
      SELECT 1 FROM workflow_task t
      WHERE t.host_id = %(host_id)s AND t.task_id = %(task_id)s AND t.lease_id = %(lease_id)s
        AND t.fencing_token = %(fencing_token)s AND t.state = 'running'
  )
RETURNING c.state;

-- retry_compensation --
-- Start a failed compensation again (workflow-mcp runs compensate); NULL: none failed.
SELECT workflow_retry_compensation(%(host_id)s::uuid, %(process_id)s::uuid)::text AS retried;
