"""Split a SQL script into statements, respecting quotes, dollar quotes and comments.

Non-transactional migrations need this: PostgreSQL runs a multi-statement query string as one
implicit transaction, where ``CREATE INDEX CONCURRENTLY`` is not allowed. The migration runner
also reads the statements of every file (``code_of``) to check what they create and call.
"""

from __future__ import annotations

import re

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def split_statements(script: str) -> list[str]:
    """The statements of script, without their terminating semicolons; blanks dropped."""
    statements: list[str] = []
    start = 0
    i = 0
    length = len(script)
    while i < length:
        char = script[i]
        if char == ";":
            statements.append(script[start:i])
            start = i + 1
            i += 1
        elif char in "'\"":
            i = _skip_quoted(script, i, char)
        elif script.startswith("--", i):
            i = _skip_to(script, "\n", i + 2)
        elif script.startswith("/*", i):
            i = _skip_block_comment(script, i)
        elif char == "$" and (tag := _DOLLAR_TAG.match(script, i)) is not None:
            i = _skip_to(script, tag.group(0), tag.end())
        else:
            i += 1
    statements.append(script[start:])
    return [s.strip() for s in statements if _has_code(s)]


def code_of(statement: str, *, literals: bool = True) -> str:
    """statement without its comments and, unless literals, its quoted and dollar-quoted text.

    Each piece removed becomes one space, so the words on either side stay apart.
    """
    kept: list[str] = []
    start = 0
    i = 0
    while i < len(statement):
        char = statement[i]
        if char == '"':
            i = _skip_quoted(statement, i, char)
            continue
        if char == "'":
            end, drop = _skip_quoted(statement, i, char), not literals
        elif statement.startswith("--", i):
            end, drop = _skip_to(statement, "\n", i + 2), True
        elif statement.startswith("/*", i):
            end, drop = _skip_block_comment(statement, i), True
        elif char == "$" and (tag := _DOLLAR_TAG.match(statement, i)) is not None:
            end, drop = _skip_to(statement, tag.group(0), tag.end()), not literals
        else:
            i += 1
            continue
        if drop:
            kept.append(statement[start:i] + " ")
            start = end
        i = end
    kept.append(statement[start:])
    return "".join(kept)


def _skip_quoted(script: str, i: int, quote: str) -> int:
    """Index just past the quoted literal opening at i (a doubled quote is an escape)."""
    i += 1
    while i < len(script):
        if script[i] == quote:
            if script.startswith(quote * 2, i):
                i += 2
                continue
            return i + 1
        i += 1
    return i


def _skip_to(script: str, terminator: str, i: int) -> int:
    end = script.find(terminator, i)
    return len(script) if end < 0 else end + len(terminator)


def _skip_block_comment(script: str, i: int) -> int:
    """Index just past the (possibly nested) block comment opening at i."""
    depth = 0
    while i < len(script):
        if script.startswith("/*", i):
            depth += 1
            i += 2
        elif script.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return i


def _has_code(statement: str) -> bool:
    """Whether statement holds more than whitespace and comments."""
    without_line_comments = re.sub(r"--[^\n]*", "", statement)
    without_comments = re.sub(r"/\*.*?\*/", "", without_line_comments, flags=re.DOTALL)
    return bool(without_comments.strip())
