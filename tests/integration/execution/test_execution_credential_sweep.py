"""The run-credential sweep keeps the credential of a disabled run that runs past its deadline."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from runtime.execution import close_waiter, forget_expired_credentials
from runtime.security import Keyring, SecretToken
from runtime.security.keyring import new_keyring_document
from runtime.store import Database
from tests.support.execution import document, set_tasks
from tests.support.execution_runs import start_workflow_run


@pytest.fixture
async def keyring(db: Database) -> AsyncIterator[Keyring]:
    yield Keyring.from_document(new_keyring_document("k1"))
    await close_waiter(db)


def _token(exp: datetime) -> SecretToken:
    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    claims = {"sub": "u-1", "exp": int(exp.timestamp())}
    return SecretToken(f"{part({'alg': 'ES256'})}.{part(claims)}.c2ln")


async def _admit(db: Database, keyring: Keyring, policy: str, token: SecretToken) -> str:
    return await start_workflow_run(
        db, host_id=str(uuid.uuid4()), user_id="u-1", input={"seen": 0}, keyring=keyring,
        credential=token, definition=document(set_tasks(1)),
        deadline=datetime.now(UTC) - timedelta(seconds=1), cancellation_policy=policy,
    )  # fmt: skip


async def _credential_ids(db: Database) -> set[str]:
    async with db.connection() as conn:
        cursor = await conn.execute("SELECT process_id::text AS id FROM workflow_run_credential")
        return {row["id"] for row in await cursor.fetchall()}


async def test_a_live_disabled_run_past_its_deadline_keeps_its_credential_until_the_token_expires(
    db: Database, keyring: Keyring
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    disabled = await _admit(db, keyring, "disabled", _token(later))
    expired_token = await _admit(db, keyring, "disabled", _token(datetime.now(UTC)))
    ordinary = await _admit(db, keyring, "before-effects-only", _token(later))
    await forget_expired_credentials(db)
    assert await _credential_ids(db) == {disabled}
    assert {expired_token, ordinary}.isdisjoint(await _credential_ids(db))
