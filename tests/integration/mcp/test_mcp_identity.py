"""Identity rules at the endpoint: both bearers, caller service, host agreement."""

from __future__ import annotations

import time
from typing import Any

import pytest

from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.mcp import McpTestClient
from tests.support.publication import new_id, publish_args, save_args
from tests.support.tokens import hs256_with_public_key, unsigned_token, user_claims

pytestmark = pytest.mark.requirement("000:Request host and identity")

OTHER_HOST = "3f0c9a52-7b1e-4d2a-8e6f-1a2b3c4d5e6f"


async def _count(db: Database, table: str) -> int:
    async with db.connection() as conn:
        cursor = await conn.execute(f"SELECT count(*) AS n FROM {table}")
        row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


async def _assert_refused_before_storage(
    mcp: McpTestClient, db: Database, headers: dict[str, str], fragment: str
) -> dict[str, Any]:
    save = await mcp.call_tool("workflow_definition_save", save_args(new_id(), 1), headers=headers)
    publish = await mcp.call_tool(
        "workflow_definition_publish", publish_args(new_id()), headers=headers
    )
    for result in (save, publish):
        assert result["isError"] is True
        error = result["structuredContent"]["error"]
        assert error["code"] == "WORKFLOW_POLICY_DENIED"
        assert fragment in error["message"]
        assert result["content"][0]["text"].startswith("WORKFLOW_POLICY_DENIED: ")
    assert await _count(db, "wf_definition_t") == 0
    assert await _count(db, "workflow_publication_operation_t") == 0
    return save


def _headers(user: str, app: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}", "X-Scope-Token": f"Bearer {app}"}


async def test_valid_tokens_and_matching_host_are_admitted(
    mcp: McpTestClient, db: Database
) -> None:
    result = await mcp.call_tool("workflow_definition_save", save_args(new_id(), 1))
    assert result["isError"] is False
    assert await _count(db, "wf_definition_t") == 1


async def test_expired_user_token_is_refused(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    expired = dev_identity.user_token(expires_at=int(time.time()) - 3600)
    headers = _headers(expired, dev_identity.app_token())
    await _assert_refused_before_storage(mcp, db, headers, "authentication failed")


async def test_expired_gateway_token_is_refused(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    headers = _headers(dev_identity.user_token(), dev_identity.app_token(expired=True))
    await _assert_refused_before_storage(mcp, db, headers, "authentication failed")


async def test_alg_none_token_is_refused(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    headers = _headers(unsigned_token(user_claims()), dev_identity.app_token())
    await _assert_refused_before_storage(mcp, db, headers, "authentication failed")


async def test_hs256_signed_with_the_public_key_is_refused(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    forged = hs256_with_public_key(dev_identity, user_claims())
    headers = _headers(forged, dev_identity.app_token())
    await _assert_refused_before_storage(mcp, db, headers, "authentication failed")


async def test_wrong_issuer_is_refused(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    user = dev_identity.user_token(issuer="https://evil.example")
    headers = _headers(user, dev_identity.app_token())
    await _assert_refused_before_storage(mcp, db, headers, "authentication failed")


async def test_wrong_audience_is_refused(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    user = dev_identity.user_token(audience="another-service")
    headers = _headers(user, dev_identity.app_token())
    await _assert_refused_before_storage(mcp, db, headers, "authentication failed")


async def test_app_token_as_user_is_refused_even_with_user_like_claims(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    disguised = dev_identity.app_token(
        extra_claims={"uid": "steve", "roles": ["admin", "workflow-admin"]}
    )
    headers = _headers(disguised, dev_identity.app_token())
    await _assert_refused_before_storage(mcp, db, headers, "authentication failed")


async def test_caller_service_not_allowed_is_refused(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    headers = _headers(dev_identity.user_token(), dev_identity.app_token(service_id="intruder"))
    await _assert_refused_before_storage(mcp, db, headers, "calling service is not allowed")


async def test_host_mismatch_between_the_two_tokens_is_refused(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    headers = _headers(dev_identity.user_token(), dev_identity.app_token(host_id=OTHER_HOST))
    await _assert_refused_before_storage(mcp, db, headers, "host")


async def test_host_mismatch_with_the_host_id_argument_is_refused(
    mcp: McpTestClient, db: Database
) -> None:
    save = await mcp.call_tool(
        "workflow_definition_save", save_args(new_id(), 1, host_id=OTHER_HOST)
    )
    publish = await mcp.call_tool(
        "workflow_definition_publish", publish_args(new_id(), host_id=OTHER_HOST)
    )
    for result in (save, publish):
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["code"] == "WORKFLOW_POLICY_DENIED"
    assert await _count(db, "wf_definition_t") == 0
    assert await _count(db, "workflow_publication_operation_t") == 0


async def test_missing_tokens_on_a_publication_tool_are_an_is_error_result(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    only_user = {"Authorization": f"Bearer {dev_identity.user_token()}", "X-Scope-Token": ""}
    await _assert_refused_before_storage(mcp, db, only_user, "authentication failed")


async def test_a_user_without_a_configured_role_is_refused(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    headers = _headers(dev_identity.user_token(roles=("genai-user",)), dev_identity.app_token())
    await _assert_refused_before_storage(mcp, db, headers, "role")


async def test_token_text_never_appears_in_a_refusal(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    user = dev_identity.user_token(audience="another-service")
    headers = _headers(user, dev_identity.app_token())
    result = await _assert_refused_before_storage(mcp, db, headers, "authentication failed")
    signature = user.rsplit(".", 1)[1]
    assert signature not in str(result)
    assert user.split(".")[1] not in str(result)


async def test_a_token_that_just_expired_past_the_clock_skew_is_refused(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    skew = dev_identity.settings().clock_skew_seconds
    just_expired = dev_identity.user_token(expires_at=int(time.time()) - skew - 2)
    headers = _headers(just_expired, dev_identity.app_token())
    await _assert_refused_before_storage(mcp, db, headers, "authentication failed")


async def test_a_token_expired_within_the_clock_skew_is_still_accepted(
    mcp: McpTestClient, dev_identity: DevIdentity
) -> None:
    skew = dev_identity.settings().clock_skew_seconds
    user = dev_identity.user_token(
        roles=("workflow-admin",), expires_at=int(time.time()) - skew // 2
    )
    headers = _headers(user, dev_identity.app_token())
    result = await mcp.call_tool(
        "workflow_definition_save", save_args(new_id(), 1), headers=headers
    )
    assert result["isError"] is False
