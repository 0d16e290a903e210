-- Named queries of the durable task queue (runtime/scheduler). Every write to a claimed task
-- is fenced: WHERE lease_id AND fencing_token AND state = 'running'; zero rows = lease lost.

-- insert_run --
-- Insert a run in ACCEPTED state, its budget row and its first ready task, and wake the executors.
SELECT workflow_enqueue_run(
    %(host_id)s::uuid, %(process_id)s::uuid, %(execution_class)s::text, %(deadline_ts)s::timestamptz,
    %(cancellation_policy)s::text, %(binding_id)s::uuid, %(attempts)s::integer,
    %(nested_calls)s::integer, %(request_bytes)s::bigint, %(intermediate_bytes)s::bigint,
    %(result_bytes)s::bigint, %(cost_units)s::bigint, %(step_no)s::integer, %(kind)s::text,
    %(payload)s::jsonb, %(priority)s::smallint, %(available_at)s::timestamptz,
    %(idempotent)s::boolean
)::text AS task_id;

-- insert_task --
-- Insert a ready task of a live run (class copied from the run) and wake the executors.
WITH inserted AS (
    INSERT INTO workflow_task (
        host_id, process_id, step_no, kind, payload, execution_class, priority, available_at,
        idempotent
    )
    SELECT p.host_id, p.process_id, %(step_no)s, %(kind)s, %(payload)s, p.execution_class,
           %(priority)s, coalesce(%(available_at)s, now()), %(idempotent)s
    FROM workflow_process p
    WHERE p.host_id = %(host_id)s AND p.process_id = %(process_id)s
      AND p.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
    RETURNING task_id
)
SELECT i.task_id,
       pg_notify('workflow_task_ready', json_build_object('type', 'task', 'id', i.task_id)::text)
FROM inserted i;

-- insert_claimed_task --
-- Insert the next task of a live run already claimed by the completing worker (a fresh fenced lease).
WITH run AS (
    SELECT host_id, process_id, execution_class, deadline_ts, cancellation_policy
    FROM workflow_process
    WHERE host_id = %(host_id)s AND process_id = %(process_id)s
      AND state IN ('ACCEPTED', 'RUNNING', 'WAITING')
      -- A disabled policy is never cancelled, but stops at its hard ceiling (deadline + overrun).
      AND (deadline_ts > now()
           OR (cancellation_policy = 'disabled'
               AND deadline_ts > now() - %(overrun_ms)s * interval '1 millisecond'))
),
inserted AS (
    INSERT INTO workflow_task (
        host_id, process_id, step_no, kind, payload, execution_class, priority, idempotent,
        state, lease_id, fencing_token, attempts, worker_id, heartbeat_ts, lease_expires_ts
    )
    SELECT r.host_id, r.process_id, %(step_no)s, %(kind)s, %(payload)s, r.execution_class,
           %(priority)s, %(idempotent)s, 'running', gen_random_uuid(),
           nextval('workflow_fencing_token_seq'), 1, %(worker_id)s, now(),
           -- Interactive leases never outlive the run's deadline (as in claim_tasks).
           CASE
               WHEN r.execution_class = 'interactive' AND r.cancellation_policy <> 'disabled'
                   THEN least(now() + %(lease_ms)s * interval '1 millisecond', r.deadline_ts)
               WHEN r.cancellation_policy = 'disabled'
                   THEN least(now() + %(lease_ms)s * interval '1 millisecond',
                              r.deadline_ts + %(overrun_ms)s * interval '1 millisecond')
               ELSE now() + %(lease_ms)s * interval '1 millisecond'
           END
    FROM run r
    RETURNING host_id, task_id, process_id, step_no, kind, payload, execution_class, idempotent,
              attempts, lease_id, fencing_token, lease_expires_ts
)
SELECT i.*, r.deadline_ts, r.cancellation_policy
FROM inserted i CROSS JOIN run r;

-- get_process --
-- Read one run with its budget counters.
SELECT p.host_id::text AS host_id, p.process_id::text AS process_id, p.execution_class,
       p.state, p.deadline_ts, p.cancellation_policy, p.effect_state, p.cancel_requested,
       p.result, p.error, p.binding_id::text AS binding_id, p.created_ts, p.updated_ts, p.finished_ts,
       b.remaining_attempts, b.remaining_nested_calls, b.remaining_request_bytes,
       b.remaining_intermediate_bytes, b.remaining_result_bytes, b.remaining_cost_units
FROM workflow_process p
LEFT JOIN workflow_budget b ON b.host_id = p.host_id AND b.process_id = p.process_id
WHERE p.host_id = %(host_id)s AND p.process_id = %(process_id)s;

-- claim_tasks --
-- Claim ready tasks: class quotas first (batch borrows idle interactive slots), then per-tenant round-robin with aging.
WITH busy AS (
    SELECT host_id, count(*) AS running
    FROM workflow_task
    WHERE state = 'running'
    GROUP BY host_id
),
tenants AS (
    SELECT DISTINCT execution_class, host_id
    FROM workflow_task
    WHERE state = 'ready' AND available_at <= now()
),
candidates AS (
    -- Per tenant: its best-priority and its oldest tasks, so aging can lift the old ones.
    SELECT DISTINCT c.host_id, c.task_id, c.process_id, c.execution_class, c.priority,
           c.enqueued_ts
    FROM tenants tn
    CROSS JOIN LATERAL (
        (SELECT t.host_id, t.task_id, t.process_id, t.execution_class, t.priority, t.enqueued_ts
         FROM workflow_task t
         WHERE t.state = 'ready' AND t.execution_class = tn.execution_class
           AND t.host_id = tn.host_id AND t.available_at <= now()
         ORDER BY t.priority DESC, t.enqueued_ts
         LIMIT %(limit)s)
        UNION ALL
        (SELECT t.host_id, t.task_id, t.process_id, t.execution_class, t.priority, t.enqueued_ts
         FROM workflow_task t
         WHERE t.state = 'ready' AND t.execution_class = tn.execution_class
           AND t.host_id = tn.host_id AND t.available_at <= now()
         ORDER BY t.enqueued_ts
         LIMIT %(limit)s)
    ) c
),
ranked AS (
    SELECT c.host_id, c.task_id, c.execution_class, c.enqueued_ts,
           c.priority + extract(epoch FROM now() - c.enqueued_ts) / %(aging_s)s AS aged_priority,
           coalesce(b.running, 0) + row_number() OVER (
               PARTITION BY c.execution_class, c.host_id
               ORDER BY c.priority + extract(epoch FROM now() - c.enqueued_ts) / %(aging_s)s DESC,
                        c.enqueued_ts, c.task_id
           ) AS tenant_rank
    FROM candidates c
    JOIN workflow_process p ON p.host_id = c.host_id AND p.process_id = c.process_id
    LEFT JOIN busy b ON b.host_id = c.host_id
    WHERE p.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
      -- A disabled policy is never cancelled, but stops at its hard ceiling (deadline + overrun).
      AND (p.deadline_ts > now()
           OR (p.cancellation_policy = 'disabled'
               AND p.deadline_ts > now() - %(overrun_ms)s * interval '1 millisecond'))
),
ordered AS (
    SELECT r.*,
           row_number() OVER (
               PARTITION BY r.execution_class
               ORDER BY r.tenant_rank, r.aged_priority DESC, r.enqueued_ts, r.task_id
           ) AS class_rank
    FROM ranked r
    WHERE r.tenant_rank <= %(tenant_limit)s
),
ready_interactive AS (
    SELECT count(*) AS n FROM ordered WHERE execution_class = 'interactive'
),
picked AS (
    SELECT o.host_id, o.task_id, o.execution_class, o.class_rank
    FROM ordered o CROSS JOIN ready_interactive ri
    WHERE (o.execution_class = 'interactive' AND o.class_rank <= %(interactive_slots)s)
       OR (o.execution_class = 'standard' AND o.class_rank <= %(standard_slots)s)
       OR (o.execution_class = 'batch' AND o.class_rank <= %(batch_slots)s
           + least(%(borrow_slots)s, greatest(0, %(interactive_slots)s - ri.n)))
),
locked AS (
    SELECT t.host_id, t.task_id, t.process_id
    FROM workflow_task t
    JOIN picked pk ON pk.host_id = t.host_id AND pk.task_id = t.task_id
    WHERE t.state = 'ready'
    ORDER BY CASE pk.execution_class WHEN 'interactive' THEN 0 WHEN 'standard' THEN 1 ELSE 2 END,
             pk.class_rank
    LIMIT %(limit)s
    FOR UPDATE OF t SKIP LOCKED
),
claimed AS (
    UPDATE workflow_task t
    SET state = 'running',
        lease_id = gen_random_uuid(),
        fencing_token = nextval('workflow_fencing_token_seq'),
        attempts = t.attempts + 1,
        worker_id = %(worker_id)s,
        heartbeat_ts = now(),
        updated_ts = now(),
        -- Interactive leases never outlive the run's deadline.
        lease_expires_ts = CASE
            WHEN t.execution_class = 'interactive' AND p.cancellation_policy <> 'disabled'
                THEN least(now() + %(lease_ms)s * interval '1 millisecond', p.deadline_ts)
            WHEN p.cancellation_policy = 'disabled'
                THEN least(now() + %(lease_ms)s * interval '1 millisecond',
                           p.deadline_ts + %(overrun_ms)s * interval '1 millisecond')
            ELSE now() + %(lease_ms)s * interval '1 millisecond'
        END
    FROM locked l, workflow_process p
    -- The run is joined on the locked row's own key, so each side is one primary-key probe
    -- whatever the statistics say (joined through t alone, a generic plan scanned every run
    -- of the host and every task of each).
    WHERE t.host_id = l.host_id AND t.task_id = l.task_id
      AND p.host_id = l.host_id AND p.process_id = l.process_id
      AND p.process_id = t.process_id
    RETURNING t.host_id, t.task_id, t.process_id, t.step_no, t.kind, t.payload,
              t.execution_class, t.idempotent, t.attempts, t.lease_id, t.fencing_token,
              t.lease_expires_ts, p.deadline_ts, p.cancellation_policy,
              -- The queue wait by the database clock, for deadline-aware admission.
              extract(epoch FROM now() - greatest(t.enqueued_ts, t.available_at)) * 1000
                  AS sojourn_ms
),
started AS (
    UPDATE workflow_process p
    SET state = 'RUNNING', updated_ts = now()
    FROM (SELECT DISTINCT host_id, process_id FROM claimed) c
    WHERE p.host_id = c.host_id AND p.process_id = c.process_id AND p.state = 'ACCEPTED'
)
SELECT * FROM claimed;

-- renew_leases --
-- Extend the worker's current leases (interactive capped by deadline); rows missing = lost.
UPDATE workflow_task t
SET heartbeat_ts = now(),
    lease_expires_ts = CASE
        WHEN t.execution_class = 'interactive' AND p.cancellation_policy <> 'disabled'
            THEN least(now() + %(lease_ms)s * interval '1 millisecond', p.deadline_ts)
        WHEN p.cancellation_policy = 'disabled'
            THEN least(now() + %(lease_ms)s * interval '1 millisecond',
                       p.deadline_ts + %(overrun_ms)s * interval '1 millisecond')
        ELSE now() + %(lease_ms)s * interval '1 millisecond'
    END
FROM unnest(%(host_ids)s::uuid[], %(task_ids)s::uuid[], %(lease_ids)s::uuid[],
            %(fencing_tokens)s::bigint[]) AS l(host_id, task_id, lease_id, fencing_token),
     workflow_process p
WHERE t.host_id = l.host_id AND t.task_id = l.task_id AND t.lease_id = l.lease_id
  AND t.fencing_token = l.fencing_token AND t.state = 'running'
  AND p.host_id = t.host_id AND p.process_id = t.process_id
RETURNING t.task_id, t.lease_expires_ts, p.cancel_requested;

-- complete_task --
-- Mark a task done under its lease; returns the run's deadline position for the next step.
UPDATE workflow_task t
SET state = 'done', result = %(result)s, lease_id = NULL, lease_expires_ts = NULL,
    updated_ts = now()
FROM workflow_process p
WHERE t.host_id = %(host_id)s AND t.task_id = %(task_id)s AND t.lease_id = %(lease_id)s
  AND t.fencing_token = %(fencing_token)s AND t.state = 'running'
  AND p.host_id = t.host_id AND p.process_id = t.process_id
RETURNING p.deadline_ts <= now() AS past_deadline, p.cancellation_policy, p.effect_state,
          p.cancel_requested,
          -- Whether ready work waits: the executor claims again at once only then.
          EXISTS (SELECT 1 FROM workflow_task r
                  WHERE r.state = 'ready' AND r.available_at <= now()) AS backlog;

-- complete_task_at_once --
-- The common completion in one statement (workflow_complete_task): debit, fenced task update, then the run's end or its one next task (claimed at once when nothing waits).
SELECT * FROM workflow_complete_task(
    %(host_id)s::uuid, %(task_id)s::uuid, %(lease_id)s::uuid, %(fencing_token)s::bigint,
    %(result)s::jsonb, %(consume)s::boolean, %(attempts)s::integer, %(nested_calls)s::integer,
    %(request_bytes)s::bigint, %(intermediate_bytes)s::bigint, %(result_bytes)s::bigint,
    %(cost_units)s::bigint, %(finish)s::boolean, %(run_result)s::jsonb, %(next)s::boolean,
    %(step_no)s::integer, %(kind)s::text, %(payload)s::jsonb, %(priority)s::smallint,
    %(available_at)s::timestamptz, %(idempotent)s::boolean, %(worker_id)s::text,
    %(lease_ms)s::integer, %(overrun_ms)s::integer
);

-- complete_task_batch --
-- Several completions in one statement and transaction (workflow_complete_task_batch, 0085);
-- calls: a JSON array of complete_task_at_once's parameters and each task's process_id.
SELECT ordinal, outcome, backlog, effect_state, host_id, task_id, process_id, step_no, kind,
       payload, execution_class, idempotent, attempts, lease_id, fencing_token,
       lease_expires_ts, deadline_ts, cancellation_policy
FROM workflow_complete_task_batch(%(calls)s::jsonb);

-- fail_task --
-- Mark a task failed (or cancelled) under its lease.
UPDATE workflow_task
SET state = %(state)s, error = %(error)s, lease_id = NULL, lease_expires_ts = NULL,
    updated_ts = now()
WHERE host_id = %(host_id)s AND task_id = %(task_id)s AND lease_id = %(lease_id)s
  AND fencing_token = %(fencing_token)s AND state = 'running'
RETURNING task_id;

-- release_task --
-- Give a task back to the queue under its lease (worker stopping) and wake the executors.
WITH released AS (
    UPDATE workflow_task
    SET state = 'ready', lease_id = NULL, lease_expires_ts = NULL, worker_id = NULL,
        available_at = now(), updated_ts = now()
    WHERE host_id = %(host_id)s AND task_id = %(task_id)s AND lease_id = %(lease_id)s
      AND fencing_token = %(fencing_token)s AND state = 'running'
    RETURNING task_id
)
SELECT r.task_id,
       pg_notify('workflow_task_ready', json_build_object('type', 'task', 'id', r.task_id)::text)
FROM released r;

-- finish_process --
-- Complete a live run with its result and wake its waiters.
WITH finished AS (
    UPDATE workflow_process
    SET state = 'COMPLETED', result = %(result)s, updated_ts = now(), finished_ts = now()
    WHERE host_id = %(host_id)s AND process_id = %(process_id)s
      AND state IN ('ACCEPTED', 'RUNNING', 'WAITING')
    RETURNING process_id, effect_state
)
SELECT f.effect_state,
       pg_notify('workflow_process_state_' || right(f.process_id::text, 1),
                 json_build_object('type', 'process', 'id', f.process_id)::text)
FROM finished f;

-- fail_process --
-- End a live run as FAILED or CANCELLED with an error, cancel its open tasks, wake waiters.
-- After a confirmed or possible effect the stored error says so and is never retryable,
-- whatever path raised it (runtime.scheduler.errors.agreeing, the same rule for waiters).
WITH failed AS (
    UPDATE workflow_process
    SET state = %(state)s,
        error = CASE WHEN effect_state <> 'none'
                     THEN %(error)s::jsonb || '{"afterEffect": true, "retryable": false}'::jsonb
                     ELSE %(error)s::jsonb END,
        updated_ts = now(), finished_ts = now()
    WHERE host_id = %(host_id)s AND process_id = %(process_id)s
      AND state IN ('ACCEPTED', 'RUNNING', 'WAITING')
    RETURNING host_id, process_id, effect_state
),
cancelled AS (
    UPDATE workflow_task t
    SET state = 'cancelled', lease_id = NULL, lease_expires_ts = NULL, updated_ts = now()
    FROM failed f
    WHERE t.host_id = f.host_id AND t.process_id = f.process_id
      AND t.state IN ('ready', 'running')
)
SELECT f.effect_state,
       pg_notify('workflow_process_state_' || right(f.process_id::text, 1),
                 json_build_object('type', 'process', 'id', f.process_id)::text)
FROM failed f;

-- lock_process --
-- Lock a run's open task rows, then its row, before deciding how to cancel it (past its
-- deadline: as the deadline's end). Task rows first: claims, completions and answered asks
-- hold a task row when they write the run row, so a cancel holding the run row while it
-- waited on their task row was a deadlock. The uncorrelated count is an InitPlan, run (and
-- its rows locked) before the run row is read.
WITH open_tasks AS MATERIALIZED (
    SELECT task_id
    FROM workflow_task
    WHERE host_id = %(host_id)s AND process_id = %(process_id)s
      AND state IN ('ready', 'running')
    ORDER BY task_id
    FOR UPDATE
)
SELECT state, effect_state, cancellation_policy, cancel_requested, deadline_ts,
       deadline_ts <= now() AS past_deadline
FROM workflow_process
WHERE host_id = %(host_id)s AND process_id = %(process_id)s
  AND (SELECT count(*) FROM open_tasks) >= 0
FOR UPDATE;

-- lock_open_tasks_now --
-- Lock every open task row of a run (already locked) without waiting; whole is false when
-- another transaction holds one (a claim or completion mid-statement), and the deadline
-- sweep then leaves the run to its next round rather than wait holding the run row.
WITH open_tasks AS (
    SELECT task_id
    FROM workflow_task
    WHERE host_id = %(host_id)s AND process_id = %(process_id)s
      AND state IN ('ready', 'running')
),
locked AS (
    SELECT task_id
    FROM workflow_task
    WHERE host_id = %(host_id)s AND process_id = %(process_id)s
      AND state IN ('ready', 'running')
    FOR UPDATE SKIP LOCKED
)
SELECT (SELECT count(*) FROM open_tasks) = (SELECT count(*) FROM locked) AS whole;

-- select_cancel_signal --
-- Whether a run asks for cooperative cancellation, whether it already dispatched an effect,
-- and whether its deadline passed (the signal is then honoured as the deadline's end).
SELECT cancel_requested, effect_state, deadline_ts <= now() AS past_deadline
FROM workflow_process
WHERE host_id = %(host_id)s AND process_id = %(process_id)s;

-- request_cancel --
-- Raise the cooperative cancellation signal of a live run. A run parked on a durable timer
-- hears it now, not at its due time: its parked task becomes available, parks again at its
-- wait (runtime.engine.run.timers) and its completion ends the run at the signal.
WITH signalled AS (
    UPDATE workflow_process
    SET cancel_requested = true, updated_ts = now()
    WHERE host_id = %(host_id)s AND process_id = %(process_id)s
      AND state IN ('ACCEPTED', 'RUNNING', 'WAITING') AND NOT cancel_requested
    RETURNING host_id, process_id
),
woken AS (
    -- It joins the queue now (migration 0089 had set its enqueued_ts to its due time).
    UPDATE workflow_task t
    SET available_at = now(), enqueued_ts = now(), updated_ts = now()
    FROM signalled s
    WHERE t.host_id = s.host_id AND t.process_id = s.process_id
      AND t.state = 'ready' AND t.available_at > now() AND t.payload ? 'timers'
)
SELECT count(*) AS signalled FROM signalled;

-- reap_expired --
-- Lock running tasks whose lease expired and reclaim those whose run can still finish in time.
WITH expired AS (
    SELECT t.host_id, t.task_id, t.process_id, p.effect_state,
           CASE
               WHEN p.deadline_ts - now() >= %(min_remaining_ms)s * interval '1 millisecond'
                   OR (p.cancellation_policy = 'disabled'
                       AND p.deadline_ts + %(overrun_ms)s * interval '1 millisecond' - now()
                           >= %(min_remaining_ms)s * interval '1 millisecond')
                   THEN 'reclaim'
               -- Past the deadline a live worker may still be finishing a dispatched write.
               WHEN t.heartbeat_ts > now() - %(stale_ms)s * interval '1 millisecond'
                   AND (p.cancellation_policy = 'cooperative' OR p.effect_state <> 'none')
                   THEN 'wait'
               ELSE 'timeout'
           END AS decision
    FROM workflow_task t
    JOIN workflow_process p ON p.host_id = t.host_id AND p.process_id = t.process_id
    WHERE t.state = 'running' AND t.lease_expires_ts < now()
    ORDER BY t.lease_expires_ts
    LIMIT %(limit)s
    -- The run row too: its effect state decides, and a task mid-mark is skipped, not raced.
    FOR UPDATE OF t, p SKIP LOCKED
),
reclaimed AS (
    UPDATE workflow_task t
    SET state = 'ready', lease_id = NULL, lease_expires_ts = NULL, worker_id = NULL,
        available_at = now(), updated_ts = now()
    FROM expired e
    WHERE t.host_id = e.host_id AND t.task_id = e.task_id AND e.decision = 'reclaim'
    RETURNING t.task_id
),
notified AS (
    SELECT pg_notify('workflow_task_ready',
                     json_build_object('type', 'task', 'id', r.task_id)::text) AS sent
    FROM reclaimed r
)
SELECT e.host_id, e.task_id, e.process_id, e.effect_state, e.decision,
       (SELECT count(*) FROM notified) AS notified
FROM expired e;

-- sweep_deadlines --
-- Lock live runs past their deadline (a disabled policy's: past deadline + overrun) and say
-- whether a live worker holds a task.
SELECT p.host_id, p.process_id, p.cancellation_policy, p.effect_state, p.cancel_requested,
       EXISTS (
           SELECT 1 FROM workflow_task t
           WHERE t.host_id = p.host_id AND t.process_id = p.process_id
             AND t.state = 'running'
             AND t.heartbeat_ts > now() - %(stale_ms)s * interval '1 millisecond'
       ) AS has_live_task
FROM workflow_process p
WHERE p.state IN ('ACCEPTED', 'RUNNING', 'WAITING') AND p.deadline_ts <= now()
  AND (p.cancellation_policy <> 'disabled'
       OR p.deadline_ts <= now() - %(overrun_ms)s * interval '1 millisecond')
ORDER BY p.deadline_ts
LIMIT %(limit)s
FOR UPDATE OF p SKIP LOCKED;

-- get_step --
-- Read the step ledger row of one step of a run.
SELECT effect_state, output, fencing_token, request_digest
FROM workflow_step
WHERE host_id = %(host_id)s AND process_id = %(process_id)s AND step_no = %(step_no)s;

-- mark_effect_possible --
-- Under the lease, record that the step's effect may happen (run effect state at least possible),
-- with what its compensation needs when its task carries one (migration 0087).
-- The task row is locked and its fence re-checked after any wait, so a lease reclaimed or a
-- run cancelled meanwhile marks nothing; then the live run row, the order every path takes
-- them in (lock_process says why). A cancel that came first has cancelled the task; one that
-- comes after waits on the task row and finds the effect possible.
WITH owner AS MATERIALIZED (
    SELECT host_id, process_id, task_id, fencing_token
    FROM workflow_task
    WHERE host_id = %(host_id)s AND task_id = %(task_id)s AND lease_id = %(lease_id)s
      AND fencing_token = %(fencing_token)s AND state = 'running'
    FOR UPDATE
),
live AS MATERIALIZED (
    SELECT p.process_id
    FROM workflow_process p
    WHERE p.host_id = %(host_id)s AND p.process_id = %(process_id)s
      AND p.state IN ('ACCEPTED', 'RUNNING', 'WAITING') AND EXISTS (SELECT 1 FROM owner)
    FOR UPDATE
),
step AS (
    INSERT INTO workflow_step (
        host_id, process_id, step_no, task_id, effect_state, fencing_token, request_digest,
        compensation
    )
    SELECT o.host_id, o.process_id, %(step_no)s, o.task_id, 'possible', o.fencing_token,
           %(request_digest)s, %(compensation)s
    FROM owner o
    WHERE EXISTS (SELECT 1 FROM live)
    ON CONFLICT (host_id, process_id, step_no) DO UPDATE
        SET fencing_token = excluded.fencing_token, task_id = excluded.task_id,
            possible_ts = now(),
            -- A re-mark describes the call about to be sent; without one, keep the old.
            request_digest = COALESCE(excluded.request_digest, workflow_step.request_digest),
            compensation = COALESCE(excluded.compensation, workflow_step.compensation)
        WHERE workflow_step.effect_state = 'possible'
          AND (workflow_step.fencing_token = excluded.fencing_token OR %(takeover)s)
    RETURNING effect_state
),
run AS (
    UPDATE workflow_process p
    SET effect_state = 'possible', updated_ts = now()
    FROM owner o
    WHERE p.host_id = o.host_id AND p.process_id = o.process_id AND p.effect_state = 'none'
      AND EXISTS (SELECT 1 FROM live)
)
SELECT (SELECT count(*) FROM owner) AS owned, (SELECT count(*) FROM live) AS live,
       (SELECT count(*) FROM step) AS marked;

-- confirm_effect --
-- Under the lease, record that the step's effect happened, with its output.
-- The task row is locked before the run row, the order mark_effect_possible, cancels and
-- every other path take them in (lock_process says why): two fork branches of one task, one
-- marking and one confirming, wait on the task row and never each hold what the other wants.
WITH owner AS MATERIALIZED (
    SELECT host_id, process_id, task_id, fencing_token
    FROM workflow_task
    WHERE host_id = %(host_id)s AND task_id = %(task_id)s AND lease_id = %(lease_id)s
      AND fencing_token = %(fencing_token)s AND state = 'running'
    FOR UPDATE
),
step AS (
    UPDATE workflow_step s
    SET effect_state = 'confirmed', output = %(output)s, fencing_token = o.fencing_token,
        confirmed_ts = now()
    FROM owner o
    WHERE s.host_id = o.host_id AND s.process_id = o.process_id AND s.step_no = %(step_no)s
      AND s.effect_state = 'possible'
    RETURNING s.step_no
),
run AS (
    UPDATE workflow_process p
    SET effect_state = 'confirmed', updated_ts = now()
    FROM owner o
    WHERE p.host_id = o.host_id AND p.process_id = o.process_id
      AND p.effect_state <> 'confirmed' AND EXISTS (SELECT 1 FROM step)
)
SELECT (SELECT count(*) FROM owner) AS owned, (SELECT count(*) FROM step) AS confirmed;

-- debit_budget --
-- Under the lease, debit every counter at once only if each suffices; with %(record)s, record
-- the debit as a reservation (reconciled later), without it the debit is final (consumed).
WITH owner AS (
    SELECT host_id, process_id, task_id, fencing_token
    FROM workflow_task
    WHERE host_id = %(host_id)s AND task_id = %(task_id)s AND lease_id = %(lease_id)s
      AND fencing_token = %(fencing_token)s AND state = 'running'
    FOR UPDATE
),
debit AS (
    UPDATE workflow_budget b
    SET remaining_attempts = b.remaining_attempts - %(attempts)s,
        remaining_nested_calls = b.remaining_nested_calls - %(nested_calls)s,
        remaining_request_bytes = b.remaining_request_bytes - %(request_bytes)s,
        remaining_intermediate_bytes = b.remaining_intermediate_bytes - %(intermediate_bytes)s,
        remaining_result_bytes = b.remaining_result_bytes - %(result_bytes)s,
        remaining_cost_units = b.remaining_cost_units - %(cost_units)s,
        updated_ts = now()
    FROM owner o
    WHERE b.host_id = o.host_id AND b.process_id = o.process_id
      AND b.remaining_attempts >= %(attempts)s
      AND b.remaining_nested_calls >= %(nested_calls)s
      AND b.remaining_request_bytes >= %(request_bytes)s
      AND b.remaining_intermediate_bytes >= %(intermediate_bytes)s
      AND b.remaining_result_bytes >= %(result_bytes)s
      AND b.remaining_cost_units >= %(cost_units)s
    RETURNING b.host_id, b.process_id
),
reservation AS (
    INSERT INTO workflow_budget_reservation (
        host_id, process_id, task_id, fencing_token, attempts, nested_calls, request_bytes,
        intermediate_bytes, result_bytes, cost_units
    )
    SELECT d.host_id, d.process_id, o.task_id, o.fencing_token, %(attempts)s,
           %(nested_calls)s, %(request_bytes)s, %(intermediate_bytes)s, %(result_bytes)s,
           %(cost_units)s
    FROM debit d CROSS JOIN owner o
    WHERE %(record)s
    RETURNING reservation_id
)
SELECT (SELECT count(*) FROM owner) AS owned, (SELECT count(*) FROM debit) AS debited,
       (SELECT reservation_id FROM reservation) AS reservation_id;

-- reconcile_budget --
-- Under the reserving lease, settle a reservation once and credit back what was not used.
WITH owner AS (
    SELECT host_id, task_id, fencing_token
    FROM workflow_task
    WHERE host_id = %(host_id)s AND task_id = %(task_id)s AND lease_id = %(lease_id)s
      AND fencing_token = %(fencing_token)s AND state = 'running'
    FOR UPDATE
),
settled AS (
    UPDATE workflow_budget_reservation r
    SET state = 'reconciled', actual = %(actual)s, reconciled_ts = now()
    FROM owner o
    WHERE r.host_id = o.host_id AND r.reservation_id = %(reservation_id)s
      AND r.task_id = o.task_id AND r.fencing_token = o.fencing_token
      AND r.state = 'reserved'
    RETURNING r.host_id, r.process_id, r.attempts, r.nested_calls, r.request_bytes,
              r.intermediate_bytes, r.result_bytes, r.cost_units
),
credit AS (
    -- Usage above the reservation is not debited here: it is reported as an overrun.
    UPDATE workflow_budget b
    SET remaining_attempts = b.remaining_attempts
            + greatest(s.attempts - %(attempts)s, 0),
        remaining_nested_calls = b.remaining_nested_calls
            + greatest(s.nested_calls - %(nested_calls)s, 0),
        remaining_request_bytes = b.remaining_request_bytes
            + greatest(s.request_bytes - %(request_bytes)s, 0),
        remaining_intermediate_bytes = b.remaining_intermediate_bytes
            + greatest(s.intermediate_bytes - %(intermediate_bytes)s, 0),
        remaining_result_bytes = b.remaining_result_bytes
            + greatest(s.result_bytes - %(result_bytes)s, 0),
        remaining_cost_units = b.remaining_cost_units
            + greatest(s.cost_units - %(cost_units)s, 0),
        updated_ts = now()
    FROM settled s
    WHERE b.host_id = s.host_id AND b.process_id = s.process_id
    RETURNING b.process_id
)
SELECT (SELECT count(*) FROM owner) AS owned,
       (SELECT count(*) FROM credit) AS settled,
       coalesce((SELECT s.attempts < %(attempts)s OR s.nested_calls < %(nested_calls)s
                     OR s.request_bytes < %(request_bytes)s
                     OR s.intermediate_bytes < %(intermediate_bytes)s
                     OR s.result_bytes < %(result_bytes)s OR s.cost_units < %(cost_units)s
                 FROM settled s), false) AS overrun;

-- sample_class_load --
-- Ready (runnable now) and running tasks per execution class across all hosts, and how long
-- the oldest runnable one has waited (ms): the shared queue's load, read by each process's
-- sampler (never on a request path). One branch per state, each matching its partial index
-- (ready by availability, running by host): only live tasks are read. A single scan filtered
-- on `state IN ('ready', 'running')` matches neither index and read the whole table, done
-- tasks and all, several times a second.
SELECT execution_class, sum(ready)::bigint AS ready, sum(running)::bigint AS running,
       COALESCE(EXTRACT(EPOCH FROM now() - min(oldest_ready_ts)) * 1000, 0) AS oldest_ready_ms
FROM (
    SELECT execution_class, count(*) AS ready, 0 AS running,
           min(greatest(enqueued_ts, available_at)) AS oldest_ready_ts
    FROM workflow_task
    WHERE state = 'ready' AND available_at <= now()
    GROUP BY execution_class
    UNION ALL
    SELECT execution_class, 0, count(*), NULL
    FROM workflow_task
    WHERE state = 'running'
    GROUP BY execution_class
) live
GROUP BY execution_class;

-- notify_task_ready --
-- Wake every listening executor for a task committed without a NOTIFY of its own (a statement
-- with no writes: no commit record to flush, so the notification queue's lock is brief).
SELECT pg_notify('workflow_task_ready', json_build_object('type', 'task', 'id', %(task_id)s::text)::text);

-- notify_runs_ended --
-- Wake other processes' waiters of runs whose end was committed without a NOTIFY (a statement
-- with no writes, as notify_task_ready; one statement for a batch of runs).
SELECT pg_notify('workflow_process_state_' || right(id, 1),
                 json_build_object('type', 'process', 'id', id)::text)
FROM unnest(%(process_ids)s::text[]) AS ended(id);

-- notify_run_end_if_over --
-- Sent right after a completion that would end the run, as a transaction of its own in the
-- completion's round trip (runs.complete_at_once): a run that is not over (the completion was
-- refused, or a deadline ends it on the other path) is not announced. Writes nothing.
SELECT pg_notify('workflow_process_state_' || right(p.process_id::text, 1),
                 json_build_object('type', 'process', 'id', p.process_id::text)::text)
FROM workflow_process AS p
WHERE p.host_id = %(host_id)s AND p.process_id = %(process_id)s AND p.finished_ts IS NOT NULL;

-- next_available_in --
-- Seconds until the earliest ready task that is not available yet (a run parked on a timer or
-- an ask) becomes available, by the database's clock (the one the claim compares with); NULL
-- when none is parked. Migration 0080's index answers it at its first entry past now().
SELECT extract(epoch FROM min(available_at) - now())::float8 AS seconds
FROM workflow_task
WHERE state = 'ready' AND available_at > now();
