"""A Tool spec's `lightspeed:` block becomes the binding's lightspeedReceiver (issue 37)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from publisher.payloads import Actor, binding_arguments
from publisher.spec import SpecError, load_dir
from tests.support.publisher_harness import EXAMPLES

ACTOR = Actor(host_id="01964b05-552a-7c4b-9184-6857e7f3dc5f", user_id="alice")
LIGHTSPEED = EXAMPLES / "lightspeed"


def test_the_lightspeed_example_names_its_lightspeed_tool_in_the_binding() -> None:
    [tool] = load_dir(LIGHTSPEED).tools
    binding = binding_arguments(ACTOR, tool)["binding"]
    assert binding["lightspeedReceiver"] == {
        "toolId": "demo.echo.v1",
        "universes": ["6f3a1a52-58c1-4f0e-9c2d-1a2b3c4d5e6f"],
        "receiverWorkflowId": "workflow-mcp/receiver/demo",
    }
    assert binding["idempotencyPolicy"]["kind"] == "explicit"


def test_a_spec_without_lightspeed_has_no_receiver_and_an_unknown_member_is_refused(
    tmp_path: Path,
) -> None:
    for path in LIGHTSPEED.glob("*.yaml"):
        (tmp_path / path.name).write_text(path.read_text())
    spec = yaml.safe_load((tmp_path / "echo.tool.yaml").read_text())
    del spec["lightspeed"]
    (tmp_path / "echo.tool.yaml").write_text(yaml.safe_dump(spec))
    [tool] = load_dir(tmp_path).tools
    assert "lightspeedReceiver" not in binding_arguments(ACTOR, tool)["binding"]
    spec["lightspeed"] = {"toolId": "x", "universes": [], "receiverWorkflowId": "r", "extra": 1}
    (tmp_path / "echo.tool.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError):
        load_dir(tmp_path)
