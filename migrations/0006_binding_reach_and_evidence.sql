-- What a binding revision may reach (nested Tool dependencies, resolved endpoint targets) and
-- the task approval evidence written when it becomes active: written once, never changed.

CREATE TABLE workflow_tool_dependency_t (
    host_id uuid NOT NULL,
    binding_id uuid NOT NULL,
    authorization_tool_name varchar(256) NOT NULL,
    nested_tool_id uuid NOT NULL,
    nested_tool_version varchar(64) NOT NULL,
    contract_digest text NOT NULL,
    dispatch_target varchar(256) NOT NULL,
    tool_annotations jsonb,
    CONSTRAINT workflow_tool_dependency_pk
        PRIMARY KEY (host_id, binding_id, authorization_tool_name, nested_tool_id,
                     nested_tool_version),
    CONSTRAINT workflow_tool_dependency_binding_fk FOREIGN KEY (host_id, binding_id)
        REFERENCES workflow_tool_binding_t (host_id, binding_id),
    CONSTRAINT workflow_tool_dependency_digest_check
        CHECK (contract_digest ~ '^sha256:[0-9a-f]{64}$')
);

-- The reverse index: which revisions depend on a nested Tool.
CREATE INDEX workflow_tool_dependency_nested_idx
    ON workflow_tool_dependency_t (host_id, nested_tool_id);

CREATE TABLE workflow_endpoint_target_t (
    host_id uuid NOT NULL,
    binding_id uuid NOT NULL,
    endpoint_ref varchar(256) NOT NULL,
    endpoint_uri varchar(2048) NOT NULL,
    allowed_methods text[] NOT NULL,
    environments text[] NOT NULL,
    authorization_policy_digest text NOT NULL,
    CONSTRAINT workflow_endpoint_target_pk PRIMARY KEY (host_id, binding_id, endpoint_ref),
    CONSTRAINT workflow_endpoint_target_binding_fk FOREIGN KEY (host_id, binding_id)
        REFERENCES workflow_tool_binding_t (host_id, binding_id),
    CONSTRAINT workflow_endpoint_target_digest_check
        CHECK (authorization_policy_digest ~ '^sha256:[0-9a-f]{64}$')
);

CREATE TABLE workflow_tool_approval_evidence_t (
    host_id uuid NOT NULL,
    binding_id uuid NOT NULL,
    task_name varchar(512) NOT NULL,
    evidence_digest text NOT NULL,
    task_kind text NOT NULL,
    task_target varchar(256) NOT NULL,
    approved_by varchar(126) NOT NULL,
    approved_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_tool_approval_evidence_pk PRIMARY KEY (host_id, binding_id, task_name),
    CONSTRAINT workflow_tool_approval_evidence_binding_fk FOREIGN KEY (host_id, binding_id)
        REFERENCES workflow_tool_binding_t (host_id, binding_id),
    CONSTRAINT workflow_tool_approval_evidence_digest_check
        CHECK (evidence_digest ~ '^sha256:[0-9a-f]{64}$'),
    CONSTRAINT workflow_tool_approval_evidence_kind_check CHECK (task_kind IN ('http', 'mcp'))
);

REVOKE UPDATE, DELETE, TRUNCATE ON workflow_tool_dependency_t FROM workflow_runtime;
REVOKE UPDATE, DELETE, TRUNCATE ON workflow_endpoint_target_t FROM workflow_runtime;
REVOKE UPDATE, DELETE, TRUNCATE ON workflow_tool_approval_evidence_t FROM workflow_runtime;
