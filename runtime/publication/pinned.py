"""What execution may read of publication: pinned versions, live grants, a revision's reach,
and the current value of a host secret (opened at dispatch, never stored with the run).

A narrow read API, so that execution depends on these questions and not on how
publication stores definitions, grants, bindings and secrets.
"""

from __future__ import annotations

from typing import Any

from runtime.binding_reach import Reach
from runtime.publication.secrets import SecretScopeError as SecretScopeError
from runtime.publication.secrets import open_secret
from runtime.publication.store import binding_rows, definition_rows, grant_rows
from runtime.publication.store.grant_rows import LiveGrant as LiveGrant
from runtime.security import Keyring, SecretToken
from runtime.store import Connection


async def definition_document(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> dict[str, Any] | None:
    """The document of a published definition version (its text as loaded), or None."""
    row = await definition_rows.select_version(conn, host_id, wf_def_id, version)
    return None if row is None else row.document


async def live_grants(conn: Connection, host_id: str, wf_def_id: str) -> list[LiveGrant]:
    """The live grant set of a definition, ordered by grant id."""
    return await grant_rows.select_grants(conn, host_id, wf_def_id)


async def revision_reach(conn: Connection, host_id: str, binding_id: str) -> Reach:
    """The reach (dependencies, endpoint targets) of one binding revision."""
    return await binding_rows.read_reach(conn, host_id, binding_id)


async def host_secret(
    conn: Connection, keyring: Keyring, host_id: str, name: str, wf_def_id: str | None = None
) -> SecretToken | None:
    """The current value of a host secret, or None; KeyringError when it cannot be opened.

    With wf_def_id (a definition's call), SecretScopeError when the secret may not serve it.
    """
    return await open_secret(conn, keyring, host_id, name, wf_def_id)
