"""The documented example configuration loads and means what it says."""

from __future__ import annotations

from pathlib import Path

import msgspec

from gateway.settings import GatewayConfig
from runtime.admission import CapacitySettings
from runtime.composition.config import load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.yaml"


def test_the_example_configuration_loads_with_every_section() -> None:
    settings = load_settings(EXAMPLE, document=GatewayConfig)
    assert settings.store.database_url == "postgresql://workflow@db.internal/workflow"
    assert settings.security.jwks_file == "/run/secrets/issuer-jwks.json"
    assert settings.security.user_token.issuers == ["https://login.example.com"]
    assert settings.publication.destinations.allowed_hosts == [
        "api.example.com",
        "*.internal.example.com",
    ]
    assert settings.execution.outbound.gateway_mcp_url == "https://gateway.example.com/mcp"


def test_the_example_shows_the_defaults_where_it_marks_none(tmp_path: Path) -> None:
    defaults = GatewayConfig()
    example = load_settings(EXAMPLE, document=GatewayConfig)
    assert example.server == defaults.server
    assert example.execution.scheduler() == defaults.execution.scheduler()
    assert example.security.clock_skew_seconds == defaults.security.clock_skew_seconds
    assert example.capacity == defaults.capacity


def test_the_example_shows_every_capacity_setting() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    section = text[text.index("\ncapacity:") : text.index("\ntelemetry:")]
    names = [field.name for field in msgspec.structs.fields(CapacitySettings)]
    missing = [name for name in names if f"\n  {name}:" not in section]
    assert missing == []


def test_the_environment_variables_the_example_shows_load_over_it() -> None:
    shown = {}
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        text = line.lstrip("# ").split("  (")[0].strip()
        if text.startswith("WORKFLOW_") and "=" in text:
            name, _, value = text.partition("=")
            shown[name] = value.strip("'")
    assert len(shown) >= 5
    settings = load_settings(EXAMPLE, shown, document=GatewayConfig)
    assert settings.server.port == int(shown["WORKFLOW_SERVER_PORT"])
    assert settings.execution.workers_enabled is False
    assert settings.publication.destinations.allowed_hosts is None
