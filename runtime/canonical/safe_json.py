"""The `rfc8785-safe-json-v1` profile: strict JSON parsing, RFC 8785 bytes and sha256 digests.

Rules (seed 001, "Idempotency And Side Effects"): duplicate object keys are refused; object
members are sorted by UTF-16 code units (RFC 8785, done by the `rfc8785` library); numbers must
be integers within +/-(2^53 - 1), so large identifiers have to travel as strings; a number
spelled with a fraction or exponent is accepted only when its value is such an integer (``1.0``
and ``1e0`` canonicalize to ``1``, exactly as RFC 8785 writes them), anything else (``1.25``,
``NaN``) is `unsupported-number` in v1; absent members stay absent (never null); strings keep
their code points (no Unicode normalization), except U+0000, which is refused
(`nul-character`): PostgreSQL cannot store it in text or jsonb, so accepting it would only move
the failure after admission.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, NoReturn

import rfc8785

from runtime.canonical.errors import CanonicalError

PROFILE = "rfc8785-safe-json-v1"
SAFE_INTEGER_MAX = 2**53 - 1
DIGEST_PREFIX = "sha256:"
# Nesting beyond this is refused rather than risking recursion limits while serializing.
MAX_DEPTH = 128


def sha256_digest(data: bytes) -> str:
    """`sha256:<hex>` of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise CanonicalError("duplicate-key", f"duplicate object key {key!r}")
        result[key] = value
    return result


def _safe_integer(value: int) -> int:
    if -SAFE_INTEGER_MAX <= value <= SAFE_INTEGER_MAX:
        return value
    raise CanonicalError("unsupported-number", "integer outside +/-(2^53 - 1); send it as a string")


def _parse_int(text: str) -> int:
    # Bound the digit count before int() so a huge literal cannot cost quadratic time.
    if len(text.lstrip("-")) > 16:
        raise CanonicalError("unsupported-number", "integer outside +/-(2^53 - 1)")
    return _safe_integer(int(text))


def _parse_fraction(text: str) -> int:
    try:
        number = Decimal(text)
    except InvalidOperation as error:  # pragma: no cover - json only hands us valid numbers
        raise CanonicalError("unsupported-number", "unreadable number") from error
    if not number.is_finite() or abs(number) > SAFE_INTEGER_MAX:
        raise CanonicalError("unsupported-number", "number outside +/-(2^53 - 1)")
    if number != number.to_integral_value():
        raise CanonicalError("unsupported-number", "non-integer numbers are not accepted in v1")
    return int(number)


def _refuse_constant(name: str) -> NoReturn:
    raise CanonicalError("unsupported-number", f"{name} is not a JSON number")


def parse_json_strict(text: str | bytes) -> Any:
    """Parse JSON text under the profile: duplicate keys and unsafe numbers are refused."""
    try:
        return json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_int=_parse_int,
            parse_float=_parse_fraction,
            parse_constant=_refuse_constant,
        )
    except CanonicalError:
        raise
    except (ValueError, RecursionError) as error:
        raise CanonicalError("invalid-json", "text is not valid JSON") from error


def _no_nul(text: str) -> str:
    if "\x00" in text:
        raise CanonicalError("nul-character", "strings and keys must not contain U+0000")
    return text


def normalize_value(value: Any, depth: int = 0) -> Any:
    """Check a decoded value against the profile and return its JSON form (tuples become lists)."""
    if depth > MAX_DEPTH:
        raise CanonicalError("too-deep", f"nesting deeper than {MAX_DEPTH}")
    if isinstance(value, str):
        return _no_nul(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _safe_integer(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise CanonicalError("unsupported-number", "NaN and infinities are not JSON numbers")
        return _parse_fraction(repr(value))
    if isinstance(value, Mapping):
        normalized: dict[str, Any] = {}
        for key, member in value.items():
            if not isinstance(key, str):
                raise CanonicalError("non-string-key", "object keys must be strings")
            normalized[_no_nul(key)] = normalize_value(member, depth + 1)
        return normalized
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [normalize_value(item, depth + 1) for item in value]
    raise CanonicalError("unsupported-value", f"{type(value).__name__} is not a JSON value")


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON value under the profile."""
    normalized = normalize_value(value)
    try:
        encoded: bytes = rfc8785.dumps(normalized)
    except rfc8785.CanonicalizationError as error:
        # Lone surrogates in strings are the remaining case the library refuses.
        raise CanonicalError("unsupported-value", "string is not valid Unicode") from error
    return encoded


def canonical_digest(value: Any) -> str:
    """`sha256:<hex>` of the canonical bytes of a JSON value."""
    return sha256_digest(canonical_bytes(value))
