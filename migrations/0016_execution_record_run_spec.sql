-- Execution's record of what a new run executes (definition source, caller, interpreter
-- limits) and, when the caller's token was sealed, the run credential. A function so that a
-- one-statement admission (invocation's workflow_admit_invoke) and the named insert_run_spec
-- query share one definition.
CREATE FUNCTION workflow_record_run_spec(
    p_host_id uuid,
    p_process_id uuid,
    p_wf_def_id uuid,
    p_workflow_version text,
    p_definition jsonb,
    p_binding_id uuid,
    p_user_id text,
    p_limits jsonb,
    p_key_id text,
    p_nonce bytea,
    p_ciphertext bytea,
    p_token_expires_ts timestamptz,
    p_expires_ts timestamptz
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO workflow_run_spec (
        host_id, process_id, wf_def_id, workflow_version, definition, binding_id, user_id, limits
    ) VALUES (
        p_host_id, p_process_id, p_wf_def_id, p_workflow_version, p_definition, p_binding_id,
        p_user_id, p_limits
    );
    -- No key id: the caller's token was not sealed (a start without a usable key).
    IF p_key_id IS NOT NULL THEN
        INSERT INTO workflow_run_credential (
            host_id, process_id, key_id, nonce, ciphertext, token_expires_ts, expires_ts
        ) VALUES (
            p_host_id, p_process_id, p_key_id, p_nonce, p_ciphertext, p_token_expires_ts,
            p_expires_ts
        );
    END IF;
END
$$;
