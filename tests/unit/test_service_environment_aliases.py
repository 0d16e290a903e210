"""The seeds' own environment variable names are accepted beside WORKFLOW_<SECTION>_<KEY>."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.composition.config import load_settings


@pytest.mark.requirement("000:Operator setup")
def test_workflow_long_keyring_file_sets_the_keyring_file(tmp_path: Path) -> None:
    config = tmp_path / "workflow.yaml"
    config.write_text("security:\n  keyring_file: /etc/workflow/keyring.json\n", encoding="utf-8")
    environ = {"WORKFLOW_LONG_KEYRING_FILE": "/run/secrets/run-credential-keyring.json"}
    # Like every variable, it wins over the file.
    settings = load_settings(config, environ)
    assert settings.security.keyring_file == "/run/secrets/run-credential-keyring.json"


def test_the_canonical_name_wins_over_an_alias() -> None:
    environ = {
        "WORKFLOW_LONG_KEYRING_FILE": "/run/secrets/alias.json",
        "WORKFLOW_SECURITY_KEYRING_FILE": "/run/secrets/canonical.json",
    }
    assert load_settings(None, environ).security.keyring_file == "/run/secrets/canonical.json"


@pytest.mark.requirement("001:Invocation State")
def test_workflow_wait_listener_connections_sets_the_waiter_bound() -> None:
    settings = load_settings(None, {"WORKFLOW_WAIT_LISTENER_CONNECTIONS": "0"})
    assert settings.execution.wait_listener_connections == 0
    assert load_settings(None, {}).execution.wait_listener_connections == 8
