"""Where an ask may stand: nested asks are accepted where their run can resume by replay."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.engine import DefinitionError
from runtime.engine.check import worst_case_human_wait_ms
from tests.support.engine import definition

pytestmark = pytest.mark.requirement("issue-22:human-tasks")


def _ask(timeout: str | None = "PT1H") -> dict[str, Any]:
    ask: dict[str, Any] = {"prompt": "ok?", "mode": "input", "assignment": {"roleId": "r"}}
    if timeout is not None:
        ask["timeout"] = {"after": timeout}
    return {"ask": ask}


def _loop(*body: dict[str, Any]) -> dict[str, Any]:
    return {"for": {"each": "item", "in": "input.items"}, "do": list(body)}


HOUR = 3_600_000
INPUT = {"schema": {"format": "json", "document": {"type": "object", "properties": {
    "items": {"type": "array", "maxItems": 3, "items": {"type": "string"}}}}}}  # fmt: skip


def test_an_ask_in_a_do_switch_target_for_body_and_try_is_accepted() -> None:
    parsed = definition(
        [
            {"block": {"do": [{"first": {"set": {"a": 1}}}, {"confirm": _ask()}]}},
            {"each": _loop({"review": _ask()})},
            {"guarded": {"try": [{"inner": _ask()}], "catch": {"do": [{"late": _ask()}]}}},
        ],
        input=INPUT,
    )
    # 1 h in the block, 3 iterations of 1 h, 1 h in the try and 1 h in its catch.
    assert worst_case_human_wait_ms(parsed) == 6 * HOUR


def test_a_for_loop_multiplies_the_wait_and_an_untimed_nested_ask_has_none() -> None:
    looped = definition([{"each": _loop({"review": _ask("PT2H")})}], input=INPUT)
    assert worst_case_human_wait_ms(looped) == 3 * 2 * HOUR
    untimed = definition([{"block": {"do": [{"confirm": _ask(None)}]}}])
    assert worst_case_human_wait_ms(untimed) is None


def test_an_ask_sharing_its_top_level_task_with_a_call_or_in_a_fork_is_refused() -> None:
    call = {"call": "http", "with": {"method": "get", "endpoint": "https://api.example.com/x"}}
    with pytest.raises(DefinitionError) as refused:
        definition([{"block": {"do": [{"fetch": call}, {"confirm": _ask()}]}}])
    [problem] = refused.value.problems
    assert problem.pointer == "/do/0/block/do/1/confirm"
    assert "would send the call again" in problem.message
    branches = [{"left": _ask()}, {"right": {"set": {"a": 1}}}]
    with pytest.raises(DefinitionError) as refused:
        definition([{"both": {"fork": {"branches": branches}}}])
    assert "fork branch" in refused.value.problems[0].message
