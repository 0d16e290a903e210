"""Every setting can come from WORKFLOW_<SECTION>_<KEY>; the environment wins over the file."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from runtime.composition.config import load_settings
from runtime.composition.environment import EnvironmentSettingError, setting_paths, variable_name
from runtime.settings import Settings


def test_environment_variables_override_settings_of_every_type(tmp_path: Path) -> None:
    environ = {
        "WORKFLOW_SERVER_PORT": "9100",
        "WORKFLOW_SERVER_ALLOWED_ORIGINS": '["https://portal.example.com"]',
        "WORKFLOW_EXECUTION_WORKERS_ENABLED": "false",
        "WORKFLOW_EXECUTION_OUTBOUND_GATEWAY_MCP_URL": "https://gw.example.com/mcp",
        "WORKFLOW_EXECUTION_OUTBOUND_ENVIRONMENT": "123",
        "WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_HOSTS": "null",
        "WORKFLOW_SECURITY_USER_TOKEN_ISSUERS": "[https://login.example.com]",
        "WORKFLOW_STORE_POOL_TIMEOUT_S": "2.5",
    }
    settings = load_settings(None, environ)
    assert settings.server.port == 9100
    assert settings.server.allowed_origins == ["https://portal.example.com"]
    assert settings.execution.workers_enabled is False
    assert settings.execution.outbound.gateway_mcp_url == "https://gw.example.com/mcp"
    # A text setting keeps the variable's text as it is, even when it looks like a number.
    assert settings.execution.outbound.environment == "123"
    assert settings.publication.destinations.allowed_hosts is None
    assert settings.security.user_token.issuers == ["https://login.example.com"]
    assert settings.store.pool_timeout_s == 2.5


def test_the_environment_wins_over_the_file_and_keeps_its_other_keys(tmp_path: Path) -> None:
    config = tmp_path / "workflow.yaml"
    config.write_text("server:\n  port: 9000\n  host: 0.0.0.0\n", encoding="utf-8")
    settings = load_settings(config, {"WORKFLOW_SERVER_PORT": "9001"})
    assert (settings.server.host, settings.server.port) == ("0.0.0.0", 9001)


def test_config_path_comes_from_workflow_config(tmp_path: Path) -> None:
    config = tmp_path / "workflow.yaml"
    config.write_text("server:\n  port: 9002\n", encoding="utf-8")
    assert load_settings(None, {"WORKFLOW_CONFIG": str(config)}).server.port == 9002


def test_workflow_store_database_url_wins_over_database_url() -> None:
    environ = {"DATABASE_URL": "postgresql://a/x"}
    assert load_settings(None, environ).store.database_url == "postgresql://a/x"
    environ["WORKFLOW_STORE_DATABASE_URL"] = "postgresql://b/y"
    assert load_settings(None, environ).store.database_url == "postgresql://b/y"


def test_a_bad_value_is_refused_naming_the_setting() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"server\.port"):
        load_settings(None, {"WORKFLOW_SERVER_PORT": "eighty"})


def test_the_section_checks_run_on_environment_values() -> None:
    environ = {"WORKFLOW_EXECUTION_RENEW_INTERVAL_MS": "5000"}
    with pytest.raises(msgspec.ValidationError, match="renew_interval_ms"):
        load_settings(None, environ)


def test_every_setting_has_its_own_variable() -> None:
    names = [variable_name(path) for path, _ in setting_paths(Settings)]
    assert len(names) == len(set(names))
    assert "WORKFLOW_EXECUTION_OUTBOUND_SERVICE_TOKEN_CLIENT_SECRET_FILE" in names
    # The configuration file's own variable names no setting.
    assert "WORKFLOW_CONFIG" not in names


def test_a_removed_settings_variable_is_refused_naming_its_replacement() -> None:
    environ = {"WORKFLOW_EXECUTION_OUTBOUND_APP_TOKEN": "a.secret.token"}
    with pytest.raises(EnvironmentSettingError, match="service_token") as refused:
        load_settings(None, environ)
    assert "a.secret.token" not in str(refused.value)
