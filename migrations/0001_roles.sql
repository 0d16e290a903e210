-- The role the service runs as (SET ROLE after connecting) and its default privileges.
-- Roles are cluster-wide while migrations run per database, so creating the role tolerates
-- another database (or a concurrent runner on one) having created it first.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'workflow_runtime') THEN
        CREATE ROLE workflow_runtime NOLOGIN;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN
        NULL;
END
$$;

-- The login that runs migrations owns the tables and must be able to SET ROLE to the runtime.
DO $$
BEGIN
    IF NOT pg_catalog.pg_has_role(CURRENT_USER, 'workflow_runtime', 'MEMBER') THEN
        EXECUTE format('GRANT workflow_runtime TO %I', CURRENT_USER);
    END IF;
END
$$;

GRANT USAGE ON SCHEMA public TO workflow_runtime;

-- Tables and sequences created later by this owner are usable by the runtime; migrations of
-- append-only tables REVOKE UPDATE, DELETE from it again.
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO workflow_runtime;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO workflow_runtime;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT EXECUTE ON FUNCTIONS TO workflow_runtime;

-- The runner created this table before the default privileges above existed; the service
-- reads it to check that the schema it runs against is current.
GRANT SELECT ON schema_migrations TO workflow_runtime;
