"""What a binding revision may reach: the vocabulary publication writes and execution reads.

Publication validates and stores a revision's reach; execution enforces it on every outbound
call. Both speak these types, so neither imports the other's internals for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Annotations:
    """Effect annotations of a Tool (the outer Tool or a nested dependency)."""

    read_only: bool
    destructive: bool
    human_approval_required: bool

    @property
    def is_write(self) -> bool:
        """A Tool that is not read-only may change data."""
        return not self.read_only


# MCP's own defaults for a Tool that states nothing: not read-only, destructive.
UNANNOTATED = Annotations(read_only=False, destructive=True, human_approval_required=False)


@dataclass(frozen=True, slots=True)
class Dependency:
    """A nested Tool the workflow may call."""

    nested_tool_id: str
    nested_tool_version: str
    contract_digest: str
    authorization_tool_name: str
    dispatch_target: str
    annotations: Annotations | None
    annotations_document: dict[str, Any] | None

    @property
    def sort_key(self) -> tuple[str, str, str]:
        """Digest order and uniqueness key: (authorizationToolName, nestedToolId, version)."""
        return (self.authorization_tool_name, self.nested_tool_id, self.nested_tool_version)

    @property
    def carry_over_key(self) -> tuple[str, str, str, str]:
        """Carry-over compares dependencies by (nestedToolId, version, contract, authName)."""
        return (
            self.nested_tool_id,
            self.nested_tool_version,
            self.contract_digest,
            self.authorization_tool_name,
        )

    def document(self) -> dict[str, Any]:
        """The dependency as it enters bindingDigest and workflow_binding_get."""
        doc: dict[str, Any] = {
            "nestedToolId": self.nested_tool_id,
            "nestedToolVersion": self.nested_tool_version,
            "contractDigest": self.contract_digest,
            "authorizationToolName": self.authorization_tool_name,
            "dispatchTarget": self.dispatch_target,
        }
        if self.annotations_document is not None:
            doc["toolAnnotations"] = self.annotations_document
        return doc


@dataclass(frozen=True, slots=True)
class EndpointTarget:
    """A resolved HTTP endpoint; methods uppercased, de-duplicated and sorted."""

    endpoint_ref: str
    endpoint_uri: str
    allowed_methods: tuple[str, ...]
    environments: tuple[str, ...]
    authorization_policy_digest: str

    @property
    def carry_over_key(self) -> tuple[str, str, tuple[str, ...]]:
        """Carry-over compares targets by (endpointRef, endpointUri, sorted allowedMethods)."""
        return (self.endpoint_ref, self.endpoint_uri, self.allowed_methods)

    def document(self) -> dict[str, Any]:
        """The target as it enters bindingDigest and workflow_binding_get."""
        return {
            "endpointRef": self.endpoint_ref,
            "endpointUri": self.endpoint_uri,
            "allowedMethods": list(self.allowed_methods),
            "environments": list(self.environments),
            "authorizationPolicyDigest": self.authorization_policy_digest,
        }


@dataclass(frozen=True, slots=True)
class Reach:
    """What a revision may reach, in digest order."""

    dependencies: tuple[Dependency, ...]
    endpoint_targets: tuple[EndpointTarget, ...]

    def document(self) -> dict[str, Any]:
        """BindingReach as returned by workflow_binding_get."""
        return {
            "dependencies": [item.document() for item in self.dependencies],
            "endpointTargets": [item.document() for item in self.endpoint_targets],
        }


def dependency_for(tool: str, reach: Reach) -> Dependency | None:
    """The pinned dependency an MCP task reaches, by authorization tool name or dispatch key."""
    for dependency in reach.dependencies:
        if tool in (dependency.authorization_tool_name, dependency.dispatch_target):
            return dependency
    return None
