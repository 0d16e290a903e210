-- Named queries of the publication domain (definition heads, versions, grants, the operation
-- receipt ledger). Loaded once by runtime/publication/store/sql.py.

-- insert_definition_head --
-- Create the saved head of a definition if it does not exist yet; returns a row only when created.
INSERT INTO wf_definition_t (
    host_id, wf_def_id, source_revision, namespace, name, version, definition,
    definition_digest, content_digest, lifecycle_status, catalog_visible, owner_user_id,
    owner_position_id, active, actor, saved_by
) VALUES (
    %(host_id)s, %(wf_def_id)s, %(source_revision)s, %(namespace)s, %(name)s, %(version)s,
    %(definition)s, %(definition_digest)s, %(content_digest)s, %(lifecycle_status)s,
    %(catalog_visible)s, %(owner_user_id)s, %(owner_position_id)s, %(active)s, %(actor)s,
    %(saved_by)s
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
    updated_ts = now()
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s AND source_revision < %(source_revision)s
RETURNING source_revision, definition_digest, active;

-- select_definition_head --
-- Read the saved head of a definition (workflow_start runs it; tests inspect it).
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
-- Read one published version with its normalized document (admission and binding publish).
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
-- The live grant set of a definition, ordered by grant id.
SELECT grant_id, tool_id, tool_version, lightapi_digest, allowed_environments, source_revision
FROM workflow_tool_grant_t
WHERE host_id = %(host_id)s AND wf_def_id = %(wf_def_id)s
ORDER BY grant_id;

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
