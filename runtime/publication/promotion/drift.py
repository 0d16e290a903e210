"""Dependency drift: what an active revision pinned against what holds now (issue 42 item 3).

A revision is immutable, the world around it is not. Four kinds are reported:

- dependencyVersion: a pinned nested Tool that is workflow-backed on the host (it has a
  publication head) now has another version active, or none. When both versions' contracts
  are known, the item says how the contract moved (contractChange, ``contract_change``): a
  compatible move is listed but is no drift (``drifted``, the gauge and `publish --status`
  leave it out), since the outer Tool's calls and reads still hold;
- endpointTarget: an HTTP call of the pinned definition that no stored target covers, or a
  target the destination policy as configured now refuses;
- secretDeleted: a secret the definition declares in use.secrets that the host no longer holds;
- definitionRetired: the pinned definition version is retired.

The publish rules and the guards on retire and secret delete keep most of these from arising;
drift is what slipped past them (a policy tightened, a row changed by an operator, a dependency
published before its inner Tool moved), reported instead of discovered by a failing run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from msgspec import UNSET

from generated.models import BindingDrift, DriftItem
from runtime.binding_reach import Reach
from runtime.canonical.definition import input_schema_of
from runtime.publication.bindings.destination_policy import DestinationPolicy, check_destination
from runtime.publication.bindings.endpoint_coverage import coverage_problems
from runtime.publication.bindings.rejections import BindingRuleViolation
from runtime.publication.bindings.version_rules import pinned_definition_problems
from runtime.publication.promotion.contract_change import Change, contract_change
from runtime.publication.store import binding_rows, lineage_rows
from runtime.publication.store.lineage_rows import ActiveBinding
from runtime.store import Connection, Database
from runtime.telemetry import metrics

DriftKind = Literal["dependencyVersion", "endpointTarget", "secretDeleted", "definitionRetired"]
DRIFT_KINDS: tuple[DriftKind, ...] = (
    "dependencyVersion",
    "endpointTarget",
    "secretDeleted",
    "definitionRetired",
)
MAX_ITEMS = 256  # the contract's bound on drift.items


@dataclass(frozen=True, slots=True)
class Drift:
    """One active revision's drift."""

    host_id: str
    tool_id: str
    binding_id: str
    items: list[DriftItem]

    @property
    def drifts(self) -> list[DriftItem]:
        """The items that are drift: all but the compatible moves of a pinned Tool."""
        return [item for item in self.items if item.contract_change != "compatible"]

    def contract(self) -> BindingDrift:
        """The drift section of workflow_binding_get."""
        return BindingDrift(binding_id=self.binding_id, drifted=bool(self.drifts), items=self.items)


def _item(
    kind: DriftKind,
    subject: str,
    message: str,
    *,
    pinned: str = "",
    current: str = "",
    change: Change | None = None,
) -> DriftItem:
    return DriftItem(
        kind=kind,
        subject=subject[:2048],
        message=message[:2000],
        pinned=pinned[:256] or UNSET,
        current=current[:256] or UNSET,
        contract_change=change or UNSET,
    )


def _schemas(found: lineage_rows.VersionContract) -> tuple[Any, Any]:
    """The (input, output) schemas a Tool's callers see at that version."""
    document = found.document
    output = (document.get("output") or {}).get("schema") if isinstance(document, dict) else None
    if isinstance(output, dict) and "document" in output:
        output = output["document"]
    return (
        found.input_schema if found.input_schema is not None else input_schema_of(document),
        found.output_schema if found.output_schema is not None else (output or {}),
    )


async def _change(
    conn: Connection, host_id: str, tool_id: str, pinned: str, current: str | None
) -> Change | None:
    """How the Tool's contract moved from pinned to current (None: one of them is unknown)."""
    if current is None:
        return None
    before = await lineage_rows.select_version_contract(conn, host_id, tool_id, pinned)
    after = await lineage_rows.select_version_contract(conn, host_id, tool_id, current)
    if before is None or after is None:
        return None
    return contract_change(_schemas(before), _schemas(after))


async def _dependency_items(conn: Connection, host_id: str, reach: Reach) -> list[DriftItem]:
    ids = sorted({dependency.nested_tool_id for dependency in reach.dependencies})
    promoted = await lineage_rows.select_promoted_versions(conn, host_id, ids) if ids else {}
    found = []
    for dependency in reach.dependencies:
        tool_id, pinned = dependency.nested_tool_id, dependency.nested_tool_version
        if tool_id not in promoted or promoted[tool_id] == pinned:
            continue
        current = promoted[tool_id]
        what = f"has version {current} active" if current else "has no active revision"
        change = await _change(conn, host_id, tool_id, pinned, current)
        how = f" ({change} contract change)" if change else ""
        message = (
            f"dependency {dependency.authorization_tool_name} pins version {pinned} of Tool "
            f"{tool_id}, which now {what}{how}"
        )
        found.append(
            _item(
                "dependencyVersion",
                tool_id,
                message,
                pinned=pinned,
                current=current or "",
                change=change,
            )
        )
    return found


def _endpoint_items(
    row: ActiveBinding, reach: Reach, policy: DestinationPolicy | None
) -> list[DriftItem]:
    found = []
    definition, _problems = pinned_definition_problems(row.document)
    if definition is not None:
        for problem in coverage_problems(definition, reach.endpoint_targets):
            found.append(_item("endpointTarget", problem.pointer, problem.message))
    if policy is None:
        return found
    for target in reach.endpoint_targets:
        try:
            check_destination(target, policy)
        except BindingRuleViolation as refused:
            found.append(_item("endpointTarget", target.endpoint_ref, refused.message))
    return found


def _declared_secrets(row: ActiveBinding) -> list[str]:
    declared = (row.document.get("use") or {}).get("secrets")
    if not isinstance(declared, list):
        return []
    return sorted({name for name in declared if isinstance(name, str)})


async def _secret_items(conn: Connection, row: ActiveBinding) -> list[DriftItem]:
    declared = _declared_secrets(row)
    if not declared:
        return []
    live = await lineage_rows.select_live_secret_names(conn, row.host_id, declared)
    return [
        _item(
            "secretDeleted",
            name,
            f"the definition declares secret {name} in use.secrets; the host no longer holds it",
        )
        for name in declared
        if name not in live
    ]


async def binding_drift(
    conn: Connection, row: ActiveBinding, policy: DestinationPolicy | None = None
) -> Drift:
    """Every drift of one active revision (policy None: the destination policy is not read)."""
    reach = await binding_rows.read_reach(conn, row.host_id, row.binding_id)
    items: list[DriftItem] = []
    if row.version_status != "active":
        subject = f"{row.wf_def_id}@{row.workflow_version}"
        message = f"the pinned definition version {row.workflow_version} is {row.version_status}"
        items.append(_item("definitionRetired", subject, message, pinned=row.workflow_version))
    items.extend(await _dependency_items(conn, row.host_id, reach))
    items.extend(_endpoint_items(row, reach, policy))
    items.extend(await _secret_items(conn, row))
    return Drift(row.host_id, row.tool_id, row.binding_id, items[:MAX_ITEMS])


async def tool_drift(
    conn: Connection, host_id: str, tool_id: str, policy: DestinationPolicy | None = None
) -> Drift | None:
    """The drift of a Tool's active revision, or None when it has none."""
    rows = await lineage_rows.select_active_bindings(conn, host_id, tool_id)
    return None if not rows else await binding_drift(conn, rows[0], policy)


async def drift_counts(conn: Connection) -> dict[str, int]:
    """Active revisions of every host with drift of each kind (for the /metrics gauge)."""
    counts: dict[str, int] = dict.fromkeys(DRIFT_KINDS, 0)
    for row in await lineage_rows.select_active_bindings(conn):
        drift = await binding_drift(conn, row)
        for kind in {item.kind for item in drift.drifts}:
            counts[kind] += 1
    return counts


async def sample_binding_drift(db: Database) -> None:
    """Report the drifted active revisions per kind (the workflow_bindings_drifted gauge)."""
    async with db.transaction(read_only=True) as conn:
        counts = await drift_counts(conn)
    metrics.record_binding_drift(counts)
