-- Issue 42: workflow_binding_rollback restores an earlier approved revision as a new active
-- revision; its decision is recorded as 'rollback' in the append-only history.

ALTER TABLE workflow_tool_binding_decision_t
    DROP CONSTRAINT workflow_tool_binding_decision_action_check;
ALTER TABLE workflow_tool_binding_decision_t
    ADD CONSTRAINT workflow_tool_binding_decision_action_check CHECK (action IN (
        'approve', 'reject', 'revoke', 'retire', 'supersede', 'withdraw', 'carryOver',
        'selfApprove', 'rollback'));

-- The reverse index by pinned version: which active revisions pin a nested Tool's version.
CREATE INDEX workflow_tool_dependency_nested_version_idx
    ON workflow_tool_dependency_t (host_id, nested_tool_id, nested_tool_version);
