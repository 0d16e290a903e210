"""`make run` and `make worker` are the development set-up: local `http://` backends work."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runtime.composition.config import load_settings

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.installed-stamp"


def make_environment(target: str, environ: dict[str, str]) -> dict[str, str]:
    """The environment `make TARGET` gives its command (the command replaced by `env`)."""
    # `-o` keeps make from (re)building the venv; CLI becomes a shell that prints its environment.
    completed = subprocess.run(
        ["make", "-s", "-o", STAMP, target, "CLI=sh -c env", "ARGS="],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        check=True,
    )
    pairs = (line.split("=", 1) for line in completed.stdout.splitlines() if "=" in line)
    return {name: value for name, value in pairs if name.startswith("WORKFLOW_")}


def clean_environment() -> dict[str, str]:
    """The caller's environment without any WORKFLOW_ setting."""
    return {name: value for name, value in os.environ.items() if not name.startswith("WORKFLOW_")}


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("target", ["run", "worker"])
def test_make_run_and_worker_allow_local_http_backends(target: str) -> None:
    settings = load_settings(None, make_environment(target, clean_environment()))
    destinations = settings.publication.destinations
    assert "http" in destinations.allowed_schemes
    assert "https" in destinations.allowed_schemes
    assert "127.0.0.0/8" in destinations.allowed_networks


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_scheme_setting_already_in_the_environment_wins() -> None:
    schemes = {"WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_SCHEMES": '["https"]'}
    environ = clean_environment() | schemes
    settings = load_settings(None, make_environment("run", environ))
    assert settings.publication.destinations.allowed_schemes == ["https"]
