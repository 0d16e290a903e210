-- Issue 35: durable MCP tasks. A task is a handle on a workflow_start run that an MCP client
-- follows with tasks/get, answers with tasks/update and cancels with tasks/cancel, from any
-- replica: the row is all there is (no process holds a task in memory, none polls it).
-- task_id is the unguessable handle the client holds (256 random bits); it is bound to the
-- subject, user and client principal that created it and to the host, and every lookup
-- matches all of them, so another caller's or another host's id reads as unknown.
CREATE TABLE workflow_mcp_task (
    host_id uuid NOT NULL,
    task_id text NOT NULL,
    process_id uuid NOT NULL,
    user_id text NOT NULL,
    end_user_subject text NOT NULL,
    principal_subject text NOT NULL,
    -- The revision the task was created in: it decides the task's shapes and status rules
    -- (2025-11-25 reads an isError result as failed, the extension as completed).
    era text NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    -- NULL: unlimited. Past expires_ts the task answers as expired (-32602) and may be purged.
    ttl_ms bigint,
    expires_ts timestamptz,
    CONSTRAINT workflow_mcp_task_pk PRIMARY KEY (host_id, task_id),
    CONSTRAINT workflow_mcp_task_process_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_process (host_id, process_id) ON DELETE CASCADE,
    CONSTRAINT workflow_mcp_task_era_check CHECK (era IN ('2026-07-28', '2025-11-25')),
    CONSTRAINT workflow_mcp_task_id_check CHECK (length(task_id) BETWEEN 32 AND 64),
    CONSTRAINT workflow_mcp_task_ttl_check
        CHECK ((ttl_ms IS NULL) = (expires_ts IS NULL) AND (ttl_ms IS NULL OR ttl_ms > 0))
);

-- tasks/list (2025-11-25): one caller's tasks, oldest first, by keyset.
CREATE INDEX workflow_mcp_task_owner_idx
    ON workflow_mcp_task (host_id, user_id, end_user_subject, created_ts, task_id);
-- The retention sweep deletes runs by process; their tasks go with them (the cascade).
CREATE INDEX workflow_mcp_task_process_idx ON workflow_mcp_task (host_id, process_id);

GRANT SELECT, INSERT, DELETE ON workflow_mcp_task TO workflow_runtime;
