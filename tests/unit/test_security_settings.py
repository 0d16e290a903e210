"""Security settings: pinned algorithms, role lists, strict fields."""

from __future__ import annotations

import msgspec
import pytest

from runtime.security import DEFAULT_TOOL_ROLES, SecuritySettings

requirement = pytest.mark.requirement


@pytest.mark.parametrize("alg", ["none", "HS256", "HS512", "RS1"])
def test_symmetric_or_unsigned_algorithms_cannot_be_pinned(alg: str) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"algorithms": ["RS256", alg]}, SecuritySettings)


def test_the_default_pinned_algorithms_are_rs256_and_es256() -> None:
    settings = SecuritySettings()
    assert settings.algorithms == ["RS256", "ES256"]
    assert settings.clock_skew_seconds == 60


def test_unknown_settings_fields_are_refused() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"trust_everyone": True}, SecuritySettings)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"claims": {"hots": "host"}}, SecuritySettings)


@requirement("000:Operator setup")
def test_the_default_role_lists_follow_operator_setup() -> None:
    roles = SecuritySettings().roles_for
    assert roles("workflow_definition_save") == {"admin", "host-admin", "workflow-admin"}
    assert roles("workflow_definition_grants_sync") == {"admin", "host-admin", "workflow-admin"}
    assert roles("workflow_definition_publish") == {
        "admin",
        "host-admin",
        "workflow-admin",
        "genai-admin",
    }
    assert roles("workflow_binding_retire") == {"admin", "host-admin", "genai-admin"}
    assert roles("workflow_binding_decide") == {
        "admin",
        "host-admin",
        "workflow-admin",
        "genai-admin",
    }
    # Issue 42: rollback is held by whoever may revoke.
    assert roles("workflow_binding_rollback") == roles("workflow_binding_revoke")
    assert roles("workflow_start") == {"admin", "host-admin", "workflow-admin"}
    assert roles("workflow_cancel") == {"admin", "host-admin", "workflow-admin"}
    assert roles("workflow_invoke") is None
    # Issue 38: whoever may publish a definition may ask for an AI draft (not a publication tool).
    assert roles("workflow_definition_draft") == roles("workflow_definition_publish")
    publication_tools = [
        t
        for t in DEFAULT_TOOL_ROLES
        if ("definition" in t or "binding" in t) and t != "workflow_definition_draft"
    ]
    assert len(publication_tools) == 11


@requirement("000:Operator setup")
def test_a_partial_role_override_keeps_the_other_tools_checked() -> None:
    settings = msgspec.convert({"tool_roles": {"workflow_start": ["starter"]}}, SecuritySettings)
    assert settings.roles_for("workflow_start") == {"starter"}
    assert settings.roles_for("workflow_definition_save") == {
        "admin",
        "host-admin",
        "workflow-admin",
    }


def test_the_config_shape_reads_from_yaml_like_data() -> None:
    settings = msgspec.convert(
        {
            "jwks_file": "/etc/workflow/jwks.json",
            "public_key_files": ["/etc/workflow/a.pem", "/etc/workflow/b.pem"],
            "user_token": {"issuers": ["https://auth"], "audiences": ["workflow"]},
            "app_token": {"issuers": ["https://auth"], "audiences": ["workflow"]},
            "claims": {"host": "tenant"},
            "run_credential": {"original_token_margin_seconds": 120},
        },
        SecuritySettings,
    )
    assert settings.claims.host == "tenant"
    assert settings.claims.user_id == "uid"
    assert settings.run_credential.original_token_margin_seconds == 120


def test_negative_durations_are_refused() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"clock_skew_seconds": -1}, SecuritySettings)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"run_credential": {"original_token_margin_seconds": -5}}, SecuritySettings)
