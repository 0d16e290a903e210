"""`compensate:` of a write task: what parses, and every refusal with its typed problem."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.engine import DefinitionError, parse_definition, walk_tasks
from runtime.engine.model import HttpCallSpec

pytestmark = pytest.mark.requirement("001:Idempotency And Side Effects")

HEADER = {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"}
URI = "https://api.example.com"


def _call(method: str, path: str) -> dict[str, Any]:
    return {"call": "http", "with": {"method": method, "endpoint": f"{URI}/{path}"}}


def _document(task: dict[str, Any]) -> dict[str, Any]:
    return {"document": dict(HEADER), "do": [{"charge": task}]}


def _problems(task: dict[str, Any]) -> list[dict[str, Any]]:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(_document(task))
    return [problem.as_json() for problem in caught.value.problems]


def test_a_single_task_and_a_do_list_both_parse_and_are_walked() -> None:
    single = {**_call("post", "charge"), "compensate": _call("post", "refund")}
    listed = {
        **_call("post", "charge"),
        "compensate": {
            "when": "possible",
            "retry": {"limit": {"attempt": {"count": 3}}},
            "do": [{"refund": _call("post", "refund")}, {"note": {"set": {"done": True}}}],
        },
    }
    for task, names, when in (
        (single, ["compensate"], "confirmed"),
        (listed, ["refund", "note"], "possible"),
    ):
        parsed = parse_definition(_document(task))
        [charge] = parsed.tasks.tasks
        assert charge.compensate is not None and charge.compensate.when == when
        assert [t.name for t in charge.compensate.body.tasks] == names
        # Walked like any nested list: publication checks (targets, evidence) reach it.
        walked = [t for t in walk_tasks(parsed.tasks) if isinstance(t.spec, HttpCallSpec)]
        assert [t.name for t in walked] == ["charge", names[0]]
    assert listed["compensate"]["retry"]["limit"]["attempt"]["count"] == 3


POST = _call("post", "charge")
UNDO = [{"r": _call("post", "r")}]
REFUSED = [
    ({**_call("get", "charge"), "compensate": _call("post", "refund")}, "task that writes"),
    ({"set": {"a": 1}, "compensate": _call("post", "refund")}, "task that writes"),
    ({**POST, "compensate": {"when": "maybe", "do": UNDO}}, "compensate.when"),
    ({**POST, "compensate": {"when": "possible"}}, "needs a task"),
    ({**POST, "compensate": {"do": [{"w": {"wait": {"seconds": 1}}}]}}, "wait task cannot run"),
    ({**POST, "compensate": {"do": [{"f": {"fork": {"branches": UNDO}}}]}}, "fork task cannot"),
    (
        {**POST, "compensate": {"do": [{"r": {**_call("post", "r"), "compensate": POST}}]}},
        "its own `compensate`",
    ),
]


@pytest.mark.parametrize(("task", "needle"), REFUSED)
def test_a_misplaced_or_unsupported_compensation_is_refused_with_a_typed_problem(
    task: dict[str, Any], needle: str
) -> None:
    problems = _problems(task)
    assert any(needle in str(problem.get("message")) for problem in problems), problems
    assert any(problem.get("rule") == "compensation" for problem in problems), problems
