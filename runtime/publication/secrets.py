"""The per-host secret store (issue 24): put seals and versions a value, list and delete.

A value is sealed with the keyring's active AES-256-GCM key, bound (associated data) to its
host, name and version, and never leaves this module in clear except through `open_secret`,
which execution calls at dispatch (`runtime.publication.pinned`). Receipts, the operation
ledger and errors carry names and versions only: the ledger's request digest covers the value
through a keyed digest (`Keyring.keyed_digest`), so a repeat with another value under the same
operationId is still a conflict while the stored digest cannot be reversed by guessing.

Every query is scoped by the verified host: another host's names are never read, so it cannot
learn that one exists (it is told WORKFLOW_NOT_FOUND exactly as for a name nobody holds).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from typing import Any

from msgspec import UNSET, UnsetType

from generated.models import (
    SecretListItem,
    SecretReference,
    WorkflowSecretDeleteInput,
    WorkflowSecretDeleteOutput,
    WorkflowSecretListInput,
    WorkflowSecretListOutput,
    WorkflowSecretPutInput,
    WorkflowSecretPutOutput,
)
from runtime.canonical import timestamp
from runtime.errors import WorkflowError, input_invalid
from runtime.publication.receipt_ledger import run_operation
from runtime.publication.store import secret_rows
from runtime.security import (
    InvocationContext,
    Keyring,
    KeyringError,
    SecretToken,
    check_host_assertion,
)
from runtime.store import Connection, Database

# A host's live secrets: bounded, so a list and the store stay small.
MAX_SECRETS_PER_HOST = 1000
# Referencing versions named per secret (list items and the delete refusal).
REFERENCES_LISTED = 100
LIST_DEFAULT_LIMIT = 50  # contracts: workflow_secret_list limit default 50
SECRET_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,62}")  # contracts: SecretName
_DIGEST_PURPOSE = "workflow-secret-put-request"


def associated_data(host_id: str, name: str, version: int) -> bytes:
    """The AAD of a sealed secret: a ciphertext moved to another host, name or version fails."""
    return f"workflow-host-secret:{host_id}:{name}:{version}".encode()


def _no_sealing_key() -> WorkflowError:
    return WorkflowError(
        "WORKFLOW_STATE_CONFLICT",
        "no sealing key is configured (security.keyring_file), so no secret can be stored; "
        "an operator must provision the keyring first",
    )


def ledger_arguments(keyring: Keyring, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The put arguments as the ledger digests them: the value replaced by its keyed digest."""
    value = arguments.get("value")
    text = value if isinstance(value, str) else ""
    return {**arguments, "value": keyring.keyed_digest(_DIGEST_PURPOSE, text.encode("utf-8"))}


# --- put --------------------------------------------------------------------------------------


async def _check_room(conn: Connection, host_id: str) -> None:
    if await secret_rows.count_live_secrets(conn, host_id) >= MAX_SECRETS_PER_HOST:
        raise WorkflowError(
            "WORKFLOW_STATE_CONFLICT",
            f"the host holds {MAX_SECRETS_PER_HOST} secrets, the most allowed; "
            "delete one it no longer needs first",
        )


async def _put(
    conn: Connection, keyring: Keyring, ctx: InvocationContext, request: WorkflowSecretPutInput
) -> WorkflowSecretPutOutput:
    host_id, name, actor = ctx.host_id, request.name, ctx.user_id
    plain = request.value.encode("utf-8")
    scope = None if request.definitions is UNSET else sorted(set(request.definitions))
    for _ in range(2):  # a concurrent first put of the name takes the rotation path
        lock = await secret_rows.lock_secret(conn, host_id, name)
        if lock is None:
            await _check_room(conn, host_id)
            sealed = keyring.seal(plain, associated_data(host_id, name, 1))
            stored = await secret_rows.insert_secret(conn, host_id, name, sealed, actor, scope)
            if stored is None:
                continue
            return _put_receipt("created", name, stored)
        if lock.deleted:
            await _check_room(conn, host_id)
        version = lock.version + 1
        sealed = keyring.seal(plain, associated_data(host_id, name, version))
        stored = await secret_rows.store_secret_version(
            conn, host_id, name, version, sealed, actor, scope
        )
        assert stored is not None  # we hold the row lock and read its version
        return _put_receipt("created" if lock.deleted else "rotated", name, stored)
    raise WorkflowError("WORKFLOW_OPERATION_PENDING", "another put of this secret is in progress")


def _put_receipt(
    result: Any, name: str, stored: secret_rows.StoredVersion
) -> WorkflowSecretPutOutput:
    return WorkflowSecretPutOutput(
        result=result,
        name=name,
        version=stored.version,
        created_at=timestamp(stored.created_ts),
        updated_at=timestamp(stored.updated_ts),
    )


async def put_secret(
    db: Database,
    keyring: Keyring,
    ctx: InvocationContext,
    request: WorkflowSecretPutInput,
    arguments: Mapping[str, Any],
) -> WorkflowSecretPutOutput:
    """workflow_secret_put: seal the value as the next version; idempotent per operationId."""
    check_host_assertion(ctx, request.host_id)
    if not keyring.has_usable_key:
        raise _no_sealing_key()

    async def perform(conn: Connection) -> WorkflowSecretPutOutput:
        return await _put(conn, keyring, ctx, request)

    return await run_operation(
        db,
        ctx,
        request,
        tool_name="workflow_secret_put",
        arguments=ledger_arguments(keyring, arguments),
        perform=perform,
        output=WorkflowSecretPutOutput,
    )


# --- list -------------------------------------------------------------------------------------


def encode_cursor(name: str) -> str:
    """An opaque page cursor: base64url of the last listed name."""
    return base64.urlsafe_b64encode(name.encode("ascii")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The name a cursor encodes; WORKFLOW_INPUT_INVALID when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        name = raw.decode("ascii")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise input_invalid("cursor is not a cursor from a previous page") from None
    if SECRET_NAME.fullmatch(name) is None:
        raise input_invalid("cursor is not a cursor from a previous page")
    return name


def _references(
    found: Sequence[secret_rows.SecretReference],
) -> dict[str, list[SecretReference]]:
    grouped: dict[str, list[SecretReference]] = {}
    for row in found:
        listed = grouped.setdefault(row.name, [])
        if len(listed) < REFERENCES_LISTED:
            listed.append(SecretReference(wf_def_id=row.wf_def_id, version=row.version))
    return grouped


async def list_secrets(
    db: Database, ctx: InvocationContext, request: WorkflowSecretListInput
) -> WorkflowSecretListOutput:
    """workflow_secret_list: the host's secrets by name, one snapshot, never a value."""
    check_host_assertion(ctx, request.host_id)
    after = None if request.cursor is UNSET else decode_cursor(request.cursor)
    limit = LIST_DEFAULT_LIMIT if request.limit is UNSET else request.limit
    async with db.transaction(read_only=True, isolation="repeatable read") as conn:
        page = await secret_rows.select_secret_page(conn, ctx.host_id, after=after, limit=limit + 1)
        shown = page[:limit]
        names = [entry.name for entry in shown]
        found = await secret_rows.select_secret_references(conn, ctx.host_id, names)
    references = _references(found)
    items = [
        SecretListItem(
            name=entry.name,
            version=entry.version,
            created_at=timestamp(entry.created_ts),
            updated_at=timestamp(entry.updated_ts),
            updated_by=entry.updated_by,
            definitions=UNSET if entry.definitions is None else entry.definitions,
            referenced_by=references.get(entry.name, []),
        )
        for entry in shown
    ]
    next_cursor: str | UnsetType = UNSET
    if len(page) > limit and shown:
        next_cursor = encode_cursor(shown[-1].name)
    return WorkflowSecretListOutput(items=items, next_cursor=next_cursor)


# --- delete -----------------------------------------------------------------------------------


def _not_held(name: str) -> WorkflowError:
    return WorkflowError("WORKFLOW_NOT_FOUND", f"the host holds no secret named {name}")


async def _delete(
    conn: Connection, ctx: InvocationContext, request: WorkflowSecretDeleteInput
) -> WorkflowSecretDeleteOutput:
    lock = await secret_rows.lock_secret(conn, ctx.host_id, request.name)
    if lock is None or lock.deleted:
        raise _not_held(request.name)
    # Under the row lock: a publish that declares the name holds it FOR SHARE until it commits.
    found = await secret_rows.select_secret_references(conn, ctx.host_id, [request.name])
    if found:
        listed = _references(found)[request.name]
        raise WorkflowError(
            "WORKFLOW_STATE_CONFLICT",
            f"secret {request.name} is declared by {len(found)} published definition "
            "version(s); retire them (or publish versions without it) first",
            details={
                "referencedBy": [{"wfDefId": r.wf_def_id, "version": r.version} for r in listed]
            },
        )
    version = await secret_rows.tombstone_secret(conn, ctx.host_id, request.name, ctx.user_id)
    assert version is not None  # we hold the row lock and saw it live
    return WorkflowSecretDeleteOutput(result="deleted", name=request.name, version=version)


async def delete_secret(
    db: Database,
    ctx: InvocationContext,
    request: WorkflowSecretDeleteInput,
    arguments: Mapping[str, Any],
) -> WorkflowSecretDeleteOutput:
    """workflow_secret_delete: drop the sealed value (a tombstone); idempotent per operationId.

    Refusals depend on state that changes (the name put again, the versions retired), so none
    is stored: a retry under the same operationId runs afresh.
    """

    async def perform(conn: Connection) -> WorkflowSecretDeleteOutput:
        return await _delete(conn, ctx, request)

    return await run_operation(
        db,
        ctx,
        request,
        tool_name="workflow_secret_delete",
        arguments=arguments,
        perform=perform,
        output=WorkflowSecretDeleteOutput,
    )


# --- what publication and execution read ------------------------------------------------------


class SecretScopeError(Exception):
    """A host secret was asked for by a definition its scope (`definitions`) does not name."""


def in_scope(scope: Sequence[str] | None, wf_def_id: str) -> bool:
    """Whether a secret with this scope (None: every definition) may serve wf_def_id."""
    return scope is None or wf_def_id.lower() in scope


async def missing_secrets(conn: Connection, host_id: str, names: Sequence[str]) -> list[str]:
    """The declared names the host does not hold, holding the others FOR SHARE until commit."""
    if not names:
        return []
    held = await secret_rows.share_live_secret_names(conn, host_id, names)
    return sorted(set(names) - set(held))


async def unscoped_secrets(
    conn: Connection, host_id: str, names: Sequence[str], wf_def_id: str
) -> list[str]:
    """The declared names the host holds whose scope does not name wf_def_id (held FOR SHARE)."""
    if not names:
        return []
    held = await secret_rows.share_live_secret_names(conn, host_id, names)
    return sorted(name for name, scope in held.items() if not in_scope(scope, wf_def_id))


def scope_refusal(
    declared: Sequence[str], unscoped: Sequence[str], wf_def_id: str, doing: str
) -> WorkflowError | None:
    """WORKFLOW_POLICY_DENIED for a definition declaring secrets whose scope does not name it."""
    if not unscoped:
        return None
    problems = [
        {
            "pointer": f"/use/secrets/{list(declared).index(name)}",
            "rule": "secret-scope",
            "message": f"secret {name} may not be used by definition {wf_def_id}: its scope "
            "names other definitions; an administrator adds this one with workflow_secret_put "
            "(definitions)",
        }
        for name in unscoped
    ]
    return WorkflowError(
        "WORKFLOW_POLICY_DENIED",
        f"the definition declares secrets it may not use: {', '.join(unscoped)}; an "
        f"administrator must add wfDefId {wf_def_id} to their definitions before you {doing}",
        details={"secrets": list(unscoped), "problems": problems},
    )


async def open_secret(
    conn: Connection, keyring: Keyring, host_id: str, name: str, wf_def_id: str | None = None
) -> SecretToken | None:
    """The current value of a host secret, or None when the host holds none by that name.

    wf_def_id: the definition whose call asks (SecretScopeError when the secret's scope does
    not name it); None for the service's own uses (a token exchange client secret). A value
    that cannot be opened (tampering, a key no longer in the keyring) raises KeyringError,
    naming neither the value nor the key material.
    """
    found = await secret_rows.select_sealed_secret(conn, host_id, name)
    if found is None:
        return None
    version, sealed, scope = found
    if wf_def_id is not None and not in_scope(scope, wf_def_id):
        raise SecretScopeError(f"secret {name} is not scoped to definition {wf_def_id}")
    plain = keyring.open(sealed, associated_data(host_id, name, version))
    try:
        return SecretToken(plain.decode("utf-8"))
    except UnicodeDecodeError:  # pragma: no cover - put stores ASCII only
        raise KeyringError(f"secret {name} is not text") from None
