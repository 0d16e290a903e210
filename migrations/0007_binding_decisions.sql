-- The append-only decision history of binding revisions: every status change appends a row.
-- The runtime role may only INSERT and SELECT; the history is never rewritten.

CREATE TABLE workflow_tool_binding_decision_t (
    host_id uuid NOT NULL,
    decision_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    binding_id uuid NOT NULL,
    action text NOT NULL,
    actor varchar(126) NOT NULL,
    comment varchar(2000),
    approval_digest text NOT NULL,
    decided_ts timestamptz NOT NULL DEFAULT clock_timestamp(),
    operation_id uuid,
    CONSTRAINT workflow_tool_binding_decision_pk PRIMARY KEY (host_id, decision_id),
    CONSTRAINT workflow_tool_binding_decision_binding_fk FOREIGN KEY (host_id, binding_id)
        REFERENCES workflow_tool_binding_t (host_id, binding_id),
    CONSTRAINT workflow_tool_binding_decision_action_check CHECK (action IN (
        'approve', 'reject', 'revoke', 'retire', 'supersede', 'withdraw', 'carryOver',
        'selfApprove')),
    CONSTRAINT workflow_tool_binding_decision_digest_check
        CHECK (approval_digest ~ '^sha256:[0-9a-f]{64}$')
);

-- workflow_binding_get reads a Tool's history newest first.
CREATE INDEX workflow_tool_binding_decision_tool_idx
    ON workflow_tool_binding_decision_t (host_id, tool_id, decided_ts DESC);

REVOKE UPDATE, DELETE, TRUNCATE ON workflow_tool_binding_decision_t FROM workflow_runtime;
