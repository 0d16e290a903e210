-- The retention sweep of invocation state (a maintenance job beside the receipt and credential
-- sweeps): idempotency reservations whose run is over and whose window has passed, and finished
-- runs past the retention window that no reservation can still replay.
--
-- The runtime role keeps no general DELETE on the reservations (0020 revokes it): the sweep is
-- this one SECURITY DEFINER function, which can only remove what its rules call expired. A run's
-- rows (tasks, steps, spec, credential, invocation record, permits, authority) go with it by
-- their ON DELETE CASCADE keys.

CREATE INDEX workflow_process_finished_idx
    ON workflow_process (finished_ts) WHERE finished_ts IS NOT NULL;

CREATE INDEX workflow_idempotency_replay_until_idx
    ON workflow_idempotency_t (result_replay_until);

CREATE FUNCTION workflow_sweep_retention(p_retention interval, p_limit integer)
RETURNS TABLE (reservations bigint, runs bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    cutoff timestamptz := clock_timestamp() - p_retention;
    swept_reservations bigint;
    swept_runs bigint;
BEGIN
    -- A reservation is expired once its run is no longer live (a live run is never re-accepted,
    -- so its reservation must stay) and its replay window has passed; a window without end
    -- (workflow_start) ends with the retention of its run.
    WITH expired AS (
        SELECT i.host_id, i.scope_digest
        FROM workflow_idempotency_t i
        LEFT JOIN workflow_process p ON p.host_id = i.host_id AND p.process_id = i.process_id
        WHERE (p.process_id IS NULL OR p.finished_ts IS NOT NULL)
          AND (i.result_replay_until < clock_timestamp()
               OR p.process_id IS NULL
               OR (i.result_replay_until = 'infinity' AND p.finished_ts < cutoff))
        ORDER BY i.result_replay_until
        LIMIT p_limit
        FOR UPDATE OF i SKIP LOCKED
    )
    DELETE FROM workflow_idempotency_t i
    USING expired e
    WHERE i.host_id = e.host_id AND i.scope_digest = e.scope_digest;
    GET DIAGNOSTICS swept_reservations = ROW_COUNT;

    -- A finished run past the cutoff goes unless a reservation still names it (inside its
    -- replay window: the run's stored result is what a retry gets back).
    WITH old_runs AS (
        SELECT p.host_id, p.process_id
        FROM workflow_process p
        WHERE p.finished_ts < cutoff
          AND NOT EXISTS (
              SELECT 1 FROM workflow_idempotency_t i
              WHERE i.host_id = p.host_id AND i.process_id = p.process_id
          )
        ORDER BY p.finished_ts
        LIMIT p_limit
        FOR UPDATE OF p SKIP LOCKED
    )
    DELETE FROM workflow_process p
    USING old_runs o
    WHERE p.host_id = o.host_id AND p.process_id = o.process_id;
    GET DIAGNOSTICS swept_runs = ROW_COUNT;

    RETURN QUERY SELECT swept_reservations, swept_runs;
END
$$;

REVOKE ALL ON FUNCTION workflow_sweep_retention(interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION workflow_sweep_retention(interval, integer) TO workflow_runtime;

-- The claim function, unchanged but for one case the sweep creates: a reservation removed
-- between the claim's insert attempt and its row lock is inserted again (before the sweep
-- existed, a conflicting row could not disappear).
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
