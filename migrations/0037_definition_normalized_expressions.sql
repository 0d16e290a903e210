-- Seed 001 (CEL Runtime Contract) and dsl-profile §1: publication persists the normalized
-- definition (bare `.x` transform leaves rewritten to `${ .x }`) and every expression with its
-- digest with the immutable version, so what was checked at publication is what is recorded.
-- Versions published before this migration have neither (NULL): nothing is re-derived for them.

ALTER TABLE wf_definition_version_t
    ADD COLUMN normalized_document jsonb,
    ADD COLUMN expression_digests jsonb;

-- The guard of 0002, unchanged but for the two new columns, which are as immutable as the rest.
CREATE OR REPLACE FUNCTION wf_definition_version_guard() RETURNS trigger
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
        NEW.publish_operation_id, NEW.normalized_document, NEW.expression_digests)
       IS DISTINCT FROM
       (OLD.host_id, OLD.wf_def_id, OLD.version, OLD.namespace, OLD.name, OLD.definition,
        OLD.document, OLD.definition_digest, OLD.schema_digest, OLD.binding_approval,
        OLD.owner_user_id, OLD.owner_position_id, OLD.published_by, OLD.published_ts,
        OLD.publish_operation_id, OLD.normalized_document, OLD.expression_digests) THEN
        RAISE EXCEPTION 'published definition versions are immutable'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'wf_definition_version_immutable';
    END IF;
    RETURN NEW;
END
$$;
