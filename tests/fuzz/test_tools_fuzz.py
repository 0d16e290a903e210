"""Schema fuzzing of POST /tools/{name} on a live server, driven by generated/openapi.json.

Every served tool gets schemathesis cases in positive and negative generation modes, sent
with valid bearers, with schemathesis' own (garbage or missing) security headers, and with
hostile but well-formed tokens. Every answer must be documented, inside its declared schema,
and never a server error. FUZZ_MAX_EXAMPLES raises the per-test example budget (default 25;
past ~150 also raise pytest's --timeout); generation is derandomized so CI runs repeat.
`--hypothesis-show-statistics` shows how far the cases got (outcome per answer).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from codegen.reference import is_valid
from generated.routes import ROUTES
from handlers import HANDLERS
from runtime.canonical import definition_digest, load_definition_yaml, schema_digest
from runtime.mcp.tools import ToolRegistry
from runtime.security.devtools import DEV_HOST_ID, DEV_USER_ID, DevIdentity
from tests.support.server import LiveServer

REPO_ROOT = Path(__file__).resolve().parents[2]
OPENAPI = REPO_ROOT / "generated" / "openapi.json"
EXAMPLES = REPO_ROOT / "contracts" / "workflow-admin" / "examples.json"
MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "25"))
# A handful of hostile tokens per tool is enough: the outcome does not depend on the body.
HOSTILE_EXAMPLES = max(8, MAX_EXAMPLES // 3)

SCHEMA = schemathesis.openapi.from_path(OPENAPI)
SERVED = ToolRegistry(ROUTES, HANDLERS).names
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
POLICY_DENIED = "WORKFLOW_POLICY_DENIED"
# With valid bearers an invalid body can only meet the host guard or input validation: any
# other refusal means a handler ran on input the schema forbids.
INVALID_BODY_REFUSALS = {"WORKFLOW_INPUT_INVALID", POLICY_DENIED}
# Except binding publish: a body whose binding or reach the schema refuses, with a valid envelope,
# meets the operation ledger first (seed 000 request-validation evidence), so a reused
# operationId is refused as a different request.
LEDGER_FIRST_REFUSALS = {"workflow_binding_publish": {"WORKFLOW_IDEMPOTENCY_CONFLICT"}}
UNAUTHENTICATED = -32001
# Input validation in runtime.mcp.dispatch prefixes its refusals this way.
SCHEMA_REFUSAL_PREFIX = "invalid arguments:"

FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    """One keep-alive HTTP session for all cases."""
    with requests.Session() as http:
        yield http


SEED_DEFINITION = (
    'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: summarize-claim\n'
    '  version: "1.2.0"\n'
    "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
    "do:\n  - first:\n      set:\n        summary: seeded\n"
)


@pytest.fixture(scope="module", autouse=True)
def seeded_state(live_server: LiveServer, session: requests.Session) -> None:
    """The contract examples' definition, version and Tool exist (owned by the dev user).

    Grafted example members then name real rows, so cases reach replays, conflicts, digest
    checks, status rules and lifecycle reads instead of stopping at "not found".
    """
    save = dict(EXAMPLE_INPUTS["workflow_definition_save"])
    save |= {"hostId": DEV_HOST_ID, "definition": SEED_DEFINITION, "active": True}
    save["owner"] = {"userId": DEV_USER_ID, "positionId": "pos-1"}
    publish = dict(EXAMPLE_INPUTS["workflow_definition_publish"])
    publish |= {
        "hostId": DEV_HOST_ID,
        "definition": SEED_DEFINITION,
        "expectedDefinitionDigest": definition_digest(SEED_DEFINITION),
    }
    binding = dict(EXAMPLE_INPUTS["workflow_binding_publish"]["binding"])
    binding |= {
        "wfDefId": publish["wfDefId"],
        "workflowVersion": publish["version"],
        "definitionDigest": definition_digest(SEED_DEFINITION),
        "schemaDigest": schema_digest(load_definition_yaml(SEED_DEFINITION)),
    }
    bind = {
        **EXAMPLE_INPUTS["workflow_binding_publish"],
        "hostId": DEV_HOST_ID,
        "binding": binding,
        "dependencies": [],
        "endpointTargets": [],
        "expectedAggregateVersion": 0,
    }
    start = dict(EXAMPLE_INPUTS["workflow_start"])
    start.pop("expectedDefinitionDigest", None)
    headers = valid_headers(live_server)
    for tool, body in [
        ("workflow_definition_save", save),
        ("workflow_definition_publish", publish),
        ("workflow_binding_publish", bind),
        ("workflow_start", start),
    ]:
        if tool not in SERVED:
            continue
        reply = session.post(f"{live_server.base_url}/tools/{tool}", json=body, headers=headers)
        payload = reply.json()
        assert reply.status_code == 200 and payload["isError"] is False, (tool, payload)


@pytest.fixture(scope="module")
def hostile_tokens(live_server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Header sets that must never authenticate: missing, garbage, expired, foreign-signed."""
    identity = live_server.identity
    stranger = DevIdentity(tmp_path_factory.mktemp("stranger-identity"))
    good_user = identity.user_token(roles=("admin",))
    good_app = identity.app_token()
    bearer = "Bearer {}".format
    return [
        {},
        {"X-Scope-Token": bearer(good_app)},
        {"Authorization": bearer(good_user)},
        {"Authorization": "Bearer", "X-Scope-Token": "Bearer"},
        {"Authorization": "Basic dXNlcjpwYXNz", "X-Scope-Token": bearer(good_app)},
        {"Authorization": bearer("not.a.jwt"), "X-Scope-Token": bearer(good_app)},
        {
            "Authorization": bearer(identity.user_token(expired=True)),
            "X-Scope-Token": bearer(good_app),
        },
        {"Authorization": bearer(stranger.user_token()), "X-Scope-Token": bearer(good_app)},
        {"Authorization": bearer(good_user), "X-Scope-Token": bearer(stranger.app_token())},
        {
            "Authorization": bearer(identity.user_token(audience="someone-else")),
            "X-Scope-Token": bearer(good_app),
        },
        {"Authorization": bearer(good_user), "X-Scope-Token": bearer(good_user)},
    ]


def _examples() -> dict[str, Any]:
    document = json.loads(EXAMPLES.read_text(encoding="utf-8"))
    return dict(document["examples"])


EXAMPLE_INPUTS = {name: entry["input"] for name, entry in _examples().items()}


def operation(tool: str) -> Any:
    """The schemathesis operation of one tool's route."""
    return SCHEMA[f"/tools/{tool}"]["POST"]


def valid_headers(server: LiveServer) -> dict[str, str]:
    """Bearers of an admin of the development host (admin passes every tool's role list)."""
    return server.auth_headers(roles=("admin",))


def send(
    case: Case, server: LiveServer, http: requests.Session, headers: dict[str, str] | None
) -> Any:
    """Send the case and run the schema checks on the answer."""
    response = case.call(base_url=server.base_url, session=http, headers=headers)
    case.validate_response(response, checks=CHECKS, headers=headers)
    event(outcome_label(response))
    return response


def outcome_label(response: Any) -> str:
    """A short outcome name for --hypothesis-show-statistics (how deep the cases got)."""
    try:
        payload = response.json()
    except ValueError:
        return f"HTTP {response.status_code} (no JSON)"
    if isinstance(payload, dict) and isinstance(payload.get("structuredContent"), dict):
        error = payload["structuredContent"].get("error")
        code = error.get("code") if isinstance(error, dict) else "success"
        return f"HTTP {response.status_code} {code}"
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        return f"HTTP {response.status_code} JSON-RPC {payload['error'].get('code')}"
    return f"HTTP {response.status_code}"


def body_is_valid(tool: str, body: Any) -> bool:
    """Whether the reference validator accepts body as the tool's input."""
    return isinstance(body, dict) and is_valid(ROUTES[tool].input_schema, body)


def steer_towards_handlers(tool: str, body: dict[str, Any], data: st.DataObject) -> None:
    """Assert our own host and graft contract-example members so cases get past the guards."""
    candidate = dict(body)
    if "hostId" in candidate and data.draw(own_host_odds(), label="own host"):
        candidate["hostId"] = DEV_HOST_ID
    example = EXAMPLE_INPUTS.get(tool, {})
    grafted = data.draw(st.sets(st.sampled_from(sorted(example))), label="example members")
    candidate.update({name: example[name] for name in grafted if name != "hostId"})
    # Grafting can break cross-member rules (oneOf and the like): keep the case positive.
    if body_is_valid(tool, candidate):
        body.clear()
        body.update(candidate)


def own_host_odds() -> st.SearchStrategy[bool]:
    """Mostly our own host (to reach the handlers), sometimes a foreign one (the host guard)."""
    # sampled_from leans towards its first element when it simplifies: keep that our host.
    return st.sampled_from([True, True, True, True, False])


def pin_own_host_keeping_invalid(tool: str, body: Any, data: st.DataObject) -> None:
    """Assert our host in an invalid body, unless the host was what made it invalid."""
    if not isinstance(body, dict) or "hostId" not in body:
        return
    if not data.draw(own_host_odds(), label="own host"):
        return
    original = body["hostId"]
    body["hostId"] = DEV_HOST_ID
    if body_is_valid(tool, body):
        body["hostId"] = original


def assert_authentication_refused(tool: str, response: Any, secrets: dict[str, str]) -> None:
    """Publication tools refuse with isError POLICY_DENIED, the others with HTTP 401."""
    payload = response.json()
    if ROUTES[tool].publisher_token:
        assert response.status_code == 200, payload
        assert payload["isError"] is True, payload
        assert payload["structuredContent"]["error"]["code"] == POLICY_DENIED, payload
    else:
        assert response.status_code == 401, payload
        assert payload["error"]["code"] == UNAUTHENTICATED, payload
        # schemathesis gives headers lower-cased, each as a list of values.
        challenge = response.headers.get("www-authenticate") or [""]
        assert challenge[0].startswith("Bearer"), response.headers
    for value in secrets.values():
        token = value.removeprefix("Bearer").strip()
        if len(token) > 16:
            assert token not in response.text, "a bearer was echoed back"


@pytest.mark.parametrize("tool", SERVED)
@FUZZ
@given(data=st.data())
def test_valid_bodies_with_valid_tokens_get_a_documented_call_result(
    tool: str, live_server: LiveServer, session: requests.Session, data: st.DataObject
) -> None:
    """Positive cases: HTTP 200, a CallToolResult in schema, never a schema refusal."""
    case = data.draw(operation(tool).as_strategy(generation_mode=GenerationMode.POSITIVE))
    assert isinstance(case.body, dict)
    steer_towards_handlers(tool, case.body, data)
    response = send(case, live_server, session, valid_headers(live_server))
    payload = response.json()
    assert response.status_code == 200, payload
    if payload["isError"] and body_is_valid(tool, case.body):
        message = payload["structuredContent"]["error"]["message"]
        # The hot-path validators must agree with the reference on what the schema admits.
        assert not message.startswith(SCHEMA_REFUSAL_PREFIX), payload


@pytest.mark.parametrize("tool", SERVED)
@FUZZ
@given(data=st.data())
def test_invalid_requests_are_refused_inside_the_schema(
    tool: str, live_server: LiveServer, session: requests.Session, data: st.DataObject
) -> None:
    """Negative cases: a bad body is refused (400 or isError); bad security headers, 401/deny."""
    case = data.draw(operation(tool).as_strategy(generation_mode=GenerationMode.NEGATIVE))
    if body_is_valid(tool, case.body):
        # Schemathesis negated the security headers: send them as generated.
        generated = {k: str(v) for k, v in (case.headers or {}).items()}
        response = send(case, live_server, session, None)
        assert_authentication_refused(tool, response, generated)
        return
    pin_own_host_keeping_invalid(tool, case.body, data)
    response = send(case, live_server, session, valid_headers(live_server))
    payload = response.json()
    if response.status_code == 200:
        assert payload["isError"] is True, payload
        allowed = INVALID_BODY_REFUSALS | LEDGER_FIRST_REFUSALS.get(tool, set())
        assert payload["structuredContent"]["error"]["code"] in allowed, payload
    else:
        assert response.status_code == 400, payload


@pytest.mark.parametrize("tool", SERVED)
@settings(FUZZ, max_examples=HOSTILE_EXAMPLES)
@given(data=st.data())
def test_missing_or_untrusted_tokens_never_authenticate(
    tool: str,
    live_server: LiveServer,
    session: requests.Session,
    hostile_tokens: list[dict[str, str]],
    data: st.DataObject,
) -> None:
    """Valid bodies with missing, garbage, expired or foreign tokens are refused."""
    case = data.draw(operation(tool).as_strategy(generation_mode=GenerationMode.POSITIVE))
    assert isinstance(case.body, dict)
    steer_towards_handlers(tool, case.body, data)
    headers = data.draw(st.sampled_from(hostile_tokens), label="tokens")
    case.headers = dict(headers)
    response = send(case, live_server, session, None)
    assert_authentication_refused(tool, response, headers)
