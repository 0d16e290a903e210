"""Definition size limits (bytes, tasks, nesting), checked on the text before it is parsed.

Loading YAML and parsing the DSL cost time in proportion to the definition, so a 20,000-task
definition used to hold a publish for seconds before any rule refused it. These limits are
checked first: bytes on the raw text, then tasks and nesting on the YAML event stream of
libyaml's C parser, which stops at the first event over a limit and builds no values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import msgspec
import yaml

from runtime.errors import WorkflowError, input_invalid

# Keys whose value is a task list in the DSL (do, try, fork branches).
TASK_LIST_KEYS = frozenset({"do", "try", "branches"})
# libyaml's own nesting limit, hit while scanning, before any event of the nested collections.
LIBYAML_NESTING_PROBLEM = "exceeded maximum nesting depth"


class DefinitionLimits(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """publication.limits: the largest definition save and publish accept."""

    max_definition_bytes: int = 262_144
    max_tasks: int = 1_000
    max_nesting: int = 64

    def __post_init__(self) -> None:
        for name in ("max_definition_bytes", "max_tasks", "max_nesting"):
            if getattr(self, name) <= 0:
                raise ValueError(f"publication.limits.{name} must be positive")


@dataclass
class _Frame:
    """One open YAML collection while scanning."""

    is_mapping: bool
    is_task_list: bool = False
    expecting_key: bool = True
    last_key: str | None = None


def _over(limit: str, message: str) -> WorkflowError:
    return input_invalid(message, details={"limit": f"publication.limits.{limit}"})


def check_definition_size(text: str, limits: DefinitionLimits) -> None:
    """Refuse a definition over a size limit before any YAML or DSL parsing (a typed refusal)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_definition_bytes:
        raise _over(
            "max_definition_bytes",
            f"definition is {size} bytes, over publication.limits.max_definition_bytes "
            f"({limits.max_definition_bytes})",
        )
    tasks = 0
    depth = 0
    for opened_task, new_depth in _structure(text):
        depth = new_depth
        if depth > limits.max_nesting:
            raise _over(
                "max_nesting",
                f"definition nests deeper than publication.limits.max_nesting "
                f"({limits.max_nesting})",
            )
        if opened_task:
            tasks += 1
            if tasks > limits.max_tasks:
                raise _over(
                    "max_tasks",
                    f"definition has more than publication.limits.max_tasks "
                    f"({limits.max_tasks}) tasks",
                )


def _structure(text: str) -> Iterator[tuple[bool, int]]:
    """(a task was opened, collection depth) per collection start, sequences and maps alike.

    libyaml stops at its own nesting limit (1,000 flow levels) before it emits the events
    counted above; handing such a text on to the full loader cost a second of serving time for
    nothing, so that error refuses the definition here. Any other YAML error is left to the
    loader, whose message and discriminator (lone-surrogate, duplicate-key, ...) say more.
    """
    stack: list[_Frame] = []
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            opened = _step(stack, event)
            if opened is not None:
                yield opened, len(stack)
    except yaml.YAMLError as error:
        if LIBYAML_NESTING_PROBLEM not in str(error):
            return
        raise input_invalid(
            f"definition is not accepted: it is not valid YAML: {_first_line(error)}",
            details={"discriminator": "invalid-yaml"},
        ) from error


def _first_line(error: yaml.YAMLError) -> str:
    # libyaml's message spans lines (problem, then where); keep it short and single-line.
    return " ".join(str(error).split())[:300]


def _step(stack: list[_Frame], event: yaml.Event) -> bool | None:
    if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
        stack.pop()
        return None
    if not isinstance(event, yaml.NodeEvent):
        return None
    parent = stack[-1] if stack else None
    key: str | None = None
    in_task_list = parent is not None and parent.is_task_list
    if parent is not None and parent.is_mapping:
        if parent.expecting_key:
            parent.expecting_key = False
            parent.last_key = event.value if isinstance(event, yaml.ScalarEvent) else None
            return _open(stack, event, None, False)
        key, parent.expecting_key = parent.last_key, True
    return _open(stack, event, key, in_task_list)


def _open(stack: list[_Frame], event: yaml.Event, key: str | None, item: bool) -> bool | None:
    if isinstance(event, yaml.MappingStartEvent):
        stack.append(_Frame(is_mapping=True))
        return item
    if isinstance(event, yaml.SequenceStartEvent):
        stack.append(_Frame(is_mapping=False, is_task_list=key in TASK_LIST_KEYS))
        return False
    return None
