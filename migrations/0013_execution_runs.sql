-- What a durable workflow run executes (runtime/execution): the definition it is pinned to
-- (a published version, or an inline document for runs without a binding), the caller and
-- the interpreter limits. The interpreter's checkpoint travels in the next task's payload,
-- committed in the same fenced transaction that completes the previous task.

CREATE TABLE workflow_run_spec (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    wf_def_id uuid,
    workflow_version varchar(64),
    -- Inline definition document; NULL when the run is pinned to a published version.
    definition jsonb,
    binding_id uuid,
    user_id varchar(126) NOT NULL,
    limits jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_run_spec_pk PRIMARY KEY (host_id, process_id),
    CONSTRAINT workflow_run_spec_process_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_process (host_id, process_id) ON DELETE CASCADE,
    CONSTRAINT workflow_run_spec_source_check CHECK (
        (definition IS NOT NULL) OR (wf_def_id IS NOT NULL AND workflow_version IS NOT NULL))
);

REVOKE UPDATE, DELETE, TRUNCATE ON workflow_run_spec FROM workflow_runtime;

-- The run credential: the user's token sealed with AES-256-GCM (never plaintext), kept only
-- while the run is live.
CREATE TABLE workflow_run_credential (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    key_id varchar(128) NOT NULL,
    nonce bytea NOT NULL,
    ciphertext bytea NOT NULL,
    token_expires_ts timestamptz,
    expires_ts timestamptz NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_run_credential_pk PRIMARY KEY (host_id, process_id),
    CONSTRAINT workflow_run_credential_process_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_process (host_id, process_id) ON DELETE CASCADE
);

CREATE INDEX workflow_run_credential_expiry_idx ON workflow_run_credential (expires_ts);

-- A run ends through several paths (completion, failure, reaper, deadline sweep); one
-- trigger deletes its credential on every one of them, in the same transaction.
CREATE FUNCTION workflow_run_credential_forget() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM workflow_run_credential
    WHERE host_id = NEW.host_id AND process_id = NEW.process_id;
    RETURN NEW;
END
$$;

CREATE TRIGGER workflow_process_forget_credential
    AFTER UPDATE OF state ON workflow_process
    FOR EACH ROW
    WHEN (NEW.state IN ('COMPLETED', 'FAILED', 'CANCELLED') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION workflow_run_credential_forget();
