"""Execution rules without a database: destinations, grants, credential sealing and selection."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runtime.binding_reach import Dependency, EndpointTarget
from runtime.errors import AuthenticationError, WorkflowError
from runtime.execution.credential import open_credential, seal_credential, select_run_token
from runtime.execution.effects import matching_grant
from runtime.execution.outbound.endpoint_label import endpoint_label
from runtime.execution.store import QUERIES, QUERIES_PATH
from runtime.execution.targets import on_origin, origin_of, policy_for
from runtime.publication.pinned import LiveGrant
from runtime.security import Keyring, SecretToken
from runtime.security.keyring import new_keyring_document
from runtime.store.queries import query_usage_problems

DIGEST = "sha256:" + "c" * 64
TARGET = EndpointTarget(
    "accounts", "https://api.example.com/accounts/{id}", ("GET",), ("prod",), DIGEST
)


def test_every_execution_query_block_is_used_and_fenced_writes_match_the_lease() -> None:
    sources = sorted(Path(QUERIES_PATH).parent.rglob("*.py"))
    assert query_usage_problems(QUERIES_PATH, sources) == []
    assert "lease_id" in QUERIES["insert_action_permit"]
    assert "fencing_token" in QUERIES["insert_action_permit"]


def test_a_pinned_endpoint_target_admits_its_methods_and_one_segment_per_placeholder() -> None:
    policy = policy_for([TARGET], [], "prod")
    policy.check("GET", "https://api.example.com/accounts/a%2Fb")
    for method, uri in [
        ("POST", "https://api.example.com/accounts/1"),
        ("GET", "https://api.example.com/accounts/1/secrets"),
        ("GET", "https://evil.example.com/accounts/1"),
        ("GET", "http://api.example.com/accounts/1"),
    ]:
        with pytest.raises(WorkflowError) as refused:
            policy.check(method, uri)
        assert refused.value.code == "WORKFLOW_POLICY_DENIED"


def test_an_endpoint_target_of_another_environment_is_not_reachable() -> None:
    with pytest.raises(WorkflowError):
        policy_for([TARGET], [], "dev").check("GET", "https://api.example.com/accounts/1")


def test_runs_without_a_binding_reach_only_the_allowlist_and_redirects_stay_on_origin() -> None:
    policy = policy_for(None, ["http://127.0.0.1:9000/api"], None)
    policy.check("POST", "http://127.0.0.1:9000/api/orders")
    with pytest.raises(WorkflowError):
        policy.check("GET", "http://127.0.0.1:9000/apix")
    with pytest.raises(WorkflowError):
        policy.check("GET", "http://user@127.0.0.1:9000/api/x")
    assert not policy.same_origin("http://127.0.0.1:9000/a", "http://127.0.0.2:9000/a")


def test_a_grant_covers_a_tool_by_name_or_pinned_dependency_version_and_environment() -> None:
    dependency = Dependency(
        "0b4f4c33-0000-4000-8000-000000000001", "2.0.0", DIGEST, "accounts@call",
        "accounts.lookup",
    )  # fmt: skip
    grants = [
        LiveGrant(grant_id="old", tool_id="accounts@call", tool_version="1.0.0",
                  lightapi_digest=None, allowed_environments=[], source_revision=1),
        LiveGrant(grant_id="ok", tool_id="accounts@call", tool_version="2.0.0",
                  lightapi_digest=None, allowed_environments=["prod"], source_revision=1),
    ]  # fmt: skip
    assert matching_grant(grants, "accounts.lookup", dependency, "prod") == grants[1]
    assert matching_grant(grants, "accounts.lookup", dependency, "dev") is None
    assert matching_grant(grants, "other", None, None) is None


def test_a_start_run_is_covered_by_a_grant_of_the_tool_published_under_the_called_name() -> None:
    tool_id = "0b4f4c33-0000-4000-8000-000000000002"
    grant = LiveGrant(grant_id="g", tool_id=tool_id, tool_version="1.0.0", lightapi_digest=None,
                      allowed_environments=["prod"], source_revision=1,
                      published_tool_name="accounts.lookup")  # fmt: skip
    assert matching_grant([grant], "accounts.lookup", None, "prod") == grant
    # Environments still apply, and another name is not covered.
    assert matching_grant([grant], "accounts.lookup", None, "dev") is None
    assert matching_grant([grant], "accounts.update", None, "prod") is None
    # A bound run keeps its pinned dependency path: the published name alone covers nothing.
    other = Dependency(
        "0b4f4c33-0000-4000-8000-000000000009", "1.0.0", DIGEST, "x@call", "accounts.lookup"
    )
    assert matching_grant([grant], "accounts.lookup", other, "prod") is None


def test_the_sealed_credential_opens_only_for_its_own_run() -> None:
    keyring = Keyring.from_document(new_keyring_document("k1"))
    sealed = seal_credential(keyring, SecretToken("token-text"), "h", "p1")
    assert b"token-text" not in sealed.ciphertext
    assert open_credential(keyring, sealed, "h", "p1").reveal() == "token-text"
    with pytest.raises(AuthenticationError):
        open_credential(keyring, sealed, "h", "p2")


def test_the_original_token_is_used_while_it_verifies_and_refused_once_it_does_not() -> None:
    token, now = SecretToken("t"), datetime.now(UTC)
    # Inside the margin there is no LONG exchange here: the still-valid original is used.
    near = now + timedelta(seconds=10)
    assert select_run_token(token, near, margin_seconds=300, now=now) is token
    with pytest.raises(AuthenticationError):
        select_run_token(token, now - timedelta(seconds=1), margin_seconds=300, now=now)

    def refuse(_: str) -> dict[str, object]:
        raise AuthenticationError("the user token has expired")

    with pytest.raises(AuthenticationError):
        select_run_token(token, near, margin_seconds=300, check=refuse, now=now)


def test_a_call_routed_through_the_gateway_is_judged_as_the_approved_uri() -> None:
    approved = "https://api.example.com/accounts/7?x=1"
    sent = on_origin(approved, origin_of("https://gateway.example.com:8443/mcp"))
    assert sent == "https://gateway.example.com:8443/accounts/7?x=1"
    policy = policy_for([TARGET], [], "prod").routed(approved, sent)
    assert policy.approved("https://gateway.example.com:8443/accounts/8") == (
        "https://api.example.com/accounts/8"
    )
    # A redirect on the Gateway to another approved path passes; one outside the targets not.
    policy.check("GET", "https://gateway.example.com:8443/accounts/8")
    with pytest.raises(WorkflowError):
        policy.check("GET", "https://gateway.example.com:8443/admin")
    # Another origin is never taken for the Gateway.
    with pytest.raises(WorkflowError):
        policy.check("GET", "https://gateway.example.com/accounts/8")
    assert endpoint_label(policy, "GET", sent) == "accounts"
    unrouted = policy_for([TARGET], [], "prod")
    assert unrouted.routed(approved, approved) is unrouted
