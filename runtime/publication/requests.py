"""Typed service inputs for definition publication, parsed from validated tool arguments.

The generated catalog validators run first; these parsers re-check what storage relies on
(UUIDs, lengths, digests, revision ranges) so a service never trusts its caller, and they keep
the exact argument mapping for the operation ledger's request digest.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from runtime.canonical import SAFE_INTEGER_MAX
from runtime.errors import input_invalid

BindingApproval = Literal["carryOver", "reapprove"]
DIGEST_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")
HEAD_TEXT_MAX = 126  # actor, namespace, name (and owner ids) on the saved head
HEAD_VERSION_MAX = 20  # saved head version, matching the existing table
VERSION_MAX = 64  # published immutable versions
TOOL_VERSION_MAX = 64


@dataclass(frozen=True, slots=True)
class Owner:
    """Definition owner metadata (resource metadata, never caller identity)."""

    user_id: str
    position_id: str | None


@dataclass(frozen=True, slots=True)
class SaveDefinitionRequest:
    """workflow_definition_save arguments."""

    host_id: str
    wf_def_id: str
    source_revision: int
    actor: str
    namespace: str
    name: str
    version: str
    definition: str
    lifecycle_status: str | None
    catalog_visible: bool
    owner: Owner
    active: bool
    arguments: Mapping[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class PublishDefinitionRequest:
    """workflow_definition_publish arguments."""

    host_id: str
    wf_def_id: str
    namespace: str
    name: str
    version: str
    definition: str
    expected_definition_digest: str
    binding_approval: BindingApproval
    owner: Owner
    operation_id: str
    arguments: Mapping[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class RetireDefinitionRequest:
    """workflow_definition_retire arguments."""

    host_id: str
    wf_def_id: str
    version: str
    operation_id: str
    expected_definition_digest: str | None
    arguments: Mapping[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Grant:
    """One grant of a definition's grant set."""

    grant_id: str
    tool_id: str
    tool_version: str | None
    lightapi_digest: str | None
    allowed_environments: tuple[str, ...]

    def digest_form(self) -> dict[str, Any]:
        """The grant as it enters grantsDigest: absent/null members omitted, environments sorted."""
        form: dict[str, Any] = {
            "grantId": self.grant_id,
            "toolId": self.tool_id,
            "allowedEnvironments": sorted(self.allowed_environments),
        }
        if self.tool_version is not None:
            form["toolVersion"] = self.tool_version
        if self.lightapi_digest is not None:
            form["lightapiDigest"] = self.lightapi_digest
        return form


@dataclass(frozen=True, slots=True)
class SyncGrantsRequest:
    """workflow_definition_grants_sync arguments."""

    host_id: str
    wf_def_id: str
    source_revision: int
    actor: str
    grants: tuple[Grant, ...]
    arguments: Mapping[str, Any] = field(repr=False, compare=False)


def normalize_uuid(value: object) -> str | None:
    """The canonical lower-case form of a UUID string, or None when value is not one."""
    if not isinstance(value, str):
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def _uuid(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    try:
        if not isinstance(value, str):
            raise ValueError(key)
        return str(uuid.UUID(value))
    except ValueError:
        raise input_invalid(f"{key} must be a UUID") from None


def _text(args: Mapping[str, Any], key: str, max_length: int) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise input_invalid(f"{key} must be a non-empty string of at most {max_length} characters")
    return value


def _optional_text(args: Mapping[str, Any], key: str, max_length: int) -> str | None:
    return None if args.get(key) is None else _text(args, key, max_length)


def _boolean(args: Mapping[str, Any], key: str) -> bool:
    value = args.get(key)
    if not isinstance(value, bool):
        raise input_invalid(f"{key} must be a boolean")
    return value


def _revision(args: Mapping[str, Any], key: str) -> int:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SAFE_INTEGER_MAX:
        raise input_invalid(f"{key} must be a non-negative integer")
    return value


def _digest(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not DIGEST_PATTERN.match(value):
        raise input_invalid(f"{key} must match sha256:<64 lower-case hex digits>")
    return value


def _definition_text(args: Mapping[str, Any]) -> str:
    value = args.get("definition")
    if not isinstance(value, str) or not value.strip():
        raise input_invalid("definition must be non-empty YAML text")
    return value


def _owner(args: Mapping[str, Any]) -> Owner:
    owner = args.get("owner")
    if not isinstance(owner, Mapping):
        raise input_invalid("owner must be an object with userId")
    return Owner(
        user_id=_text(owner, "userId", HEAD_TEXT_MAX),
        position_id=_optional_text(owner, "positionId", HEAD_TEXT_MAX),
    )


def parse_save_definition(args: Mapping[str, Any]) -> SaveDefinitionRequest:
    """Parse workflow_definition_save arguments."""
    return SaveDefinitionRequest(
        host_id=_uuid(args, "hostId"),
        wf_def_id=_uuid(args, "wfDefId"),
        source_revision=_revision(args, "sourceRevision"),
        actor=_text(args, "actor", HEAD_TEXT_MAX),
        namespace=_text(args, "namespace", HEAD_TEXT_MAX),
        name=_text(args, "name", HEAD_TEXT_MAX),
        version=_text(args, "version", HEAD_VERSION_MAX),
        definition=_definition_text(args),
        lifecycle_status=_optional_text(args, "lifecycleStatus", HEAD_TEXT_MAX),
        catalog_visible=_boolean(args, "catalogVisible"),
        owner=_owner(args),
        active=_boolean(args, "active"),
        arguments=args,
    )


def parse_publish_definition(args: Mapping[str, Any]) -> PublishDefinitionRequest:
    """Parse workflow_definition_publish arguments (bindingApproval defaults to carryOver)."""
    approval = args.get("bindingApproval", "carryOver")
    if approval not in ("carryOver", "reapprove"):
        raise input_invalid("bindingApproval must be carryOver or reapprove")
    return PublishDefinitionRequest(
        host_id=_uuid(args, "hostId"),
        wf_def_id=_uuid(args, "wfDefId"),
        namespace=_text(args, "namespace", HEAD_TEXT_MAX),
        name=_text(args, "name", HEAD_TEXT_MAX),
        version=_text(args, "version", VERSION_MAX),
        definition=_definition_text(args),
        expected_definition_digest=_digest(args, "expectedDefinitionDigest"),
        binding_approval=approval,
        owner=_owner(args),
        operation_id=_uuid(args, "operationId"),
        arguments=args,
    )


def parse_retire_definition(args: Mapping[str, Any]) -> RetireDefinitionRequest:
    """Parse workflow_definition_retire arguments."""
    expected = None
    if args.get("expectedDefinitionDigest") is not None:
        expected = _digest(args, "expectedDefinitionDigest")
    return RetireDefinitionRequest(
        host_id=_uuid(args, "hostId"),
        wf_def_id=_uuid(args, "wfDefId"),
        version=_text(args, "version", VERSION_MAX),
        operation_id=_uuid(args, "operationId"),
        expected_definition_digest=expected,
        arguments=args,
    )


def _grant(item: Any, index: int) -> Grant:
    if not isinstance(item, Mapping):
        raise input_invalid(f"grants[{index}] must be an object")
    environments = item.get("allowedEnvironments", [])
    if not isinstance(environments, list) or not all(
        isinstance(env, str) and 0 < len(env) <= HEAD_TEXT_MAX for env in environments
    ):
        raise input_invalid(f"grants[{index}].allowedEnvironments must be a list of strings")
    lightapi_digest = None
    if item.get("lightapiDigest") is not None:
        lightapi_digest = _digest(item, "lightapiDigest")
    return Grant(
        grant_id=_text(item, "grantId", HEAD_TEXT_MAX),
        tool_id=_text(item, "toolId", HEAD_TEXT_MAX),
        tool_version=_optional_text(item, "toolVersion", TOOL_VERSION_MAX),
        lightapi_digest=lightapi_digest,
        allowed_environments=tuple(environments),
    )


def parse_sync_grants(args: Mapping[str, Any]) -> SyncGrantsRequest:
    """Parse workflow_definition_grants_sync arguments; a repeated grantId is refused."""
    items = args.get("grants")
    if not isinstance(items, list):
        raise input_invalid("grants must be a list")
    grants = tuple(_grant(item, index) for index, item in enumerate(items))
    seen: set[str] = set()
    for grant in grants:
        if grant.grant_id in seen:
            raise input_invalid(f"grantId {grant.grant_id!r} appears twice")
        seen.add(grant.grant_id)
    return SyncGrantsRequest(
        host_id=_uuid(args, "hostId"),
        wf_def_id=_uuid(args, "wfDefId"),
        source_revision=_revision(args, "sourceRevision"),
        actor=_text(args, "actor", HEAD_TEXT_MAX),
        grants=grants,
        arguments=args,
    )
