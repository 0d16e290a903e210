-- Named queries of durable workflow execution (runtime/execution). Writes made for a claimed
-- task are fenced on its lease like the scheduler's own.

-- insert_run_spec --
-- Record what a run executes (definition source, caller, interpreter limits) and, when the
-- caller's token was sealed, the run credential: one statement.
SELECT workflow_record_run_spec(
    %(host_id)s::uuid, %(process_id)s::uuid, %(wf_def_id)s::uuid, %(workflow_version)s::text,
    %(definition)s::jsonb, %(binding_id)s::uuid, %(user_id)s::text, %(limits)s::jsonb,
    %(key_id)s::text, %(nonce)s::bytea, %(ciphertext)s::bytea, %(token_expires_ts)s::timestamptz,
    %(expires_ts)s::timestamptz
);

-- select_run_spec --
-- Read what a run executes.
SELECT host_id::text AS host_id, process_id::text AS process_id, wf_def_id::text AS wf_def_id,
       workflow_version, definition, binding_id::text AS binding_id, user_id, limits
FROM workflow_run_spec
WHERE host_id = %(host_id)s AND process_id = %(process_id)s;

-- select_run_credential --
-- Read a run's sealed credential (absent once the run ended) and whether it was exchanged.
SELECT key_id, nonce, ciphertext, token_expires_ts, exchanged_ts IS NOT NULL AS exchanged
FROM workflow_run_credential
WHERE host_id = %(host_id)s AND process_id = %(process_id)s;

-- replace_exchanged_credential --
-- A run's exchanged token (RFC 8693): kept only when it outlives the stored one, so two tasks
-- exchanging at once leave the later-expiring token.
UPDATE workflow_run_credential
SET key_id = %(key_id)s, nonce = %(nonce)s, ciphertext = %(ciphertext)s,
    token_expires_ts = %(token_expires_ts)s, exchanged_ts = now()
WHERE host_id = %(host_id)s AND process_id = %(process_id)s
  AND (token_expires_ts IS NULL OR token_expires_ts < %(token_expires_ts)s);

-- delete_expired_credentials --
-- Forget sealed credentials that outlived their run's deadline; a live run whose policy is
-- disabled runs past its deadline, so its credential stays until it ends or the token expires.
DELETE FROM workflow_run_credential c
WHERE c.expires_ts < now()
  AND NOT EXISTS (
      SELECT 1
      FROM workflow_process p
      WHERE p.host_id = c.host_id AND p.process_id = c.process_id
        AND p.cancellation_policy = 'disabled'
        AND p.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
        AND (c.token_expires_ts IS NULL OR c.token_expires_ts > now())
  )
RETURNING c.process_id;

-- select_call_steps --
-- Read the step ledger rows of the calls made by one top-level task (a step number range).
SELECT step_no, effect_state, output, request_digest
FROM workflow_step
WHERE host_id = %(host_id)s AND process_id = %(process_id)s
  AND step_no > %(first_step)s AND step_no < %(last_step)s
ORDER BY step_no;

-- insert_action_permit --
-- Under the task's lease, record the permit of one outbound Tool call; no row = lease lost.
INSERT INTO workflow_action_permit (
    host_id, action_id, process_id, task_id, fencing_token, user_id, grant_id, tool_name,
    contract_digest, depth, max_depth, execution_class, deadline_ts
)
SELECT t.host_id, %(action_id)s, t.process_id, t.task_id, t.fencing_token, %(user_id)s,
       %(grant_id)s, %(tool_name)s, %(contract_digest)s, 0, 0, p.execution_class, p.deadline_ts
FROM workflow_task t
JOIN workflow_process p ON p.host_id = t.host_id AND p.process_id = t.process_id
WHERE t.host_id = %(host_id)s AND t.task_id = %(task_id)s AND t.lease_id = %(lease_id)s
  AND t.fencing_token = %(fencing_token)s AND t.state = 'running'
FOR UPDATE OF t
RETURNING action_id;

-- select_process_state --
-- A run's state, result and error (the waiter's read).
SELECT state, result, error, effect_state
FROM workflow_process
WHERE host_id = %(host_id)s AND process_id = %(process_id)s;
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
