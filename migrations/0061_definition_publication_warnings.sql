-- Issue 11: a published version keeps the warnings its publication returned, so republishing
-- the same payload answers the same `unchanged` receipt without running the checker again.
-- NULL means "not computed yet" (versions published before this migration): the first
-- unchanged receipt computes them once and stores them; after that they never change.

ALTER TABLE wf_definition_version_t
    ADD COLUMN publication_warnings jsonb;

-- The guard of 0037, but for the new column: it may go from NULL to a value once (the
-- backfill, also on a retired version), and is as immutable as the rest afterwards.
CREATE OR REPLACE FUNCTION wf_definition_version_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'published definition versions are never deleted'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'wf_definition_version_immutable';
    END IF;
    IF OLD.status = 'retired'
       AND to_jsonb(NEW) - 'publication_warnings' IS DISTINCT FROM
           to_jsonb(OLD) - 'publication_warnings' THEN
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
        OLD.publish_operation_id, OLD.normalized_document, OLD.expression_digests)
       OR (OLD.publication_warnings IS NOT NULL
           AND NEW.publication_warnings IS DISTINCT FROM OLD.publication_warnings) THEN
        RAISE EXCEPTION 'published definition versions are immutable'
            USING ERRCODE = 'integrity_constraint_violation',
                  CONSTRAINT = 'wf_definition_version_immutable';
    END IF;
    RETURN NEW;
END
$$;
