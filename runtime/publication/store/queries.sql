-- Named queries of the publication domain: definition heads and versions, grant sets, the
-- operation receipt ledger, and Tool binding revisions with their publication heads, reach,
-- evidence and decisions. Loaded once as QUERIES by runtime/publication/store/__init__.py.
-- Lock order: definition version row, then the Tool publication head, then revision rows.

-- insert_definition_head --
-- Create the saved head of a definition if it does not exist yet; returns a row only when created.
INSERT INTO wf_definition_t (
    host_id, wf_def_id, source_revision, namespace, name, version, definition,
    definition_digest, content_digest, lifecycle_status, catalog_visible, owner_user_id,
    owner_position_id, active, actor, saved_by, ai_authored
) VALUES (
    %(host_id)s, %(wf_def_id)s, %(source_revision)s, %(namespace)s, %(name)s, %(version)s,
    %(definition)s, %(definition_digest)s, %(content_digest)s, %(lifecycle_status)s,
    %(catalog_visible)s, %(owner_user_id)s, %(owner_position_id)s, %(active)s, %(actor)s,
    %(saved_by)s, %(ai_authored)s
)
ON CONFLICT (host_id, wf_def_id) DO NOTHING
RETURNING source_revision, definition_digest, active;

-- lock_definition_head --
-- Lock the saved head so concurrent saves of one definition serialize.
SELECT source_revision, definition_digest, content_digest, active
FROM wf_definition_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s
FOR UPDATE;

-- update_definition_head --
-- Replace the saved head with a higher source revision (the caller holds the row lock).
UPDATE wf_definition_t
SET source_revision = %(source_revision)s,
    namespace = %(namespace)s,
    name = %(name)s,
    version = %(version)s,
    definition = %(definition)s,
    definition_digest = %(definition_digest)s,
    content_digest = %(content_digest)s,
    lifecycle_status = %(lifecycle_status)s,
    catalog_visible = %(catalog_visible)s,
    owner_user_id = %(owner_user_id)s,
    owner_position_id = %(owner_position_id)s,
    active = %(active)s,
    actor = %(actor)s,
    saved_by = %(saved_by)s,
    -- Sticky (migration 0115): once AI-authored, always private.
    ai_authored = ai_authored OR %(ai_authored)s,
    updated_ts = now()
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND source_revision < %(source_revision)s
RETURNING source_revision, definition_digest, active;

-- select_definition_head --
-- Read the saved head of a definition (tests inspect it; workflow_start reads its own columns).
SELECT host_id::text AS host_id, wf_def_id::text AS wf_def_id, source_revision, namespace, name,
       version, definition, definition_digest, lifecycle_status, catalog_visible, owner_user_id,
       owner_position_id, active, actor, saved_by, created_ts, updated_ts
FROM wf_definition_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s;

-- insert_definition_version --
-- Store a published version unless it exists; returns a row only when created.
INSERT INTO wf_definition_version_t (
    host_id, wf_def_id, version, namespace, name, definition, document, definition_digest,
    schema_digest, binding_approval, owner_user_id, owner_position_id, published_by,
    publish_operation_id, normalized_document, expression_digests, publication_warnings
) VALUES (
    %(host_id)s, %(wf_def_id)s, %(version)s, %(namespace)s, %(name)s, %(definition)s,
    %(document)s::jsonb, %(definition_digest)s, %(schema_digest)s, %(binding_approval)s,
    %(owner_user_id)s, %(owner_position_id)s, %(published_by)s, %(operation_id)s,
    %(normalized_document)s::jsonb, %(expression_digests)s::jsonb,
    %(publication_warnings)s::jsonb
)
ON CONFLICT (host_id, wf_def_id, version) DO NOTHING
RETURNING status, definition_digest, schema_digest, binding_approval, publication_warnings;

-- lock_definition_version --
-- Lock one published version (FOR UPDATE: publish compares it, retire moves it).
SELECT status, definition_digest, schema_digest, binding_approval, publication_warnings
FROM wf_definition_version_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND version = %(version)s
FOR UPDATE;

-- store_definition_version_warnings --
-- Store the publication warnings of a version published before they were kept (once: NULL only).
UPDATE wf_definition_version_t
SET publication_warnings = %(warnings)s::jsonb
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND version = %(version)s
  AND publication_warnings IS NULL;

-- select_definition_version --
-- Read one published version with its document (execution runs it; tests inspect it).
SELECT host_id::text AS host_id, wf_def_id::text AS wf_def_id, version, namespace, name,
       definition, document, definition_digest, schema_digest, binding_approval, status,
       owner_user_id, owner_position_id, published_by, published_ts, retired_by, retired_ts
FROM wf_definition_version_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND version = %(version)s;

-- retire_definition_version --
-- Move an active version to retired (terminal); the caller holds the row lock.
UPDATE wf_definition_version_t
SET status = 'retired', retired_by = %(retired_by)s, retired_ts = now(),
    retire_operation_id = %(operation_id)s
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND version = %(version)s
  AND status = 'active'
RETURNING status, definition_digest, schema_digest, binding_approval;

-- insert_grant_sync --
-- Create the grant sync row of a definition if it does not exist; returns a row only when created.
INSERT INTO workflow_definition_grant_sync_t (
    host_id, wf_def_id, source_revision, grants_digest, actor, synced_by
) VALUES (
    %(host_id)s, %(wf_def_id)s, %(source_revision)s, %(grants_digest)s, %(actor)s, %(synced_by)s
)
ON CONFLICT (host_id, wf_def_id) DO NOTHING
RETURNING source_revision, grants_digest;

-- lock_grant_sync --
-- Lock the grant sync row so concurrent grant sets of one definition serialize.
SELECT source_revision, grants_digest
FROM workflow_definition_grant_sync_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s
FOR UPDATE;

-- update_grant_sync --
-- Record a newer applied grant revision and digest (the caller holds the row lock).
UPDATE workflow_definition_grant_sync_t
SET source_revision = %(source_revision)s, grants_digest = %(grants_digest)s,
    actor = %(actor)s, synced_by = %(synced_by)s, updated_ts = now()
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND source_revision < %(source_revision)s
RETURNING source_revision, grants_digest;

-- delete_definition_grants --
-- Remove the whole grant set of a definition before the new set is written.
DELETE FROM workflow_tool_grant_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s;

-- insert_definition_grant --
-- Write one grant of a definition's new grant set.
INSERT INTO workflow_tool_grant_t (
    host_id, wf_def_id, grant_id, tool_id, tool_version, lightapi_digest, allowed_environments,
    source_revision
) VALUES (
    %(host_id)s, %(wf_def_id)s, %(grant_id)s, %(tool_id)s, %(tool_version)s, %(lightapi_digest)s,
    %(allowed_environments)s, %(source_revision)s
);

-- select_definition_grants --
-- The live grant set of a definition, ordered by grant id, each with the MCP name its Tool is
-- published under right now (published_tool_name, NULL when none). A grant names a Tool by its
-- stable toolId (a tool_t UUID), while a run without a binding calls a tool by the name the
-- Gateway lists; this join is what lets such a run match the grant. It reads the Tool's active
-- head on the grant's own host only (a grant never resolves to another host's Tool), live at
-- every dispatch, so a revoked or retired Tool stops matching at once. A toolId that is not a
-- UUID (a grant written by tool name) is never cast, and joins nothing.
SELECT g.grant_id, g.tool_id, g.tool_version, g.lightapi_digest, g.allowed_environments,
       g.source_revision, r.tool_name AS published_tool_name
FROM workflow_tool_grant_t g
LEFT JOIN workflow_tool_publication_t h
       ON h.host_id = g.host_id
      AND h.tool_id = CASE
              WHEN g.tool_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
              THEN g.tool_id::uuid
          END
LEFT JOIN workflow_tool_binding_t r
       ON r.host_id = h.host_id AND r.binding_id = h.active_binding_id AND r.active
WHERE g.host_id = %(host_id)s AND g.wf_def_id = %(wf_def_id)s
ORDER BY g.grant_id;

-- claim_operation --
-- Claim an operation id for this host; returns a row only for a new operation. A concurrent
-- claim of the same id waits here until the first transaction ends.
INSERT INTO workflow_publication_operation_t (
    host_id, operation_id, tool_name, request_digest, requested_by
) VALUES (
    %(host_id)s, %(operation_id)s, %(tool_name)s, %(request_digest)s, %(requested_by)s
)
ON CONFLICT (host_id, operation_id) DO NOTHING
RETURNING operation_id;

-- lock_operation --
-- Lock an existing operation record of this host to compare and replay it.
SELECT tool_name, request_digest, requested_by, response, is_error
FROM workflow_publication_operation_t
WHERE host_id = %(host_id)s AND operation_id = %(operation_id)s
FOR UPDATE;

-- complete_operation --
-- Store the complete response of a claimed operation, in the mutation's transaction.
UPDATE workflow_publication_operation_t
SET response = %(response)s::jsonb, is_error = %(is_error)s, completed_at = now()
WHERE host_id = %(host_id)s AND operation_id = %(operation_id)s AND response IS NULL;

-- sweep_operations --
-- Delete one batch of operation records created before the cutoff (all hosts).
DELETE FROM workflow_publication_operation_t
WHERE ctid IN (
    SELECT ctid FROM workflow_publication_operation_t
    WHERE created_at < %(cutoff)s
    ORDER BY created_at
    LIMIT %(batch_size)s
);

-- lock_version_for_share --
-- Lock a pinned definition version against retirement while a binding operation runs.
SELECT status, definition_digest, schema_digest, binding_approval, document, published_by
FROM wf_definition_version_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND version = %(version)s
FOR SHARE;

-- lock_definition_owner --
-- Read the current owner from the saved head, so an ownership save cannot interleave.
SELECT owner_user_id, owner_position_id
FROM wf_definition_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s
FOR SHARE;

-- insert_publication_head --
-- Create a Tool's publication head at version 0 unless it exists (serializes first publish).
INSERT INTO workflow_tool_publication_t (host_id, tool_id)
VALUES (%(host_id)s, %(tool_id)s)
ON CONFLICT (host_id, tool_id) DO NOTHING;

-- lock_publication_head --
-- Lock a Tool's publication head; every publication operation on the Tool holds it.
SELECT aggregate_version, active_binding_id::text AS active_binding_id,
       pending_binding_id::text AS pending_binding_id
FROM workflow_tool_publication_t
WHERE host_id = %(host_id)s AND tool_id = %(tool_id)s
FOR UPDATE;

-- select_publication_head --
-- Read a Tool's publication head (binding get, in its snapshot).
SELECT aggregate_version, active_binding_id::text AS active_binding_id,
       pending_binding_id::text AS pending_binding_id
FROM workflow_tool_publication_t
WHERE host_id = %(host_id)s AND tool_id = %(tool_id)s;

-- advance_publication_head --
-- Point the head at its new active and pending revisions and bump the aggregate version.
UPDATE workflow_tool_publication_t
SET aggregate_version = aggregate_version + 1,
    active_binding_id = %(active_binding_id)s,
    pending_binding_id = %(pending_binding_id)s,
    updated_ts = now()
WHERE host_id = %(host_id)s AND tool_id = %(tool_id)s
RETURNING aggregate_version;

-- select_revision --
-- One binding revision of the host.
SELECT binding_id::text AS binding_id, tool_id::text AS tool_id,
       source_binding_id::text AS source_binding_id, tool_name, wf_def_id::text AS wf_def_id,
       workflow_version, definition_digest, schema_digest, binding, write_tasks, binding_digest,
       approval_digest, revision_status, active, owner_user_id, owner_position_id, requested_by,
       requested_ts, approved_by, approved_ts, approval_basis_id::text AS approval_basis_id,
       carry_over_denied_reason, decided_by, decided_ts
FROM workflow_tool_binding_t
WHERE host_id = %(host_id)s AND binding_id = %(binding_id)s;

-- insert_revision --
-- Store a new immutable binding revision.
INSERT INTO workflow_tool_binding_t (
    host_id, binding_id, tool_id, source_binding_id, tool_name, wf_def_id, workflow_version,
    definition_digest, schema_digest, invocation_mode, sync_wait_ms, total_deadline_ms,
    execution_class, result_text_mode, cancellation_policy, idempotency_policy,
    delegation_policy, runtime_bounds, admission_limits, caller_policy, tool_annotations,
    input_schema, output_schema, binding, write_tasks, binding_digest, approval_digest,
    revision_status, active, owner_user_id, owner_position_id, requested_by, approved_by,
    approved_ts, approval_basis_id, carry_over_denied_reason, decided_by, decided_ts,
    publish_operation_id
) VALUES (
    %(host_id)s, %(binding_id)s, %(tool_id)s, %(source_binding_id)s, %(tool_name)s,
    %(wf_def_id)s, %(workflow_version)s, %(definition_digest)s, %(schema_digest)s,
    %(invocation_mode)s, %(sync_wait_ms)s, %(total_deadline_ms)s, %(execution_class)s,
    %(result_text_mode)s, %(cancellation_policy)s, %(idempotency_policy)s::jsonb,
    %(delegation_policy)s::jsonb, %(runtime_bounds)s::jsonb, %(admission_limits)s::jsonb,
    %(caller_policy)s::jsonb, %(tool_annotations)s::jsonb, %(input_schema)s::jsonb,
    %(output_schema)s::jsonb, %(binding)s::jsonb, %(write_tasks)s::jsonb, %(binding_digest)s,
    %(approval_digest)s, %(revision_status)s, %(active)s::boolean, %(owner_user_id)s,
    %(owner_position_id)s, %(requested_by)s, %(approved_by)s,
    CASE WHEN %(active)s::boolean THEN now() END, %(approval_basis_id)s, %(carry_over_denied_reason)s,
    %(decided_by)s::varchar, CASE WHEN %(decided_by)s::varchar IS NOT NULL THEN now() END,
    %(operation_id)s
);

-- insert_dependency --
-- Store one nested Tool dependency of a revision (written once).
INSERT INTO workflow_tool_dependency_t (
    host_id, binding_id, authorization_tool_name, nested_tool_id, nested_tool_version,
    contract_digest, dispatch_target, tool_annotations
) VALUES (
    %(host_id)s, %(binding_id)s, %(authorization_tool_name)s, %(nested_tool_id)s,
    %(nested_tool_version)s, %(contract_digest)s, %(dispatch_target)s,
    %(tool_annotations)s::jsonb
);

-- insert_endpoint_target --
-- Store one resolved endpoint target of a revision (written once).
INSERT INTO workflow_endpoint_target_t (
    host_id, binding_id, endpoint_ref, endpoint_uri, allowed_methods, environments,
    authorization_policy_digest
) VALUES (
    %(host_id)s, %(binding_id)s, %(endpoint_ref)s, %(endpoint_uri)s, %(allowed_methods)s,
    %(environments)s, %(authorization_policy_digest)s
);

-- insert_evidence --
-- Store the approval evidence of one write task when its revision becomes active.
INSERT INTO workflow_tool_approval_evidence_t (
    host_id, binding_id, task_name, evidence_digest, task_kind, task_target, approved_by
) VALUES (
    %(host_id)s, %(binding_id)s, %(task_name)s, %(evidence_digest)s, %(task_kind)s,
    %(task_target)s, %(approved_by)s
)
ON CONFLICT (host_id, binding_id, task_name) DO NOTHING;

-- select_dependencies --
-- The dependencies of a revision, in digest order.
SELECT authorization_tool_name, nested_tool_id::text AS nested_tool_id, nested_tool_version,
       contract_digest, dispatch_target, tool_annotations
FROM workflow_tool_dependency_t
WHERE host_id = %(host_id)s AND binding_id = %(binding_id)s
ORDER BY authorization_tool_name, nested_tool_id::text, nested_tool_version;

-- select_endpoint_targets --
-- The endpoint targets of a revision, by endpointRef.
SELECT endpoint_ref, endpoint_uri, allowed_methods, environments, authorization_policy_digest
FROM workflow_endpoint_target_t
WHERE host_id = %(host_id)s AND binding_id = %(binding_id)s
ORDER BY endpoint_ref;

-- activate_revision --
-- Move a pending revision to approved and active, with its approver and current owner.
UPDATE workflow_tool_binding_t
SET revision_status = 'approved', active = true, approved_by = %(approved_by)s,
    approved_ts = now(), owner_user_id = %(owner_user_id)s,
    owner_position_id = %(owner_position_id)s, decided_by = %(approved_by)s, decided_ts = now()
WHERE host_id = %(host_id)s AND binding_id = %(binding_id)s
  AND revision_status = 'pendingApproval';

-- close_revision --
-- Move an active or pending revision to a closed status (superseded, rejected, ...).
UPDATE workflow_tool_binding_t
SET revision_status = %(revision_status)s, active = false, decided_by = %(decided_by)s,
    decided_ts = now()
WHERE host_id = %(host_id)s AND binding_id = %(binding_id)s
  AND revision_status IN ('pendingApproval', 'approved');

-- insert_decision --
-- Append one row to the decision history.
INSERT INTO workflow_tool_binding_decision_t (
    host_id, decision_id, tool_id, binding_id, action, actor, comment, approval_digest,
    operation_id
) VALUES (
    %(host_id)s, %(decision_id)s, %(tool_id)s, %(binding_id)s, %(action)s, %(actor)s,
    %(comment)s, %(approval_digest)s, %(operation_id)s
);

-- select_decisions --
-- A Tool's decision history, newest first.
SELECT decision_id::text AS decision_id, binding_id::text AS binding_id, action, actor, comment,
       approval_digest, decided_ts, operation_id::text AS operation_id
FROM workflow_tool_binding_decision_t
WHERE host_id = %(host_id)s AND tool_id = %(tool_id)s
ORDER BY decided_ts DESC, decision_id DESC
LIMIT %(limit)s;

-- select_latest_revision --
-- The newest revision of a Tool (binding get without a pointer to an active or pending one).
SELECT binding_id::text AS binding_id
FROM workflow_tool_binding_t
WHERE host_id = %(host_id)s AND tool_id = %(tool_id)s
ORDER BY requested_ts DESC, binding_id DESC
LIMIT 1;

-- count_active_pinning_version --
-- How many active revisions pin a definition version (definition retire refuses then).
SELECT count(*) AS active_count
FROM workflow_tool_binding_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND workflow_version = %(version)s
  AND active;

-- select_pending_pinning_version --
-- Pending revisions pinning a definition version, in Tool order (heads lock in this order).
SELECT binding_id::text AS binding_id, tool_id::text AS tool_id, approval_digest
FROM workflow_tool_binding_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND workflow_version = %(version)s
  AND revision_status = 'pendingApproval'
ORDER BY tool_id;

-- move_pending_to_owner --
-- An ownership transfer moves the definition's pending revisions to the new owner.
UPDATE workflow_tool_binding_t
SET owner_user_id = %(owner_user_id)s, owner_position_id = %(owner_position_id)s
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s
  AND revision_status = 'pendingApproval'
  AND (owner_user_id, owner_position_id) IS DISTINCT FROM
      (%(owner_user_id)s::varchar, %(owner_position_id)s::varchar);

-- list_revisions --
-- One page of revisions for the caller as owner or requester, newest request first.
SELECT r.binding_id::text AS binding_id, r.tool_id::text AS tool_id, r.tool_name,
       r.wf_def_id::text AS wf_def_id, r.workflow_version, r.revision_status,
       r.definition_digest, r.binding_digest, r.requested_by, r.requested_ts, r.decided_by,
       r.decided_ts
FROM workflow_tool_binding_t r
LEFT JOIN wf_definition_t d ON d.host_id = r.host_id AND d.wf_def_id = r.wf_def_id
WHERE r.host_id = %(host_id)s
  AND (CASE WHEN %(role)s = 'owner'
            THEN d.owner_user_id = %(user_id)s OR d.owner_position_id = ANY(%(positions)s)
            ELSE r.requested_by = %(user_id)s END)
  AND (%(wf_def_id)s::uuid IS NULL OR r.wf_def_id = %(wf_def_id)s::uuid)
  AND (%(tool_id)s::uuid IS NULL OR r.tool_id = %(tool_id)s::uuid)
  AND (%(status)s::text IS NULL OR r.revision_status = %(status)s::text)
  AND (%(after_ts)s::timestamptz IS NULL
       OR (r.requested_ts, r.binding_id) < (%(after_ts)s::timestamptz, %(after_id)s::uuid))
ORDER BY r.requested_ts DESC, r.binding_id DESC
LIMIT %(limit)s;

-- count_pending_revisions --
-- Pending revisions per definition for the caller as owner or requester (list badges).
SELECT r.wf_def_id::text AS wf_def_id, count(*) AS pending_count
FROM workflow_tool_binding_t r
LEFT JOIN wf_definition_t d ON d.host_id = r.host_id AND d.wf_def_id = r.wf_def_id
WHERE r.host_id = %(host_id)s AND r.revision_status = 'pendingApproval'
  AND (CASE WHEN %(role)s = 'owner'
            THEN d.owner_user_id = %(user_id)s OR d.owner_position_id = ANY(%(positions)s)
            ELSE r.requested_by = %(user_id)s END)
  AND (%(wf_def_id)s::uuid IS NULL OR r.wf_def_id = %(wf_def_id)s::uuid)
  AND (%(tool_id)s::uuid IS NULL OR r.tool_id = %(tool_id)s::uuid)
GROUP BY r.wf_def_id
ORDER BY r.wf_def_id
LIMIT 1000;

-- tool_related_to_caller --
-- Whether the caller owns (saved head, by user or position) or requested a revision of a Tool.
SELECT EXISTS (
    SELECT 1
    FROM workflow_tool_binding_t r
    LEFT JOIN wf_definition_t d ON d.host_id = r.host_id AND d.wf_def_id = r.wf_def_id
    WHERE r.host_id = %(host_id)s AND r.tool_id = %(tool_id)s
      AND (r.requested_by = %(user_id)s
           OR d.owner_user_id = %(user_id)s
           OR d.owner_position_id = ANY(%(positions)s))
) AS related;

-- lock_secret --
-- Lock a host secret's row, live or tombstoned (FOR UPDATE: puts and deletes of a name serialize).
SELECT version, deleted_ts IS NOT NULL AS deleted
FROM workflow_secret_t
WHERE host_id = %(host_id)s AND name = %(name)s
FOR UPDATE;

-- count_live_secrets --
-- How many secrets a host holds (tombstones not counted).
SELECT count(*) AS live
FROM workflow_secret_t
WHERE host_id = %(host_id)s AND deleted_ts IS NULL;

-- insert_secret --
-- Store the first version of a name the host never held; returns a row only when created.
INSERT INTO workflow_secret_t (
    host_id, name, version, key_id, nonce, ciphertext, created_by, updated_by, definitions
) VALUES (
    %(host_id)s, %(name)s, %(version)s, %(key_id)s, %(nonce)s, %(ciphertext)s, %(actor)s,
    %(actor)s, %(definitions)s::uuid[]
)
ON CONFLICT (host_id, name) DO NOTHING
RETURNING version, created_ts, updated_ts;

-- store_secret_version --
-- Replace a locked row's value with the next version (a rotation, or a put after a delete).
-- A put that names no definitions keeps a live secret's scope; after a delete it starts afresh.
UPDATE workflow_secret_t
SET version = %(version)s,
    definitions = CASE WHEN %(scoped)s THEN %(definitions)s::uuid[]
                       WHEN deleted_ts IS NULL THEN definitions ELSE NULL END,
    key_id = %(key_id)s,
    nonce = %(nonce)s,
    ciphertext = %(ciphertext)s,
    created_by = CASE WHEN deleted_ts IS NULL THEN created_by ELSE %(actor)s END,
    created_ts = CASE WHEN deleted_ts IS NULL THEN created_ts ELSE now() END,
    updated_by = %(actor)s,
    updated_ts = now(),
    deleted_ts = NULL
WHERE host_id = %(host_id)s AND name = %(name)s AND version = %(version)s - 1
RETURNING version, created_ts, updated_ts;

-- tombstone_secret --
-- Drop a live secret's sealed value and mark it deleted; its version stays for the next put.
UPDATE workflow_secret_t
SET key_id = NULL, nonce = NULL, ciphertext = NULL, deleted_ts = now(),
    updated_by = %(actor)s, updated_ts = now()
WHERE host_id = %(host_id)s AND name = %(name)s AND deleted_ts IS NULL
RETURNING version;

-- select_secret_page --
-- One page of a host's live secrets in name order (byte order, so cursors are stable).
SELECT name, version, created_ts, updated_ts, updated_by,
       definitions::text[] AS definitions
FROM workflow_secret_t
WHERE host_id = %(host_id)s AND deleted_ts IS NULL
  AND (%(after)s::text IS NULL OR name COLLATE "C" > %(after)s::text COLLATE "C")
ORDER BY name COLLATE "C"
LIMIT %(limit)s;

-- share_live_secret_names --
-- Which of the given names the host holds and their scopes (NULL: every definition), locked
-- FOR SHARE (a delete or a narrowing put waits for the publish).
SELECT name, definitions::text[] AS definitions
FROM workflow_secret_t
WHERE host_id = %(host_id)s AND name = ANY(%(names)s::text[]) AND deleted_ts IS NULL
FOR SHARE;

-- select_secret_references --
-- Published (active) definition versions whose use.secrets declares one of the names.
SELECT v.wf_def_id::text AS wf_def_id, v.version, s.name
FROM wf_definition_version_t v
CROSS JOIN LATERAL jsonb_array_elements_text(
    CASE WHEN jsonb_typeof(v.document -> 'use' -> 'secrets') = 'array'
         THEN v.document -> 'use' -> 'secrets' ELSE '[]'::jsonb END
) AS s(name)
WHERE v.host_id = %(host_id)s AND v.status = 'active'
  AND (v.document -> 'use' -> 'secrets') ?| %(names)s::text[]
  AND s.name = ANY(%(names)s::text[])
ORDER BY s.name, v.wf_def_id, v.version
LIMIT 10000;

-- select_sealed_secret --
-- The sealed current value of a live host secret (execution opens it at dispatch).
SELECT version, key_id, nonce, ciphertext, definitions::text[] AS definitions
FROM workflow_secret_t
WHERE host_id = %(host_id)s AND name = %(name)s AND deleted_ts IS NULL;

-- select_rollback_candidate --
-- The revision a rollback restores: the most recently approved superseded revision of the Tool
-- whose binding differs from the active one (revoked and retired ones were withdrawn on
-- purpose and never come back).
SELECT binding_id::text AS binding_id
FROM workflow_tool_binding_t
WHERE host_id = %(host_id)s AND tool_id = %(tool_id)s AND revision_status = 'superseded'
  AND approved_ts IS NOT NULL AND binding_digest <> %(active_digest)s
ORDER BY approved_ts DESC, binding_id DESC
LIMIT 1;

-- select_pinning_dependents --
-- The reverse index: active revisions of other Tools that pin a version of a nested Tool.
SELECT DISTINCT b.tool_id::text AS tool_id, b.tool_name, b.binding_id::text AS binding_id,
       d.nested_tool_version AS pinned_version
FROM workflow_tool_dependency_t d
JOIN workflow_tool_binding_t b ON b.host_id = d.host_id AND b.binding_id = d.binding_id
WHERE d.host_id = %(host_id)s AND d.nested_tool_id = %(nested_tool_id)s
  AND d.nested_tool_version = %(version)s AND b.active AND b.tool_id <> %(nested_tool_id)s
ORDER BY b.tool_name, tool_id
LIMIT 1000;

-- select_active_bindings --
-- Every active revision (all hosts when host_id is null), for the drift checks.
SELECT b.host_id::text AS host_id, b.binding_id::text AS binding_id, b.tool_id::text AS tool_id,
       b.wf_def_id::text AS wf_def_id, b.workflow_version, v.status AS version_status,
       v.document
FROM workflow_tool_binding_t b
JOIN wf_definition_version_t v
  ON v.host_id = b.host_id AND v.wf_def_id = b.wf_def_id AND v.version = b.workflow_version
WHERE b.active AND (%(host_id)s::uuid IS NULL OR b.host_id = %(host_id)s::uuid)
  AND (%(tool_id)s::uuid IS NULL OR b.tool_id = %(tool_id)s::uuid)
ORDER BY b.host_id, b.tool_id
LIMIT 100000;

-- select_promoted_versions --
-- The version each workflow-backed Tool of a host has active now ('' when it has a head but
-- no active revision); Tools without a head are not workflow-backed and are left out.
SELECT p.tool_id::text AS tool_id, coalesce(b.workflow_version, '') AS workflow_version
FROM workflow_tool_publication_t p
LEFT JOIN workflow_tool_binding_t b
  ON b.host_id = p.host_id AND b.binding_id = p.active_binding_id
WHERE p.host_id = %(host_id)s AND p.tool_id = ANY(%(tool_ids)s::uuid[]);

-- select_live_secret_names --
-- Which of the given names a host holds live now (a tombstone or no row: not held).
SELECT name
FROM workflow_secret_t
WHERE host_id = %(host_id)s AND name = ANY(%(names)s::text[]) AND deleted_ts IS NULL;

-- select_dependencies_reaching --
-- Which of the nested Tools (start) reach target through the dependencies of the host's
-- current revisions (active or pending: either may serve), any number of hops. UNION keeps
-- each (start, Tool) pair once, so a cycle among other Tools ends the walk.
WITH RECURSIVE walk(start_id, tool_id) AS (
    SELECT started, started
    FROM unnest(%(start)s::uuid[]) AS started
    UNION
    SELECT walk.start_id, dependency.nested_tool_id
    FROM walk
    JOIN workflow_tool_binding_t binding
      ON binding.host_id = %(host_id)s AND binding.tool_id = walk.tool_id
     AND (binding.active OR binding.revision_status = 'pendingApproval')
    JOIN workflow_tool_dependency_t dependency
      ON dependency.host_id = binding.host_id AND dependency.binding_id = binding.binding_id
)
SELECT DISTINCT start_id::text AS nested_tool_id
FROM walk
WHERE tool_id = %(target)s::uuid;

-- select_version_contract --
-- The contract of a Tool at one version, for drift's classification: the schemas of its most
-- recently approved revision of that version (whatever it became since) and the definition
-- version's document (its input and output schemas when the revision names none).
SELECT b.input_schema, b.output_schema, v.document
FROM workflow_tool_binding_t b
JOIN wf_definition_version_t v
  ON v.host_id = b.host_id AND v.wf_def_id = b.wf_def_id AND v.version = b.workflow_version
WHERE b.host_id = %(host_id)s AND b.tool_id = %(tool_id)s
  AND b.workflow_version = %(version)s AND b.approved_ts IS NOT NULL
ORDER BY b.approved_ts DESC
LIMIT 1;
-- select_authoring_tools --
-- The active revisions of the Tools an author selected (issue 38), by toolId on the caller's
-- host: only the fields the authoring context may carry, the caller policy to filter them by,
-- and whether the pinned definition version still serves. Host-scoped: another host's Tool
-- reads as unknown.
SELECT h.tool_id::text AS tool_id, r.tool_name, r.binding->>'toolDescription' AS tool_description,
       r.input_schema, r.output_schema, r.tool_annotations, r.caller_policy,
       v.status AS version_status
FROM workflow_tool_publication_t h
JOIN workflow_tool_binding_t r
  ON r.host_id = h.host_id AND r.binding_id = h.active_binding_id
JOIN wf_definition_version_t v
  ON v.host_id = r.host_id AND v.wf_def_id = r.wf_def_id AND v.version = r.workflow_version
WHERE h.host_id = %(host_id)s AND h.tool_id = ANY(%(tool_ids)s::uuid[])
ORDER BY h.tool_id;
