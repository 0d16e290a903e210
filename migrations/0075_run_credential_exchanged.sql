-- Issue 24: a run credential records when it became the run's exchanged token (RFC 8693).
-- Seed 000 "Run credential selection": once the selector exchanges a run's token, the run's
-- protected HTTP calls go to the configured Gateway origin instead of the approved endpoint.
-- The fact is stored beside the sealed token, so every replica routes the run's calls alike.
-- NULL: the token is the caller's original one (every row before this migration).

ALTER TABLE workflow_run_credential
    ADD COLUMN exchanged_ts timestamptz;
