-- The development-feature ledger (migration 0105). Every statement is scoped by host_id; the
-- callers hold one transaction and lock the feature row (or the host's slot row) first.

-- ensure_slot --
-- The host's slot row, created on first use.
INSERT INTO workflow_feature_slot (host_id) VALUES (%(host_id)s) ON CONFLICT DO NOTHING;

-- lock_slot --
-- The host's slot, locked for the transaction.
SELECT feature_run_id::text AS feature_run_id, generation
FROM workflow_feature_slot WHERE host_id = %(host_id)s FOR UPDATE;

-- take_slot --
-- Give the free slot to a feature under a new reservation generation.
UPDATE workflow_feature_slot SET feature_run_id = %(feature_run_id)s, generation = generation + 1
WHERE host_id = %(host_id)s RETURNING generation;

-- release_slot --
-- Free the slot, fenced by holder and generation.
UPDATE workflow_feature_slot SET feature_run_id = NULL
WHERE host_id = %(host_id)s AND feature_run_id = %(feature_run_id)s
  AND generation = %(generation)s;

-- select_slot --
-- The host's slot without a lock.
SELECT feature_run_id::text AS feature_run_id, generation
FROM workflow_feature_slot WHERE host_id = %(host_id)s;

-- select_operation --
-- A recorded feature operation.
SELECT tool, request_digest, outcome FROM workflow_feature_operation
WHERE host_id = %(host_id)s AND operation_id = %(operation_id)s;

-- insert_operation --
-- Record a feature operation's outcome.
INSERT INTO workflow_feature_operation (host_id, operation_id, tool, request_digest, outcome)
VALUES (%(host_id)s, %(operation_id)s, %(tool)s, %(request_digest)s, %(outcome)s::jsonb);

-- insert_feature --
-- A new feature run.
INSERT INTO workflow_feature_run (
    host_id, feature_run_id, issue, scope, completion_target, require_design_signoff, phases,
    accepted_inputs, state, maximum_remediation_rounds, maximum_turns, slot_generation, created_by
) VALUES (
    %(host_id)s, %(feature_run_id)s, %(issue)s::jsonb, %(scope)s, %(completion_target)s,
    %(require_design_signoff)s, %(phases)s::jsonb, %(accepted_inputs)s::jsonb, %(state)s,
    %(maximum_remediation_rounds)s, %(maximum_turns)s, %(slot_generation)s, %(created_by)s
);

-- select_feature --
-- A feature run.
SELECT feature_run_id::text AS feature_run_id, issue, scope, completion_target,
       require_design_signoff, phases, accepted_inputs, accepted_results, state, version,
       active_stage_execution_id::text AS active_stage_execution_id, maximum_remediation_rounds,
       maximum_turns, remediation_used, turns_used, slot_generation, signoff, resolution_reason, created_ts,
       updated_ts
FROM workflow_feature_run WHERE host_id = %(host_id)s AND feature_run_id = %(feature_run_id)s;

-- lock_feature --
-- A feature run, locked for the transaction (every mutation starts here).
SELECT feature_run_id::text AS feature_run_id, issue, scope, completion_target,
       require_design_signoff, phases, accepted_inputs, accepted_results, state, version,
       active_stage_execution_id::text AS active_stage_execution_id, maximum_remediation_rounds,
       maximum_turns, remediation_used, turns_used, slot_generation, signoff, resolution_reason, created_ts,
       updated_ts
FROM workflow_feature_run WHERE host_id = %(host_id)s AND feature_run_id = %(feature_run_id)s
FOR UPDATE;

-- update_feature --
-- Write back a locked feature run's mutable columns.
UPDATE workflow_feature_run
SET accepted_inputs = %(accepted_inputs)s::jsonb, accepted_results = %(accepted_results)s::jsonb,
    state = %(state)s, version = %(version)s,
    active_stage_execution_id = %(active_stage_execution_id)s,
    remediation_used = %(remediation_used)s::jsonb, turns_used = %(turns_used)s,
    signoff = %(signoff)s::jsonb, resolution_reason = %(resolution_reason)s, updated_ts = now()
WHERE host_id = %(host_id)s AND feature_run_id = %(feature_run_id)s;

-- select_claim_by_transition --
-- The claim of one transition identity (feature, stage key, predecessor version).
SELECT feature_run_id::text AS feature_run_id, stage_key, predecessor_version, stage,
       stage_execution_id::text AS stage_execution_id, process_id::text AS process_id,
       wf_def_id::text AS wf_def_id, definition_digest, inputs, request_digest, state, outcome,
       claimed_ts
FROM workflow_feature_claim
WHERE host_id = %(host_id)s AND feature_run_id = %(feature_run_id)s
  AND stage_key = %(stage_key)s AND predecessor_version = %(predecessor_version)s;

-- select_claim_by_execution --
-- The claim of one stage execution.
SELECT feature_run_id::text AS feature_run_id, stage_key, predecessor_version, stage,
       stage_execution_id::text AS stage_execution_id, process_id::text AS process_id,
       wf_def_id::text AS wf_def_id, definition_digest, inputs, request_digest, state, outcome,
       claimed_ts
FROM workflow_feature_claim
WHERE host_id = %(host_id)s AND feature_run_id = %(feature_run_id)s
  AND stage_execution_id = %(stage_execution_id)s;

-- insert_claim --
-- A new active claim.
INSERT INTO workflow_feature_claim (
    host_id, feature_run_id, stage_key, predecessor_version, stage, stage_execution_id,
    process_id, wf_def_id, definition_digest, inputs, request_digest, state
) VALUES (
    %(host_id)s, %(feature_run_id)s, %(stage_key)s, %(predecessor_version)s, %(stage)s::jsonb,
    %(stage_execution_id)s, %(process_id)s, %(wf_def_id)s, %(definition_digest)s,
    %(inputs)s::jsonb, %(request_digest)s, 'active'
)
RETURNING claimed_ts;

-- settle_claim --
-- Close a claim with its recorded outcome.
UPDATE workflow_feature_claim SET state = %(state)s, outcome = %(outcome)s::jsonb
WHERE host_id = %(host_id)s AND stage_execution_id = %(stage_execution_id)s;

-- select_findings --
-- Every canonical finding of a feature run.
SELECT finding_id, review_id, local_id, stage_execution_id::text AS stage_execution_id,
       severity, status, alias_of
FROM workflow_feature_finding
WHERE host_id = %(host_id)s AND feature_run_id = %(feature_run_id)s
ORDER BY finding_id;

-- upsert_finding --
-- A new finding, or a new status of a known one.
INSERT INTO workflow_feature_finding (
    host_id, feature_run_id, review_id, local_id, finding_id, alias_of, stage_execution_id,
    severity, status
) VALUES (
    %(host_id)s, %(feature_run_id)s, %(review_id)s, %(local_id)s, %(finding_id)s, %(alias_of)s,
    %(stage_execution_id)s, %(severity)s, %(status)s
)
ON CONFLICT (host_id, feature_run_id, review_id, local_id) DO UPDATE SET status = EXCLUDED.status;

-- select_run --
-- The stage run's state and output (the process table's view), for acceptance.
SELECT state, result FROM workflow_run_state
WHERE host_id = %(host_id)s AND process_id = %(process_id)s;
