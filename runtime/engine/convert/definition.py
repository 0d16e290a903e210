"""convert_definition: a light-workflow definition as one of our profile meaning the same."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime.engine.convert.context_flow import reach_before, task_entries
from runtime.engine.convert.loops import backward_jumps
from runtime.engine.convert.scope import Scope
from runtime.engine.convert.tasks import Blocker, Change, TaskRewriter

# Top-level light-workflow sections our profile keeps under document.metadata.
_KEPT_AS_METADATA = ("outputSchemas", "metadata")


@dataclass(frozen=True)
class Conversion:
    """The converted document, every change made and every construct left unconverted."""

    document: dict[str, Any]
    changes: tuple[Change, ...]
    blockers: tuple[Blocker, ...]


def convert_definition(source: Mapping[str, Any], *, version: str | None = None) -> Conversion:
    """Convert one loaded light-workflow definition; the source is not modified."""
    document = copy.deepcopy(dict(source))
    changes: list[Change] = []
    sessions = _sessions(document, changes)
    rewriter = TaskRewriter(sessions)
    tasks = document.get("do")
    if isinstance(tasks, list):
        inputs = _input_keys(document)
        for position, ((name, task), reach) in enumerate(
            zip(task_entries(tasks), reach_before(tasks), strict=True)
        ):
            scope = Scope(reach.exported, reach.maybe - reach.exported, inputs)
            rewriter.task(dict_task(tasks, position, name, task), f"/do/{position}/{name}", scope)
    _metadata(document, changes)
    _version(document, version, changes)
    loops = backward_jumps(tasks) if isinstance(tasks, list) else []
    blockers = (*rewriter.blockers, *loops)
    return Conversion(document, (*changes, *rewriter.changes), blockers)


def dict_task(tasks: list[Any], position: int, name: str, task: Any) -> dict[str, Any]:
    """The task at position as a mutable dict, stored back in its list."""
    mutable = dict(task)
    for index, item in enumerate(tasks):
        if isinstance(item, Mapping) and name in item and item[name] is task:
            tasks[index] = {name: mutable}
            break
    return mutable


def _input_keys(document: Mapping[str, Any]) -> frozenset[str]:
    section = document.get("input")
    schema = section.get("schema") if isinstance(section, Mapping) else None
    body = schema.get("document") if isinstance(schema, Mapping) else None
    properties = body.get("properties") if isinstance(body, Mapping) else None
    return frozenset(map(str, properties)) if isinstance(properties, Mapping) else frozenset()


def _sessions(document: dict[str, Any], changes: list[Change]) -> dict[str, str]:
    """use.mcpSessions as {name: endpoint URI}; the section is removed (calls name the URI)."""
    use = document.get("use")
    if not isinstance(use, dict) or "mcpSessions" not in use:
        return {}
    declared = use.pop("mcpSessions")
    changes.append(Change("/use/mcpSessions", declared, None))
    if not use:
        del document["use"]
    sessions: dict[str, str] = {}
    for name, session in (declared or {}).items():
        server = session.get("server", {}) if isinstance(session, Mapping) else {}
        endpoint = server.get("endpoint") if isinstance(server, Mapping) else None
        uri = endpoint.get("uri") if isinstance(endpoint, Mapping) else endpoint
        if isinstance(uri, str):
            sessions[str(name)] = uri
    return sessions


def _metadata(document: dict[str, Any], changes: list[Change]) -> None:
    """Top-level outputSchemas and metadata move under document.metadata, the profile's place."""
    header = document.get("document")
    if not isinstance(header, dict):
        return
    for key in _KEPT_AS_METADATA:
        if key in document:
            value = document.pop(key)
            metadata = header.setdefault("metadata", {})
            if key == "metadata" and isinstance(value, Mapping):
                metadata.update(value)  # the workflow's own metadata is document.metadata
                changes.append(Change(f"/{key}", value, "/document/metadata"))
            else:
                metadata[key] = value
                changes.append(Change(f"/{key}", value, f"/document/metadata/{key}"))


def _version(document: dict[str, Any], version: str | None, changes: list[Change]) -> None:
    header = document.get("document")
    if version is None or not isinstance(header, dict) or header.get("version") == version:
        return
    changes.append(Change("/document/version", header.get("version"), version))
    header["version"] = version
