-- One permit per outbound Tool call of a running workflow (an "action"), recorded before the
-- call; the Gateway looks it up by the x-workflow-action header. Append-only.

CREATE TABLE workflow_action_permit (
    host_id uuid NOT NULL,
    action_id uuid NOT NULL,
    process_id uuid NOT NULL,
    task_id uuid NOT NULL,
    fencing_token bigint NOT NULL,
    user_id varchar(126) NOT NULL,
    grant_id varchar(126) NOT NULL,
    tool_name varchar(256) NOT NULL,
    contract_digest text,
    depth integer NOT NULL DEFAULT 0,
    max_depth integer NOT NULL DEFAULT 0,
    execution_class text NOT NULL,
    deadline_ts timestamptz NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_action_permit_pk PRIMARY KEY (host_id, action_id),
    CONSTRAINT workflow_action_permit_process_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_process (host_id, process_id) ON DELETE CASCADE,
    CONSTRAINT workflow_action_permit_depth_check CHECK (depth >= 0 AND max_depth >= depth)
);

CREATE INDEX workflow_action_permit_process_idx ON workflow_action_permit (host_id, process_id);

REVOKE UPDATE, DELETE, TRUNCATE ON workflow_action_permit FROM workflow_runtime;
