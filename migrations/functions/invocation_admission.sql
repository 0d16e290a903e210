-- The admission of a new run, workflow_invoke's and workflow_start's: the function family,
-- defined here once.
--
-- The migration runner (runtime/store/migrations.py) installs this file after the numbered
-- migrations whenever its text changes: change a function by editing it here, never by
-- restating it in a numbered migration. Migrations 0020-0084 hold how it came to be (0020 the
-- idempotency claim, 0025 the one-statement admission, 0026-0031 its counters and shards, 0036
-- the claim after a retention sweep, 0084 workflow_admit_invoke_v2 and its batches); since
-- then workflow_start admits through the same steps here (workflow_admit_start) instead of
-- restating them in Python.
--
-- Who calls what:
--   runtime/invocation/store.py admit_invoke (queries.sql admit_invoke)
--       -> workflow_admit_invoke_v2, alone in its transaction (autocommit)
--   runtime/invocation/store.py admit_invoke_batch (queries.sql admit_invoke_batch)
--       -> workflow_admit_invoke_batch: up to workflow_admission_batch_max() calls of one Tool
--          in one transaction, each in a subtransaction of its own, in idempotency-scope order
--   runtime/invocation/store.py admit_start (queries.sql admit_start; workflow_start)
--       -> workflow_admit_start, alone in its transaction (autocommit)
--   both admissions -> workflow_admit_claimed_run (the claim, the refusal of a new run, the
--       run, its spec, its authority) -> workflow_claim_idempotency_v2; and
--       workflow_record_invocation (the owner record)
--   workflow_admit_invoke: the previous release's entry, kept while a service of it may still
--       run during an upgrade; the same admission (not batched)
--   the run-end trigger workflow_tool_live_end (0025) -> workflow_tool_live_add
--
-- One admission (workflow_admit_invoke_v2), in this order, which is also its lock order:
--   1. The retry of a call that committed (this call's own process id): attach or replay.
--   2. Shed (p_shed): refused unless its key re-attaches, replays or conflicts; nothing is
--      locked or written.
--   3. The pinned definition version row FOR SHARE, then the Tool's publication head FOR SHARE
--      (seed 000's order; judged head first: stale, then retired).
--   4. The approval evidence of the revision's write tasks (missing_evidence).
--   5. The idempotency claim (workflow_claim_idempotency_v2: the reservation row inserted, or
--      locked FOR UPDATE and judged): attach, replay and conflict return here, before anything
--      is counted; a new run while shed raises workflow_capacity_shed.
--   6. The new run: workflow_enqueue_run (scheduler, functions/scheduler_enqueue.sql: the run,
--      its budget, its first task, claimed by p_worker_id when no ready task waits),
--      workflow_record_run_spec (execution, 0016: its spec and sealed credential), its action
--      authority. Steps 5 and 6 are workflow_admit_claimed_run.
--   7. Last, the Tool's advisory admission lock: shared while every limit is more than
--      max_connections times workflow_admission_batch_max() away, else exclusive (never in a
--      batch: near a limit a batched call answers near_limit and is repeated alone). Under it
--      the counts (live runs from workflow_tool_live_count_t, starts per minute from the
--      ten-second buckets of workflow_tool_start_count_t), then the owner record
--      (workflow_record_invocation, stamped with the counting instant), the live counter and
--      the start bucket in a shard no other transaction in progress writes
--      (workflow_counter_shard), and the sweep and fold of old buckets.
-- A refusal raises (workflow_capacity_shed, workflow_admission_near_limit, or
-- workflow_admission_limit_reached with the counts in DETAIL), so nothing of the call stays.
--
-- workflow_admit_start: steps 5 and 6 (workflow_admit_claimed_run), then the owner record;
-- in that order, its lock order. What differs from an invoke, and why:
--   - No head or version lock (steps 3-4): a start runs the saved definition head, which the
--     service reads without a lock in a statement of its own and judges in Python (found,
--     expectedDefinitionDigest, active, the parse, the input schema), as workflow_start always
--     did; the document itself goes into the run's spec, so a head saved meanwhile changes
--     nothing of this run. There is no evidence to check (no binding).
--   - No step 1: the service retries a start whose connection was lost with the same
--     process id and key, and the claim itself finds a first try that committed (the
--     same call under a key that never expires while its run lives or after).
--   - p_refuse_new instead of p_shed: the token-cover verdict (a run that calls out must hold
--     a token lasting to its deadline, or an exchange) and the capacity verdict, both decided
--     before the statement, refuse only a new run: attach, replay and conflict pass.
--   - Key kind and operation 'start', replay window NULL (once the run ends its key replays
--     forever: workflow_idempotency_window_end, 0020), no worker (the first task is left ready) and a NOTIFY
--     inside (no Tool lock is held through the commit, so nothing waits on the queue's lock).
--   - No Tool, so no admissionLimits, counters or Tool lock (step 7): the owner record (with
--     the starter roles) is written right after the run, stamped with its default clock.
-- Either admission's owner record keeps the caller's disclosure ceiling (0090), passed as the
-- statement's trailing parameter: no statement of its own.
--   - One row: the outcome and, but for a conflict, the run as the receipt shows it.
--
-- Checked by tests/unit/test_invocation_queries.py (the orders above, read from this file) and
-- tests/integration/invocation/ (limit races, lock modes, batches, live counts, retries, start
-- races and shedding).

-- The most admissions one transaction holds in progress (the service's batches are no larger:
-- runtime/invocation/admission_batch.py BATCH_MAX).
CREATE OR REPLACE FUNCTION workflow_admission_batch_max() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 8';

-- A counter shard no other transaction in progress writes: shard s of every counter is written
-- only under the transaction-scoped advisory lock (class, s), claimed by trying the shards from
-- the backend's own number on, without waiting. The lock is re-entrant, so a transaction that
-- adds more than once (several run ends in one statement) keeps its shard.
CREATE OR REPLACE FUNCTION workflow_counter_shard() RETURNS smallint
LANGUAGE plpgsql AS $$
DECLARE
    first integer := pg_backend_pid() % 64;
    probe integer;
BEGIN
    FOR step IN 0..63 LOOP
        probe := (first + step) % 64;
        IF pg_try_advisory_xact_lock(20251127, probe) THEN
            RETURN probe::smallint;
        END IF;
    END LOOP;
    -- Sixty-four transactions hold one each: wait for this backend's own.
    PERFORM pg_advisory_xact_lock(20251127, first);
    RETURN first::smallint;
END
$$;

-- Live runs per Tool and per end user, as counters split in shards: admission adds one, the
-- run's end takes it away (trigger workflow_tool_live_end, 0025). Add delta to the Tool's and
-- the end user's live count, in this transaction's shard.
CREATE OR REPLACE FUNCTION workflow_tool_live_add(
    p_host_id uuid, p_tool_id uuid, p_subject text, p_delta integer
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    this_shard smallint := workflow_counter_shard();
BEGIN
    INSERT INTO workflow_tool_live_count_t AS c (
        host_id, tool_id, per_user, end_user_subject, shard, live
    ) VALUES
        (p_host_id, p_tool_id, false, '', this_shard, p_delta),
        (p_host_id, p_tool_id, true, p_subject, this_shard, p_delta)
    ON CONFLICT ON CONSTRAINT workflow_tool_live_count_pk
        DO UPDATE SET live = c.live + EXCLUDED.live;
END
$$;

-- A scope's live runs (the sum of its shards).
CREATE OR REPLACE FUNCTION workflow_tool_live_count(
    p_host_id uuid, p_tool_id uuid, p_per_user boolean, p_subject text
) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT coalesce(sum(c.live), 0)::bigint
        FROM workflow_tool_live_count_t c
        WHERE c.host_id = p_host_id AND c.tool_id = p_tool_id AND c.per_user = p_per_user
          AND c.end_user_subject = p_subject
    );
END
$$;

-- A scope's starts from one second on (to another, inclusive, when given). PL/pgSQL, not SQL:
-- a SQL function called from PL/pgSQL is planned again on every call (0.3 ms, measured), a
-- PL/pgSQL one keeps its plan for the session.
CREATE OR REPLACE FUNCTION workflow_tool_starts_since(
    p_host_id uuid,
    p_tool_id uuid,
    p_per_user boolean,
    p_subject text,
    p_from_second bigint,
    p_to_second bigint DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT coalesce(sum(b.starts), 0)::bigint
        FROM workflow_tool_start_count_t b
        WHERE b.host_id = p_host_id AND b.tool_id = p_tool_id AND b.per_user = p_per_user
          AND b.end_user_subject = p_subject AND b.second >= p_from_second
          AND b.second <= coalesce(p_to_second, 9223372036854775807)
    );
END
$$;

-- The one atomic insert-or-judge path of an idempotency reservation (workflow_invoke and
-- workflow_start). Outcomes: accepted (a new reservation or a new generation: start
-- p_process_id), attach (the same call while its run is live), replay (the same call of a
-- terminal run inside its window), conflict (another input, definition or client under a key
-- still in use). A live run is never re-accepted, whatever its window says; a reservation the
-- retention sweep removed between the insert attempt and the row lock is inserted again.
CREATE OR REPLACE FUNCTION workflow_claim_idempotency_v2(
    p_host_id uuid,
    p_scope_digest text,
    p_operation text,
    p_key_kind text,
    p_process_id uuid,
    p_principal_subject text,
    p_input_digest text,
    p_definition_digest text,
    p_result_replay_ms bigint,
    p_deadline_ts timestamptz
) RETURNS TABLE (outcome text, process_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    current_row workflow_idempotency_t%ROWTYPE;
    run_state text;
    same_call boolean;
BEGIN
    LOOP
        INSERT INTO workflow_idempotency_t AS i (
            host_id, scope_digest, operation, key_kind, process_id, principal_subject,
            input_digest, definition_digest, result_replay_ms, in_flight_until,
            result_replay_until
        ) VALUES (
            p_host_id, p_scope_digest, p_operation, p_key_kind, p_process_id,
            p_principal_subject, p_input_digest, p_definition_digest, p_result_replay_ms,
            p_deadline_ts, p_deadline_ts
        )
        ON CONFLICT ON CONSTRAINT workflow_idempotency_pk DO NOTHING;
        IF FOUND THEN
            RETURN QUERY SELECT 'accepted'::text, p_process_id;
            RETURN;
        END IF;

        SELECT * INTO current_row FROM workflow_idempotency_t i
        WHERE i.host_id = p_host_id AND i.scope_digest = p_scope_digest
        FOR UPDATE;
        -- Not found: the retention sweep removed the expired row between the two statements;
        -- insert again rather than accept a run without a reservation.
        EXIT WHEN FOUND;
    END LOOP;
    SELECT p.state INTO run_state FROM workflow_process p
    WHERE p.host_id = p_host_id AND p.process_id = current_row.process_id;
    same_call := current_row.principal_subject = p_principal_subject
        AND current_row.input_digest = p_input_digest
        AND current_row.definition_digest = p_definition_digest;

    IF run_state IN ('ACCEPTED', 'RUNNING', 'WAITING') THEN
        RETURN QUERY SELECT CASE WHEN same_call THEN 'attach' ELSE 'conflict' END,
                            current_row.process_id;
        RETURN;
    END IF;
    IF current_row.result_replay_until > clock_timestamp() THEN
        RETURN QUERY SELECT CASE WHEN same_call THEN 'replay' ELSE 'conflict' END,
                            current_row.process_id;
        RETURN;
    END IF;

    UPDATE workflow_idempotency_t i
    SET generation = i.generation + 1, process_id = p_process_id, key_kind = p_key_kind,
        principal_subject = p_principal_subject, input_digest = p_input_digest,
        definition_digest = p_definition_digest, result_replay_ms = p_result_replay_ms,
        in_flight_until = p_deadline_ts, result_replay_until = p_deadline_ts,
        updated_ts = now()
    WHERE i.host_id = p_host_id AND i.scope_digest = p_scope_digest;
    RETURN QUERY SELECT 'accepted'::text, p_process_id;
END
$$;

-- The steps both admissions share, in this order (their lock order after the head):
-- the idempotency claim (workflow_claim_idempotency_v2) under p_operation, which is also the
-- reservation's operation and the authority's credential kind ('invoke' or 'start'); a new
-- run refused when p_refuse_new (raised, so the claim's new reservation rolls back with the
-- statement); else the run (workflow_enqueue_run, its first task claimed by p_worker_id when
-- no ready task waits, announced inside when p_notify), its spec and sealed credential
-- (workflow_record_run_spec) and its action authority (no LONG grant, seed 000: the run id is
-- its grant id). Attach, replay and conflict return the claimed run with task_id NULL and
-- write nothing. The owner record is the caller's (workflow_record_invocation): invoke writes
-- it last, under the Tool's lock, stamped with the counting instant.
CREATE OR REPLACE FUNCTION workflow_admit_claimed_run(
    p_host_id uuid,
    p_operation text,
    p_scope_digest text,
    p_key_kind text,
    p_process_id uuid,
    p_principal_subject text,
    p_input_digest text,
    p_definition_digest text,
    p_result_replay_ms bigint,
    p_deadline_ts timestamptz,
    p_refuse_new boolean,
    p_wf_def_id uuid,
    p_workflow_version text,
    p_definition jsonb,
    p_binding_id uuid,
    p_user_id text,
    p_execution_class text,
    p_cancellation_policy text,
    p_attempts integer,
    p_nested_calls integer,
    p_request_bytes bigint,
    p_intermediate_bytes bigint,
    p_result_bytes bigint,
    p_cost_units bigint,
    p_task_kind text,
    p_payload jsonb,
    p_limits jsonb,
    p_key_id text,
    p_nonce bytea,
    p_ciphertext bytea,
    p_token_expires_ts timestamptz,
    p_action_limit integer,
    p_notify boolean,
    p_worker_id text,
    p_lease_ms integer,
    p_overrun_ms integer
) RETURNS TABLE (outcome text, process_id uuid, task_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    claim record;
    new_task_id uuid;
BEGIN
    SELECT c.outcome, c.process_id INTO claim
    FROM workflow_claim_idempotency_v2(
        p_host_id, p_scope_digest, p_operation, p_key_kind, p_process_id, p_principal_subject,
        p_input_digest, p_definition_digest, p_result_replay_ms, p_deadline_ts
    ) AS c;

    IF claim.outcome = 'accepted' AND p_refuse_new THEN
        -- A new run, which the caller's verdict refuses (invoke: the load; the key's window
        -- may have closed since its look before the claim).
        RAISE EXCEPTION 'workflow_capacity_shed';
    END IF;
    IF claim.outcome <> 'accepted' THEN
        RETURN QUERY SELECT claim.outcome, claim.process_id, NULL::uuid;
        RETURN;
    END IF;

    new_task_id := workflow_enqueue_run(
        p_host_id, p_process_id, p_execution_class, p_deadline_ts, p_cancellation_policy,
        p_binding_id, p_attempts, p_nested_calls, p_request_bytes, p_intermediate_bytes,
        p_result_bytes, p_cost_units, 0, p_task_kind, p_payload, 0::smallint, NULL, false,
        p_notify, p_worker_id, p_lease_ms, p_overrun_ms
    );
    PERFORM workflow_record_run_spec(
        p_host_id, p_process_id, p_wf_def_id, p_workflow_version, p_definition, p_binding_id,
        p_user_id, p_limits, p_key_id, p_nonce, p_ciphertext, p_token_expires_ts, p_deadline_ts
    );
    INSERT INTO workflow_action_authority_t (
        host_id, grant_id, process_id, user_id, deadline_ts, action_limit, credential_kind
    ) VALUES (
        p_host_id, p_process_id::text, p_process_id, p_user_id, p_deadline_ts, p_action_limit,
        p_operation
    );
    RETURN QUERY SELECT 'accepted'::text, p_process_id, new_task_id;
END
$$;

-- A new run's owner record: who admitted it and through what (the lifecycle tools check it),
-- and the disclosure ceiling its caller was accepted with (0090).
-- p_created_ts NULL: the column's default (clock_timestamp()).
-- 0090 added p_disclosure_ceiling: the signature before it is dropped (it would be ambiguous
-- beside this one's default).
DROP FUNCTION IF EXISTS workflow_record_invocation(
    uuid, uuid, text, text, text, text, uuid, uuid, uuid, text, text, text[], timestamptz
);
CREATE OR REPLACE FUNCTION workflow_record_invocation(
    p_host_id uuid,
    p_process_id uuid,
    p_operation text,
    p_user_id text,
    p_end_user_subject text,
    p_principal_subject text,
    p_tool_id uuid,
    p_binding_id uuid,
    p_wf_def_id uuid,
    p_workflow_version text,
    p_definition_digest text,
    p_starter_roles text[],
    p_created_ts timestamptz,
    p_disclosure_ceiling text[] DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO workflow_invocation_t (
        host_id, process_id, operation, user_id, end_user_subject, principal_subject, tool_id,
        binding_id, wf_def_id, workflow_version, definition_digest, starter_roles, created_ts,
        disclosure_ceiling
    ) VALUES (
        p_host_id, p_process_id, p_operation, p_user_id, p_end_user_subject, p_principal_subject,
        p_tool_id, p_binding_id, p_wf_def_id, p_workflow_version, p_definition_digest,
        p_starter_roles, coalesce(p_created_ts, clock_timestamp()), p_disclosure_ceiling
    );
END
$$;

-- workflow_start's whole admission, alone in its transaction (autocommit): the saved head it
-- runs was read without a lock and judged by the service (found, digest, active, its input),
-- as was p_refuse_new (the token-cover and capacity verdicts, which refuse only a new run).
-- Then workflow_admit_claimed_run (operation and key kind 'start', replay window NULL: a
-- terminal run replays until its deadline; NOTIFY inside, no executor claims the task here)
-- and the owner record with the starter roles. One row: the outcome and, but for a conflict,
-- the run as the receipt shows it (its state, the owner record's digest, its creation).
-- 0090 added the trailing p_disclosure_ceiling (a service of the previous release calls
-- without it); the signature before it is dropped, as it would be ambiguous beside this one.
DROP FUNCTION IF EXISTS workflow_admit_start(
    uuid, uuid, jsonb, text, uuid, text, text, text, timestamptz, text, text, text[], text,
    text, integer, integer, bigint, bigint, bigint, bigint, text, jsonb, jsonb, text, bytea,
    bytea, timestamptz, integer, boolean
);
CREATE OR REPLACE FUNCTION workflow_admit_start(
    p_host_id uuid,
    p_wf_def_id uuid,
    p_definition jsonb,
    p_scope_digest text,
    p_process_id uuid,
    p_principal_subject text,
    p_input_digest text,
    p_definition_digest text,
    p_deadline_ts timestamptz,
    p_user_id text,
    p_end_user_subject text,
    p_starter_roles text[],
    p_execution_class text,
    p_cancellation_policy text,
    p_attempts integer,
    p_nested_calls integer,
    p_request_bytes bigint,
    p_intermediate_bytes bigint,
    p_result_bytes bigint,
    p_cost_units bigint,
    p_task_kind text,
    p_payload jsonb,
    p_limits jsonb,
    p_key_id text,
    p_nonce bytea,
    p_ciphertext bytea,
    p_token_expires_ts timestamptz,
    p_action_limit integer,
    p_refuse_new boolean,
    -- The parts of the run its caller may see (runtime/invocation/disclosure.py; 0090).
    p_disclosure_ceiling text[] DEFAULT NULL
) RETURNS TABLE (
    outcome text,
    process_id uuid,
    state text,
    definition_digest text,
    created_ts timestamptz
)
LANGUAGE plpgsql AS $$
DECLARE
    claim record;
BEGIN
    SELECT a.outcome, a.process_id INTO claim
    FROM workflow_admit_claimed_run(
        p_host_id, 'start', p_scope_digest, 'start', p_process_id, p_principal_subject,
        p_input_digest, p_definition_digest, NULL, p_deadline_ts, p_refuse_new, p_wf_def_id,
        NULL, p_definition, NULL, p_user_id, p_execution_class, p_cancellation_policy,
        p_attempts, p_nested_calls, p_request_bytes, p_intermediate_bytes, p_result_bytes,
        p_cost_units, p_task_kind, p_payload, p_limits, p_key_id, p_nonce, p_ciphertext,
        p_token_expires_ts, p_action_limit, true, NULL, NULL, NULL
    ) AS a;
    IF claim.outcome = 'conflict' THEN
        RETURN QUERY SELECT claim.outcome, claim.process_id, NULL::text, NULL::text,
            NULL::timestamptz;
        RETURN;
    END IF;
    IF claim.outcome = 'accepted' THEN
        PERFORM workflow_record_invocation(
            p_host_id, p_process_id, 'start', p_user_id, p_end_user_subject,
            p_principal_subject, NULL, NULL, p_wf_def_id, NULL, p_definition_digest,
            p_starter_roles, NULL, p_disclosure_ceiling
        );
    END IF;
    RETURN QUERY
    SELECT claim.outcome, claim.process_id, p.state, i.definition_digest, p.created_ts
    FROM workflow_invocation_t i
    JOIN workflow_run_state p ON p.host_id = i.host_id AND p.process_id = i.process_id
    WHERE i.host_id = p_host_id AND i.process_id = claim.process_id;
END
$$;

-- One admission, in the order the header gives. p_batched: one of several in a transaction
-- (workflow_admit_invoke_batch), which then never takes the Tool's lock exclusively.
-- 0090 added the trailing p_disclosure_ceiling (a service of the previous release, and
-- workflow_admit_invoke, call without it); the signature before it is dropped, as it would be
-- ambiguous beside this one.
DROP FUNCTION IF EXISTS workflow_admit_invoke_v2(
    uuid, uuid, uuid, uuid, text, boolean, text, text, uuid, text, text, text, bigint,
    timestamptz, text, text, bigint, bigint, bigint, bigint, text, text, integer, integer,
    bigint, bigint, bigint, bigint, text, jsonb, jsonb, text, bytea, bytea, timestamptz,
    integer, boolean, boolean, boolean, text, integer, integer
);
CREATE OR REPLACE FUNCTION workflow_admit_invoke_v2(
    p_host_id uuid,
    p_tool_id uuid,
    p_binding_id uuid,
    p_wf_def_id uuid,
    p_workflow_version text,
    p_check_evidence boolean,
    -- The idempotency claim (workflow_claim_idempotency_v2).
    p_scope_digest text,
    p_key_kind text,
    p_process_id uuid,
    p_principal_subject text,
    p_input_digest text,
    p_definition_digest text,
    p_result_replay_ms bigint,
    p_deadline_ts timestamptz,
    -- Who calls, and the revision's admissionLimits.
    p_user_id text,
    p_end_user_subject text,
    p_maximum_concurrent_runs bigint,
    p_maximum_concurrent_runs_per_user bigint,
    p_starts_per_minute bigint,
    p_starts_per_minute_per_user bigint,
    -- The run (workflow_enqueue_run, workflow_record_run_spec).
    p_execution_class text,
    p_cancellation_policy text,
    p_attempts integer,
    p_nested_calls integer,
    p_request_bytes bigint,
    p_intermediate_bytes bigint,
    p_result_bytes bigint,
    p_cost_units bigint,
    p_task_kind text,
    p_payload jsonb,
    p_limits jsonb,
    p_key_id text,
    p_nonce bytea,
    p_ciphertext bytea,
    p_token_expires_ts timestamptz,
    p_action_limit integer,
    -- The service's load shedding refuses this call unless it re-attaches, replays or conflicts.
    p_shed boolean,
    -- Count under the Tool's exclusive lock whatever the limits (the retry after
    -- 'workflow_admission_near_limit').
    p_exclusive boolean,
    -- One of several admissions of this Tool in one transaction (workflow_admit_invoke_batch):
    -- never takes the Tool's lock exclusively (near a limit it answers near_limit instead, so
    -- the caller repeats it alone), since the transaction holds it shared for its other calls.
    p_batched boolean,
    -- This process's executor with a slot kept free for the run's first task (NULL: none):
    -- the task is inserted claimed by it when no ready task waits (workflow_enqueue_run).
    p_worker_id text,
    p_lease_ms integer,
    p_overrun_ms integer,
    -- The parts of the run its caller may see (runtime/invocation/disclosure.py; 0090).
    p_disclosure_ceiling text[] DEFAULT NULL
) RETURNS TABLE (
    outcome text,
    process_id uuid,
    state text,
    effect_state text,
    deadline_ts timestamptz,
    result jsonb,
    error jsonb,
    token_expires_ts timestamptz,
    detail text,
    -- The first task's lease when it was inserted claimed by p_worker_id (else NULL).
    lease_id uuid,
    fencing_token bigint,
    lease_expires_ts timestamptz
)
LANGUAGE plpgsql AS $$
DECLARE
    version_status text;
    head_binding uuid;
    missing_task text;
    claim record;
    counted_at timestamptz;
    window_start timestamptz;
    this_second bigint;
    first_second bigint;
    live bigint;
    live_for_user bigint;
    next_live_deadline timestamptz;
    recent bigint;
    recent_for_user bigint;
    held record;
    new_task_id uuid;
    tool_lock bigint;
    in_flight_bound bigint;
    shared_lock boolean;
    this_shard smallint;
    task_state text;
    task_lease uuid;
    task_token bigint;
    task_lease_expires timestamptz;
BEGIN
    -- The retry of a call whose first try committed (its answer was lost on the way): the
    -- process id is this call's own, so the answer is that run, whatever became of it or of
    -- the head since. Without this a run that already ended outside its replay window (or a
    -- head moved meanwhile) would have the retry admit the same run again, or refuse it.
    RETURN QUERY
    SELECT CASE WHEN p.state IN ('ACCEPTED', 'RUNNING', 'WAITING') THEN 'attach' ELSE 'replay'
           END, p.process_id, p.state, p.effect_state, p.deadline_ts, p.result, p.error,
           c.token_expires_ts, NULL::text, NULL::uuid, NULL::bigint, NULL::timestamptz
    FROM workflow_run_state p
    LEFT JOIN workflow_run_credential c ON c.host_id = p.host_id AND c.process_id = p.process_id
    WHERE p.host_id = p_host_id AND p.process_id = p_process_id;
    IF FOUND THEN
        RETURN;
    END IF;

    IF p_shed THEN
        -- Seed 000: an active key attaches, replays or conflicts before any capacity check.
        -- Any other call of an overloaded class is refused here, with nothing locked or
        -- written (a refusal must cost a small fraction of an admission).
        SELECT p.state, i.result_replay_until INTO held
        FROM workflow_idempotency_t i
        LEFT JOIN workflow_run_state p ON p.host_id = i.host_id AND p.process_id = i.process_id
        WHERE i.host_id = p_host_id AND i.scope_digest = p_scope_digest;
        IF NOT FOUND OR NOT (held.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
                             OR held.result_replay_until > clock_timestamp()) THEN
            RETURN QUERY SELECT 'shed'::text, NULL::uuid, NULL::text, NULL::text,
                NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text,
                NULL::uuid, NULL::bigint, NULL::timestamptz;
            RETURN;
        END IF;
    END IF;

    SELECT v.status INTO version_status
    FROM wf_definition_version_t v
    WHERE v.host_id = p_host_id AND v.wf_def_id = p_wf_def_id AND v.version = p_workflow_version
    FOR SHARE;
    SELECT h.active_binding_id INTO head_binding
    FROM workflow_tool_publication_t h
    WHERE h.host_id = p_host_id AND h.tool_id = p_tool_id
    FOR SHARE;
    -- Locked in that order, judged head first: a Tool without this active revision reads as
    -- such (the caller re-reads the head) even when its version was retired as well.
    IF head_binding IS DISTINCT FROM p_binding_id THEN
        RETURN QUERY SELECT 'stale'::text, NULL::uuid, NULL::text, NULL::text,
            NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text,
            NULL::uuid, NULL::bigint, NULL::timestamptz;
        RETURN;
    END IF;
    IF version_status IS DISTINCT FROM 'active' THEN
        RETURN QUERY SELECT 'retired'::text, NULL::uuid, NULL::text, NULL::text,
            NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text,
            NULL::uuid, NULL::bigint, NULL::timestamptz;
        RETURN;
    END IF;

    IF p_check_evidence THEN
        SELECT t.doc->>'taskName' INTO missing_task
        FROM workflow_tool_binding_t r
        CROSS JOIN LATERAL jsonb_array_elements(r.write_tasks) AS t(doc)
        WHERE r.host_id = p_host_id AND r.binding_id = p_binding_id
          AND NOT EXISTS (
              SELECT 1
              FROM workflow_tool_approval_evidence_t e
              WHERE e.host_id = r.host_id AND e.binding_id = r.binding_id
                AND e.task_name = t.doc->>'taskName'
                AND e.evidence_digest = t.doc->>'approvalEvidenceDigest'
          )
        ORDER BY 1
        LIMIT 1;
        IF missing_task IS NOT NULL THEN
            RETURN QUERY SELECT 'missing_evidence'::text, NULL::uuid, NULL::text, NULL::text,
                NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, missing_task,
                NULL::uuid, NULL::bigint, NULL::timestamptz;
            RETURN;
        END IF;
    END IF;

    -- Steps 5 and 6, shared with workflow_start (workflow_admit_claimed_run): the claim, the
    -- refusal of a new run while shedding, the run, its spec and its authority.
    SELECT a.outcome, a.process_id, a.task_id INTO claim
    FROM workflow_admit_claimed_run(
        p_host_id, 'invoke', p_scope_digest, p_key_kind, p_process_id, p_principal_subject,
        p_input_digest, p_definition_digest, p_result_replay_ms, p_deadline_ts, p_shed,
        p_wf_def_id, p_workflow_version, NULL, p_binding_id, p_user_id, p_execution_class,
        p_cancellation_policy, p_attempts, p_nested_calls, p_request_bytes, p_intermediate_bytes,
        p_result_bytes, p_cost_units, p_task_kind, p_payload, p_limits, p_key_id, p_nonce,
        p_ciphertext, p_token_expires_ts, p_action_limit,
        -- No NOTIFY inside: the service announces the task once this statement committed (a
        -- notifying commit holds the notification queue's lock, and with it the Tool's lock,
        -- through its WAL flush).
        false, p_worker_id, p_lease_ms, p_overrun_ms
    ) AS a;
    IF claim.outcome <> 'accepted' THEN
        -- Re-attach and replay never count as starts; conflict names the run holding the key.
        RETURN QUERY
        SELECT claim.outcome, claim.process_id, p.state, p.effect_state, p.deadline_ts, p.result,
               p.error, c.token_expires_ts, NULL::text, NULL::uuid, NULL::bigint,
               NULL::timestamptz
        FROM (SELECT 1) AS one
        LEFT JOIN workflow_run_state p
               ON p.host_id = p_host_id AND p.process_id = claim.process_id
        LEFT JOIN workflow_run_credential c
               ON c.host_id = p.host_id AND c.process_id = p.process_id;
        RETURN;
    END IF;
    new_task_id := claim.task_id;

    -- The Tool's admission lock, shared while every limit is far away, exclusive near one.
    -- Admissions in progress at any instant are at most workflow_admission_batch_max() per
    -- database connection (one transaction admits at most that many), so a call whose counts
    -- stay more than that many times max_connections under every limit cannot overspend it
    -- whatever the others do: those admissions share the lock and never wait on each other.
    -- Near a limit the count must be exact: the exclusive lock waits until every shared
    -- holder has committed (so it sees them all) and keeps the next ones out until it has.
    tool_lock := hashtextextended('workflow-tool-admission:' || p_host_id || ':' || p_tool_id, 0);
    in_flight_bound := current_setting('max_connections')::bigint * workflow_admission_batch_max();
    shared_lock := NOT p_exclusive AND least(
        p_maximum_concurrent_runs, p_maximum_concurrent_runs_per_user, p_starts_per_minute,
        p_starts_per_minute_per_user
    ) > in_flight_bound;
    IF p_batched AND NOT shared_lock THEN
        -- Raised before the lock: the batch's subtransaction for this call rolls back whole.
        RAISE EXCEPTION 'workflow_admission_near_limit';
    END IF;
    IF shared_lock THEN
        PERFORM pg_advisory_xact_lock_shared(tool_lock);
    ELSE
        PERFORM pg_advisory_xact_lock(tool_lock);
    END IF;
    -- After the lock each statement's snapshot sees every admission that released it.
    -- clock_timestamp(), not now(): the lock may have been waited on. The start is recorded at
    -- this same instant (the owner record and its bucket), so starts are checked in the order
    -- of their times and no sliding window can hold more than the limit.
    counted_at := clock_timestamp();
    window_start := counted_at - interval '1 minute';
    -- Starts are counted in ten-second buckets (the column keeps its name: a bucket is named
    -- by its first second).
    this_second := floor(extract(epoch FROM counted_at) / 10)::bigint * 10;
    first_second := floor(extract(epoch FROM window_start) / 10)::bigint * 10;

    -- Live runs from the counters (this call's run is counted in only once admitted, below).
    live := workflow_tool_live_count(p_host_id, p_tool_id, false, '');
    live_for_user := workflow_tool_live_count(p_host_id, p_tool_id, true, p_end_user_subject);

    -- Starts in the window, from the buckets it touches: exact but for the window's first
    -- bucket, which may hold starts older than a minute (so the sum is an upper bound).
    recent := workflow_tool_starts_since(p_host_id, p_tool_id, false, '', first_second);
    recent_for_user := workflow_tool_starts_since(
        p_host_id, p_tool_id, true, p_end_user_subject, first_second
    );
    -- Near a limit only: count that first bucket exactly from the owner records.
    IF recent >= p_starts_per_minute THEN
        recent := recent
            - workflow_tool_starts_since(
                p_host_id, p_tool_id, false, '', first_second, first_second + 9)
            + (SELECT count(*) FROM workflow_invocation_t r
               WHERE r.host_id = p_host_id AND r.tool_id = p_tool_id
                 AND r.created_ts > window_start
                 AND r.created_ts < to_timestamp(first_second + 10));
    END IF;
    IF recent_for_user >= p_starts_per_minute_per_user THEN
        recent_for_user := recent_for_user
            - workflow_tool_starts_since(
                p_host_id, p_tool_id, true, p_end_user_subject, first_second, first_second + 9)
            + (SELECT count(*) FROM workflow_invocation_t r
               WHERE r.host_id = p_host_id AND r.tool_id = p_tool_id
                 AND r.end_user_subject = p_end_user_subject
                 AND r.created_ts > window_start
                 AND r.created_ts < to_timestamp(first_second + 10));
    END IF;

    IF shared_lock AND NOT (
        live + in_flight_bound < p_maximum_concurrent_runs
        AND live_for_user + in_flight_bound < p_maximum_concurrent_runs_per_user
        AND recent + in_flight_bound < p_starts_per_minute
        AND recent_for_user + in_flight_bound < p_starts_per_minute_per_user
    ) THEN
        -- Closer to a limit than the shared lock allows: the caller repeats the statement
        -- with p_exclusive (a shared lock cannot be raised to an exclusive one safely).
        RAISE EXCEPTION 'workflow_admission_near_limit';
    END IF;
    IF live >= p_maximum_concurrent_runs
       OR live_for_user >= p_maximum_concurrent_runs_per_user
       OR recent >= p_starts_per_minute
       OR recent_for_user >= p_starts_per_minute_per_user THEN
        -- Only a refusal needs the earliest deadline of the live runs (its retryAfterMs).
        SELECT min(p.deadline_ts) INTO next_live_deadline
        FROM workflow_run_state p
        CROSS JOIN LATERAL (
            SELECT 1
            FROM workflow_invocation_t o
            WHERE o.host_id = p.host_id AND o.process_id = p.process_id
              AND o.tool_id = p_tool_id
            LIMIT 1
        ) AS i
        WHERE p.host_id = p_host_id AND p.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
          AND p.process_id <> p_process_id;
        RAISE EXCEPTION 'workflow_admission_limit_reached' USING DETAIL = jsonb_build_object(
            'live', live,
            'live_for_user', live_for_user,
            'next_live_deadline', next_live_deadline,
            'recent', recent,
            'recent_for_user', recent_for_user,
            'oldest_recent', (
                SELECT min(r.created_ts) FROM workflow_invocation_t r
                WHERE r.host_id = p_host_id AND r.tool_id = p_tool_id
                  AND r.created_ts > window_start),
            'oldest_recent_for_user', (
                SELECT min(r.created_ts) FROM workflow_invocation_t r
                WHERE r.host_id = p_host_id AND r.tool_id = p_tool_id
                  AND r.end_user_subject = p_end_user_subject
                  AND r.created_ts > window_start),
            'counted_at', counted_at
        )::text;
    END IF;

    PERFORM workflow_record_invocation(
        p_host_id, p_process_id, 'invoke', p_user_id, p_end_user_subject, p_principal_subject,
        p_tool_id, p_binding_id, p_wf_def_id, p_workflow_version, p_definition_digest, NULL,
        counted_at, p_disclosure_ceiling
    );
    PERFORM workflow_tool_live_add(p_host_id, p_tool_id, p_end_user_subject, 1);
    -- A shard of the second no other transaction in progress writes (the one the live counts
    -- above took): admissions never queue on each other's row lock (held to the end of the
    -- commit's WAL flush).
    this_shard := workflow_counter_shard();
    INSERT INTO workflow_tool_start_count_t AS b (
        host_id, tool_id, per_user, end_user_subject, second, shard, starts
    ) VALUES
        (p_host_id, p_tool_id, false, '', this_second, this_shard, 1),
        (p_host_id, p_tool_id, true, p_end_user_subject, this_second, this_shard, 1)
    ON CONFLICT ON CONSTRAINT workflow_tool_start_count_pk
        DO UPDATE SET starts = b.starts + 1;
    -- Seconds that left every window: this Tool's and this user's (the retention job sweeps
    -- the buckets of users who stopped calling).
    -- Rows another admission is deleting right now are left to it (SKIP LOCKED): waiting for
    -- its commit would only find them gone.
    DELETE FROM workflow_tool_start_count_t b
    WHERE b.ctid IN (
        SELECT o.ctid FROM workflow_tool_start_count_t o
        WHERE o.host_id = p_host_id AND o.tool_id = p_tool_id
          AND ((NOT o.per_user AND o.end_user_subject = '')
               OR (o.per_user AND o.end_user_subject = p_end_user_subject))
          AND o.second < first_second
        FOR UPDATE SKIP LOCKED
    );

    -- In the first second of a bucket, the buckets that closed and are still in the window are
    -- folded into one row each (shard -1): the sums above then read one row per closed bucket
    -- instead of one per shard that wrote it. A start still committing into a closed bucket
    -- keeps its own shard row (the sums count both), and rows another admission is folding
    -- are left to it.
    IF counted_at < to_timestamp(this_second + 1) THEN
        WITH folded AS (
            DELETE FROM workflow_tool_start_count_t b
            WHERE b.ctid IN (
                SELECT o.ctid FROM workflow_tool_start_count_t o
                WHERE o.host_id = p_host_id AND o.tool_id = p_tool_id
                  AND ((NOT o.per_user AND o.end_user_subject = '')
                       OR (o.per_user AND o.end_user_subject = p_end_user_subject))
                  AND o.second >= first_second AND o.second < this_second AND o.shard >= 0
                FOR UPDATE SKIP LOCKED
            )
            RETURNING b.per_user, b.end_user_subject, b.second, b.starts
        )
        INSERT INTO workflow_tool_start_count_t AS b (
            host_id, tool_id, per_user, end_user_subject, second, shard, starts
        )
        SELECT p_host_id, p_tool_id, f.per_user, f.end_user_subject, f.second, -1, sum(f.starts)
        FROM folded f
        GROUP BY f.per_user, f.end_user_subject, f.second
        ON CONFLICT ON CONSTRAINT workflow_tool_start_count_pk
            DO UPDATE SET starts = b.starts + EXCLUDED.starts;
    END IF;

    -- detail: the first task, for the service to announce, or, claimed by p_worker_id, its
    -- lease for that executor to run it under.
    IF p_worker_id IS NOT NULL THEN
        SELECT r.state, r.lease_id, r.fencing_token, r.lease_expires_ts
        INTO task_state, task_lease, task_token, task_lease_expires
        FROM workflow_enqueued_task(p_host_id, new_task_id) AS r;
    END IF;
    RETURN QUERY SELECT 'accepted'::text, p_process_id,
        CASE WHEN task_state = 'running' THEN 'RUNNING' ELSE 'ACCEPTED' END, 'none'::text,
        p_deadline_ts, NULL::jsonb, NULL::jsonb, p_token_expires_ts, new_task_id::text,
        task_lease, task_token, task_lease_expires;
END
$$;

-- The previous release's signature: the same admission, never batched.
CREATE OR REPLACE FUNCTION workflow_admit_invoke(
    p_host_id uuid,
    p_tool_id uuid,
    p_binding_id uuid,
    p_wf_def_id uuid,
    p_workflow_version text,
    p_check_evidence boolean,
    p_scope_digest text,
    p_key_kind text,
    p_process_id uuid,
    p_principal_subject text,
    p_input_digest text,
    p_definition_digest text,
    p_result_replay_ms bigint,
    p_deadline_ts timestamptz,
    p_user_id text,
    p_end_user_subject text,
    p_maximum_concurrent_runs bigint,
    p_maximum_concurrent_runs_per_user bigint,
    p_starts_per_minute bigint,
    p_starts_per_minute_per_user bigint,
    p_execution_class text,
    p_cancellation_policy text,
    p_attempts integer,
    p_nested_calls integer,
    p_request_bytes bigint,
    p_intermediate_bytes bigint,
    p_result_bytes bigint,
    p_cost_units bigint,
    p_task_kind text,
    p_payload jsonb,
    p_limits jsonb,
    p_key_id text,
    p_nonce bytea,
    p_ciphertext bytea,
    p_token_expires_ts timestamptz,
    p_action_limit integer,
    p_shed boolean,
    p_exclusive boolean,
    p_worker_id text,
    p_lease_ms integer,
    p_overrun_ms integer
) RETURNS TABLE (
    outcome text,
    process_id uuid,
    state text,
    effect_state text,
    deadline_ts timestamptz,
    result jsonb,
    error jsonb,
    token_expires_ts timestamptz,
    detail text,
    lease_id uuid,
    fencing_token bigint,
    lease_expires_ts timestamptz
)
LANGUAGE sql AS $$
    SELECT * FROM workflow_admit_invoke_v2(
        p_host_id, p_tool_id, p_binding_id, p_wf_def_id, p_workflow_version, p_check_evidence,
        p_scope_digest, p_key_kind, p_process_id, p_principal_subject, p_input_digest,
        p_definition_digest, p_result_replay_ms, p_deadline_ts, p_user_id, p_end_user_subject,
        p_maximum_concurrent_runs, p_maximum_concurrent_runs_per_user, p_starts_per_minute,
        p_starts_per_minute_per_user, p_execution_class, p_cancellation_policy, p_attempts,
        p_nested_calls, p_request_bytes, p_intermediate_bytes, p_result_bytes, p_cost_units,
        p_task_kind, p_payload, p_limits, p_key_id, p_nonce, p_ciphertext, p_token_expires_ts,
        p_action_limit, p_shed, p_exclusive, false, p_worker_id, p_lease_ms, p_overrun_ms
    )
$$;

-- p_calls: a JSON array of workflow_admit_invoke_v2's parameters by name (without p_; bytea
-- as base64). One row per call, ordinal its position in the array: the admission's row, or
-- (refusal set, the rest NULL) the exception it raised: workflow_capacity_shed,
-- workflow_admission_near_limit or workflow_admission_limit_reached (refusal_detail: the
-- counts). Calls go in the order of their idempotency scopes, so two batches that share
-- scopes claim them in one order and cannot deadlock on them. The service batches only calls
-- of one Tool: they lock the same version row and head, which the transaction then holds.
CREATE OR REPLACE FUNCTION workflow_admit_invoke_batch(p_calls jsonb)
RETURNS TABLE (
    ordinal integer,
    outcome text,
    process_id uuid,
    state text,
    effect_state text,
    deadline_ts timestamptz,
    result jsonb,
    error jsonb,
    token_expires_ts timestamptz,
    detail text,
    lease_id uuid,
    fencing_token bigint,
    lease_expires_ts timestamptz,
    refusal text,
    refusal_detail text
)
LANGUAGE plpgsql AS $$
DECLARE
    c jsonb;
    n integer;
    refused text;
    counts text;
BEGIN
    IF jsonb_array_length(p_calls) > workflow_admission_batch_max() THEN
        RAISE EXCEPTION 'workflow_admission_batch_too_large';
    END IF;
    FOR c, n IN
        SELECT e.value, e.ordinality::integer
        FROM jsonb_array_elements(p_calls) WITH ORDINALITY AS e
        ORDER BY e.value->>'scope_digest', e.ordinality
    LOOP
        BEGIN
            RETURN QUERY SELECT n, a.*, NULL::text, NULL::text
            FROM workflow_admit_invoke_v2(
                (c->>'host_id')::uuid, (c->>'tool_id')::uuid, (c->>'binding_id')::uuid,
                (c->>'wf_def_id')::uuid, (c->>'workflow_version')::text,
                (c->>'check_evidence')::boolean, (c->>'scope_digest')::text,
                (c->>'key_kind')::text, (c->>'process_id')::uuid,
                (c->>'principal_subject')::text, (c->>'input_digest')::text,
                (c->>'definition_digest')::text, (c->>'result_replay_ms')::bigint,
                (c->>'deadline_ts')::timestamptz, (c->>'user_id')::text,
                (c->>'end_user_subject')::text, (c->>'maximum_concurrent_runs')::bigint,
                (c->>'maximum_concurrent_runs_per_user')::bigint,
                (c->>'starts_per_minute')::bigint, (c->>'starts_per_minute_per_user')::bigint,
                (c->>'execution_class')::text, (c->>'cancellation_policy')::text,
                (c->>'attempts')::integer, (c->>'nested_calls')::integer,
                (c->>'request_bytes')::bigint, (c->>'intermediate_bytes')::bigint,
                (c->>'result_bytes')::bigint, (c->>'cost_units')::bigint,
                (c->>'task_kind')::text, c->'payload', c->'limits', (c->>'key_id')::text,
                decode(c->>'nonce', 'base64'), decode(c->>'ciphertext', 'base64'),
                (c->>'token_expires_ts')::timestamptz, (c->>'action_limit')::integer,
                (c->>'shed')::boolean, false, true, (c->>'worker_id')::text,
                (c->>'lease_ms')::integer, (c->>'overrun_ms')::integer,
                CASE WHEN jsonb_typeof(c->'disclosure_ceiling') = 'array' THEN
                    ARRAY(SELECT jsonb_array_elements_text(c->'disclosure_ceiling'))
                END
            ) AS a;
        EXCEPTION WHEN raise_exception THEN
            GET STACKED DIAGNOSTICS refused = MESSAGE_TEXT, counts = PG_EXCEPTION_DETAIL;
            IF refused NOT IN ('workflow_capacity_shed', 'workflow_admission_near_limit',
                               'workflow_admission_limit_reached') THEN
                RAISE;
            END IF;
            RETURN QUERY SELECT n, NULL::text, NULL::uuid, NULL::text, NULL::text,
                NULL::timestamptz, NULL::jsonb, NULL::jsonb, NULL::timestamptz, NULL::text,
                NULL::uuid, NULL::bigint, NULL::timestamptz, refused, nullif(counts, '');
        END;
    END LOOP;
END
$$;
