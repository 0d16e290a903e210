"""Settings from the environment: WORKFLOW_<SECTION>_<KEY> overrides the configuration file."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
import yaml

PREFIX = "WORKFLOW_"
# The seeds' own variable names for settings that have a WORKFLOW_<SECTION>_<KEY> name too;
# the canonical name wins when both are set.
ALIASES: dict[str, tuple[str, ...]] = {
    "WORKFLOW_LONG_KEYRING_FILE": ("security", "keyring_file"),
    "WORKFLOW_WAIT_LISTENER_CONNECTIONS": ("execution", "wait_listener_connections"),
}


# Variables of settings a release removed, with what replaces them: refused when set, since
# unknown WORKFLOW_* variables are otherwise ignored and the setting would silently vanish.
REMOVED: dict[str, str] = {
    "WORKFLOW_EXECUTION_OUTBOUND_APP_TOKEN": "execution.outbound.service_token (a "
    'client-credentials grant, docs/OPERATIONS.md "Workflow\'s service token")',
}


class EnvironmentSettingError(ValueError):
    """An environment variable names a setting but its value does not parse."""


def _struct_type(annotation: Any) -> type[msgspec.Struct] | None:
    """The Struct class of an annotation (also inside `X | None`), else None."""
    candidates = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, msgspec.Struct):
            return candidate
    return None


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _is_text(annotation: Any) -> bool:
    """Whether the setting is a string (the variable's text is taken as it is)."""
    members = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    return str in members and all(member in (str, type(None)) for member in members)


def setting_paths(
    struct: type[msgspec.Struct], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf setting of struct as (path of field names, annotation)."""
    hints = typing.get_type_hints(struct)
    for name in struct.__struct_fields__:
        annotation = hints[name]
        nested = _struct_type(annotation)
        if nested is not None:
            yield from setting_paths(nested, (*prefix, name))
        else:
            yield (*prefix, name), annotation


def variable_name(path: tuple[str, ...]) -> str:
    """The environment variable of a setting path: WORKFLOW_<SECTION>_<KEY>."""
    return PREFIX + "_".join(path).upper()


def _parse(name: str, text: str, annotation: Any) -> Any:
    if _is_text(annotation):
        return text
    try:
        # YAML reads numbers, booleans, null and JSON-style lists and maps alike.
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise EnvironmentSettingError(f"{name}: not a YAML/JSON value") from exc


def _set(raw: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    section = raw
    for name in path[:-1]:
        child = section.get(name)
        if not isinstance(child, dict):
            child = section[name] = {}
        section = child
    section[path[-1]] = value


def apply_environment(
    raw: dict[str, Any], struct: type[msgspec.Struct], environ: Mapping[str, str]
) -> dict[str, Any]:
    """raw (the decoded configuration file) with every WORKFLOW_<SECTION>_<KEY> applied."""
    for name, replacement in REMOVED.items():
        if name in environ:
            raise EnvironmentSettingError(f"{name} names a removed setting; use {replacement}")
    for path, annotation in setting_paths(struct):
        names = [alias for alias, target in ALIASES.items() if target == path]
        for name in [*names, variable_name(path)]:
            if name in environ:
                _set(raw, path, _parse(name, environ[name], annotation))
    return raw
