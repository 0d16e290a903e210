"""The host secret store through POST /mcp: put, list and delete (issue 24 item 1)."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import httpx
import psycopg
import pytest

from runtime.canonical import canonical_digest
from runtime.collaborators import Services
from runtime.publication.secrets import associated_data
from runtime.security import KeyringError, SealedSecret
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST
from tests.support.invocation import client, ok, refused
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("issue-24:host-secrets")

OTHER_HOST = "0196a1b2-0000-7000-8000-00000000beef"
KEY = "pk_live_7f3a9c1e5b2d4f60"
ROTATED = "pk_live_second_0a1b2c3d"


def _admin(http: httpx.AsyncClient, identity: DevIdentity, host_id: str = HOST) -> McpTestClient:
    return client(http, identity, "secret-admin", roles=("host-admin",), host_id=host_id)


def _put(name: str, value: str, host_id: str = HOST, **extra: Any) -> dict[str, Any]:
    return {
        "hostId": host_id,
        "name": name,
        "value": value,
        "operationId": str(uuid.uuid4()),
    } | extra


def _delete(name: str, host_id: str = HOST) -> dict[str, Any]:
    return {"hostId": host_id, "name": name, "operationId": str(uuid.uuid4())}


async def _stored(admin: psycopg.AsyncConnection[Any]) -> str:
    """Every row of the secret table and the operation ledger, as text."""
    rows = []
    for table in ("workflow_secret_t", "workflow_publication_operation_t"):
        cursor = await admin.execute(f"SELECT * FROM {table}")
        rows += [repr(row) for row in await cursor.fetchall()]
    return "\n".join(rows)


async def test_put_rotate_list_and_delete_never_show_the_value(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    admin: psycopg.AsyncConnection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    secrets = _admin(http, dev_identity)
    first = await secrets.call_tool("workflow_secret_put", _put("partnerKey", KEY))
    created = ok(first)
    assert (created["result"], created["name"], created["version"]) == ("created", "partnerKey", 1)
    rotation = _put("partnerKey", ROTATED)
    rotated = ok(await secrets.call_tool("workflow_secret_put", rotation))
    assert (rotated["result"], rotated["version"]) == ("rotated", 2)
    assert rotated["createdAt"] == created["createdAt"]
    listed = ok(await secrets.call_tool("workflow_secret_list", {"hostId": HOST}))
    [item] = listed["items"]
    assert item["name"] == "partnerKey" and item["version"] == 2
    assert item["updatedBy"] == "secret-admin" and item["referencedBy"] == []
    # A repeat of the rotation replays its receipt and stores nothing new.
    assert ok(await secrets.call_tool("workflow_secret_put", rotation)) == rotated
    deleted = ok(await secrets.call_tool("workflow_secret_delete", _delete("partnerKey")))
    assert deleted == {"result": "deleted", "name": "partnerKey", "version": 2}
    assert ok(await secrets.call_tool("workflow_secret_list", {"hostId": HOST}))["items"] == []
    refused(
        await secrets.call_tool("workflow_secret_delete", _delete("partnerKey")),
        "WORKFLOW_NOT_FOUND",
    )
    # A version number is never reused: the next put after a delete continues the count.
    again = ok(await secrets.call_tool("workflow_secret_put", _put("partnerKey", KEY)))
    assert (again["result"], again["version"]) == ("created", 3)
    stored = await _stored(admin)
    for value in (KEY, ROTATED):
        assert value not in stored
        assert value not in caplog.text
        assert canonical_digest(rotation) not in stored  # the ledger's digest is keyed


async def test_a_repeat_with_another_value_is_a_conflict(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    secrets = _admin(http, dev_identity)
    request = _put("partnerKey", KEY)
    ok(await secrets.call_tool("workflow_secret_put", request))
    conflict = await secrets.call_tool("workflow_secret_put", request | {"value": ROTATED})
    body = refused(conflict, "WORKFLOW_IDEMPOTENCY_CONFLICT")
    assert ROTATED not in json.dumps(conflict) and KEY not in json.dumps(body)


async def test_only_host_administrators_manage_secrets(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    author = client(http, dev_identity, "author-1", roles=("workflow-admin", "genai-admin"))
    for name, arguments in (
        ("workflow_secret_put", _put("partnerKey", KEY)),
        ("workflow_secret_list", {"hostId": HOST}),
        ("workflow_secret_delete", _delete("partnerKey")),
    ):
        result = await author.call_tool(name, arguments)
        assert KEY not in json.dumps(refused(result, "WORKFLOW_POLICY_DENIED"))


async def test_another_host_cannot_learn_that_a_name_exists(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    ok(await _admin(http, dev_identity).call_tool("workflow_secret_put", _put("partnerKey", KEY)))
    other = _admin(http, dev_identity, OTHER_HOST)
    assert ok(await other.call_tool("workflow_secret_list", {"hostId": OTHER_HOST}))["items"] == []
    missing = await other.call_tool("workflow_secret_delete", _delete("partnerKey", OTHER_HOST))
    never_held = await other.call_tool("workflow_secret_delete", _delete("neverHeld", OTHER_HOST))
    assert refused(missing, "WORKFLOW_NOT_FOUND")["error"]["message"] == refused(
        never_held, "WORKFLOW_NOT_FOUND"
    )["error"]["message"].replace("neverHeld", "partnerKey")
    # Its own put of the name is a first version: nothing of the first host's row shows.
    created = ok(
        await other.call_tool("workflow_secret_put", _put("partnerKey", ROTATED, OTHER_HOST))
    )
    assert (created["result"], created["version"]) == ("created", 1)
    asserted = await other.call_tool("workflow_secret_list", {"hostId": HOST})
    refused(asserted, "WORKFLOW_POLICY_DENIED")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("partner-key", KEY),  # not an identifier: `$secrets.partner-key` would not read it
        ("1key", KEY),
        ("partnerKey", "line\r\nX-Injected: 1"),  # header injection
        ("partnerKey", " padded "),
        ("partnerKey", "k" * 4097),
        ("partnerKey", ""),
    ],
)
async def test_names_and_values_outside_their_patterns_are_refused_without_echo(
    http: httpx.AsyncClient, dev_identity: DevIdentity, name: str, value: str
) -> None:
    secrets = _admin(http, dev_identity)
    result = await secrets.call_tool("workflow_secret_put", _put(name, value))
    refused(result, "WORKFLOW_INPUT_INVALID")
    if len(value) > 3:
        assert value not in json.dumps(result)
        assert value.strip() not in json.dumps(result)
    assert ok(await secrets.call_tool("workflow_secret_list", {"hostId": HOST}))["items"] == []


async def test_the_sealed_value_is_bound_to_host_name_and_version(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    admin: psycopg.AsyncConnection[Any],
    services: Services,
) -> None:
    ok(await _admin(http, dev_identity).call_tool("workflow_secret_put", _put("partnerKey", KEY)))
    cursor = await admin.execute(
        "SELECT key_id, nonce, ciphertext, version FROM workflow_secret_t WHERE name = %s",
        ("partnerKey",),
    )
    row = await cursor.fetchone()
    assert row is not None
    sealed = SealedSecret(key_id=row["key_id"], nonce=row["nonce"], ciphertext=row["ciphertext"])
    assert KEY.encode() not in sealed.ciphertext
    keyring = services.keyring
    assert keyring.open(sealed, associated_data(HOST, "partnerKey", 1)).decode() == KEY
    for moved in (
        associated_data(OTHER_HOST, "partnerKey", 1),
        associated_data(HOST, "otherKey", 1),
        associated_data(HOST, "partnerKey", 2),
    ):
        with pytest.raises(KeyringError):
            keyring.open(sealed, moved)


async def test_list_pages_by_name(http: httpx.AsyncClient, dev_identity: DevIdentity) -> None:
    secrets = _admin(http, dev_identity)
    names = ["alpha", "Beta", "gamma", "delta_2"]
    for name in names:
        ok(await secrets.call_tool("workflow_secret_put", _put(name, KEY)))
    seen: list[str] = []
    arguments: dict[str, Any] = {"hostId": HOST, "limit": 3}
    while True:
        page = ok(await secrets.call_tool("workflow_secret_list", arguments))
        seen += [item["name"] for item in page["items"]]
        if "nextCursor" not in page:
            break
        arguments["cursor"] = page["nextCursor"]
    assert seen == sorted(names)  # byte order: upper case first
    bad = await secrets.call_tool("workflow_secret_list", {"hostId": HOST, "cursor": "AAAA"})
    refused(bad, "WORKFLOW_INPUT_INVALID")
