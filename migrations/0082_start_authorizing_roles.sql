-- Authorized handles (issue 22 item 5): a workflow_start run's status and result are readable
-- by its starter only while the starter still holds a role that authorized the start. The
-- roles the start was admitted with (the caller's roles among workflow_start's allowed ones)
-- are kept with the run's admission record; NULL for workflow_invoke runs (the Tool is their
-- capability) and for starts admitted before this migration (no check, as before).
ALTER TABLE workflow_invocation_t ADD COLUMN starter_roles text[];
