"""bindingReach: Workflow's rules on the dependencies and endpointTargets of a publish request.

The catalog validator has already checked their structure (members, formats, sizes). Every
rejection here is bindingReach evidence (request section reach): a contradictory dependency
annotation, an endpoint URI Workflow will not call, unsupported or repeated methods, repeated
environments, and a repeated dependency key or endpointRef.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from msgspec import UNSET

from generated import models
from runtime.binding_reach import Dependency, EndpointTarget, Reach
from runtime.publication.bindings.binding_problems import BindingProblem
from runtime.publication.bindings.field_rules import annotation_problems

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _problem(pointer: str, rule: str, message: str) -> BindingProblem:
    return BindingProblem(pointer, rule, message, section="reach")


def _dependency(item: models.BindingDependency) -> Dependency:
    return Dependency(
        nested_tool_id=item.nested_tool_id,
        nested_tool_version=item.nested_tool_version,
        contract_digest=item.contract_digest,
        authorization_tool_name=item.authorization_tool_name,
        dispatch_target=item.dispatch_target,
        tool_annotations=None if item.tool_annotations is UNSET else item.tool_annotations,
    )


def _dependency_problems(item: models.BindingDependency, index: int) -> list[BindingProblem]:
    if item.tool_annotations is UNSET:
        return []
    where, pointer = f"dependencies[{index}]", f"/dependencies/{index}/toolAnnotations"
    return annotation_problems(
        item.tool_annotations, f"{where}.toolAnnotations", pointer, section="reach"
    )


def endpoint_uri_problem(uri: str, where: str) -> str | None:
    """Why uri is not an absolute URI with a host, no credentials, fragment or port 0."""
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return f"{where} is not a valid URI"
    if not parts.scheme or not parts.hostname:
        return f"{where} must be an absolute URI with a host"
    if parts.username is not None or parts.password is not None:
        return f"{where} must not carry credentials"
    if parts.fragment:
        return f"{where} must not carry a fragment"
    if port == 0:
        return f"{where} names port 0"
    return None


def _target_problems(item: models.EndpointTarget, index: int) -> list[BindingProblem]:
    where, pointer = f"endpointTargets[{index}]", f"/endpointTargets/{index}"
    found = []
    why = endpoint_uri_problem(item.endpoint_uri, f"{where}.endpointUri")
    if why is not None:
        found.append(_problem(f"{pointer}/endpointUri", "endpoint-uri", why))
    if not {method.upper() for method in item.allowed_methods} <= HTTP_METHODS:
        message = f"{where}.allowedMethods names an unsupported HTTP method"
        found.append(_problem(f"{pointer}/allowedMethods", "http-method", message))
    if len(set(item.environments)) != len(item.environments):
        message = f"{where}.environments repeats an environment"
        found.append(_problem(f"{pointer}/environments", "duplicate-environment", message))
    return found


def _target(item: models.EndpointTarget) -> EndpointTarget:
    return EndpointTarget(
        endpoint_ref=item.endpoint_ref,
        endpoint_uri=item.endpoint_uri,
        allowed_methods=tuple(sorted({method.upper() for method in item.allowed_methods})),
        environments=tuple(sorted(item.environments)),
        authorization_policy_digest=item.authorization_policy_digest,
    )


def indexed_targets(
    endpoint_targets: list[models.EndpointTarget],
) -> list[tuple[int, EndpointTarget]]:
    """Each target with its index in the request, when its URI is one Workflow can check."""
    return [
        (index, _target(item))
        for index, item in enumerate(endpoint_targets)
        if endpoint_uri_problem(item.endpoint_uri, "") is None
    ]


def reach_of(
    dependencies: list[models.BindingDependency], endpoint_targets: list[models.EndpointTarget]
) -> Reach:
    """The ordered reach, whether or not it breaks a rule (see reach_problems)."""
    deps = [_dependency(item) for item in dependencies]
    targets = [_target(item) for item in endpoint_targets]
    return Reach(
        dependencies=tuple(sorted(deps, key=lambda dep: dep.sort_key)),
        endpoint_targets=tuple(sorted(targets, key=lambda target: target.endpoint_ref)),
    )


def self_dependency_problems(
    tool_id: str, dependencies: list[models.BindingDependency]
) -> list[BindingProblem]:
    """A Tool whose workflow calls the Tool itself: recursion, refused at publication (seed 001
    Delegation And Cycle Prevention: "a workflow that calls its own composite tool")."""
    return [
        _problem(
            f"/dependencies/{index}/nestedToolId",
            "recursive-dependency",
            f"dependencies[{index}] is this Tool itself ({tool_id}): a workflow-backed Tool may "
            "not call its own Tool; remove the dependency or call another Tool",
        )
        for index, item in enumerate(dependencies)
        if item.nested_tool_id.lower() == tool_id.lower()
    ]


def cycle_problems(
    tool_id: str, dependencies: list[models.BindingDependency], reaching: set[str]
) -> list[BindingProblem]:
    """Dependencies whose Tools lead back to this one through their own current revisions
    (seed 001: "a cycle across two or more workflow-backed tools"); stored state, no section."""
    wanted = {tool.lower() for tool in reaching}
    return [
        BindingProblem(
            f"/dependencies/{index}/nestedToolId",
            "dependency-cycle",
            f"dependencies[{index}] ({item.nested_tool_id}) calls back into this Tool "
            f"({tool_id}) through its own dependencies: workflow-backed Tools may not form a "
            "cycle; remove the dependency here or there",
        )
        for index, item in enumerate(dependencies)
        if item.nested_tool_id.lower() in wanted and item.nested_tool_id.lower() != tool_id.lower()
    ]


def reach_problems(
    dependencies: list[models.BindingDependency], endpoint_targets: list[models.EndpointTarget]
) -> list[BindingProblem]:
    """Every bindingReach rule the two arrays break; a duplicate set key is refused, not merged."""
    found = [p for i, item in enumerate(dependencies) for p in _dependency_problems(item, i)]
    dep_keys = [_dependency(item).sort_key for item in dependencies]
    if len(set(dep_keys)) != len(dep_keys):
        message = "dependencies repeat an (authorizationToolName, nestedToolId, version) key"
        found.append(_problem("/dependencies", "duplicate-dependency", message))
    found.extend(p for i, item in enumerate(endpoint_targets) for p in _target_problems(item, i))
    refs = [item.endpoint_ref for item in endpoint_targets]
    if len(set(refs)) != len(refs):
        message = "endpointTargets repeat an endpointRef"
        found.append(_problem("/endpointTargets", "duplicate-endpoint-ref", message))
    return found
