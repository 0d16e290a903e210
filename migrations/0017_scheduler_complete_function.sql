-- A task's completion as one statement (issue 20): the executor's completing transaction
-- (budget debit, the fenced task update, then the run's end or its one next task, claimed by
-- the completing worker when nothing else waits) runs inside PostgreSQL, called in autocommit,
-- so a one-task call spends one round trip on it instead of five.
--
-- Each step keeps its named query's rules (runtime/scheduler/queries.sql: debit_budget,
-- complete_task, finish_process, insert_claimed_task, insert_task). The outcome says what
-- happened; 'lost', 'exhausted' and 'ending' wrote nothing:
--   lost      the lease id or fencing token no longer matches (a repeat of a completion that
--             committed lands here too, since the task is done and its lease cleared);
--   exhausted a counter cannot cover p_consume's amounts (the caller fails the task);
--   ending    the run is past its deadline or asks for cooperative cancellation and this is
--             not its last step: the caller ends it on the multi-statement path, which words
--             the error;
--   finished  the run is completed (effect_state NULL: it had already ended);
--   claimed   the next task was inserted already claimed by p_worker_id (its lease columns);
--   continued the next task was inserted ready (task_id NULL: the run is no longer live), or
--             p_next was false and nothing followed.
CREATE FUNCTION workflow_complete_task(
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
        IF FOUND THEN
            PERFORM pg_notify(
                'workflow_process_state_' || right(v_process_id::text, 1),
                json_build_object('type', 'process', 'id', v_process_id)::text
            );
        END IF;
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
    -- insert_task: a ready task of a live run, and a wake-up for the executors.
    INSERT INTO workflow_task AS t (
        host_id, process_id, step_no, kind, payload, execution_class, priority, available_at,
        idempotent
    )
    SELECT r.host_id, r.process_id, p_step_no, p_kind, p_payload, r.execution_class,
           p_priority, coalesce(p_available_at, now()), p_idempotent
    FROM workflow_process r
    WHERE r.host_id = p_host_id AND r.process_id = v_process_id
      AND r.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
    RETURNING t.task_id INTO task_id;
    IF FOUND THEN
        PERFORM pg_notify(
            'workflow_task_ready', json_build_object('type', 'task', 'id', task_id)::text
        );
    END IF;
END
$$;
