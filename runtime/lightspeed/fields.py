"""Typed reads of one JSON object's members, each refusal naming the member's dotted path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.lightspeed.errors import ContractError
from runtime.lightspeed.ids import U64_MAX, universe_text

U32_MAX = 2**32 - 1
_MISSING = object()


def path_of(parent: str, name: str) -> str:
    """The dotted path of member name under parent."""
    return f"{parent}.{name}" if parent else name


def obj(value: Any, path: str) -> Mapping[str, Any]:
    """value as a JSON object, or refused."""
    if not isinstance(value, dict):
        raise ContractError(path, "expected an object")
    return value


def member(source: Mapping[str, Any], name: str, path: str, *, optional: bool = False) -> Any:
    """source[name]; a missing member is refused unless optional (then None)."""
    value = source.get(name, _MISSING)
    if value is _MISSING:
        if optional:
            return None
        raise ContractError(path_of(path, name), "missing required field")
    return value


def text(source: Mapping[str, Any], name: str, path: str, *, optional: bool = False) -> Any:
    """A string member (None allowed only when optional)."""
    value = member(source, name, path, optional=optional)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ContractError(path_of(path, name), "expected a string")
    return value


def nonempty(source: Mapping[str, Any], name: str, path: str) -> str:
    """A non-empty string member: ids and keys."""
    value: str = text(source, name, path)
    if not value:
        raise ContractError(path_of(path, name), "must not be empty")
    return value


def unsigned(source: Mapping[str, Any], name: str, path: str, *, bits: int = 64) -> int:
    """An unsigned integer member of the given width (a JSON string of digits is refused)."""
    value = member(source, name, path)
    top = U64_MAX if bits == 64 else U32_MAX
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise ContractError(path_of(path, name), f"expected an unsigned {bits}-bit integer")
    return value


def universe(source: Mapping[str, Any], name: str, path: str) -> str:
    """A UUID member, normalized to the lowercase hyphenated text the framing hashes."""
    return universe_text(text(source, name, path), path_of(path, name))


def kind(source: Mapping[str, Any], path: str, known: tuple[str, ...], what: str) -> str:
    """The `kind` tag of a closed union (E5: an unknown kind is refused, never skipped)."""
    value = text(source, "kind", path)
    if value not in known:
        raise ContractError(path_of(path, "kind"), f"unknown {what} kind {value!r}")
    return str(value)
