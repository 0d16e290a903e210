"""What the task kinds need from the interpreter: the Runner protocol and a list's result.

The task kinds (``task_kinds``) are called by the interpreter and call back into it for nested
task lists and expressions; typing them against this protocol instead of the Interpreter class
keeps the import graph of the engine acyclic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.engine.model import Task, TaskList, Transform, WorkflowDefinition
from runtime.engine.run.deadlines import Deadlines
from runtime.engine.run.ports import Clock, EffectPort, RunLimits
from runtime.engine.run.state import RunState


@dataclass
class ListResult:
    """The output of a task list and whether it stopped on `exit`."""

    output: Any
    exited: bool = False


class Runner(Protocol):
    """The interpreter as the task kinds see it."""

    definition: WorkflowDefinition
    state: RunState
    effects: EffectPort
    limits: RunLimits
    clock: Clock
    deadlines: Deadlines
    # The checkpoint before the running top-level task: a parked ask resumes from it.
    checkpoint: dict[str, Any]

    @property
    def parking(self) -> Any:
        """Whether every flow of the run waits on a timer (a timers.Parking; typed there, as
        the timers module imports this one)."""
        ...

    def ask_key(self, task: Task) -> str:
        """The key of this reaching of an ask (the same on every replay of its top-level task)."""
        ...

    def timer_key(self, pointer: str, *, peek: bool = False) -> str:
        """The key of this reaching of a timed wait (the same on every replay); peek: the next
        key, without reaching it."""
        ...

    def variables(self, roots: Mapping[str, Any], subject: Any, scope: Mapping[str, Any]) -> Any:
        """The activation of one expression site."""
        ...

    def predicate(self, text: str, variables: Any, pointer: str) -> bool:
        """Evaluate a predicate site."""
        ...

    def value(self, tree: Any, variables: Any, pointer: str) -> Any:
        """Evaluate a value tree."""
        ...

    def transform(self, transform: Transform, variables: Any, pointer: str) -> Any:
        """Evaluate a transform."""
        ...

    async def run_list(self, tasks: TaskList, data: Any, scope: Mapping[str, Any]) -> ListResult:
        """Run a nested task list."""
        ...

    async def run_task(self, task: Task, raw: Any, scope: Mapping[str, Any]) -> tuple[Any, str]:
        """Run one task; its output and next directive."""
        ...
