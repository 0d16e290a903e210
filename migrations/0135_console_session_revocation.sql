-- Console sign-out revokes the session on the server: a copied session cookie is refused by
-- every replica and after a restart, not only cleared in the signing-out browser. A session is
-- named by a digest of its random nonce (never the cookie, the nonce or the token itself); a row
-- is only needed until the session would have expired anyway (expires_ts), then it is pruned.
CREATE TABLE workflow_console_session_revocation (
    host_id uuid NOT NULL,
    session_digest text NOT NULL,
    expires_ts timestamptz NOT NULL,
    revoked_ts timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host_id, session_digest)
);

GRANT SELECT, INSERT, DELETE ON workflow_console_session_revocation TO workflow_runtime;
