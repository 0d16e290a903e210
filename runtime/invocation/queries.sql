-- Named queries of invocation admission and the lifecycle tools (runtime/invocation).

-- lock_active_revision --
-- The Tool's publication head (FOR SHARE: a revocation waits for admissions) and its active revision.
-- has_write_tasks: only a revision with write tasks can lack approval evidence (its write_tasks
-- never change), so admission reads the evidence of no other.
SELECT h.active_binding_id::text AS active_binding_id,
       r.binding_id::text AS binding_id, r.tool_id::text AS tool_id, r.wf_def_id::text AS wf_def_id,
       r.workflow_version, r.definition_digest, r.binding_digest, r.sync_wait_ms,
       r.total_deadline_ms, r.execution_class, r.cancellation_policy, r.idempotency_policy,
       r.runtime_bounds, r.admission_limits, r.caller_policy, r.input_schema,
       r.write_tasks <> '[]'::jsonb AS has_write_tasks
FROM workflow_tool_publication_t h
LEFT JOIN workflow_tool_binding_t r
       ON r.host_id = h.host_id AND r.binding_id = h.active_binding_id
WHERE h.host_id = %(host_id)s AND h.tool_id = %(tool_id)s
FOR SHARE OF h;

-- select_last_closed_status --
-- The status of the Tool's most recently closed revision (revoked, retired, ...), if any.
SELECT revision_status
FROM workflow_tool_binding_t
WHERE host_id = %(host_id)s AND tool_id = %(tool_id)s
  AND revision_status NOT IN ('pendingApproval', 'approved')
ORDER BY decided_ts DESC NULLS LAST, requested_ts DESC
LIMIT 1;

-- lock_version_for_share --
-- A published definition version (FOR SHARE: a retire waits for admissions) with its document.
SELECT status, definition_digest, document
FROM wf_definition_version_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND version = %(version)s
FOR SHARE;

-- select_head --
-- A saved definition head (what workflow_start runs).
SELECT wf_def_id::text AS wf_def_id, definition, definition_digest, active
FROM wf_definition_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s;

-- claim_idempotency --
-- Reserve an idempotency scope, or judge the existing reservation (one atomic path).
SELECT outcome, process_id::text AS process_id
FROM workflow_claim_idempotency_v2(
    %(host_id)s, %(scope_digest)s, %(operation)s, %(key_kind)s, %(process_id)s,
    %(principal_subject)s, %(input_digest)s, %(definition_digest)s, %(result_replay_ms)s,
    %(deadline_ts)s
);

-- lock_tool_admission --
-- Serialize admissions of one Tool (all revisions) for the rest of the transaction.
SELECT pg_advisory_xact_lock(hashtextextended('workflow-tool-admission:' || %(host_id)s || ':' || %(tool_id)s, 0));

-- count_tool_admissions --
-- Live runs and starts in the last minute of a Tool, overall and for one end user.
-- Two index-bounded reads rather than one join over the Tool's whole history: live runs come
-- from the host's live-run index, recent starts from a created_ts range of the Tool index. The
-- cutoff is one clock reading taken as an InitPlan (a volatile call per row cannot bound an
-- index scan); clock_timestamp(), not now(), because the admission lock may have been waited on.
WITH clock AS MATERIALIZED (
    SELECT clock_timestamp() AS at
),
live AS (
    SELECT i.end_user_subject, p.deadline_ts
    FROM workflow_run_state p
    JOIN workflow_invocation_t i ON i.host_id = p.host_id AND i.process_id = p.process_id
    WHERE p.host_id = %(host_id)s AND p.state IN ('ACCEPTED', 'RUNNING', 'WAITING')
      AND i.tool_id = %(tool_id)s
),
recent AS (
    SELECT i.end_user_subject, i.created_ts
    FROM workflow_invocation_t i
    WHERE i.host_id = %(host_id)s AND i.tool_id = %(tool_id)s
      AND i.created_ts > (SELECT at FROM clock) - interval '1 minute'
)
SELECT
    (SELECT count(*) FROM live) AS live,
    (SELECT count(*) FROM live WHERE end_user_subject = %(subject)s) AS live_for_user,
    (SELECT count(*) FROM recent) AS recent,
    (SELECT count(*) FROM recent WHERE end_user_subject = %(subject)s) AS recent_for_user,
    (SELECT min(created_ts) FROM recent) AS oldest_recent,
    (SELECT min(created_ts) FROM recent WHERE end_user_subject = %(subject)s)
        AS oldest_recent_for_user,
    (SELECT min(deadline_ts) FROM live) AS next_live_deadline,
    (SELECT at FROM clock) AS counted_at;

-- insert_invocation --
-- Record who admitted a run and through what.
INSERT INTO workflow_invocation_t (
    host_id, process_id, operation, user_id, end_user_subject, principal_subject, tool_id,
    binding_id, wf_def_id, workflow_version, definition_digest
) VALUES (
    %(host_id)s, %(process_id)s, %(operation)s, %(user_id)s, %(end_user_subject)s,
    %(principal_subject)s, %(tool_id)s, %(binding_id)s, %(wf_def_id)s, %(workflow_version)s,
    %(definition_digest)s
);

-- replace_credential --
-- On a re-attach: keep the later-expiring sealed token of a live run (never add one).
UPDATE workflow_run_credential
SET key_id = %(key_id)s, nonce = %(nonce)s, ciphertext = %(ciphertext)s,
    token_expires_ts = %(token_expires_ts)s
WHERE host_id = %(host_id)s AND process_id = %(process_id)s
  AND token_expires_ts IS NOT NULL AND token_expires_ts < %(token_expires_ts)s;

-- select_owned_run --
-- A run with who admitted it (the lifecycle tools check the owner).
SELECT i.process_id::text AS process_id, i.operation, i.user_id, i.end_user_subject,
       i.principal_subject, i.tool_id::text AS tool_id,
       i.wf_def_id::text AS wf_def_id, i.definition_digest, p.state, p.effect_state,
       p.cancellation_policy, p.cancel_requested, p.result, p.error, p.deadline_ts,
       p.created_ts, p.updated_ts, p.finished_ts
FROM workflow_invocation_t i
JOIN workflow_run_state p ON p.host_id = i.host_id AND p.process_id = i.process_id
WHERE i.host_id = %(host_id)s AND i.process_id = %(process_id)s;

-- select_missing_evidence --
-- The first write task of a revision without an approval evidence row of its digest, if any.
SELECT t.doc->>'taskName' AS task_name
FROM workflow_tool_binding_t r
CROSS JOIN LATERAL jsonb_array_elements(r.write_tasks) AS t(doc)
WHERE r.host_id = %(host_id)s AND r.binding_id = %(binding_id)s
  AND NOT EXISTS (
      SELECT 1
      FROM workflow_tool_approval_evidence_t e
      WHERE e.host_id = r.host_id AND e.binding_id = r.binding_id
        AND e.task_name = t.doc->>'taskName'
        AND e.evidence_digest = t.doc->>'approvalEvidenceDigest'
  )
ORDER BY 1
LIMIT 1;

-- insert_action_authority --
-- The run's action authority (grant id = run id for workflow_invoke and workflow_start runs),
-- written in the transaction that admits the run.
INSERT INTO workflow_action_authority_t (
    host_id, grant_id, process_id, user_id, deadline_ts, action_limit, credential_kind
) VALUES (
    %(host_id)s, %(grant_id)s, %(process_id)s, %(user_id)s, %(deadline_ts)s, %(action_limit)s,
    %(credential_kind)s
);

-- sweep_retention --
-- Remove expired idempotency reservations and finished runs past the retention window (bounded).
SELECT reservations, runs
FROM workflow_sweep_retention(%(retention_s)s * interval '1 second', %(batch)s);
