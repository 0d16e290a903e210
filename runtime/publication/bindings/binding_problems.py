"""Every problem a binding publish finds in one pass, ordered blockers first.

Each problem names where the fix goes: a JSON pointer into the publish request (``/binding/...``,
``/dependencies/N``, ``/endpointTargets/N``) or, for a problem inside the pinned definition
version, into that definition (``/do/...``). A request-only problem (``section`` set) is proof
from the request alone and makes the refusal stored bindingFields/bindingReach evidence (seed
000 "Additive binding request-validation evidence"); the others depend on stored state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from generated.errors import ErrorCodeName
from runtime.errors import WorkflowError
from runtime.publication.bindings.rejections import RequestSection, evidence_of

# What a publisher must fix first: the Tool cannot exist in this shape at all.
BLOCKER_RULES: Final = frozenset(
    {
        "sync-only",
        "pinned-definition",
        "unsupported-task-kind",
        "undeclared-dependency",
        "endpoint-coverage",
        "destination",
    }
)
# Bounds and limits: cheap to change once the shape is right, so listed last.
LIMIT_RULES: Final = frozenset(
    {"binding-limit", "admission-limits", "static-fit", "service-parallelism"}
)
# The listed problems keep the receipt's warnings cap; the message still counts them all.
MAX_LISTED: Final = 200
POLICY_DENIED: Final[ErrorCodeName] = "WORKFLOW_POLICY_DENIED"
INPUT_INVALID: Final[ErrorCodeName] = "WORKFLOW_INPUT_INVALID"


@dataclass(frozen=True, slots=True)
class BindingProblem:
    """One rule violation: where to fix it, which rule, and how."""

    pointer: str
    rule: str
    message: str
    # The request section it proves invalid on its own (None: it depends on stored state).
    section: RequestSection | None = None
    # A destination-policy refusal: WORKFLOW_POLICY_DENIED when nothing else is wrong.
    policy: bool = False

    def as_json(self) -> dict[str, str]:
        """The `details.problems` item: {pointer, rule, message}."""
        return {"pointer": self.pointer, "rule": self.rule, "message": self.message}


def _rank(problem: BindingProblem) -> int:
    if problem.rule in BLOCKER_RULES:
        return 0
    if problem.rule in LIMIT_RULES:
        return 2
    return 1


def _key(problem: BindingProblem) -> tuple[int, int]:
    # Within a rank the request-only problems lead, so a refusal whose first problem is
    # request-only carries that problem's own section as its evidence.
    return _rank(problem), 0 if problem.section is not None else 1


def ordered(problems: Iterable[BindingProblem]) -> list[BindingProblem]:
    """Blockers first, limits last; request-only first within a rank, else the order found."""
    return sorted(problems, key=_key)


def refusal_message(problems: list[BindingProblem]) -> str:
    """The first problem's message and, when there are more, how many (as definition publish)."""
    first = problems[0].message
    if len(problems) == 1:
        return first
    return f"{first} (and {len(problems) - 1} more problems; see details.problems)"


def refusal(problems: Iterable[BindingProblem], operation_id: str) -> WorkflowError:
    """The one refusal for every problem found.

    A request-only problem anywhere makes it WORKFLOW_INPUT_INVALID with the version 2 evidence
    of the first such problem's section (so it is stored and replayed); without one, it is
    WORKFLOW_POLICY_DENIED when every problem is a destination refusal, else
    WORKFLOW_INPUT_INVALID without evidence.
    """
    found = ordered(problems)
    details: dict[str, Any] = {"problems": [p.as_json() for p in found[:MAX_LISTED]]}
    section = next((p.section for p in found if p.section is not None), None)
    if section is not None:
        details["requestValidation"] = evidence_of(section, operation_id)
    code = POLICY_DENIED if section is None and all(p.policy for p in found) else INPUT_INVALID
    return WorkflowError(code, refusal_message(found), details=details)


def revalidation_refusal(problems: Iterable[BindingProblem]) -> WorkflowError:
    """Owner approval's refusal of a revision that no longer passes: every problem, no evidence.

    WORKFLOW_POLICY_DENIED when every problem is a destination refusal (as publish), else
    WORKFLOW_INPUT_INVALID; nothing is stored (it depends on the current state and settings).
    """
    found = ordered(problems)
    details = {"problems": [p.as_json() for p in found[:MAX_LISTED]]}
    code = POLICY_DENIED if all(p.policy for p in found) else INPUT_INVALID
    message = f"the revision no longer passes validation: {refusal_message(found)}"
    return WorkflowError(code, message, details=details)
