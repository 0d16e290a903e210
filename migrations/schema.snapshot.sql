-- Schema after all migrations, from `python -m runtime.store.migrations snapshot`.
-- Generated: do not edit by hand. Grants and ownership are not included.

CREATE FUNCTION public.wf_definition_version_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE TABLE public.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.wf_definition_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    source_revision bigint NOT NULL,
    namespace character varying(126) NOT NULL,
    name character varying(126) NOT NULL,
    version character varying(20) NOT NULL,
    definition text NOT NULL,
    definition_digest text NOT NULL,
    content_digest text NOT NULL,
    lifecycle_status character varying(126),
    catalog_visible boolean NOT NULL,
    owner_user_id character varying(126) NOT NULL,
    owner_position_id character varying(126),
    active boolean NOT NULL,
    actor character varying(126) NOT NULL,
    saved_by character varying(126) NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT wf_definition_digest_check CHECK ((definition_digest ~ '^sha256:[0-9a-f]{64}$'::text)),
    CONSTRAINT wf_definition_source_revision_check CHECK ((source_revision >= 0))
);

CREATE TABLE public.wf_definition_version_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    version character varying(64) NOT NULL,
    namespace character varying(126) NOT NULL,
    name character varying(126) NOT NULL,
    definition text NOT NULL,
    document jsonb NOT NULL,
    definition_digest text NOT NULL,
    schema_digest text NOT NULL,
    binding_approval text NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    owner_user_id character varying(126) NOT NULL,
    owner_position_id character varying(126),
    published_by character varying(126) NOT NULL,
    published_ts timestamp with time zone DEFAULT now() NOT NULL,
    publish_operation_id uuid,
    retired_by character varying(126),
    retired_ts timestamp with time zone,
    retire_operation_id uuid,
    CONSTRAINT wf_definition_version_binding_approval_check CHECK ((binding_approval = ANY (ARRAY['carryOver'::text, 'reapprove'::text]))),
    CONSTRAINT wf_definition_version_digest_check CHECK (((definition_digest ~ '^sha256:[0-9a-f]{64}$'::text) AND (schema_digest ~ '^sha256:[0-9a-f]{64}$'::text))),
    CONSTRAINT wf_definition_version_retired_check CHECK (((status = 'retired'::text) = (retired_ts IS NOT NULL))),
    CONSTRAINT wf_definition_version_status_check CHECK ((status = ANY (ARRAY['active'::text, 'retired'::text])))
);

CREATE TABLE public.workflow_definition_grant_sync_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    source_revision bigint NOT NULL,
    grants_digest text NOT NULL,
    actor character varying(126) NOT NULL,
    synced_by character varying(126) NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL,
    updated_ts timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_definition_grant_sync_digest_check CHECK ((grants_digest ~ '^sha256:[0-9a-f]{64}$'::text)),
    CONSTRAINT workflow_definition_grant_sync_revision_check CHECK ((source_revision >= 0))
);

CREATE TABLE public.workflow_publication_operation_t (
    host_id uuid NOT NULL,
    operation_id uuid NOT NULL,
    tool_name character varying(64) NOT NULL,
    request_digest text NOT NULL,
    requested_by character varying(126) NOT NULL,
    response jsonb,
    is_error boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    CONSTRAINT workflow_publication_operation_digest_check CHECK ((request_digest ~ '^sha256:[0-9a-f]{64}$'::text))
);

CREATE TABLE public.workflow_tool_grant_t (
    host_id uuid NOT NULL,
    wf_def_id uuid NOT NULL,
    grant_id character varying(126) NOT NULL,
    tool_id character varying(126) NOT NULL,
    tool_version character varying(64),
    lightapi_digest text,
    allowed_environments text[] DEFAULT '{}'::text[] NOT NULL,
    source_revision bigint NOT NULL,
    created_ts timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.wf_definition_t
    ADD CONSTRAINT wf_definition_pk PRIMARY KEY (host_id, wf_def_id);

ALTER TABLE ONLY public.wf_definition_version_t
    ADD CONSTRAINT wf_definition_version_pk PRIMARY KEY (host_id, wf_def_id, version);

ALTER TABLE ONLY public.workflow_definition_grant_sync_t
    ADD CONSTRAINT workflow_definition_grant_sync_pk PRIMARY KEY (host_id, wf_def_id);

ALTER TABLE ONLY public.workflow_publication_operation_t
    ADD CONSTRAINT workflow_publication_operation_pk PRIMARY KEY (host_id, operation_id);

ALTER TABLE ONLY public.workflow_tool_grant_t
    ADD CONSTRAINT workflow_tool_grant_pk PRIMARY KEY (host_id, wf_def_id, grant_id);

CREATE INDEX workflow_publication_operation_created_idx ON public.workflow_publication_operation_t USING btree (created_at);

CREATE INDEX workflow_tool_grant_tool_idx ON public.workflow_tool_grant_t USING btree (host_id, tool_id);

CREATE TRIGGER wf_definition_version_guard_trg BEFORE DELETE OR UPDATE ON public.wf_definition_version_t FOR EACH ROW EXECUTE FUNCTION public.wf_definition_version_guard();

ALTER TABLE ONLY public.workflow_tool_grant_t
    ADD CONSTRAINT workflow_tool_grant_sync_fk FOREIGN KEY (host_id, wf_def_id) REFERENCES public.workflow_definition_grant_sync_t(host_id, wf_def_id) ON DELETE CASCADE;
