"""normalize_reach: Workflow's rules on the typed dependencies and endpointTargets arrays.

The catalog validator has already checked their structure (members, formats, sizes). Every
rejection here is bindingReach evidence (request section reach): a contradictory dependency
annotation, an endpoint URI Workflow will not call, unsupported or repeated methods, repeated
environments, and a repeated dependency key or endpointRef.
"""

from __future__ import annotations

from typing import NoReturn
from urllib.parse import urlsplit

import msgspec
from msgspec import UNSET

from generated import models
from runtime.binding_reach import Dependency as Dependency
from runtime.binding_reach import EndpointTarget as EndpointTarget
from runtime.binding_reach import Reach as Reach
from runtime.publication.bindings.errors import InvalidBindingRequest
from runtime.publication.bindings.fields import annotations_of

HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _reject(message: str) -> NoReturn:
    raise InvalidBindingRequest("reach", message)


def _dependency(item: models.BindingDependency, where: str) -> Dependency:
    annotations = None
    document = None
    if item.tool_annotations is not UNSET:
        annotations = annotations_of(
            item.tool_annotations, f"{where}.toolAnnotations", section="reach"
        )
        document = msgspec.to_builtins(item.tool_annotations)
    return Dependency(
        nested_tool_id=item.nested_tool_id,
        nested_tool_version=item.nested_tool_version,
        contract_digest=item.contract_digest,
        authorization_tool_name=item.authorization_tool_name,
        dispatch_target=item.dispatch_target,
        annotations=annotations,
        annotations_document=document,
    )


def check_endpoint_uri(uri: str, where: str) -> str:
    """An absolute URI with a host, no credentials, no fragment and no port 0."""
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        _reject(f"{where} is not a valid URI")
    if not parts.scheme or not parts.hostname:
        _reject(f"{where} must be an absolute URI with a host")
    if parts.username is not None or parts.password is not None:
        _reject(f"{where} must not carry credentials")
    if parts.fragment:
        _reject(f"{where} must not carry a fragment")
    if port == 0:
        _reject(f"{where} names port 0")
    return uri


def _methods(value: list[str], where: str) -> tuple[str, ...]:
    methods = {method.upper() for method in value}
    if not methods <= HTTP_METHODS:
        _reject(f"{where} names an unsupported HTTP method")
    return tuple(sorted(methods))


def _environments(value: list[str], where: str) -> tuple[str, ...]:
    if len(set(value)) != len(value):
        _reject(f"{where} repeats an environment")
    return tuple(sorted(value))


def _target(item: models.EndpointTarget, where: str) -> EndpointTarget:
    return EndpointTarget(
        endpoint_ref=item.endpoint_ref,
        endpoint_uri=check_endpoint_uri(item.endpoint_uri, f"{where}.endpointUri"),
        allowed_methods=_methods(item.allowed_methods, f"{where}.allowedMethods"),
        environments=_environments(item.environments, f"{where}.environments"),
        authorization_policy_digest=item.authorization_policy_digest,
    )


def normalize_reach(
    dependencies: list[models.BindingDependency], endpoint_targets: list[models.EndpointTarget]
) -> Reach:
    """Check and order the reach; a duplicate set key is rejected, never merged."""
    deps = [_dependency(item, f"dependencies[{i}]") for i, item in enumerate(dependencies)]
    targets = [_target(item, f"endpointTargets[{i}]") for i, item in enumerate(endpoint_targets)]
    dep_keys = [dep.sort_key for dep in deps]
    if len(set(dep_keys)) != len(dep_keys):
        _reject("dependencies repeat an (authorizationToolName, nestedToolId, version) key")
    refs = [target.endpoint_ref for target in targets]
    if len(set(refs)) != len(refs):
        _reject("endpointTargets repeat an endpointRef")
    return Reach(
        dependencies=tuple(sorted(deps, key=lambda dep: dep.sort_key)),
        endpoint_targets=tuple(sorted(targets, key=lambda target: target.endpoint_ref)),
    )
