"""The command's checks before any call: credentials, host, destination policy."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from publisher.command import EXIT_USAGE, actor_of, run_publish
from runtime.publication.bindings.destination_policy import DestinationPolicy
from runtime.security.devtools import DevIdentity
from tests.support.publisher_harness import copy_examples
from workflow_mcp.cli import build_parser

UNREACHABLE = "http://127.0.0.1:9/mcp"


def _run(
    directory: Path, *options: str, policy: DestinationPolicy | None = None
) -> tuple[int, str]:
    args = build_parser().parse_args(["publish", str(directory), "--url", UNREACHABLE, *options])
    err = io.StringIO()
    code = run_publish(args, destinations=policy, out=io.StringIO(), err=err)
    return code, err.getvalue()


def test_targets_outside_the_configured_destinations_refuse_the_directory_before_any_call(
    tmp_path: Path,
) -> None:
    token = DevIdentity(tmp_path / "keys").user_token(user_id="alice")
    code, err = _run(copy_examples(tmp_path), "--token", token, policy=DestinationPolicy())
    assert code == EXIT_USAGE
    assert "http://127.0.0.1:8790/notes" in err
    assert not (tmp_path / "examples" / ".publish").exists()


def test_without_a_token_nothing_is_called_and_no_token_is_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WORKFLOW_PUBLISH_TOKEN", raising=False)
    monkeypatch.delenv("WORKFLOW_PUBLISH_TOKEN_FILE", raising=False)
    code, err = _run(copy_examples(tmp_path))
    assert code == EXIT_USAGE and "no user token" in err
    token = DevIdentity(tmp_path / "keys").user_token(host_id=None, user_id="alice")
    code, err = _run(copy_examples(tmp_path / "again"), "--token", token)
    assert code == EXIT_USAGE and "--host-id" in err and token not in err


def test_the_host_and_actor_come_from_the_token_unless_the_host_is_given(tmp_path: Path) -> None:
    token = DevIdentity(tmp_path).user_token(host_id="h-1", user_id="alice")
    assert (actor_of(token, None).host_id, actor_of(token, None).user_id) == ("h-1", "alice")
    assert actor_of(token, "h-2").host_id == "h-2"


@pytest.mark.requirement("001:Publication, Versioning, And Rollback")
def test_a_rollback_without_a_reason_calls_nothing(tmp_path: Path) -> None:
    token = DevIdentity(tmp_path / "keys").user_token(user_id="alice")
    directory = copy_examples(tmp_path)
    for reason in ((), ("--reason", "   ")):
        code, err = _run(directory, "--token", token, "--rollback", "loans.quick-decision", *reason)
        assert code == EXIT_USAGE and "--reason" in err
    assert not (directory / ".publish").exists()
