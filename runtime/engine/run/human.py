"""The `ask` task kind at run time: answer from the run state, or park the run.

The interpreter stays pure: a human task is answered by the durable runner, which reads the
task's row before it resumes the run at the ask's position and hands the answer in through the
RunState. Without an answer the task raises AwaitingAnswer with the checkpoint to resume from
(the state before the ask: a top-level ask has changed nothing yet), and the runner parks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.engine.model import AskSpec, Task, thaw
from runtime.engine.run.faults import fault
from runtime.engine.run.runner import Runner


@dataclass(frozen=True)
class AskRequest:
    """What a parked run asks a person: the resolved prompt and the task's static fields."""

    name: str
    pointer: str
    position: int
    prompt: str
    spec: AskSpec

    def document(self) -> dict[str, Any]:
        """The JSON the human-task row keeps of the question."""
        spec = self.spec
        return {
            "prompt": self.prompt,
            "mode": spec.mode,
            "assignment": dict(spec.assignment),
            "options": [
                {"label": o.label, "value": o.value}
                | ({"description": o.description} if o.description is not None else {})
                for o in spec.options
            ],
            "required": spec.required,
            "timeoutMs": spec.timeout_ms,
            "onTimeout": {"action": spec.on_timeout}
            | ({"default": thaw(spec.default)} if spec.on_timeout == "default" else {}),
        }


class AwaitingAnswer(Exception):
    """The run waits for a person: park it with ``state`` (to resume at the ask)."""

    def __init__(self, request: AskRequest, state: dict[str, Any]) -> None:
        super().__init__(f"waiting for an answer to {request.pointer}")
        self.request = request
        self.state = state


def run_ask(runner: Runner, spec: AskSpec, task: Task, variables: Any) -> Any:
    """The answer's output, a timeout fault, or AwaitingAnswer."""
    answer = runner.state.answer
    if answer is not None:
        runner.state.answer = None  # consumed: the next checkpoint must not carry it
        if answer.get("failed"):
            raise fault("timeout", task.pointer, title="Human task timed out")
        return answer.get("output")
    prompt = runner.value(spec.prompt, variables, task.pointer)
    if not isinstance(prompt, str):
        raise fault("expression", task.pointer, detail="ask.prompt must resolve to a string")
    request = AskRequest(task.name, task.pointer, runner.state.position, prompt, spec)
    raise AwaitingAnswer(request, runner.state.to_json())
