"""`workflow-mcp lightspeed`: vectors --check, emission-id, parse (A3-1 to A3-3 of the design)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.lightspeed import (
    VECTORS,
    changed,
    reference_envelopes,
    requires_vectors,
    tool_invocation_envelope,
    vectors,
)
from tests.support.shared import REPO, shared_path
from workflow_mcp.cli import main

U = "6f3a1a52-58c1-4f0e-9c2d-1a2b3c4d5e6f"
INVOCATION = "wti:sha256:" + "a" * 64


def run(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *argv: str,
    stdin: str = "",
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        code = main(["lightspeed", *argv])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@requires_vectors
@pytest.mark.requirement("003:E17")
def test_vectors_check_prints_one_ok_line_per_value_and_exits_0(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, monkeypatch, "vectors", "--check", str(shared_path(VECTORS)))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines and all(line.startswith("ok ") for line in lines)
    assert "ok expected.emissionIds.sourceResolution" in lines


@requires_vectors
@pytest.mark.requirement("003:E17")
def test_vectors_check_with_one_changed_digit_exits_2_naming_the_value(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    document = vectors()
    value = document["expected"]["emissionIds"]["sourceResolution"]
    digit = "1" if value[-1] == "0" else "0"
    bad = changed(document, "expected.emissionIds.sourceResolution", value[:-1] + digit)
    path = tmp_path / "vectors.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    code, out, err = run(capsys, monkeypatch, "vectors", "--check", str(path))
    assert code == 2
    assert "MISMATCH expected.emissionIds.sourceResolution" in out
    assert "emissionIds.sourceResolution" in err


def test_vectors_check_of_a_missing_or_broken_file_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, _, err = run(capsys, monkeypatch, "vectors", "--check", str(tmp_path / "absent.json"))
    assert code == 2 and "cannot read" in err
    broken = tmp_path / "broken.json"
    broken.write_text('{"framing": {}}', encoding="utf-8")
    code, _, err = run(capsys, monkeypatch, "vectors", "--check", str(broken))
    assert code == 2 and "framing.hashDomain" in err


@pytest.mark.requirement("003:E17")
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            [
                "source_resolution",
                "--universe",
                U,
                "--producer",
                f"lightspeed.bots.v1/{U}/triage",
                "--holder",
                f"{U}/bot:v1:triage",
                "--promise",
                "promise_1",
            ],
            "emission:sha256:8980ea03cd17fbacf2682cdf4e5a13593d6c596ca8965ebcdb601ad56e40ec85",
        ),
        (
            [
                "run_terminal",
                "--universe",
                U,
                "--session",
                "bot:v1:triage",
                "--run",
                "7",
                "--token",
                "terminal-token-1",
            ],
            "emission:sha256:a477a56dbeb4f3937959dc5ece1cf363c7030bec130415e4019b507e48098240",
        ),
        (
            ["invocation_cancellation", "--invocation", INVOCATION, "--key", "reply"],
            "emission:sha256:6b88bd2ef714193fc9274b5f212cc415da4dd25733e1717fa89c7fdddc3eca4e",
        ),
        (["tool_invocation", "--invocation", INVOCATION], INVOCATION),
    ],
    ids=["source_resolution", "run_terminal", "invocation_cancellation", "tool_invocation"],
)
def test_emission_id_prints_the_upstream_value(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    expected: str,
) -> None:
    # The values are the upstream manifest-v2 expectations (seed 003's vectors), pinned here.
    assert run(capsys, monkeypatch, "emission-id", *argv) == (0, expected + "\n", "")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run_terminal", "--universe", U, "--session", "s", "--token", "t"], "--run"),
        (
            ["run_terminal", "--universe", U, "--session", "s", "--run", "x", "--token", "t"],
            "--run",
        ),
        (
            [
                "source_resolution",
                "--universe",
                "nope",
                "--producer",
                "p",
                "--holder",
                "h",
                "--promise",
                "p",
            ],
            "universe_id",
        ),
        (["invocation_cancellation", "--key", "reply"], "--invocation"),
    ],
)
def test_emission_id_with_a_missing_or_bad_flag_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], named: str
) -> None:
    code, out, err = run(capsys, monkeypatch, "emission-id", *argv)
    assert (code, out) == (2, "")
    assert named in err


@pytest.mark.requirement("003:E5")
@pytest.mark.parametrize("envelope", reference_envelopes())
def test_parse_prints_each_reference_envelope_back_as_the_same_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, envelope: dict[str, Any]
) -> None:
    code, out, err = run(capsys, monkeypatch, "parse", stdin=json.dumps(envelope))
    assert (code, err) == (0, "")
    assert json.loads(out) == envelope


@requires_vectors
def test_parse_prints_the_reference_start_args_back(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    start = vectors()["startArgs"]
    code, out, _ = run(capsys, monkeypatch, "parse", stdin=json.dumps(start))
    assert code == 0 and json.loads(out) == start


@pytest.mark.requirement("003:E5")
@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("body.kind", "future_protocol_shape", "unknown emission body kind"),
        ("body.invocation.run_id", "7", "body.invocation.run_id"),
        ("body.invocation.completion_promises", {}, "completion_promises"),
        (
            "body.invocation.completion_promises",
            {"reply": "p", "extra": "q"},
            "completion_promises",
        ),
    ],
)
def test_parse_refuses_a_malformed_envelope_with_exit_2_naming_the_field(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    value: Any,
    message: str,
) -> None:
    bad = changed(tool_invocation_envelope(), path, value)
    code, out, err = run(capsys, monkeypatch, "parse", stdin=json.dumps(bad))
    assert (code, out) == (2, "")
    assert message in err


def test_parse_refuses_a_malformed_id_and_non_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    envelope = {
        "emission_id": "emission:sha256:ABC",
        "producer": {"kind": "workflow", "universe_id": U, "workflow_id": "w"},
        "body": {
            "kind": "source_resolution",
            "promise_id": "p",
            "resolution": {"kind": "cancelled"},
        },
    }
    code, _, err = run(capsys, monkeypatch, "parse", stdin=json.dumps(envelope))
    assert code == 2 and "emission_id: invalid format" in err
    code, _, err = run(capsys, monkeypatch, "parse", stdin="{not json")
    assert code == 2 and "not JSON" in err


def test_the_console_command_runs_the_lightspeed_commands_in_a_process() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workflow_mcp.cli",
            "lightspeed",
            "emission-id",
            "invocation_cancellation",
            "--invocation",
            INVOCATION,
            "--key",
            "reply",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("emission:sha256:6b88bd2e")
