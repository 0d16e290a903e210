"""Where an `ask` may stand: top level, or nested where its resume can replay safely.

A run parks between top-level tasks. A nested ask parks the run at the checkpoint before its
top-level task; the resumed run replays that task from its start, the asks reached before it
answering from their rows. The replay is exact only if everything before the ask in that task
is a pure function of the checkpoint and the answers, so a top-level task holding an ask may
not call out (its calls would be sent again), and no ask may stand in a `fork` branch (parallel
branches have no single order to replay).
"""

from __future__ import annotations

from runtime.engine.model import (
    AskSpec,
    ForkSpec,
    HttpCallSpec,
    McpCallSpec,
    Task,
    TaskList,
    walk_tasks,
)
from runtime.engine.parse.definition_errors import DefinitionError

FORK_ASK_REASON = (
    "an ask cannot stand in a fork branch: a parked run resumes by replaying its top-level "
    "task in order, and parallel branches have none; move the ask out of the fork"
)


def ask_placement_problems(tasks: TaskList) -> list[DefinitionError]:
    """One problem per nested ask that could not resume exactly."""
    problems: list[DefinitionError] = []
    for top in tasks.tasks:
        if isinstance(top.spec, AskSpec):
            continue
        nested = walk_tasks(TaskList((top,)))[1:]
        asks = [task for task in nested if isinstance(task.spec, AskSpec)]
        if not asks:
            continue
        calls = [task for task in nested if isinstance(task.spec, HttpCallSpec | McpCallSpec)]
        for ask in asks:
            if calls:
                problems.append(_calls_problem(top, ask, calls[0]))
        for fork in (task for task in (top, *nested) if isinstance(task.spec, ForkSpec)):
            problems.extend(
                DefinitionError(FORK_ASK_REASON, task=ask.pointer, rule="ask-placement")
                for ask in asks
                if ask.pointer.startswith(f"{fork.pointer}/")
            )
    return problems


def _calls_problem(top: Task, ask: Task, call: Task) -> DefinitionError:
    return DefinitionError(
        f"an ask nested in {top.name!r} cannot share it with the call {call.pointer}: a parked "
        f"run resumes by replaying {top.name!r} from its start up to the ask, which would "
        "send the call again; move the call (or the ask) to its own top-level task",
        task=ask.pointer,
        rule="ask-placement",
    )
