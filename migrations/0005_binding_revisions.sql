-- Tool binding revisions: every published binding is an immutable revision; only its approval
-- state moves. At most one active and one pending revision per (host, Tool).

CREATE TABLE workflow_tool_binding_t (
    host_id uuid NOT NULL,
    binding_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    source_binding_id uuid NOT NULL,
    tool_name varchar(128) NOT NULL,
    wf_def_id uuid NOT NULL,
    workflow_version varchar(64) NOT NULL,
    definition_digest text NOT NULL,
    schema_digest text NOT NULL,
    invocation_mode text NOT NULL,
    sync_wait_ms integer NOT NULL,
    total_deadline_ms integer NOT NULL,
    execution_class text NOT NULL,
    result_text_mode text NOT NULL,
    cancellation_policy text NOT NULL,
    idempotency_policy jsonb NOT NULL,
    delegation_policy jsonb NOT NULL,
    runtime_bounds jsonb NOT NULL,
    admission_limits jsonb NOT NULL,
    caller_policy jsonb NOT NULL,
    tool_annotations jsonb NOT NULL,
    input_schema jsonb,
    output_schema jsonb,
    -- The normalized binding exactly as published (what workflow_binding_get returns).
    binding jsonb NOT NULL,
    -- Write tasks of the pinned version, computed at publish (carry-over compares them).
    write_tasks jsonb NOT NULL,
    binding_digest text NOT NULL,
    approval_digest text NOT NULL,
    revision_status text NOT NULL,
    active boolean NOT NULL DEFAULT false,
    owner_user_id varchar(126) NOT NULL,
    owner_position_id varchar(126),
    requested_by varchar(126) NOT NULL,
    requested_ts timestamptz NOT NULL DEFAULT now(),
    approved_by varchar(126),
    approved_ts timestamptz,
    approval_basis_id uuid,
    carry_over_denied_reason varchar(1024),
    decided_by varchar(126),
    decided_ts timestamptz,
    publish_operation_id uuid NOT NULL,
    CONSTRAINT workflow_tool_binding_pk PRIMARY KEY (host_id, binding_id),
    CONSTRAINT workflow_tool_binding_version_fk FOREIGN KEY (host_id, wf_def_id, workflow_version)
        REFERENCES wf_definition_version_t (host_id, wf_def_id, version),
    CONSTRAINT workflow_tool_binding_status_check CHECK (revision_status IN (
        'pendingApproval', 'approved', 'rejected', 'revoked', 'superseded', 'retired',
        'withdrawn')),
    CONSTRAINT workflow_tool_binding_active_check CHECK (NOT active OR revision_status = 'approved'),
    CONSTRAINT workflow_tool_binding_sync_check CHECK (
        invocation_mode = 'sync' AND execution_class = 'interactive'),
    CONSTRAINT workflow_tool_binding_deadline_check CHECK (
        total_deadline_ms >= sync_wait_ms AND sync_wait_ms > 0 AND sync_wait_ms <= 20000
        AND total_deadline_ms <= 30000),
    CONSTRAINT workflow_tool_binding_cancellation_check CHECK (
        cancellation_policy IN ('before-effects-only', 'cooperative', 'disabled')),
    CONSTRAINT workflow_tool_binding_digest_check CHECK (
        binding_digest ~ '^sha256:[0-9a-f]{64}$' AND approval_digest ~ '^sha256:[0-9a-f]{64}$')
);

CREATE UNIQUE INDEX workflow_tool_binding_one_active_idx
    ON workflow_tool_binding_t (host_id, tool_id) WHERE active;
CREATE UNIQUE INDEX workflow_tool_binding_one_pending_idx
    ON workflow_tool_binding_t (host_id, tool_id) WHERE revision_status = 'pendingApproval';
-- Definition retire looks up the revisions pinning a version; owner lists go by definition.
CREATE INDEX workflow_tool_binding_version_idx
    ON workflow_tool_binding_t (host_id, wf_def_id, workflow_version);
CREATE INDEX workflow_tool_binding_requested_idx
    ON workflow_tool_binding_t (host_id, requested_ts DESC, binding_id DESC);

-- Every binding field is immutable; only the approval state moves, and the owner snapshot only
-- while the revision is pending (an ownership transfer moves pending revisions).
CREATE FUNCTION workflow_tool_binding_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'binding revisions are never deleted'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'workflow_tool_binding_immutable';
    END IF;
    IF (NEW.host_id, NEW.binding_id, NEW.tool_id, NEW.source_binding_id, NEW.tool_name,
        NEW.wf_def_id, NEW.workflow_version, NEW.definition_digest, NEW.schema_digest,
        NEW.invocation_mode, NEW.sync_wait_ms, NEW.total_deadline_ms, NEW.execution_class,
        NEW.result_text_mode, NEW.cancellation_policy, NEW.idempotency_policy,
        NEW.delegation_policy, NEW.runtime_bounds, NEW.admission_limits, NEW.caller_policy,
        NEW.tool_annotations, NEW.input_schema, NEW.output_schema, NEW.binding, NEW.write_tasks,
        NEW.binding_digest, NEW.approval_digest, NEW.requested_by, NEW.requested_ts,
        NEW.carry_over_denied_reason, NEW.publish_operation_id)
       IS DISTINCT FROM
       (OLD.host_id, OLD.binding_id, OLD.tool_id, OLD.source_binding_id, OLD.tool_name,
        OLD.wf_def_id, OLD.workflow_version, OLD.definition_digest, OLD.schema_digest,
        OLD.invocation_mode, OLD.sync_wait_ms, OLD.total_deadline_ms, OLD.execution_class,
        OLD.result_text_mode, OLD.cancellation_policy, OLD.idempotency_policy,
        OLD.delegation_policy, OLD.runtime_bounds, OLD.admission_limits, OLD.caller_policy,
        OLD.tool_annotations, OLD.input_schema, OLD.output_schema, OLD.binding, OLD.write_tasks,
        OLD.binding_digest, OLD.approval_digest, OLD.requested_by, OLD.requested_ts,
        OLD.carry_over_denied_reason, OLD.publish_operation_id) THEN
        RAISE EXCEPTION 'binding revisions are immutable'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'workflow_tool_binding_immutable';
    END IF;
    IF OLD.revision_status NOT IN ('pendingApproval', 'approved')
       AND NEW.revision_status IS DISTINCT FROM OLD.revision_status THEN
        RAISE EXCEPTION 'a % binding revision is terminal', OLD.revision_status
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'workflow_tool_binding_terminal';
    END IF;
    IF OLD.revision_status <> 'pendingApproval'
       AND (NEW.owner_user_id, NEW.owner_position_id)
           IS DISTINCT FROM (OLD.owner_user_id, OLD.owner_position_id) THEN
        RAISE EXCEPTION 'only a pending revision moves to a new owner'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'workflow_tool_binding_immutable';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER workflow_tool_binding_guard_trg
    BEFORE UPDATE OR DELETE ON workflow_tool_binding_t
    FOR EACH ROW EXECUTE FUNCTION workflow_tool_binding_guard();

REVOKE DELETE, TRUNCATE ON workflow_tool_binding_t FROM workflow_runtime;

-- The per-Tool publication head: every publication operation inserts it (ON CONFLICT DO
-- NOTHING) and locks it FOR UPDATE, so operations on one Tool serialize.
CREATE TABLE workflow_tool_publication_t (
    host_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    aggregate_version bigint NOT NULL DEFAULT 0,
    active_binding_id uuid,
    pending_binding_id uuid,
    created_ts timestamptz NOT NULL DEFAULT now(),
    updated_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_tool_publication_pk PRIMARY KEY (host_id, tool_id),
    CONSTRAINT workflow_tool_publication_version_check CHECK (aggregate_version >= 0),
    CONSTRAINT workflow_tool_publication_active_fk FOREIGN KEY (host_id, active_binding_id)
        REFERENCES workflow_tool_binding_t (host_id, binding_id),
    CONSTRAINT workflow_tool_publication_pending_fk FOREIGN KEY (host_id, pending_binding_id)
        REFERENCES workflow_tool_binding_t (host_id, binding_id)
);

REVOKE DELETE, TRUNCATE ON workflow_tool_publication_t FROM workflow_runtime;
