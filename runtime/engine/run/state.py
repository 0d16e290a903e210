"""Run state (a JSON checkpoint between top-level tasks) and the run outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from runtime.errors import WorkflowError

EffectState = Literal["none", "possible", "confirmed"]
RUN_STATE_VERSION = 1


@dataclass
class RunState:
    """Everything needed to resume a run before the top-level task at ``position``."""

    position: int
    data: Any
    context: dict[str, Any]
    workflow_input: Any
    effect_state: EffectState = "none"
    nested_calls: int = 0
    finished: bool = False
    # The answers of the human tasks the top-level task at ``position`` opened, by ask key
    # ({"output": ...} or {"failed": true} after a failing timeout). Set by the durable runner
    # on resume, read by the asks as the task replays; never part of a checkpoint (the rows
    # are the record).
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The due times (epoch seconds) of the durable timers the top-level task at ``position``
    # parked on, by timer key; like the answers, set by the durable runner on resume and kept
    # beside the checkpoint, never in it (runtime.engine.run.timers).
    timers: dict[str, float] = field(default_factory=dict)
    # The keys of the waits it parked on (AwaitingTimer.parked): its replay runs without
    # deadlines until it reaches them (runtime.engine.run.deadlines); set like the timers.
    parked: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON for a durable checkpoint."""
        document = {
            "version": RUN_STATE_VERSION,
            "position": self.position,
            "data": self.data,
            "context": self.context,
            "workflowInput": self.workflow_input,
            "effectState": self.effect_state,
            "nestedCalls": self.nested_calls,
            "finished": self.finished,
        }
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> RunState:
        """Rebuild from ``to_json`` output."""
        if document.get("version") != RUN_STATE_VERSION:
            raise ValueError("unsupported run state version")
        return cls(
            position=int(document["position"]),
            data=document["data"],
            context=dict(document["context"]),
            workflow_input=document["workflowInput"],
            effect_state=document["effectState"],
            nested_calls=int(document["nestedCalls"]),
            finished=bool(document["finished"]),
        )

    def mark_effect(self, state: EffectState) -> None:
        """Advance the effect state; it never moves back."""
        order = {"none": 0, "possible": 1, "confirmed": 2}
        if order[state] > order[self.effect_state]:
            self.effect_state = state


@dataclass
class RunOutcome:
    """A finished run: the public result or the fault with its mapped workflow error."""

    status: Literal["completed", "faulted"]
    output: Any = None
    fault: dict[str, Any] | None = None
    error: WorkflowError | None = None
    state: RunState | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def effect_state(self) -> EffectState:
        """The run's effect state at the end."""
        return self.state.effect_state if self.state else "none"
