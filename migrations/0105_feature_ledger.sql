-- Issue 36 (seed 004): the development-feature stage ledger. A feature run, its stage claims
-- (transition identity: feature + stage key + predecessor version), the canonical finding map,
-- the per-host slot ("one feature per VM") and the operation ledger of the feature tools.
-- Every table is keyed by host_id; every write of a feature happens under its row lock.

CREATE TABLE workflow_feature_run (
    host_id uuid NOT NULL,
    feature_run_id uuid NOT NULL,
    issue jsonb NOT NULL,
    scope text NOT NULL CHECK (scope IN ('design-only', 'implementation')),
    completion_target text NOT NULL
        CHECK (completion_target IN ('pr-ready', 'merged', 'deployed')),
    require_design_signoff boolean NOT NULL,
    phases jsonb NOT NULL,
    -- The accepted input bindings (name -> {id, digest}); requirements pinned at intake.
    accepted_inputs jsonb NOT NULL,
    -- Accepted stage results, in acceptance order.
    accepted_results jsonb NOT NULL DEFAULT '[]'::jsonb,
    state text NOT NULL,
    version integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    -- The one stage owning mutable execution (F1): its stage execution id, or NULL.
    active_stage_execution_id uuid,
    maximum_remediation_rounds integer NOT NULL,
    maximum_turns integer NOT NULL,
    -- Remediation rounds consumed per stage key (survives reopen and new instances: F17).
    remediation_used jsonb NOT NULL DEFAULT '{}'::jsonb,
    turns_used integer NOT NULL DEFAULT 0,
    slot_generation bigint NOT NULL,
    signoff jsonb,
    -- Why the feature needs a person (the last human-resolution outcome), or NULL.
    resolution_reason text,
    created_by text NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    updated_ts timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host_id, feature_run_id)
);

CREATE TABLE workflow_feature_claim (
    host_id uuid NOT NULL,
    feature_run_id uuid NOT NULL,
    stage_key text NOT NULL,
    predecessor_version integer NOT NULL,
    stage jsonb NOT NULL,
    stage_execution_id uuid NOT NULL,
    process_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    definition_digest text NOT NULL,
    inputs jsonb NOT NULL,
    request_digest text NOT NULL,
    state text NOT NULL,
    -- The recorded acceptance (or human-resolution) outcome, replayed to any later accept.
    outcome jsonb,
    claimed_ts timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host_id, feature_run_id, stage_key, predecessor_version),
    UNIQUE (host_id, stage_execution_id),
    FOREIGN KEY (host_id, feature_run_id) REFERENCES workflow_feature_run (host_id, feature_run_id)
);

CREATE TABLE workflow_feature_finding (
    host_id uuid NOT NULL,
    feature_run_id uuid NOT NULL,
    review_id text NOT NULL,
    local_id text NOT NULL,
    finding_id text NOT NULL,
    -- A validated duplicate keeps the old canonical id; this row is then its alias record.
    alias_of text,
    stage_execution_id uuid NOT NULL,
    severity text NOT NULL,
    status text NOT NULL,
    PRIMARY KEY (host_id, feature_run_id, review_id, local_id),
    FOREIGN KEY (host_id, feature_run_id) REFERENCES workflow_feature_run (host_id, feature_run_id)
);
CREATE INDEX workflow_feature_finding_id ON workflow_feature_finding (host_id, finding_id);

-- One slot per host (the pilot's one VM): the feature holding it and its reservation generation.
CREATE TABLE workflow_feature_slot (
    host_id uuid PRIMARY KEY,
    feature_run_id uuid,
    generation bigint NOT NULL DEFAULT 0
);

CREATE TABLE workflow_feature_operation (
    host_id uuid NOT NULL,
    operation_id uuid NOT NULL,
    tool text NOT NULL,
    request_digest text NOT NULL,
    outcome jsonb NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host_id, operation_id)
);
