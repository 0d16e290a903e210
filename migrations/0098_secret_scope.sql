-- Issue 40 X-11: a host secret names the definitions that may use it (seed 001, Authorization
-- And Data Protection: service identity "no broader than the published capability set").
-- NULL: every definition of the host (secrets put before this migration, and puts that name
-- none); an array: only those wfDefIds may declare the secret, start with it or send it.
ALTER TABLE workflow_secret_t ADD COLUMN definitions uuid[];
ALTER TABLE workflow_secret_t ADD CONSTRAINT workflow_secret_definitions_check
    CHECK (definitions IS NULL OR cardinality(definitions) <= 256);
