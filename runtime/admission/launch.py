"""The caller's token for a run: sealed before admission, refreshed on a re-attach.

Both admissions write the run in one statement of their own (store.admit_invoke,
store.admit_start: the function family of migrations/functions/invocation_admission.sql);
the token is sealed before it, so no lock waits on crypto.
"""

from __future__ import annotations

from runtime.execution.credential import seal_credential, token_expiry
from runtime.invocation import store
from runtime.security import InvocationContext, Keyring, SealedSecret
from runtime.store import Connection


def seal_for(keyring: Keyring, ctx: InvocationContext, process_id: str) -> SealedSecret:
    """Seal the caller's token for the run (before the transaction; refuses without a key)."""
    return seal_credential(keyring, ctx.user_token, ctx.host_id, process_id)


async def refresh_credential(
    conn: Connection, keyring: Keyring, ctx: InvocationContext, process_id: str
) -> None:
    """On a re-attach: store the caller's token if it outlives the stored one."""
    expires = token_expiry(ctx.user_token) or ctx.user_token_expires_at
    sealed = seal_credential(keyring, ctx.user_token, ctx.host_id, process_id)
    await store.replace_credential(conn, ctx.host_id, process_id, sealed, expires)
