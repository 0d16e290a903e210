-- The grant set of each definition, replaced whole by workflow_definition_grants_sync, and
-- the sync row holding the last applied source revision and the set's digest.

CREATE TABLE workflow_definition_grant_sync_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    source_revision bigint NOT NULL,
    grants_digest text NOT NULL,
    actor varchar(126) NOT NULL,
    synced_by varchar(126) NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    updated_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_definition_grant_sync_pk PRIMARY KEY (host_id, wf_def_id),
    CONSTRAINT workflow_definition_grant_sync_revision_check CHECK (source_revision >= 0),
    CONSTRAINT workflow_definition_grant_sync_digest_check
        CHECK (grants_digest ~ '^sha256:[0-9a-f]{64}$')
);

CREATE TABLE workflow_tool_grant_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    grant_id varchar(126) NOT NULL,
    tool_id varchar(126) NOT NULL,
    tool_version varchar(64),
    lightapi_digest text,
    allowed_environments text[] NOT NULL DEFAULT '{}',
    source_revision bigint NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_tool_grant_pk PRIMARY KEY (host_id, wf_def_id, grant_id),
    CONSTRAINT workflow_tool_grant_sync_fk FOREIGN KEY (host_id, wf_def_id)
        REFERENCES workflow_definition_grant_sync_t (host_id, wf_def_id) ON DELETE CASCADE
);

-- Dispatch looks grants up by tool.
CREATE INDEX workflow_tool_grant_tool_idx ON workflow_tool_grant_t (host_id, tool_id);

REVOKE DELETE, TRUNCATE ON workflow_definition_grant_sync_t FROM workflow_runtime;
