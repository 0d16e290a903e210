"""Conversions between JSON and CEL values (contract v2; v1 is reference/cel-value-v1.json).

v2 differs from v1 in one rule: a finite double converts to a JSON number (the canonical input
profile rfc8785-json-v2 admits decimals, so expressions see them) within the same
+/-(2^53 - 1) magnitude the profile accepts; v1 refuses every double.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from collections.abc import Mapping
from typing import Any, Final

from runtime.engine.cel import celpy_seam as shim
from runtime.engine.cel.expression_error import ExpressionError

CEL_VALUE_CONTRACT_VERSION: Final = 2
MAX_SAFE_INTEGER: Final = 2**53 - 1


class _Missing:
    """The absent value: a leaf that resolved to nothing is omitted, never turned into null."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def json_to_cel(value: Any) -> Any:
    """Convert a JSON value (dict/list/str/int/float/bool/None) into CEL-typed values."""
    if value is None:
        return None
    if isinstance(value, bool):
        return shim.BoolType(value)
    if isinstance(value, int):
        return shim.IntType(value)
    if isinstance(value, float):
        return shim.DoubleType(value)
    if isinstance(value, str):
        return shim.StringType(value)
    if isinstance(value, Mapping):
        return shim.MapType({shim.StringType(k): json_to_cel(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return shim.ListType([json_to_cel(item) for item in value])
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def cel_to_json(
    value: Any, *, max_depth: int = 64, contract: int = CEL_VALUE_CONTRACT_VERSION
) -> Any:
    """Convert one CEL result to exactly one JSON value, or raise a typed ExpressionError."""
    if contract not in (1, 2):
        raise ValueError(f"unknown CEL value contract {contract}")
    return _convert(value, max_depth, contract >= 2)


def _reject(message: str) -> ExpressionError:
    return ExpressionError(message, reason="convert")


def _convert(value: Any, depth: int, doubles: bool) -> Any:  # noqa: C901 - one branch a CEL type
    if depth < 0:
        raise _reject("result nests too deeply")
    if value is None:
        return None
    if isinstance(value, bool | shim.BoolType):
        return bool(value)
    if isinstance(value, float | shim.DoubleType):
        if math.isnan(value) or math.isinf(value):
            raise _reject("a non-finite double has no JSON form")
        if not doubles:
            raise _reject("doubles are not supported by the CEL value contract v1")
        if abs(float(value)) > MAX_SAFE_INTEGER:
            raise _reject("double outside the safe range ±(2^53−1)")
        return float(value)
    if isinstance(value, int):
        if abs(int(value)) > MAX_SAFE_INTEGER:
            raise _reject("integer outside the safe range ±(2^53−1)")
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.datetime):
        return format_timestamp(value)
    if isinstance(value, dt.timedelta):
        return format_duration(value)
    if isinstance(value, list):
        return [_convert(item, depth - 1, doubles) for item in value]
    if isinstance(value, dict) and type(value) in (dict, shim.MapType):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, bool | shim.BoolType) or not isinstance(key, str):
                raise _reject("map keys must be strings")
            result[str(key)] = _convert(item, depth - 1, doubles)
        return result
    if value is MISSING:
        raise _reject("a missing value cannot appear here")
    raise _reject(f"an opaque CEL value ({type(value).__name__}) has no JSON form")


def _fraction(nanos: int) -> str:
    # protobuf JSON style: 0, 3, 6 or 9 fractional digits.
    if nanos == 0:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1_000 == 0:
        return f".{nanos // 1_000:06d}"
    return f".{nanos:09d}"


def format_timestamp(value: dt.datetime) -> str:
    """RFC 3339 in UTC with a Z suffix, e.g. 2099-08-12T20:00:00Z."""
    utc = value.astimezone(dt.UTC) if value.tzinfo is not None else value
    base = utc.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}{_fraction(utc.microsecond * 1000)}Z"


def format_duration(value: dt.timedelta) -> str:
    """Seconds with an s suffix, e.g. 1.250s (protobuf JSON form)."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    return f"{sign}{micros // 1_000_000}{_fraction((micros % 1_000_000) * 1000)}s"
