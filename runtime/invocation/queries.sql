-- Named queries of invocation admission and the lifecycle tools (runtime/invocation).

-- select_active_revision --
-- The Tool's active revision and its pinned version's status and document, read without a lock:
-- admission caches it by revision and admit_invoke re-checks the head and version under lock.
-- has_write_tasks: only a revision with write tasks can lack approval evidence (its write_tasks
-- never change), so admission reads the evidence of no other.
SELECT r.binding_id::text AS binding_id, r.tool_id::text AS tool_id, r.wf_def_id::text AS wf_def_id,
       r.workflow_version, r.definition_digest, r.binding_digest, r.sync_wait_ms,
       r.total_deadline_ms, r.execution_class, r.cancellation_policy, r.idempotency_policy,
       r.runtime_bounds, r.admission_limits, r.caller_policy, r.input_schema,
       r.write_tasks <> '[]'::jsonb AS has_write_tasks,
       v.status AS version_status, v.document
FROM workflow_tool_publication_t h
LEFT JOIN workflow_tool_binding_t r
       ON r.host_id = h.host_id AND r.binding_id = h.active_binding_id
LEFT JOIN wf_definition_version_t v
       ON v.host_id = r.host_id AND v.wf_def_id = r.wf_def_id AND v.version = r.workflow_version
WHERE h.host_id = %(host_id)s AND h.tool_id = %(tool_id)s;

-- admit_invoke --
-- workflow_invoke's whole admission in one statement (workflow_admit_invoke_v2,
-- migrations/functions/invocation_admission.sql), alone in its transaction.
SELECT outcome, process_id::text AS process_id, state, effect_state, deadline_ts, result, error,
       token_expires_ts, detail, lease_id::text AS lease_id, fencing_token, lease_expires_ts
FROM workflow_admit_invoke_v2(
    %(host_id)s::uuid, %(tool_id)s::uuid, %(binding_id)s::uuid, %(wf_def_id)s::uuid,
    %(workflow_version)s::text, %(check_evidence)s::boolean,
    %(scope_digest)s::text, %(key_kind)s::text, %(process_id)s::uuid,
    %(principal_subject)s::text, %(input_digest)s::text, %(definition_digest)s::text,
    %(result_replay_ms)s::bigint, %(deadline_ts)s::timestamptz,
    %(user_id)s::text, %(end_user_subject)s::text,
    %(maximum_concurrent_runs)s::bigint, %(maximum_concurrent_runs_per_user)s::bigint,
    %(starts_per_minute)s::bigint, %(starts_per_minute_per_user)s::bigint,
    %(execution_class)s::text, %(cancellation_policy)s::text,
    %(attempts)s::integer, %(nested_calls)s::integer, %(request_bytes)s::bigint,
    %(intermediate_bytes)s::bigint, %(result_bytes)s::bigint, %(cost_units)s::bigint,
    %(task_kind)s::text, %(payload)s::jsonb, %(limits)s::jsonb,
    %(key_id)s::text, %(nonce)s::bytea, %(ciphertext)s::bytea,
    %(token_expires_ts)s::timestamptz, %(action_limit)s::integer, %(shed)s::boolean,
    %(exclusive)s::boolean, false, %(worker_id)s::text, %(lease_ms)s::integer,
    %(overrun_ms)s::integer, %(disclosure_ceiling)s::text[]
);

-- admit_invoke_batch --
-- Several admissions of one Tool in one statement and transaction (workflow_admit_invoke_batch,
-- migrations/functions/invocation_admission.sql); calls: a JSON array of admit_invoke's
-- parameters but exclusive.
SELECT ordinal, outcome, process_id::text AS process_id, state, effect_state, deadline_ts,
       result, error, token_expires_ts, detail, lease_id::text AS lease_id, fencing_token,
       lease_expires_ts, refusal, refusal_detail
FROM workflow_admit_invoke_batch(%(calls)s::jsonb);

-- select_last_closed_status --
-- The status of the Tool's most recently closed revision (revoked, retired, ...), if any.
SELECT revision_status
FROM workflow_tool_binding_t
WHERE host_id = %(host_id)s AND tool_id = %(tool_id)s
  AND revision_status NOT IN ('pendingApproval', 'approved')
ORDER BY decided_ts DESC NULLS LAST, requested_ts DESC
LIMIT 1;

-- select_head --
-- A saved definition head (what workflow_start runs).
SELECT wf_def_id::text AS wf_def_id, definition, definition_digest, active
FROM wf_definition_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s;

-- admit_start --
-- workflow_start's whole admission in one statement (workflow_admit_start,
-- migrations/functions/invocation_admission.sql), alone in its transaction.
SELECT outcome, process_id::text AS process_id, state, definition_digest, created_ts
FROM workflow_admit_start(
    %(host_id)s::uuid, %(wf_def_id)s::uuid, %(definition)s::jsonb, %(scope_digest)s::text,
    %(process_id)s::uuid, %(principal_subject)s::text, %(input_digest)s::text,
    %(definition_digest)s::text, %(deadline_ts)s::timestamptz, %(user_id)s::text,
    %(end_user_subject)s::text, %(starter_roles)s::text[], %(execution_class)s::text,
    %(cancellation_policy)s::text, %(attempts)s::integer, %(nested_calls)s::integer,
    %(request_bytes)s::bigint, %(intermediate_bytes)s::bigint, %(result_bytes)s::bigint,
    %(cost_units)s::bigint, %(task_kind)s::text, %(payload)s::jsonb, %(limits)s::jsonb,
    %(key_id)s::text, %(nonce)s::bytea, %(ciphertext)s::bytea,
    %(token_expires_ts)s::timestamptz, %(action_limit)s::integer, %(refuse_new)s::boolean,
    %(disclosure_ceiling)s::text[]
);

-- replace_credential --
-- On a re-attach: keep the later-expiring sealed token of a live run (never add one); it is
-- the caller's own token again, not an exchanged one.
UPDATE workflow_run_credential
SET key_id = %(key_id)s, nonce = %(nonce)s, ciphertext = %(ciphertext)s,
    token_expires_ts = %(token_expires_ts)s, exchanged_ts = NULL
WHERE host_id = %(host_id)s AND process_id = %(process_id)s
  AND token_expires_ts IS NOT NULL AND token_expires_ts < %(token_expires_ts)s;

-- select_owned_run --
-- A run with who admitted it (the lifecycle tools check the owner).
SELECT i.process_id::text AS process_id, i.operation, i.user_id, i.end_user_subject,
       i.principal_subject, i.tool_id::text AS tool_id, i.starter_roles, i.disclosure_ceiling,
       i.wf_def_id::text AS wf_def_id, i.definition_digest, p.state, p.effect_state,
       p.cancellation_policy, p.cancel_requested, p.result, p.error, p.deadline_ts,
       p.created_ts, p.updated_ts, p.finished_ts
FROM workflow_invocation_t i
JOIN workflow_run_state p ON p.host_id = i.host_id AND p.process_id = i.process_id
WHERE i.host_id = %(host_id)s AND i.process_id = %(process_id)s;

-- sweep_retention --
-- Remove expired idempotency reservations and finished runs past the retention window (bounded).
SELECT reservations, runs
FROM workflow_sweep_retention(%(retention_s)s * interval '1 second', %(batch)s);

-- sweep_start_counts --
-- Remove per-second start counts two minutes past (admission drops its own scopes' sooner;
-- these are the scopes of users who stopped calling), bounded.
WITH old AS (
    SELECT host_id, tool_id, per_user, end_user_subject, second
    FROM workflow_tool_start_count_t
    WHERE second < floor(extract(epoch FROM clock_timestamp()))::bigint - 120
    ORDER BY second
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM workflow_tool_start_count_t b
USING old o
WHERE b.host_id = o.host_id AND b.tool_id = o.tool_id AND b.per_user = o.per_user
  AND b.end_user_subject = o.end_user_subject AND b.second = o.second;

-- select_started_runs --
-- The runs one caller started (workflow_start) on a host, newest first, after a keyset cursor:
-- the console's Runs page. The same owner columns as select_owned_run; lifecycle re-checks them.
SELECT i.process_id::text AS process_id, i.operation, i.user_id, i.end_user_subject,
       i.principal_subject, i.tool_id::text AS tool_id, i.starter_roles, i.disclosure_ceiling,
       i.wf_def_id::text AS wf_def_id, i.definition_digest, p.state, p.effect_state,
       p.cancellation_policy, p.cancel_requested, p.result, p.error, p.deadline_ts,
       p.created_ts, p.updated_ts, p.finished_ts
FROM workflow_invocation_t i
JOIN workflow_run_state p ON p.host_id = i.host_id AND p.process_id = i.process_id
WHERE i.host_id = %(host_id)s AND i.operation = 'start' AND i.user_id = %(user_id)s
  AND i.end_user_subject = %(subject)s AND i.principal_subject = %(principal)s
  AND (%(before_ts)s::timestamptz IS NULL
       OR (i.created_ts, i.process_id) < (%(before_ts)s::timestamptz, %(before_id)s::uuid))
ORDER BY i.created_ts DESC, i.process_id DESC
LIMIT %(limit)s;
