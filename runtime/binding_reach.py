"""What a binding revision may reach: the vocabulary publication writes and execution reads.

Publication validates and stores a revision's reach; execution enforces it on every outbound
call. Both speak these types, so neither imports the other's internals for them. The stored
rows decode straight into them, and ``contract()`` gives each as the catalog's type (for
bindingDigest and workflow_binding_get).
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET

from generated import models


class Annotations(msgspec.Struct, frozen=True, kw_only=True):
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


def annotations_of(value: models.ToolAnnotations) -> Annotations:
    """The effect flags of toolAnnotations (humanApprovalRequired absent: false)."""
    required = value.human_approval_required
    return Annotations(
        read_only=value.read_only,
        destructive=value.destructive,
        human_approval_required=False if required is UNSET else required,
    )


class Dependency(msgspec.Struct, frozen=True):
    """A nested Tool the workflow may call."""

    nested_tool_id: str
    nested_tool_version: str
    contract_digest: str
    authorization_tool_name: str
    dispatch_target: str
    # As published (None: the dependency stated none).
    tool_annotations: models.ToolAnnotations | None = None

    @property
    def annotations(self) -> Annotations | None:
        """The effect flags of its toolAnnotations, or None when it stated none."""
        if self.tool_annotations is None:
            return None
        return annotations_of(self.tool_annotations)

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

    def contract(self) -> models.BindingDependency:
        """The dependency as it enters bindingDigest and workflow_binding_get."""
        return models.BindingDependency(
            nested_tool_id=self.nested_tool_id,
            nested_tool_version=self.nested_tool_version,
            contract_digest=self.contract_digest,
            authorization_tool_name=self.authorization_tool_name,
            dispatch_target=self.dispatch_target,
            tool_annotations=UNSET if self.tool_annotations is None else self.tool_annotations,
        )


class EndpointTarget(msgspec.Struct, frozen=True):
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

    def contract(self) -> models.EndpointTarget:
        """The target as it enters bindingDigest and workflow_binding_get."""
        return models.EndpointTarget(
            endpoint_ref=self.endpoint_ref,
            endpoint_uri=self.endpoint_uri,
            allowed_methods=list(self.allowed_methods),
            environments=list(self.environments),
            authorization_policy_digest=self.authorization_policy_digest,
        )


class Reach(msgspec.Struct, frozen=True):
    """What a revision may reach, in digest order."""

    dependencies: tuple[Dependency, ...]
    endpoint_targets: tuple[EndpointTarget, ...]

    def contract(self) -> models.BindingReach:
        """BindingReach as bindingDigest covers it and workflow_binding_get returns it."""
        return models.BindingReach(
            dependencies=[item.contract() for item in self.dependencies],
            endpoint_targets=[item.contract() for item in self.endpoint_targets],
        )


def dependency_for(tool: str, reach: Reach) -> Dependency | None:
    """The pinned dependency an MCP task reaches, by authorization tool name or dispatch key."""
    for dependency in reach.dependencies:
        if tool in (dependency.authorization_tool_name, dependency.dispatch_target):
            return dependency
    return None
