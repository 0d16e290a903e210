"""Authenticating a call: both bearers, the invocation context, host and caller checks."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from runtime.errors import AuthenticationError, WorkflowError
from runtime.security import (
    Authenticator,
    InvocationContext,
    KeySet,
    SecretToken,
    authorize_roles,
    check_host_assertion,
    is_position_holder,
)
from runtime.security.devtools import DEV_HOST_ID, DevIdentity

requirement = pytest.mark.requirement
OTHER_HOST_ID = "0b3e8a44-1c2d-4e5f-8a9b-0c1d2e3f4a5b"


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> DevIdentity:
    return DevIdentity(tmp_path_factory.mktemp("dev"))


def authenticator_for(dev: DevIdentity, **overrides: Any) -> Authenticator:
    settings = dev.settings(**overrides)
    return Authenticator(settings, KeySet.from_settings(settings))


def bearer(token: str) -> str:
    return f"Bearer {token}"


def authenticate(dev: DevIdentity, user: str, app: str, **overrides: Any) -> InvocationContext:
    return authenticator_for(dev, **overrides).authenticate(bearer(user), bearer(app))


def assert_no_token_text(error: Exception, *tokens: str) -> None:
    for token in tokens:
        for segment in token.split("."):
            if len(segment) >= 16:  # shorter pieces could match ordinary words
                assert segment not in str(error)
                assert segment not in repr(error)


def auth_refusal(dev: DevIdentity, user: str | None, app: str | None) -> AuthenticationError:
    with pytest.raises(AuthenticationError) as caught:
        authenticator_for(dev).authenticate(user, app)
    assert_no_token_text(caught.value, *(value for value in (user, app) if value))
    return caught.value


def policy_refusal(dev: DevIdentity, user: str, app: str, **overrides: Any) -> WorkflowError:
    with pytest.raises(WorkflowError) as caught:
        authenticate(dev, user, app, **overrides)
    assert caught.value.code == "WORKFLOW_POLICY_DENIED"
    assert_no_token_text(caught.value, user, app)
    return caught.value


@requirement("000:Identity and user token")
def test_a_valid_user_and_scope_token_pair_builds_the_invocation_context(
    dev: DevIdentity,
) -> None:
    expires_at = int(time.time()) + 900
    user = dev.user_token(
        user_id="u-1", roles=["workflow-admin", "viewer"], positions=["p-1"], expires_at=expires_at
    )
    ctx = authenticate(dev, user, dev.app_token())
    assert ctx.host_id == DEV_HOST_ID
    assert (ctx.user_id, ctx.subject) == ("u-1", "u-1")
    assert ctx.roles == frozenset({"workflow-admin", "viewer"})
    assert ctx.positions == frozenset({"p-1"})
    assert (ctx.caller_service_id, ctx.client_id, ctx.user_client_id) == (
        "gateway",
        "gateway",
        "dev-portal",
    )
    assert ctx.user_token.reveal() == user
    assert ctx.user_token_expires_at == datetime.fromtimestamp(expires_at, tz=UTC)


@requirement("000:Identity and user token")
def test_the_context_never_shows_the_user_token(dev: DevIdentity) -> None:
    user = dev.user_token()
    ctx = authenticate(dev, user, dev.app_token())
    for rendered in (repr(ctx), str(ctx), repr(ctx.user_token), str(ctx.user_token), f"{ctx}"):
        for segment in user.split("."):
            assert segment not in rendered


def test_a_secret_token_cannot_be_pickled_but_copies_in_process() -> None:
    import copy
    import pickle

    token = SecretToken("secret-value")
    with pytest.raises(TypeError):
        pickle.dumps(token)
    assert copy.deepcopy(token).reveal() == "secret-value"


@requirement("000:Request host and identity")
def test_the_user_host_is_normalized_to_lower_case(dev: DevIdentity) -> None:
    user = dev.user_token(host_id=DEV_HOST_ID.upper())
    assert authenticate(dev, user, dev.app_token()).host_id == DEV_HOST_ID


@requirement("000:Request host and identity")
@pytest.mark.parametrize("host", [None, "not-a-uuid", "{" + DEV_HOST_ID + "}", 42])
def test_a_user_token_without_a_uuid_host_is_refused(dev: DevIdentity, host: object) -> None:
    user = dev.user_token(host_id=None, extra_claims={} if host is None else {"host": host})
    error = auth_refusal(dev, bearer(user), bearer(dev.app_token()))
    assert "host" in error.message


@requirement("000:Identity and user token")
def test_the_user_id_falls_back_to_the_subject(dev: DevIdentity) -> None:
    user = dev.user_token(user_id="subject-1", extra_claims={"uid": None})
    ctx = authenticate(dev, user, dev.app_token())
    assert (ctx.user_id, ctx.subject) == ("subject-1", "subject-1")


@requirement("000:Authorization")
def test_roles_are_read_from_a_list_claim(dev: DevIdentity) -> None:
    user = dev.user_token(roles=["admin", "genai-admin"])
    assert authenticate(dev, user, dev.app_token()).roles == {"admin", "genai-admin"}


@requirement("000:Authorization")
def test_roles_are_read_from_a_space_separated_string_claim(dev: DevIdentity) -> None:
    user = dev.user_token(roles=["admin", "genai-admin"], roles_as_string=True)
    assert authenticate(dev, user, dev.app_token()).roles == {"admin", "genai-admin"}


@requirement("000:Authorization")
def test_a_roles_claim_of_another_shape_grants_no_role(dev: DevIdentity) -> None:
    user = dev.user_token(extra_claims={"roles": {"admin": True}})
    assert authenticate(dev, user, dev.app_token()).roles == frozenset()


@requirement("000:Operator setup")
def test_an_application_token_in_authorization_is_refused_even_with_user_like_claims(
    dev: DevIdentity,
) -> None:
    impostor = dev.app_token(
        extra_claims={"uid": "dev-user", "roles": ["admin"], "host": DEV_HOST_ID}
    )
    error = auth_refusal(dev, bearer(impostor), bearer(dev.app_token()))
    assert "application token" in error.message


@requirement("000:Gateway assertion")
def test_a_user_token_in_the_scope_header_is_refused(dev: DevIdentity) -> None:
    auth_refusal(dev, bearer(dev.user_token()), bearer(dev.user_token()))


@requirement("000:Gateway assertion")
def test_a_caller_service_that_is_not_allowed_is_denied(dev: DevIdentity) -> None:
    app = dev.app_token(service_id="portal-direct")
    error = policy_refusal(dev, dev.user_token(), app)
    assert "not allowed" in error.message


@requirement("000:Gateway assertion")
def test_the_service_id_falls_back_to_the_client_id(dev: DevIdentity) -> None:
    app = dev.app_token(service_id="ignored", extra_claims={"sid": None})
    policy_refusal(dev, dev.user_token(), app)
    app = dev.app_token(client_id="gateway", extra_claims={"sid": None})
    assert authenticate(dev, dev.user_token(), app).caller_service_id == "gateway"


@requirement("000:Gateway assertion")
def test_the_client_id_falls_back_to_cid(dev: DevIdentity) -> None:
    app = dev.app_token(extra_claims={"client_id": None, "cid": "gateway"})
    ctx = authenticate(dev, dev.user_token(), app)
    assert (ctx.client_id, ctx.caller_service_id) == ("gateway", "gateway")


@requirement("000:Request host and identity")
def test_a_host_mismatch_between_the_two_tokens_is_denied(dev: DevIdentity) -> None:
    app = dev.app_token(host_id=OTHER_HOST_ID)
    error = policy_refusal(dev, dev.user_token(), app)
    assert "different hosts" in error.message


@requirement("000:Request host and identity")
def test_a_scope_token_without_a_host_is_denied(dev: DevIdentity) -> None:
    policy_refusal(dev, dev.user_token(), dev.app_token(host_id=None))


@requirement("000:Request host and identity")
def test_hosts_that_differ_only_in_case_agree(dev: DevIdentity) -> None:
    app = dev.app_token(host_id=DEV_HOST_ID.upper())
    assert authenticate(dev, dev.user_token(), app).host_id == DEV_HOST_ID


@requirement("000:Gateway assertion")
def test_a_scope_token_for_another_environment_is_denied(dev: DevIdentity) -> None:
    user = dev.user_token()
    policy_refusal(dev, user, dev.app_token(environment="prod"), app_environment="dev")
    ctx = authenticate(dev, user, dev.app_token(environment="dev"), app_environment="dev")
    assert ctx.caller_service_id == "gateway"


@requirement("000:Identity and user token")
def test_a_missing_scope_token_is_refused(dev: DevIdentity) -> None:
    for missing in (None, "", "   "):
        error = auth_refusal(dev, bearer(dev.user_token()), missing)
        assert "X-Scope-Token" in error.message


@requirement("000:Identity and user token")
def test_a_missing_authorization_header_is_refused(dev: DevIdentity) -> None:
    error = auth_refusal(dev, None, bearer(dev.app_token()))
    assert "Authorization" in error.message


@requirement("000:Identity and user token")
@pytest.mark.parametrize(
    "template",
    ["Basic {token}", "Bearer", "Bearer {token} extra", "Bearer\t{token}", "{token}", "Bearer  "],
)
def test_a_malformed_authorization_header_is_refused(dev: DevIdentity, template: str) -> None:
    header = template.format(token=dev.user_token())
    auth_refusal(dev, header, bearer(dev.app_token()))


@requirement("000:Identity and user token")
@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "BeArEr"])
def test_the_bearer_scheme_is_case_insensitive(dev: DevIdentity, scheme: str) -> None:
    ctx = authenticator_for(dev).authenticate(
        f"{scheme} {dev.user_token()}", f"{scheme} {dev.app_token()}"
    )
    assert ctx.host_id == DEV_HOST_ID


@requirement("000:Identity and user token")
def test_an_expired_scope_token_is_refused(dev: DevIdentity) -> None:
    error = auth_refusal(dev, bearer(dev.user_token()), bearer(dev.app_token(expired=True)))
    assert error.message == "scope token has expired"


@requirement("000:Identity and user token")
def test_a_scope_token_from_another_issuer_is_refused(dev: DevIdentity) -> None:
    app = dev.app_token(issuer="https://elsewhere.example")
    auth_refusal(dev, bearer(dev.user_token()), bearer(app))


@requirement("000:Request host and identity")
def test_a_matching_host_id_argument_passes_in_any_case(dev: DevIdentity) -> None:
    ctx = authenticate(dev, dev.user_token(), dev.app_token())
    check_host_assertion(ctx, DEV_HOST_ID)
    check_host_assertion(ctx, DEV_HOST_ID.upper())


@requirement("000:Request host and identity")
@pytest.mark.parametrize("argument", [OTHER_HOST_ID, "not-a-uuid", None, "", 7])
def test_a_host_id_argument_that_differs_from_the_user_host_is_denied(
    dev: DevIdentity, argument: object
) -> None:
    ctx = authenticate(dev, dev.user_token(), dev.app_token())
    with pytest.raises(WorkflowError) as caught:
        check_host_assertion(ctx, argument)
    assert caught.value.code == "WORKFLOW_POLICY_DENIED"


@requirement("000:Operator setup")
def test_a_user_without_a_configured_role_is_denied_the_tool(dev: DevIdentity) -> None:
    settings = dev.settings()
    ctx = authenticate(dev, dev.user_token(roles=["genai-admin"]), dev.app_token())
    with pytest.raises(WorkflowError) as caught:
        authorize_roles(ctx, "workflow_definition_save", settings)
    assert caught.value.code == "WORKFLOW_POLICY_DENIED"
    authorize_roles(ctx, "workflow_definition_publish", settings)
    authorize_roles(ctx, "workflow_binding_publish", settings)


@requirement("000:Authorization")
def test_workflow_invoke_has_no_role_check(dev: DevIdentity) -> None:
    ctx = authenticate(dev, dev.user_token(roles=[]), dev.app_token())
    authorize_roles(ctx, "workflow_invoke", dev.settings())
    with pytest.raises(WorkflowError):
        authorize_roles(ctx, "workflow_start", dev.settings())


@requirement("000:Authorization")
def test_position_holders_are_recognised(dev: DevIdentity) -> None:
    user = dev.user_token(positions=["pos-a", "pos-b"])
    ctx = authenticate(dev, user, dev.app_token())
    assert is_position_holder(ctx, "pos-a")
    assert not is_position_holder(ctx, "pos-c")


@requirement("000:Identity and user token")
def test_no_refusal_message_contains_token_text(dev: DevIdentity) -> None:
    user, app = dev.user_token(), dev.app_token()
    cases = [
        (bearer(dev.user_token(expired=True)), bearer(app)),
        (bearer(user), bearer(dev.app_token(audience="elsewhere"))),
        (bearer(app), bearer(app)),
        (bearer(user), bearer(dev.app_token(service_id="intruder"))),
        (bearer(user), bearer(dev.app_token(host_id=OTHER_HOST_ID))),
        ("Basic " + user, bearer(app)),
        (bearer(user + "tampered"), bearer(app)),
    ]
    for authorization, scope in cases:
        with pytest.raises((AuthenticationError, WorkflowError)) as caught:
            authenticator_for(dev).authenticate(authorization, scope)
        rendered = f"{caught.value} {caught.value!r} {caught.value.args!r}"
        for token in (authorization, scope):
            for segment in token.removeprefix("Bearer ").removeprefix("Basic ").split("."):
                assert segment not in rendered
