-- Invocation admission (runtime/invocation): who started each run and through what, the
-- idempotency reservations of workflow_invoke and workflow_start, and the claim function.

-- One row per run admitted by workflow_invoke or workflow_start: its owner (lifecycle tools
-- are scoped to the same host and user), what it runs, and the admission-limit counters
-- (starts per Tool in a sliding minute, live runs per Tool and per end user).
CREATE TABLE workflow_invocation_t (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    operation text NOT NULL,
    user_id varchar(126) NOT NULL,
    end_user_subject varchar(256) NOT NULL,
    principal_subject varchar(256) NOT NULL,
    tool_id uuid,
    binding_id uuid,
    wf_def_id uuid NOT NULL,
    workflow_version varchar(64),
    definition_digest text NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT workflow_invocation_pk PRIMARY KEY (host_id, process_id),
    CONSTRAINT workflow_invocation_process_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_process (host_id, process_id) ON DELETE CASCADE,
    CONSTRAINT workflow_invocation_operation_check CHECK (operation IN ('invoke', 'start')),
    CONSTRAINT workflow_invocation_tool_check CHECK ((operation = 'invoke') = (tool_id IS NOT NULL))
);

-- Admission limits count a Tool's starts by time and its live runs, across all revisions.
CREATE INDEX workflow_invocation_tool_idx
    ON workflow_invocation_t (host_id, tool_id, created_ts) WHERE tool_id IS NOT NULL;

REVOKE UPDATE, DELETE, TRUNCATE ON workflow_invocation_t FROM workflow_runtime;

-- The current idempotency reservation per scope (one unique key: host + scope digest, which
-- covers the operation, Tool or definition, end-user subject and the final key). Input and
-- definition digests and the client principal are stored beside it, so a reuse with other
-- values is detected as a conflict. A new generation replaces the process once the window of
-- a terminal run has passed; the runs themselves stay in workflow_invocation_t.
CREATE TABLE workflow_idempotency_t (
    host_id uuid NOT NULL,
    scope_digest text NOT NULL,
    operation text NOT NULL,
    key_kind text NOT NULL,
    generation integer NOT NULL DEFAULT 1,
    process_id uuid NOT NULL,
    principal_subject varchar(256) NOT NULL,
    input_digest text NOT NULL,
    definition_digest text NOT NULL,
    -- NULL: the result replays for as long as the reservation exists (workflow_start).
    result_replay_ms bigint,
    in_flight_until timestamptz NOT NULL,
    result_replay_until timestamptz NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    updated_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_idempotency_pk PRIMARY KEY (host_id, scope_digest),
    CONSTRAINT workflow_idempotency_operation_check CHECK (operation IN ('invoke', 'start')),
    CONSTRAINT workflow_idempotency_kind_check
        CHECK (key_kind IN ('derived', 'explicit', 'business', 'start')),
    CONSTRAINT workflow_idempotency_replay_check
        CHECK (result_replay_ms IS NULL OR result_replay_ms >= 0)
);

CREATE INDEX workflow_idempotency_process_idx ON workflow_idempotency_t (host_id, process_id);

REVOKE DELETE, TRUNCATE ON workflow_idempotency_t FROM workflow_runtime;

-- The one atomic insert-or-judge path of an idempotency reservation. Outcomes:
-- accepted (a new reservation or a new generation: start p_process_id), attach (the same
-- call while its run is live), replay (the same call of a terminal run inside its window),
-- conflict (another input, definition or client under a key still in use).
-- A live run is never re-accepted, whatever its window says.
CREATE FUNCTION workflow_claim_idempotency_v2(
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
    INSERT INTO workflow_idempotency_t AS i (
        host_id, scope_digest, operation, key_kind, process_id, principal_subject,
        input_digest, definition_digest, result_replay_ms, in_flight_until, result_replay_until
    ) VALUES (
        p_host_id, p_scope_digest, p_operation, p_key_kind, p_process_id, p_principal_subject,
        p_input_digest, p_definition_digest, p_result_replay_ms, p_deadline_ts, p_deadline_ts
    )
    ON CONFLICT ON CONSTRAINT workflow_idempotency_pk DO NOTHING;
    IF FOUND THEN
        RETURN QUERY SELECT 'accepted'::text, p_process_id;
        RETURN;
    END IF;

    SELECT * INTO current_row FROM workflow_idempotency_t i
    WHERE i.host_id = p_host_id AND i.scope_digest = p_scope_digest
    FOR UPDATE;
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

-- When a run ends its replay window starts: terminal time plus the pinned revision's
-- resultReplayMs, except a FAILED or CANCELLED run without effects, which may be retried at
-- once. Named to fire before the credential trigger so both lock rows in one order.
CREATE FUNCTION workflow_idempotency_window_end() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE workflow_idempotency_t i
    SET in_flight_until = NEW.finished_ts,
        result_replay_until = CASE
            WHEN i.result_replay_ms IS NULL THEN 'infinity'::timestamptz
            WHEN NEW.state IN ('FAILED', 'CANCELLED') AND NEW.effect_state = 'none'
                THEN NEW.finished_ts
            ELSE NEW.finished_ts + i.result_replay_ms * interval '1 millisecond'
        END,
        updated_ts = now()
    WHERE i.host_id = NEW.host_id AND i.process_id = NEW.process_id;
    RETURN NEW;
END
$$;

CREATE TRIGGER workflow_process_end_idempotency_window
    AFTER UPDATE OF state ON workflow_process
    FOR EACH ROW
    WHEN (NEW.state IN ('COMPLETED', 'FAILED', 'CANCELLED') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION workflow_idempotency_window_end();
