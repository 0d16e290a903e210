-- workflow_start runs get an action authority row too (grant id = run id, the run's deadline,
-- the default budget's nested-call limit). Seed 000 names credential kinds only for
-- workflow_invoke ('invoke'), LONG ('long') and legacy rows ('broker'); it names none for a
-- start run, so this adds a distinct value, 'start': its token is the start's sealed run
-- credential, or none when no sealing key was usable.

ALTER TABLE workflow_action_authority_t
    DROP CONSTRAINT workflow_action_authority_kind_check;

ALTER TABLE workflow_action_authority_t
    ADD CONSTRAINT workflow_action_authority_kind_check
        CHECK (credential_kind IN ('invoke', 'long', 'broker', 'start'));
