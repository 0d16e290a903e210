-- Saved definition heads (written only by workflow_definition_save) and immutable published
-- definition versions (written by workflow_definition_publish; only status moves, to retired).

CREATE TABLE wf_definition_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    source_revision bigint NOT NULL,
    namespace varchar(126) NOT NULL,
    name varchar(126) NOT NULL,
    version varchar(20) NOT NULL,
    definition text NOT NULL,
    definition_digest text NOT NULL,
    -- Digest of every saved field except actor (audit only): equal revisions compare this.
    content_digest text NOT NULL,
    lifecycle_status varchar(126),
    catalog_visible boolean NOT NULL,
    owner_user_id varchar(126) NOT NULL,
    owner_position_id varchar(126),
    active boolean NOT NULL,
    actor varchar(126) NOT NULL,
    saved_by varchar(126) NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    updated_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT wf_definition_pk PRIMARY KEY (host_id, wf_def_id),
    CONSTRAINT wf_definition_source_revision_check CHECK (source_revision >= 0),
    CONSTRAINT wf_definition_digest_check CHECK (definition_digest ~ '^sha256:[0-9a-f]{64}$')
);

CREATE TABLE wf_definition_version_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    version varchar(64) NOT NULL,
    namespace varchar(126) NOT NULL,
    name varchar(126) NOT NULL,
    definition text NOT NULL,
    document jsonb NOT NULL,
    definition_digest text NOT NULL,
    schema_digest text NOT NULL,
    binding_approval text NOT NULL,
    status text NOT NULL DEFAULT 'active',
    owner_user_id varchar(126) NOT NULL,
    owner_position_id varchar(126),
    published_by varchar(126) NOT NULL,
    published_ts timestamptz NOT NULL DEFAULT now(),
    publish_operation_id uuid,
    retired_by varchar(126),
    retired_ts timestamptz,
    retire_operation_id uuid,
    CONSTRAINT wf_definition_version_pk PRIMARY KEY (host_id, wf_def_id, version),
    CONSTRAINT wf_definition_version_binding_approval_check
        CHECK (binding_approval IN ('carryOver', 'reapprove')),
    CONSTRAINT wf_definition_version_status_check CHECK (status IN ('active', 'retired')),
    CONSTRAINT wf_definition_version_retired_check
        CHECK ((status = 'retired') = (retired_ts IS NOT NULL)),
    CONSTRAINT wf_definition_version_digest_check
        CHECK (definition_digest ~ '^sha256:[0-9a-f]{64}$'
               AND schema_digest ~ '^sha256:[0-9a-f]{64}$')
);

-- A version is immutable except for its one-way move to retired: enforced here, not by habit.
CREATE FUNCTION wf_definition_version_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'published definition versions are never deleted'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'wf_definition_version_immutable';
    END IF;
    IF OLD.status = 'retired' AND NEW IS DISTINCT FROM OLD THEN
        RAISE EXCEPTION 'a retired definition version is terminal'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'wf_definition_version_retired_terminal';
    END IF;
    IF (NEW.host_id, NEW.wf_def_id, NEW.version, NEW.namespace, NEW.name, NEW.definition,
        NEW.document, NEW.definition_digest, NEW.schema_digest, NEW.binding_approval,
        NEW.owner_user_id, NEW.owner_position_id, NEW.published_by, NEW.published_ts,
        NEW.publish_operation_id)
       IS DISTINCT FROM
       (OLD.host_id, OLD.wf_def_id, OLD.version, OLD.namespace, OLD.name, OLD.definition,
        OLD.document, OLD.definition_digest, OLD.schema_digest, OLD.binding_approval,
        OLD.owner_user_id, OLD.owner_position_id, OLD.published_by, OLD.published_ts,
        OLD.publish_operation_id) THEN
        RAISE EXCEPTION 'published definition versions are immutable'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'wf_definition_version_immutable';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER wf_definition_version_guard_trg
    BEFORE UPDATE OR DELETE ON wf_definition_version_t
    FOR EACH ROW EXECUTE FUNCTION wf_definition_version_guard();

REVOKE DELETE, TRUNCATE ON wf_definition_version_t FROM workflow_runtime;
REVOKE DELETE, TRUNCATE ON wf_definition_t FROM workflow_runtime;
