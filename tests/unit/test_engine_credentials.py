"""Secret references and credential headers in definitions (issue 24 items 2 and 3)."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest

from runtime.canonical import load_definition_yaml
from runtime.engine import DefinitionError, parse_definition
from runtime.engine.check.service_identity import service_identity_problems
from runtime.engine.model import CredentialPolicy, HttpCallSpec, walk_tasks
from runtime.engine.run import HttpRequest
from runtime.execution.credential import RunToken
from runtime.execution.outbound.auth import with_credential
from runtime.security import SecretToken

pytestmark = pytest.mark.requirement("issue-24:host-secrets")

HEADER = {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"}
URI = "https://api.example.com/orders"


def _call(policy: str | None = None, **with_: Any) -> dict[str, Any]:
    endpoint: Any = URI if policy is None else {"uri": URI, "authentication": {"use": policy}}
    return {"call": "http", "with": {"method": "post", "endpoint": endpoint, **with_}}


def _definition(
    tasks: list[Any], secrets: list[str] | None = None, **policies: Any
) -> dict[str, Any]:
    use: dict[str, Any] = {"authentications": policies}
    if secrets is not None:
        use["secrets"] = secrets
    return {"document": dict(HEADER), "use": use, "do": tasks}


def _problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(document)
    return [(problem.pointer, problem.rule) for problem in caught.value.problems]


API_KEY = {"apiKey": {"header": "X-API-Key", "value": "${ $secrets.partnerKey }"}}


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (API_KEY, CredentialPolicy("p", "apiKey", secret="partnerKey", header="x-api-key")),
        (
            {"bearer": {"token": "${ $secrets.partnerKey }"}},
            CredentialPolicy("p", "bearer", secret="partnerKey"),
        ),
        ({"bearer": {"use": "partnerKey"}}, CredentialPolicy("p", "bearer", secret="partnerKey")),
        ({"bearer": {"use": "runCredential"}}, CredentialPolicy("p", "runCredential")),
        (
            {"basic": {"username": "svc", "password": "${$secrets.partnerKey}"}},
            CredentialPolicy("p", "basic", secret="partnerKey", username="svc"),
        ),
        (
            {"basic": {"username": "${ $secrets.user }", "password": "${ $secrets.partnerKey }"}},
            CredentialPolicy("p", "basic", secret="partnerKey", username_secret="user"),
        ),
    ],
)
def test_each_policy_form_names_its_secrets_and_never_a_value(
    policy: dict[str, Any], expected: CredentialPolicy
) -> None:
    parsed = parse_definition(_definition([{"post": _call("p")}], ["partnerKey", "user"], p=policy))
    spec = parsed.tasks.tasks[0].spec
    assert isinstance(spec, HttpCallSpec)
    assert spec.credential == expected
    assert parsed.secrets == ("partnerKey", "user")


@pytest.mark.parametrize(
    ("policy", "rule"),
    [
        ({"apiKey": {"header": "X-API-Key", "value": "pk_live_123"}}, "secrets"),  # a literal
        ({"apiKey": {"header": "X-API-Key", "value": "$secrets.partnerKey"}}, "secrets"),
        ({"apiKey": {"header": "X-API-Key", "value": "${ $secrets.other }"}}, "undeclared-secret"),
        ({"apiKey": {"header": "Host", "value": "${ $secrets.partnerKey }"}}, "invalid-definition"),
        ({"bearer": {"token": "${ 'x' + $secrets.partnerKey }"}}, "secrets"),
        ({"bearer": {"use": "other"}}, "undeclared-secret"),
        ({"basic": {"username": "u", "password": "p"}}, "secrets"),
        ({"oauth2": {"use": "runCredential"}}, "invalid-definition"),
    ],
)
def test_a_policy_with_a_literal_an_undeclared_or_a_composed_secret_is_refused(
    policy: dict[str, Any], rule: str
) -> None:
    problems = _problems(_definition([{"post": _call("p")}], ["partnerKey"], p=policy))
    assert problems[0][0].startswith("/use/authentications/p")
    assert problems[0][1] == rule


@pytest.mark.parametrize(
    ("task", "pointer"),
    [
        ({"set": {"k": "${ $secrets.partnerKey }"}}, "/do/0/t/set/k"),
        (_call(body={"key": "${ $secrets.partnerKey }"}), "/do/0/t/with/body/key"),
        (_call(query={"key": "${ $secrets.partnerKey }"}), "/do/0/t/with/query/key"),
        ({"set": {}, "export": {"as": {"k": "${ $secrets.partnerKey }"}}}, "/do/0/t/export/as/k"),
        ({"set": {}, "output": {"as": "${ $secrets.partnerKey }"}}, "/do/0/t/output/as"),
        ({"if": "$secrets.partnerKey == 'x'", "set": {}}, "/do/0/t/if"),
    ],
)
def test_a_secret_read_outside_an_authentication_policy_is_refused(
    task: dict[str, Any], pointer: str
) -> None:
    problems = _problems(_definition([{"t": task}], ["partnerKey"], p=API_KEY))
    assert problems == [(pointer, "secret-outside-authentication")]


@pytest.mark.parametrize(
    "header",
    ["Authorization", "proxy-authorization", "Cookie", "X-API-Key", "X-Auth-Token", "Stripe-Key"],
)
def test_a_credential_header_written_in_a_task_is_refused_naming_it_and_the_fix(
    header: str,
) -> None:
    literal = _problems(_definition([{"t": _call(headers={header: "Basic dTpw"})}]))
    assert literal == [(f"/do/0/t/with/headers/{header}", "literal-credential")]
    computed = _problems(_definition([{"t": _call(headers={header: "${ input.key }"})}]))
    assert computed == [(f"/do/0/t/with/headers/{header}", "credential-from-data")]
    with pytest.raises(DefinitionError) as caught:
        parse_definition(_definition([{"t": _call(headers={header: "Basic dTpw"})}]))
    assert header in caught.value.message and "workflow_secret_put" in caught.value.message
    assert "dTpw" not in caught.value.message
    plain = parse_definition(_definition([{"t": _call(headers={"X-Tag": "t1", "Accept": "x"})}]))
    assert plain.tasks.tasks[0].kind == "http"


def test_an_mcp_call_may_add_an_api_key_header_but_not_replace_the_user_token() -> None:
    def mcp(policy: str) -> dict[str, Any]:
        endpoint = {"uri": "/mcp", "authentication": {"use": policy}}
        transport = {"http": {"endpoint": endpoint}}
        with_ = {"method": "tools/call", "parameters": {"name": "add"}, "transport": transport}
        return {"call": "mcp", "with": with_}

    bearer = {"bearer": {"token": "${ $secrets.partnerKey }"}}
    document = _definition([{"a": mcp("k")}], ["partnerKey"], k=API_KEY, b=bearer)
    assert parse_definition(document).tasks.tasks[0].spec.credential.scheme == "apiKey"  # type: ignore[union-attr]
    document = _definition([{"a": mcp("b")}], ["partnerKey"], k=API_KEY, b=bearer)
    assert _problems(document) == [("/do/0/a", "secrets")]


async def test_the_policy_header_joins_only_the_request_as_sent() -> None:
    opened: list[str] = []

    async def token() -> RunToken:
        return RunToken(SecretToken("user.jwt"), exchanged=False)

    async def secret(name: str) -> SecretToken:
        opened.append(name)
        return SecretToken({"partnerKey": "pk_live_123", "user": "svc"}[name])

    def request(policy: CredentialPolicy) -> HttpRequest:
        return HttpRequest(
            task="/do/0/t", method="POST", uri=URI, headers={"X-API-Key": "mine", "x-tag": "1"},
            query={}, body=None, redirect=False, authentication=policy.name, write=True,
            credential=policy,
        )  # fmt: skip

    sent = await with_credential(
        request(CredentialPolicy("p", "apiKey", secret="partnerKey", header="x-api-key")),
        token,
        secret,
    )
    assert sent.headers == {"x-api-key": "pk_live_123", "x-tag": "1"}
    assert "pk_live_123" not in repr(sent)
    basic = await with_credential(
        request(CredentialPolicy("p", "basic", secret="partnerKey", username_secret="user")),
        token,
        secret,
    )
    assert basic.headers["authorization"] == "Basic " + base64.b64encode(b"svc:pk_live_123").decode(
        "ascii"
    )
    run = await with_credential(request(CredentialPolicy("p", "runCredential")), token, secret)
    assert run.headers["authorization"] == "Bearer user.jwt"
    assert opened == ["partnerKey", "partnerKey", "user"]


def test_the_publishing_guide_example_parses_to_an_api_key_policy() -> None:
    doc = Path(__file__).parents[2] / "docs" / "PUBLISHING.md"
    fence = re.compile(r"^```yaml file=secret-call\.yaml\n(?P<body>.*?)^```$", re.M | re.S)
    match = fence.search(doc.read_text("utf-8"))
    assert match is not None
    definition = parse_definition(load_definition_yaml(match["body"].encode()))
    [task] = walk_tasks(definition.tasks)
    assert isinstance(task.spec, HttpCallSpec)
    assert task.spec.credential == CredentialPolicy(
        "partnerApi", "apiKey", secret="partnerKey", header="x-api-key"
    )
    assert definition.secrets == ("partnerKey",)
    assert service_identity_problems(definition) == []  # the secret call carries its evidence
