"""`workflow-mcp secrets put|list|delete` on a real test database, as an operator runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.collaborators import Services
from runtime.publication.pinned import host_secret
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST
from tests.support.cli import run_command

pytestmark = pytest.mark.requirement("issue-24:host-secrets")

REPO = Path(__file__).resolve().parents[3]
KEY = "pk_live_operator_3c4d5e6f"


async def _cli(
    database_url: str, identity: DevIdentity, *args: str, stdin: str = ""
) -> tuple[int, str, str]:
    # The service's keyring and trusted keys (not the development identity of `make run`).
    env = {
        "WORKFLOW_SECURITY_JWKS_FILE": str(identity.paths.jwks),
        "WORKFLOW_SECURITY_KEYRING_FILE": str(identity.paths.keyring),
    }
    return await run_command("secrets", *args, "--database-url", database_url, stdin=stdin, env=env)


async def test_an_operator_puts_lists_and_deletes_a_secret_whose_value_is_never_printed(
    services: Services, database_url: str, dev_identity: DevIdentity
) -> None:
    code, out, err = await _cli(
        database_url, dev_identity, "put", "partnerKey", "--host", HOST, stdin=KEY + "\n"
    )
    assert (code, out.strip()) == (0, "created partnerKey version 1"), err
    async with services.database.transaction(read_only=True) as conn:
        opened = await host_secret(conn, services.keyring, HOST, "partnerKey")
    assert opened is not None and opened.reveal() == KEY  # sealed with the service's keyring
    code, out, err = await _cli(database_url, dev_identity, "list", "--host", HOST, "--json")
    assert code == 0, err
    [item] = json.loads(out)
    assert (item["name"], item["version"], item["referencedBy"]) == ("partnerKey", 1, [])
    assert item["updatedBy"].startswith("operator:")
    code, table, _ = await _cli(database_url, dev_identity, "list", "--host", HOST)
    assert code == 0 and table.splitlines()[0].startswith("name") and "partnerKey" in table
    code, out, err = await _cli(database_url, dev_identity, "delete", "partnerKey", "--host", HOST)
    assert (code, out.strip()) == (0, "deleted partnerKey version 1"), err
    code, _, err = await _cli(database_url, dev_identity, "delete", "partnerKey", "--host", HOST)
    assert code == 2 and "WORKFLOW_NOT_FOUND" in err
    for text in (out, table, err):
        assert KEY not in text


async def test_a_value_outside_the_contract_is_refused_without_echo(
    database_url: str, dev_identity: DevIdentity
) -> None:
    value = "pk_live_bad\r\nX-Injected: yes"
    code, out, err = await _cli(
        database_url, dev_identity, "put", "partnerKey", "--host", HOST, stdin=value
    )
    assert code == 2 and "WORKFLOW_INPUT_INVALID" in err
    assert "pk_live_bad" not in out + err and "X-Injected" not in out + err
    code, out, _ = await _cli(database_url, dev_identity, "list", "--host", HOST, "--json")
    assert code == 0 and json.loads(out) == []
    code, _, err = await _cli(database_url, dev_identity, "list", "--host", "not-a-host")
    assert code == 2 and "--host" in err


async def test_an_operator_scopes_a_secret_to_definitions_and_a_rotation_keeps_the_scope(
    database_url: str, dev_identity: DevIdentity
) -> None:
    allowed = "7d1f3c2a-9b8e-4c6d-a5f4-3e2d1c0b9a87"
    code, out, err = await _cli(
        database_url, dev_identity, "put", "partnerKey", "--host", HOST,
        "--definition", allowed.upper(), stdin=KEY,
    )  # fmt: skip
    assert (code, out.strip()) == (0, "created partnerKey version 1"), err
    code, out, err = await _cli(
        database_url, dev_identity, "put", "partnerKey", "--host", HOST, stdin=KEY
    )
    assert (code, out.strip()) == (0, "rotated partnerKey version 2"), err
    code, out, err = await _cli(database_url, dev_identity, "list", "--host", HOST, "--json")
    assert code == 0, err
    [item] = json.loads(out)
    assert item["definitions"] == [allowed]
