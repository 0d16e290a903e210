"""normalize_reach: the typed dependencies and endpointTargets arrays of a binding publish.

Every rejection here is bindingReach evidence (request section reach): reach size, dependency
fields, digests and uniqueness, endpoint fields, digests, uniqueness, URI and methods.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NoReturn
from urllib.parse import urlsplit

from runtime.binding_reach import Dependency as Dependency
from runtime.binding_reach import EndpointTarget as EndpointTarget
from runtime.binding_reach import Reach as Reach
from runtime.publication.bindings.errors import InvalidBindingRequest
from runtime.publication.bindings.fields import (
    DIGEST_PATTERN,
    UUID_PATTERN,
    VERSION_PATTERN,
    parse_annotations,
)

MAX_REACH_ITEMS = 256
TARGET_REF_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:/-]*$")
ENVIRONMENT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_DEPENDENCY_FIELDS = {
    "nestedToolId",
    "nestedToolVersion",
    "contractDigest",
    "authorizationToolName",
    "dispatchTarget",
}
_TARGET_FIELDS = {
    "endpointRef",
    "endpointUri",
    "allowedMethods",
    "environments",
    "authorizationPolicyDigest",
}


def _reject(message: str) -> NoReturn:
    raise InvalidBindingRequest("reach", message)


def _members(value: Any, where: str, required: set[str], optional: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        _reject(f"{where} must be an object")
    unknown = set(value) - required - optional
    if unknown:
        _reject(f"{where} has unknown members: {', '.join(sorted(map(str, unknown)))}")
    missing = required - {key for key, item in value.items() if item is not None}
    if missing:
        _reject(f"{where} is missing {', '.join(sorted(missing))}")
    return value


def _matching(value: Any, where: str, pattern: re.Pattern[str], max_length: int) -> str:
    if not isinstance(value, str) or len(value) > max_length or not pattern.match(value):
        _reject(f"{where} is not a valid value")
    return value


def _array(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        _reject(f"{where} must be an array")
    if len(value) > MAX_REACH_ITEMS:
        _reject(f"{where} lists {len(value)} items; at most {MAX_REACH_ITEMS} are accepted")
    return value


def _dependency(value: Any, where: str) -> Dependency:
    item = _members(value, where, _DEPENDENCY_FIELDS, {"toolAnnotations"})
    annotations_doc = item.get("toolAnnotations")
    annotations = None
    if annotations_doc is not None:
        annotations = parse_annotations(
            annotations_doc, f"{where}.toolAnnotations", section="reach"
        )
    return Dependency(
        nested_tool_id=_matching(item["nestedToolId"], f"{where}.nestedToolId", UUID_PATTERN, 36),
        nested_tool_version=_matching(
            item["nestedToolVersion"], f"{where}.nestedToolVersion", VERSION_PATTERN, 64
        ),
        contract_digest=_matching(
            item["contractDigest"], f"{where}.contractDigest", DIGEST_PATTERN, 71
        ),
        authorization_tool_name=_matching(
            item["authorizationToolName"], f"{where}.authorizationToolName", TARGET_REF_PATTERN, 256
        ),
        dispatch_target=_matching(
            item["dispatchTarget"], f"{where}.dispatchTarget", TARGET_REF_PATTERN, 256
        ),
        annotations=annotations,
        annotations_document=None if annotations_doc is None else dict(annotations_doc),
    )


def check_endpoint_uri(uri: Any, where: str) -> str:
    """An absolute http(s)-style URI with a host, no credentials and no fragment."""
    if not isinstance(uri, str) or not 1 <= len(uri) <= 2048 or any(c.isspace() for c in uri):
        _reject(f"{where} must be an absolute URI without spaces")
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


def _methods(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= 16:
        _reject(f"{where} must list 1-16 HTTP methods")
    methods: set[str] = set()
    for method in value:
        if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
            _reject(f"{where} names an unsupported HTTP method")
        methods.add(method.upper())
    return tuple(sorted(methods))


def _environments(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= 32:
        _reject(f"{where} must list 1-32 environments")
    names = [_matching(name, where, ENVIRONMENT_PATTERN, 64) for name in value]
    if len(set(names)) != len(names):
        _reject(f"{where} repeats an environment")
    return tuple(sorted(names))


def _target(value: Any, where: str) -> EndpointTarget:
    item = _members(value, where, _TARGET_FIELDS, set())
    return EndpointTarget(
        endpoint_ref=_matching(
            item["endpointRef"], f"{where}.endpointRef", TARGET_REF_PATTERN, 256
        ),
        endpoint_uri=check_endpoint_uri(item["endpointUri"], f"{where}.endpointUri"),
        allowed_methods=_methods(item["allowedMethods"], f"{where}.allowedMethods"),
        environments=_environments(item["environments"], f"{where}.environments"),
        authorization_policy_digest=_matching(
            item["authorizationPolicyDigest"],
            f"{where}.authorizationPolicyDigest",
            DIGEST_PATTERN,
            71,
        ),
    )


def normalize_reach(dependencies: Any, endpoint_targets: Any) -> Reach:
    """Validate and order the reach; a duplicate set key is rejected, never merged."""
    deps = [
        _dependency(item, f"dependencies[{index}]")
        for index, item in enumerate(_array(dependencies, "dependencies"))
    ]
    targets = [
        _target(item, f"endpointTargets[{index}]")
        for index, item in enumerate(_array(endpoint_targets, "endpointTargets"))
    ]
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
