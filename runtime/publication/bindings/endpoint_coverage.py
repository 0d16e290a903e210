"""Endpoint coverage: every HTTP call of the pinned version must be reachable through a target.

dsl-profile.md §6: a `call: http` endpoint is a literal URI or a path-only template and must
match a published endpoint target with an allowed method. Without this check a binding whose
targets miss a call is published active and every run then fails at that call; here the publish
is refused instead, naming the task pointer, the URI and the method. The definition version is
immutable and named by digest in the request, so the refusal is bindingReach evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from runtime.binding_reach import EndpointTarget
from runtime.engine.model import HttpCallSpec, Task, WorkflowDefinition, walk_tasks
from runtime.publication.bindings.binding_problems import BindingProblem

_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
_WHOLE_PLACEHOLDER = re.compile(r"^\{[A-Za-z_][A-Za-z0-9_]*\}$")


def _origin(uri: str) -> tuple[str, str, int]:
    parts = urlsplit(uri)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        # Not a port (a call's literal may say anything): no target's origin, so uncovered.
        port = -1
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def _segments(uri: str) -> list[str]:
    return (urlsplit(uri).path or "/").split("/")


def _segment_pattern(template_segment: str) -> re.Pattern[str]:
    # As at run time: a {name} placeholder stands for one non-empty percent-encoded segment part.
    pieces = _PLACEHOLDER.split(template_segment)
    return re.compile("[^/]+".join(re.escape(piece) for piece in pieces))


def _segment_covered(call_segment: str, target_segment: str) -> bool:
    """Every value the call's segment can take matches the target's segment."""
    if _PLACEHOLDER.search(call_segment) is None:
        return _segment_pattern(target_segment).fullmatch(call_segment) is not None
    if _WHOLE_PLACEHOLDER.match(target_segment):
        return True
    # A templated call segment is covered only by the same literal shape (names may differ).
    return _PLACEHOLDER.sub("{}", call_segment) == _PLACEHOLDER.sub("{}", target_segment)


def uri_covered(call_uri: str, target_uri: str) -> bool:
    """Every URI the call template expands to matches the target template (origin and path)."""
    if _origin(call_uri) != _origin(target_uri):
        return False
    call, target = _segments(call_uri), _segments(target_uri)
    if len(call) != len(target):
        return False
    return all(_segment_covered(c, t) for c, t in zip(call, target, strict=True))


def covering_target(
    method: str, uri: str, targets: Iterable[EndpointTarget]
) -> EndpointTarget | None:
    """The first target that covers the call's URI and allows its method, or None."""
    for target in targets:
        if method.upper() in target.allowed_methods and uri_covered(uri, target.endpoint_uri):
            return target
    return None


def _http_calls(definition: WorkflowDefinition) -> list[tuple[Task, HttpCallSpec]]:
    return [
        (task, task.spec)
        for task in walk_tasks(definition.tasks)
        if isinstance(task.spec, HttpCallSpec)
    ]


def coverage_problems(
    definition: WorkflowDefinition, targets: Iterable[EndpointTarget]
) -> list[BindingProblem]:
    """Every HTTP call no target covers by URI template and method (bindingReach)."""
    targets = tuple(targets)
    found = []
    for task, spec in _http_calls(definition):
        if covering_target(spec.method, spec.endpoint, targets) is not None:
            continue
        narrower = any(uri_covered(spec.endpoint, t.endpoint_uri) for t in targets)
        why = (
            "no endpoint target covering this URI allows the method"
            if narrower
            else "no endpoint target covers this URI"
        )
        message = f"task {task.pointer} calls {spec.method.upper()} {spec.endpoint}: {why}"
        found.append(BindingProblem("/endpointTargets", "endpoint-coverage", message, "reach"))
    return found
