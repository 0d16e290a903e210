-- The scheduler's one way to enqueue a new run: the run in ACCEPTED state, its budget row and
-- its first ready task, then a wake-up for the executors. A function so that an admission
-- written as one statement (invocation's workflow_admit_invoke) and the named insert_run query
-- share one definition of what a new run is.
CREATE FUNCTION workflow_enqueue_run(
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
    p_notify boolean DEFAULT true
) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    new_task_id uuid;
BEGIN
    INSERT INTO workflow_process (
        host_id, process_id, execution_class, deadline_ts, cancellation_policy, binding_id
    ) VALUES (
        p_host_id, p_process_id, p_execution_class, p_deadline_ts, p_cancellation_policy,
        p_binding_id
    );
    INSERT INTO workflow_budget (
        host_id, process_id, remaining_attempts, remaining_nested_calls, remaining_request_bytes,
        remaining_intermediate_bytes, remaining_result_bytes, remaining_cost_units
    ) VALUES (
        p_host_id, p_process_id, p_attempts, p_nested_calls, p_request_bytes,
        p_intermediate_bytes, p_result_bytes, p_cost_units
    );
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
