"""The `workflow-mcp` command line: commands, their options and their help."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import msgspec
import pytest

from runtime.composition.cli import _worker_settings
from workflow_mcp.cli import build_parser, main

COMMANDS = ["serve", "worker", "migrate", "token", "check", "runs", "publish", "gateway", "draft"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_answers_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_token_help_names_the_workflow_mcp_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["token", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: workflow-mcp token ")
    assert "runtime.security.devtools" not in out


def test_the_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(command in out for command in COMMANDS)


def test_serve_runs_workers_unless_told_not_to() -> None:
    assert build_parser().parse_args(["serve"]).no_workers is False
    parsed = build_parser().parse_args(["serve", "--no-workers", "--config", "w.yaml"])
    assert (parsed.no_workers, parsed.config) == (True, "w.yaml")


def test_worker_slots_apply_to_every_class_and_a_class_flag_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WORKFLOW_CONFIG", raising=False)
    args = build_parser().parse_args(["worker", "--slots", "3", "--batch-slots", "1"])
    section = _worker_settings(args).execution
    assert (section.interactive_slots, section.standard_slots, section.batch_slots) == (3, 3, 1)


def test_worker_runs_workflow_handlers_by_default() -> None:
    assert build_parser().parse_args(["worker"]).handlers is None


def test_worker_overrides_are_checked_like_the_configuration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WORKFLOW_CONFIG", raising=False)
    args = build_parser().parse_args(["worker", "--slots", "0"])
    with pytest.raises(msgspec.ValidationError, match="slot"):
        _worker_settings(args)


def test_an_unknown_command_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2


def test_a_configuration_error_is_one_line_and_exit_code_two(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WORKFLOW_SERVER_PORT", "eighty")
    assert main(["worker"]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and "server.port" in err


def test_the_console_script_and_the_historical_module_run_the_same_entry_point() -> None:
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    script = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["scripts"]
    module, _, attribute = script["workflow-mcp"].partition(":")
    assert getattr(importlib.import_module(module), attribute) is main
    assert importlib.import_module("runtime.cli").main is main


def test_the_command_line_builds_no_cel_parser_until_a_command_needs_one() -> None:
    # Building it takes about half a second: `runs`, `secrets`, `token` and `gateway` never parse
    # CEL. (A service builds it while starting: runtime.composition.bootstrap.)
    probe = (
        "import workflow_mcp.cli\n"
        "from runtime.engine.cel import celpy_seam\n"
        "assert not celpy_seam._ENVIRONMENT, 'built at import'\n"
        "celpy_seam.parse('1 + 1')\n"
        "assert celpy_seam._ENVIRONMENT\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
