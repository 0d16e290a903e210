"""Signed-out console sessions, kept in PostgreSQL so every replica refuses them, restarts too.

A session is named by a digest of its random nonce: the table holds neither the cookie nor
anything that opens it or stands in for it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from runtime.console.session import Session
from runtime.store import Database, load_queries

QUERIES = load_queries(Path(__file__).resolve().with_name("queries.sql"))
_DIGEST_PREFIX = b"workflow-console-session-revocation-v1\x00"


def session_digest(session: Session) -> str:
    """The name of a session in the revocation table (sha256 of its nonce, domain-separated)."""
    return "sha256:" + hashlib.sha256(_DIGEST_PREFIX + session.nonce.encode("ascii")).hexdigest()


async def revoke_session(database: Database, host_id: str, session: Session) -> None:
    """Refuse the session from now on; harmless when it already was."""
    params = {"host_id": host_id, "session_digest": session_digest(session)}
    async with database.transaction() as conn:
        await conn.execute(QUERIES["prune_revocations"], {"host_id": host_id})
        await conn.execute(QUERIES["revoke_session"], params | {"expires_at": session.expires_at})


async def is_revoked(database: Database, host_id: str, session: Session) -> bool:
    """Whether the session was signed out."""
    params = {"host_id": host_id, "session_digest": session_digest(session)}
    async with database.transaction(read_only=True) as conn:
        cursor = await conn.execute(QUERIES["session_revoked"], params)
        return await cursor.fetchone() is not None
