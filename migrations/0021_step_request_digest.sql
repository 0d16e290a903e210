-- The request fingerprint of a write step: a digest over the call's identity (HTTP method, URI,
-- query and body; MCP tool and arguments), written when the step is marked possible. A replay
-- resumes from a confirmed step only when its own call has the same fingerprint, so a write whose
-- ordinal moved (concurrent fork branches) never receives another call's output. Rows written
-- before this column existed keep NULL, which replays as before (by ordinal alone).

ALTER TABLE workflow_step ADD COLUMN request_digest text;
