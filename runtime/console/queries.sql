-- Named queries of the console's sessions (runtime/console/revocations.py), scoped by host.

-- revoke_session --
-- Record a signed-out session (a second sign-out of it changes nothing).
INSERT INTO workflow_console_session_revocation (host_id, session_digest, expires_ts)
VALUES (%(host_id)s, %(session_digest)s, to_timestamp(%(expires_at)s))
ON CONFLICT (host_id, session_digest) DO NOTHING;

-- prune_revocations --
-- Forget the host's revocations of sessions that have expired on their own since.
DELETE FROM workflow_console_session_revocation
WHERE host_id = %(host_id)s AND expires_ts < now();

-- session_revoked --
-- Whether a session was signed out.
SELECT 1 AS revoked FROM workflow_console_session_revocation
WHERE host_id = %(host_id)s AND session_digest = %(session_digest)s;
