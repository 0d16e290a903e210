"""Publication-time definition errors: each problem with its pointer and rule, ranked."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

# Rules a publisher must fix first (the definition cannot run in this profile at all) rank
# before ordinary structural problems, expression problems, and cosmetic ones (unknown fields).
BLOCKER_RULES: Final = frozenset(
    {"unsupported-task-kind", "rejected-call-kind", "rejected-construct"}
)
COSMETIC_RULES: Final = frozenset({"unknown-field"})
EXPRESSION_RULES: Final = frozenset({"expression", "undeclared-identifier"})
DEFAULT_RULE: Final = "invalid-definition"


@dataclass(frozen=True, slots=True)
class Problem:
    """One definition problem: where (JSON pointer), which rule, and how to fix it."""

    pointer: str
    rule: str
    message: str

    def as_json(self) -> dict[str, str]:
        """The `details.problems` item: {pointer, rule, message}."""
        return {"pointer": self.pointer, "rule": self.rule, "message": self.message}


def _rank(problem: Problem) -> int:
    if problem.rule in BLOCKER_RULES:
        return 0
    if problem.rule in COSMETIC_RULES:
        return 3
    if problem.rule in EXPRESSION_RULES:
        return 2
    return 1


def ordered(problems: Iterable[Problem]) -> list[Problem]:
    """Blockers first, cosmetic problems last; document order within each rank."""
    return sorted(problems, key=_rank)


class DefinitionError(Exception):
    """A definition breaks a publication rule; names the task path and expression when known.

    ``problems`` holds every problem found in one pass (this error's own when it stands alone);
    ``message`` names the first and, when there are more, how many.
    """

    def __init__(
        self,
        message: str,
        *,
        task: str | None = None,
        expression: str | None = None,
        rule: str = DEFAULT_RULE,
        pointer: str | None = None,
    ):
        parts = [message]
        if task is not None:
            parts.append(f"(task {task})")
        if expression is not None:
            parts.append(f"(expression {expression!r})")
        super().__init__(" ".join(parts))
        self.message = message
        self.task = task
        self.expression = expression
        self.rule = rule
        self.pointer = pointer if pointer is not None else (task or "")
        self.problems: tuple[Problem, ...] = (self.problem(),)

    def problem(self) -> Problem:
        """This error as one problem; the expression, when known, is named in the message."""
        text = self.message
        if self.expression is not None and repr(self.expression) not in text:
            text = f"{text} in expression {self.expression!r}"
        return Problem(self.pointer, self.rule, text)

    @classmethod
    def collected(cls, errors: Iterable[DefinitionError]) -> DefinitionError:
        """One error for every problem found; the first (after ordering) leads the message."""
        found = list(errors)
        problems = ordered(problem for error in found for problem in error.problems)
        lead = next(error for error in found if problems[0] in error.problems)
        if len(problems) == 1:
            return lead
        message = lead.message
        if lead.pointer and lead.pointer not in message:
            message = f"{lead.pointer}: {message}"
        message = f"{message} (and {len(problems) - 1} more problems; see details.problems)"
        error = cls(
            message,
            task=lead.task,
            expression=lead.expression,
            rule=lead.rule,
            pointer=lead.pointer,
        )
        error.problems = tuple(problems)
        return error

    def details(self) -> dict[str, Any]:
        """The refusal details: every problem, plus the first one's task and expression."""
        details: dict[str, Any] = {"problems": [problem.as_json() for problem in self.problems]}
        if self.task is not None:
            details["task"] = self.task
        if self.expression is not None:
            details["expression"] = self.expression
        return details
