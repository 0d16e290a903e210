"""Refusals caused by light-workflow-only syntax name it and point at `workflow-mcp convert`.

Users arrive with light-workflow definitions (the system our specification was written for);
a refusal should teach the way instead of only saying what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

CONVERT = "`workflow-mcp convert` rewrites it into this profile (docs/MIGRATING.md)"
# Fields only light-workflow has, and what each is there.
_FIELDS = {
    "end": "`end: true` is light-workflow's `then: end`",
    "session": "`session` names a light-workflow use.mcpSessions entry",
    "mcpSessions": "use.mcpSessions is light-workflow's MCP session table",
    "outputSchemas": "top-level outputSchemas is light-workflow's (kept here under "
    "document.metadata)",
    "metadata": "top-level metadata is light-workflow's (here it is document.metadata)",
}
_BARE_WORD = re.compile(r"^[A-Za-z][\w-]*$")


def field_hint(fields: Iterable[str]) -> str:
    """'; <what the light-workflow fields are>: <convert>' for known fields, else ''."""
    notes = [_FIELDS[name] for name in sorted(fields) if name in _FIELDS]
    return f"; {'; '.join(notes)}: {CONVERT}" if notes else ""


def interpolation_hint() -> str:
    """Why `${ }` inside a string or URI is light-workflow syntax."""
    return f"; `${{ }}` inside text is light-workflow interpolation: {CONVERT}"


def bare_word_hint(name: str, expression: str) -> str:
    """For an undeclared name compared in an expression: light-workflow reads it as a string."""
    comparison = any(op in expression for op in ("==", "!="))
    if not comparison or not _BARE_WORD.match(name):
        return ""
    return f"; light-workflow reads a bare word as a string: write '{name}' in quotes; {CONVERT}"


def ask_mode_hint(mode: object) -> str:
    """For light-workflow's `ask.mode: confirm`, which convert maps to approval."""
    if mode != "confirm":
        return ""
    return (
        "; `mode: confirm` is light-workflow's (its options are the acknowledgements, an "
        f"approval here): {CONVERT}"
    )
