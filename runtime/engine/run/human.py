"""The `ask` task kind at run time: answer from the run state, or park the run.

The interpreter stays pure: a human task is answered by the durable runner, which reads the
rows of the asks a top-level task opened before it resumes the run at that task and hands the
answers in through the RunState. Without an answer the ask raises AwaitingAnswer with the
checkpoint before its top-level task, and the runner parks. A nested ask (in a `do`, `switch`
target, `for` body or `try`) resumes by replaying its top-level task from that checkpoint: the
asks reached before it answer from their rows, keyed by pointer and how often each was reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.engine.model import AskSpec, Task, thaw
from runtime.engine.run.faults import fault
from runtime.engine.run.runner import Runner

# An assignee id as the inbox stores and matches it (ask_spec's literal bound).
MAX_ASSIGNEE = 128


@dataclass(frozen=True)
class AskRequest:
    """What a parked run asks a person: the resolved prompt and the task's static fields."""

    name: str
    pointer: str
    position: int
    # Which reaching of the ask within its top-level task ('' for a top-level ask).
    key: str
    prompt: str
    spec: AskSpec
    # The assignment with each `${ }` resolved: whom the task's row names.
    assignment: dict[str, str]

    def document(self) -> dict[str, Any]:
        """The JSON the human-task row keeps of the question."""
        spec = self.spec
        return {
            "prompt": self.prompt,
            "mode": spec.mode,
            "assignment": dict(self.assignment),
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
    key = runner.ask_key(task)
    answer = runner.state.answers.get(key)
    if answer is not None:
        if answer.get("failed"):
            raise fault("timeout", task.pointer, title="Human task timed out")
        return answer.get("output")
    prompt = runner.value(spec.prompt, variables, task.pointer)
    if not isinstance(prompt, str):
        raise fault("expression", task.pointer, detail="ask.prompt must resolve to a string")
    assignment = _assignment(runner, spec, variables, task.pointer)
    position = runner.state.position
    request = AskRequest(task.name, task.pointer, position, key, prompt, spec, assignment)
    # The run resumes before its top-level task, which replays up to here with the answers
    # (publication refuses an ask in a top-level task that calls out, so replays send nothing).
    raise AwaitingAnswer(request, runner.checkpoint)


def _assignment(runner: Runner, spec: AskSpec, variables: Any, pointer: str) -> dict[str, str]:
    """The assignment with its `${ }` strings evaluated once, now, as the prompt is."""
    resolved: dict[str, str] = {}
    for key, text in spec.assignment.items():
        value = runner.value(text, variables, pointer)  # a literal stays as it is
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_ASSIGNEE:
            # Nobody (or a non-id) to ask: the run fails here rather than park unanswerable.
            # The message names the definition's expression and the value's kind, no run data.
            problem = fault(
                "expression",
                pointer,
                title="Human task has no assignee",
                detail=f"ask.assignment.{key} must resolve to a non-empty string "
                f"(<= {MAX_ASSIGNEE} characters), not {_kind(value)}",
            )
            problem.problem["expression"] = text
            raise problem
        resolved[key] = value
    return resolved


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return "an empty string" if not value.strip() else f"{len(value)} characters"
    return "null" if value is None else type(value).__name__
