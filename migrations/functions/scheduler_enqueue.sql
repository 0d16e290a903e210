-- The scheduler's one way to enqueue a new run, defined here once.
--
-- The migration runner installs this file after the numbered migrations whenever its text
-- changes: change these functions here, never in a numbered migration (0015 wrote
-- workflow_enqueue_run, 0019 replaced it with the claimed first task and added
-- workflow_enqueued_task; the definitions below are 0019's, unchanged).
--
-- Who calls what:
--   runtime/scheduler/store/runs.py insert_run (queries.sql insert_run; through
--       runtime.execution.admit_run and runtime.scheduler.service.enqueue_process, which only
--       the tests' in-process runs use now) -> workflow_enqueue_run, notifying
--   workflow_admit_claimed_run (functions/invocation_admission.sql), for both admissions:
--       workflow_admit_invoke_v2 -> workflow_enqueue_run without a NOTIFY (the service
--          announces the task after the commit), with the admitting process's worker, then
--          workflow_enqueued_task
--       workflow_admit_start -> workflow_enqueue_run, notifying, no worker
--
-- The run in ACCEPTED state, its budget row and its first task. When the caller's executor has
-- a slot kept free (p_worker_id) and no other ready task waits, the task is inserted already
-- claimed by it under a fresh fenced lease, with the lease columns claim_tasks writes
-- (runtime/scheduler/queries.sql): lease id, fencing token, one attempt, the worker, and an
-- expiry that never outlives an interactive run's deadline (or a disabled policy's hard
-- ceiling); the run is then RUNNING. Otherwise the task is inserted ready (and announced unless
-- p_notify is false) for the fair claim query.
CREATE OR REPLACE FUNCTION workflow_enqueue_run(
    p_host_id uuid,
    p_process_id uuid,
    p_execution_class text,
    p_deadline_ts timestamptz,
    p_cancellation_policy text,
    p_binding_id uuid,
    p_attempts integer,
    p_nested_calls integer,
    p_request_bytes bigint,
    p_intermediate_bytes bigint,
    p_result_bytes bigint,
    p_cost_units bigint,
    p_step_no integer,
    p_kind text,
    p_payload jsonb,
    p_priority smallint,
    p_available_at timestamptz,
    p_idempotent boolean,
    -- false: the caller announces the task after its commit (runtime.scheduler.wakeup), so its
    -- commit never holds the notification queue's lock.
    p_notify boolean DEFAULT true,
    -- The executor that takes the task at once when no ready task waits (NULL: nobody), with
    -- its lease and the overrun a disabled cancellation policy allows past the deadline.
    p_worker_id text DEFAULT NULL,
    p_lease_ms integer DEFAULT NULL,
    p_overrun_ms integer DEFAULT NULL
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    new_task_id uuid;
    claim boolean;
BEGIN
    claim := p_worker_id IS NOT NULL AND p_available_at IS NULL
        AND p_deadline_ts > now()
        AND NOT EXISTS (SELECT 1 FROM workflow_task r
                        WHERE r.state = 'ready' AND r.available_at <= now());
    INSERT INTO workflow_process (
        host_id, process_id, execution_class, deadline_ts, cancellation_policy, binding_id, state
    ) VALUES (
        p_host_id, p_process_id, p_execution_class, p_deadline_ts, p_cancellation_policy,
        p_binding_id, CASE WHEN claim THEN 'RUNNING' ELSE 'ACCEPTED' END
    );
    INSERT INTO workflow_budget (
        host_id, process_id, remaining_attempts, remaining_nested_calls, remaining_request_bytes,
        remaining_intermediate_bytes, remaining_result_bytes, remaining_cost_units
    ) VALUES (
        p_host_id, p_process_id, p_attempts, p_nested_calls, p_request_bytes,
        p_intermediate_bytes, p_result_bytes, p_cost_units
    );
    IF claim THEN
        INSERT INTO workflow_task (
            host_id, process_id, step_no, kind, payload, execution_class, priority, idempotent,
            state, lease_id, fencing_token, attempts, worker_id, heartbeat_ts, lease_expires_ts
        ) VALUES (
            p_host_id, p_process_id, p_step_no, p_kind, p_payload, p_execution_class, p_priority,
            p_idempotent, 'running', gen_random_uuid(), nextval('workflow_fencing_token_seq'), 1,
            p_worker_id, now(),
            CASE
                WHEN p_execution_class = 'interactive' AND p_cancellation_policy <> 'disabled'
                    THEN least(now() + p_lease_ms * interval '1 millisecond', p_deadline_ts)
                WHEN p_cancellation_policy = 'disabled'
                    THEN least(now() + p_lease_ms * interval '1 millisecond',
                               p_deadline_ts + p_overrun_ms * interval '1 millisecond')
                ELSE now() + p_lease_ms * interval '1 millisecond'
            END
        )
        RETURNING task_id INTO new_task_id;
        RETURN new_task_id;
    END IF;
    INSERT INTO workflow_task (
        host_id, process_id, step_no, kind, payload, execution_class, priority, available_at,
        idempotent
    ) VALUES (
        p_host_id, p_process_id, p_step_no, p_kind, p_payload, p_execution_class, p_priority,
        coalesce(p_available_at, now()), p_idempotent
    )
    RETURNING task_id INTO new_task_id;
    IF p_notify THEN
        PERFORM pg_notify(
            'workflow_task_ready', json_build_object('type', 'task', 'id', new_task_id)::text
        );
    END IF;
    RETURN new_task_id;
END
$$;

-- A task just enqueued by this transaction, as the scheduler wrote it: whether it is claimed
-- and under which lease (for workflow_admit_invoke_v2, which reads the scheduler's tables only
-- through its functions and the workflow_run_state view).
CREATE OR REPLACE FUNCTION workflow_enqueued_task(p_host_id uuid, p_task_id uuid)
RETURNS TABLE (state text, lease_id uuid, fencing_token bigint, lease_expires_ts timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT t.state, t.lease_id, t.fencing_token, t.lease_expires_ts
    FROM workflow_task t
    WHERE t.host_id = p_host_id AND t.task_id = p_task_id;
END
$$;
