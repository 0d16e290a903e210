"""Where a light-workflow path reads from: the workflow input or an exported context key.

light-workflow evaluates every expression against one map, the workflow input plus every
`export` so far (../shared/design/light-workflow-semantics.md). Our profile reads the previous
task's output instead, so each converted path names its root explicitly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from runtime.engine.cel import is_identifier

# Our CEL roots: a converted definition names them, so they are never read as context keys.
PROFILE_ROOTS = frozenset(
    {"workflow", "context", "input", "output", "task", "runtime", "item", "index", "error"}
)


@dataclass(frozen=True)
class Scope:
    """The context keys a task can read: exported on every path, on some, and the input's."""

    exported: frozenset[str] = field(default_factory=frozenset)
    maybe: frozenset[str] = field(default_factory=frozenset)
    inputs: frozenset[str] = field(default_factory=frozenset)

    def known(self) -> frozenset[str]:
        """Every key the light-workflow context may hold at this task."""
        return self.exported | self.maybe | self.inputs

    def resolve(self, segments: Sequence[str]) -> str:
        """The CEL text reading light-workflow's path `.a.b` (segments a, b) in our profile."""
        head, tail = segments[0], "".join(member(name) for name in segments[1:])
        if head in self.exported:
            return f"context{member(head)}{tail}"
        if head in self.maybe:
            # Only some paths into this task exported it: say which value wins where.
            fallback = f"workflow.input{member(head)}{tail}" if head in self.inputs else "null"
            return f"({presence(head)} ? context{member(head)}{tail} : {fallback})"
        return f"workflow.input{member(head)}{tail}"


def member(name: str) -> str:
    """CEL member access of one path segment (index form when it is not an identifier)."""
    return f".{name}" if is_identifier(name) else f"[{json.dumps(name)}]"


def presence(name: str) -> str:
    """A CEL test that the context holds key name."""
    return f"has(context.{name})" if is_identifier(name) else f"{json.dumps(name)} in context"
