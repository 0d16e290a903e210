"""The StageResult wire contract at acceptance: strict decoding (unknown fields refused).

The generated models (contracts/workflow-admin/schemas.json $defs StageResult, ReviewResult,
Remediation) ignore unknown members when decoding, so this walks the value against the model's
type info and refuses any member the contract does not declare, as the upstream contract does.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import inspect

from generated.models import StageResult


class MalformedResult(Exception):
    """A stage run's output is not a valid StageResult (never read as "no findings")."""


def _unknown(value: Any, info: inspect.Type, path: str) -> list[str]:
    if isinstance(info, inspect.Metadata):
        return _unknown(value, info.type, path)
    if isinstance(info, inspect.StructType) and isinstance(value, dict):
        fields = {f.encode_name: f for f in info.fields}
        found = [f"{path}/{key}" for key in value if key not in fields]
        for key, member in value.items():
            if key in fields:
                found += _unknown(member, fields[key].type, f"{path}/{key}")
        return found
    if isinstance(info, inspect.ListType) and isinstance(value, list):
        return [
            p for i, item in enumerate(value) for p in _unknown(item, info.item_type, f"{path}/{i}")
        ]
    if isinstance(info, inspect.DictType) and isinstance(value, dict):
        return [
            p for k, item in value.items() for p in _unknown(item, info.value_type, f"{path}/{k}")
        ]
    if isinstance(info, inspect.UnionType):
        structs = [t for t in info.types if isinstance(t, inspect.StructType | inspect.Metadata)]
        return _unknown(value, structs[0], path) if len(structs) == 1 else []
    return []


_INFO = inspect.type_info(StageResult)


def parse_stage_result(value: Any) -> dict[str, Any]:
    """The run output as a StageResult (plain JSON values), or MalformedResult naming why."""
    if not isinstance(value, dict):
        raise MalformedResult("the run's output is not an object")
    unknown = _unknown(value, _INFO, "")
    if unknown:
        raise MalformedResult(f"unknown fields: {', '.join(sorted(unknown)[:5])}")
    try:
        parsed = msgspec.convert(value, StageResult)
    except msgspec.ValidationError as error:
        raise MalformedResult(str(error)) from None
    result: dict[str, Any] = msgspec.to_builtins(parsed)
    return result
