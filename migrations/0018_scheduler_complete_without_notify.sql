-- A task's completion commits without a NOTIFY (issue 20). A notifying commit takes
-- PostgreSQL's notification-queue lock before its commit record and keeps it through the WAL
-- flush, so every completion of the database queued behind the previous one's flush (measured:
-- a fifth of a backend on average waiting on that lock at 50 callers of one Tool, and a
-- completion's time in its slot 12 ms for a one-task run). The service now announces what a
-- completion committed once it has committed, in statements that write nothing: the run's end
-- to other processes' waiters (this process's are handed it directly), and a next task left
-- ready to the executors (this process's woken directly, others by NOTIFY when none has room).
-- NOTIFY is only a wake-up: one lost to a crash between the commit and the announcement costs
-- the waiters' and executors' poll interval, never a result or a task.
--
-- Otherwise workflow_complete_task is migration 0017's, with one more output: a next task left
-- ready returns its execution_class beside task_id (outcome 'continued'), for the announcement.
CREATE OR REPLACE FUNCTION workflow_complete_task(
    p_host_id uuid,
    p_task_id uuid,
    p_lease_id uuid,
    p_fencing_token bigint,
    p_result jsonb,
    -- What the task used; p_consume false: nothing is debited.
    p_consume boolean,
    p_attempts integer,
    p_nested_calls integer,
    p_request_bytes bigint,
    p_intermediate_bytes bigint,
    p_result_bytes bigint,
    p_cost_units bigint,
    -- The run's end.
    p_finish boolean,
    p_run_result jsonb,
    -- The one next task (p_next false: none).
    p_next boolean,
    p_step_no integer,
    p_kind text,
    p_payload jsonb,
    p_priority smallint,
    p_available_at timestamptz,
    p_idempotent boolean,
    -- Who takes the next task at once when no other ready work waits (NULL: nobody).
    p_worker_id text,
    p_lease_ms integer,
    p_overrun_ms integer,
    OUT outcome text,
    OUT backlog boolean,
    OUT effect_state text,
    OUT host_id uuid,
    OUT task_id uuid,
    OUT process_id uuid,
    OUT step_no integer,
    OUT kind text,
    OUT payload jsonb,
    OUT execution_class text,
    OUT idempotent boolean,
    OUT attempts integer,
    OUT lease_id uuid,
    OUT fencing_token bigint,
    OUT lease_expires_ts timestamptz,
    OUT deadline_ts timestamptz,
    OUT cancellation_policy text
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_process_id uuid;
    v_ending boolean;
BEGIN
    -- The fence first, and the task row locked: a completion that no longer owns its task
    -- writes nothing.
    SELECT t.process_id, p.deadline_ts, p.cancellation_policy,
           NOT p_finish AND (
               (p.deadline_ts <= now() AND p.cancellation_policy <> 'disabled')
               OR (p.cancel_requested AND p.cancellation_policy = 'cooperative'))
    INTO v_process_id, deadline_ts, cancellation_policy, v_ending
    FROM workflow_task t
    JOIN workflow_process p ON p.host_id = t.host_id AND p.process_id = t.process_id
    WHERE t.host_id = p_host_id AND t.task_id = p_task_id AND t.lease_id = p_lease_id
      AND t.fencing_token = p_fencing_token AND t.state = 'running'
    FOR UPDATE OF t;
    IF NOT FOUND THEN
        outcome := 'lost';
        RETURN;
    END IF;
    IF v_ending THEN
        -- Nothing new starts after the deadline or a cooperative signal; that end carries an
        -- error document the service words, so it takes the multi-statement path.
        outcome := 'ending';
        RETURN;
    END IF;

    IF p_consume THEN
        -- Every counter at once or none (debit_budget).
        UPDATE workflow_budget b
        SET remaining_attempts = b.remaining_attempts - p_attempts,
            remaining_nested_calls = b.remaining_nested_calls - p_nested_calls,
            remaining_request_bytes = b.remaining_request_bytes - p_request_bytes,
            remaining_intermediate_bytes = b.remaining_intermediate_bytes - p_intermediate_bytes,
            remaining_result_bytes = b.remaining_result_bytes - p_result_bytes,
            remaining_cost_units = b.remaining_cost_units - p_cost_units,
            updated_ts = now()
        WHERE b.host_id = p_host_id AND b.process_id = v_process_id
          AND b.remaining_attempts >= p_attempts
          AND b.remaining_nested_calls >= p_nested_calls
          AND b.remaining_request_bytes >= p_request_bytes
          AND b.remaining_intermediate_bytes >= p_intermediate_bytes
          AND b.remaining_result_bytes >= p_result_bytes
          AND b.remaining_cost_units >= p_cost_units;
        IF NOT FOUND THEN
            outcome := 'exhausted';
            RETURN;
        END IF;
    END IF;

    -- complete_task, fenced again although the row is held: a mismatch here rolls back the
    -- debit with the statement.
    UPDATE workflow_task t
    SET state = 'done', result = p_result, lease_id = NULL, lease_expires_ts = NULL,
        updated_ts = now()
    WHERE t.host_id = p_host_id AND t.task_id = p_task_id AND t.lease_id = p_lease_id
      AND t.fencing_token = p_fencing_token AND t.state = 'running';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'workflow_complete_task: the held task % changed', p_task_id;
    END IF;
    -- Whether ready work waits: the executor claims again at once only then.
    backlog := EXISTS (SELECT 1 FROM workflow_task r
                       WHERE r.state = 'ready' AND r.available_at <= now());

    IF p_finish THEN
        -- finish_process: the run's triggers (replay window, credential) fire on this update.
        UPDATE workflow_process p
        SET state = 'COMPLETED', result = p_run_result, updated_ts = now(), finished_ts = now()
        WHERE p.host_id = p_host_id AND p.process_id = v_process_id
          AND p.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
        RETURNING p.effect_state INTO effect_state;
        outcome := 'finished';
        RETURN;
    END IF;

    outcome := 'continued';
    IF NOT p_next THEN
        RETURN;
    END IF;
    IF p_worker_id IS NOT NULL AND NOT backlog AND p_available_at IS NULL THEN
        -- insert_claimed_task: only while the run can still go on.
        INSERT INTO workflow_task AS t (
            host_id, process_id, step_no, kind, payload, execution_class, priority, idempotent,
            state, lease_id, fencing_token, attempts, worker_id, heartbeat_ts, lease_expires_ts
        )
        SELECT r.host_id, r.process_id, p_step_no, p_kind, p_payload, r.execution_class,
               p_priority, p_idempotent, 'running', gen_random_uuid(),
               nextval('workflow_fencing_token_seq'), 1, p_worker_id, now(),
               -- Interactive leases never outlive the run's deadline (as in claim_tasks).
               CASE
                   WHEN r.execution_class = 'interactive' AND r.cancellation_policy <> 'disabled'
                       THEN least(now() + p_lease_ms * interval '1 millisecond', r.deadline_ts)
                   WHEN r.cancellation_policy = 'disabled'
                       THEN least(now() + p_lease_ms * interval '1 millisecond',
                                  r.deadline_ts + p_overrun_ms * interval '1 millisecond')
                   ELSE now() + p_lease_ms * interval '1 millisecond'
               END
        FROM workflow_process r
        WHERE r.host_id = p_host_id AND r.process_id = v_process_id
          AND r.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
          -- A disabled policy is never cancelled, but stops at its hard ceiling.
          AND (r.deadline_ts > now()
               OR (r.cancellation_policy = 'disabled'
                   AND r.deadline_ts > now() - p_overrun_ms * interval '1 millisecond'))
        RETURNING t.host_id, t.task_id, t.process_id, t.step_no, t.kind, t.payload,
                  t.execution_class, t.idempotent, t.attempts, t.lease_id, t.fencing_token,
                  t.lease_expires_ts
        INTO host_id, task_id, process_id, step_no, kind, payload, execution_class,
             idempotent, attempts, lease_id, fencing_token, lease_expires_ts;
        IF FOUND THEN
            outcome := 'claimed';
            RETURN;
        END IF;
    END IF;
    -- insert_task: a ready task of a live run; the caller announces it after the commit.
    INSERT INTO workflow_task AS t (
        host_id, process_id, step_no, kind, payload, execution_class, priority, available_at,
        idempotent
    )
    SELECT r.host_id, r.process_id, p_step_no, p_kind, p_payload, r.execution_class,
           p_priority, coalesce(p_available_at, now()), p_idempotent
    FROM workflow_process r
    WHERE r.host_id = p_host_id AND r.process_id = v_process_id
      AND r.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
    RETURNING t.task_id, t.execution_class INTO task_id, execution_class;
END
$$;
