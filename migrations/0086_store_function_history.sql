-- The runner records each install of an authored function file (migrations/functions/) in
-- schema_function_history, a table it creates before any migration runs, as it does
-- schema_migrations. The service reads it (readiness: every function file installed) and
-- never writes it. On a fresh database the runner creates it before 0001 sets the default
-- privileges, so it has no grant; on an older one 0001's default privileges gave the runtime
-- role the table's writes and its id sequence. Both end the same here.
REVOKE ALL ON schema_function_history FROM workflow_runtime;
REVOKE ALL ON SEQUENCE schema_function_history_id_seq FROM workflow_runtime;
GRANT SELECT ON schema_function_history TO workflow_runtime;
