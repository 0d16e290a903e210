"""Negative probes: malformed digests, non-UUID ids and extra properties must be rejected."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from codegen.catalog import ToolSpec
from codegen.checks.names import EXTRA_PROPERTY, MALFORMED_DIGESTS, NOT_UUIDS
from codegen.checks.report import Report
from codegen.reference import is_valid

CHECK = "probe"
UUID_FIELDS = ("operationId", "hostId")


def iter_probes(tool: ToolSpec, base: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (description, instance) for every negative probe of one tool's input."""
    properties = tool.input_schema.get("properties", {})
    for name in properties:
        if name.lower().endswith("digest"):
            for value in MALFORMED_DIGESTS:
                yield f"{name}={value!r}", {**copy.deepcopy(base), name: value}
    for name in UUID_FIELDS:
        if name in properties:
            for value in NOT_UUIDS:
                yield f"{name}={value!r}", {**copy.deepcopy(base), name: value}
    yield f"extra property {EXTRA_PROPERTY}", {**copy.deepcopy(base), EXTRA_PROPERTY: True}


def _generated_rejects(validate: Callable[[Any], Any], instance: Any) -> bool:
    try:
        validate(copy.deepcopy(instance))
    except Exception:  # JsonSchemaValueException from the exec'd generated module
        return True
    return False


def check_probes(
    report: Report,
    tool: ToolSpec,
    base: Any,
    generated: dict[str, Callable[[Any], Any]] | None,
) -> None:
    """Every probe is rejected by jsonschema and by the generated validator."""
    if not isinstance(base, dict) or not is_valid(tool.input_schema, base):
        return  # the example check already reports an invalid or missing input example
    validate = generated.get(f"validate_{tool.name}_input") if generated else None
    for description, instance in iter_probes(tool, base):
        if is_valid(tool.input_schema, instance):
            report.fail(CHECK, f"{tool.name}: jsonschema accepts the probe {description}")
        if validate is not None and not _generated_rejects(validate, instance):
            report.fail(CHECK, f"{tool.name}: generated validator accepts the probe {description}")
