-- The operation receipt ledger: one row per (host, operationId) of a mutating publication call,
-- written in the same transaction as the mutation and swept 30 days after creation.

CREATE TABLE workflow_publication_operation_t (
    host_id uuid NOT NULL,
    operation_id uuid NOT NULL,
    tool_name varchar(64) NOT NULL,
    request_digest text NOT NULL,
    requested_by varchar(126) NOT NULL,
    -- NULL only inside the transaction that claimed the row; it commits with the response.
    response jsonb,
    is_error boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    CONSTRAINT workflow_publication_operation_pk PRIMARY KEY (host_id, operation_id),
    CONSTRAINT workflow_publication_operation_digest_check
        CHECK (request_digest ~ '^sha256:[0-9a-f]{64}$')
);

-- The 30-day sweep scans by age across hosts.
CREATE INDEX workflow_publication_operation_created_idx
    ON workflow_publication_operation_t (created_at);

REVOKE TRUNCATE ON workflow_publication_operation_t FROM workflow_runtime;
