"""The canonical JSON profiles: strict JSON parsing, RFC 8785 bytes and sha256 digests.

Two profiles share every rule but one. `rfc8785-safe-json-v1` (definition, binding and other
stored digests, and runs admitted before v2) accepts integers only; `rfc8785-json-v2` (the
canonical effective input of new runs, seed 001 "Canonical effective input") also accepts
finite decimals and writes them as RFC 8785 does (ECMAScript shortest round-trip form, via the
`rfc8785` library). Both refuse every number whose magnitude exceeds 2^53 - 1 whatever its
spelling (``9007199254740992``, ``1e21``): outside that range a double no longer holds every
integer, so large identifiers must travel as strings; refusing by value, not by spelling,
keeps the canonical text itself a valid input. A value v1 accepts has the same bytes under
v2, so an input digest never changes between the profiles.

v1 rules in detail (v2 differs only in accepting finite decimals):
(seed 001, "Idempotency And Side Effects"): duplicate object keys are refused; object
members are sorted by UTF-16 code units (RFC 8785, done by the `rfc8785` library); numbers must
be integers within +/-(2^53 - 1), so large identifiers have to travel as strings; a number
spelled with a fraction or exponent is accepted only when its value is such an integer (``1.0``
and ``1e0`` canonicalize to ``1``, exactly as RFC 8785 writes them), anything else (``1.25``,
``NaN``) is `unsupported-number` in v1; absent members stay absent (never null); strings keep
their code points (no Unicode normalization), except U+0000, which is refused
(`nul-character`): PostgreSQL cannot store it in text or jsonb, so accepting it would only move
the failure after admission; a lone surrogate is refused (`lone-surrogate`) for the same reason.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, NoReturn

import rfc8785

from runtime.canonical.errors import CanonicalError

PROFILE = "rfc8785-safe-json-v1"
PROFILE_V2 = "rfc8785-json-v2"
PROFILES = (PROFILE, PROFILE_V2)
# The profile of new runs' canonical effective input (seed 001: finite numbers are accepted).
INPUT_PROFILE = PROFILE_V2
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


def _finite_double(value: float) -> float:
    if value != value or value in (float("inf"), float("-inf")):
        raise CanonicalError("unsupported-number", "NaN and infinities are not JSON numbers")
    if abs(value) > SAFE_INTEGER_MAX:
        raise CanonicalError(
            "unsupported-number", "number outside +/-(2^53 - 1); send it as a string"
        )
    return value


def _parse_double(text: str) -> float:
    # float() rounds correctly: 100000.5 and 1.000005e5 are the same double.
    value = float(text)
    mantissa = re.split("[eE]", text, maxsplit=1)[0]
    if value == 0.0 and any(digit in mantissa for digit in "123456789"):
        # Admitting 1e-400 as 0 would digest a value the caller did not send.
        raise CanonicalError("unsupported-number", "a non-zero number underflows to zero")
    return _finite_double(value)


def _check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise ValueError(f"unknown canonical profile {profile!r}")


def _refuse_constant(name: str) -> NoReturn:
    raise CanonicalError("unsupported-number", f"{name} is not a JSON number")


def parse_json_strict(text: str | bytes, *, profile: str = PROFILE) -> Any:
    """Parse JSON text under a profile: duplicate keys and unsupported numbers are refused."""
    _check_profile(profile)
    try:
        return json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_int=_parse_int,
            parse_float=_parse_double if profile == PROFILE_V2 else _parse_fraction,
            parse_constant=_refuse_constant,
        )
    except CanonicalError:
        raise
    except (ValueError, RecursionError) as error:
        raise CanonicalError("invalid-json", "text is not valid JSON") from error


_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_nul(text: str) -> str:
    if "\x00" in text:
        raise CanonicalError("nul-character", "strings and keys must not contain U+0000")
    # Checked here, before the library sorts keys by UTF-16, so no path meets its encode error.
    if _SURROGATE.search(text):
        raise CanonicalError(
            "lone-surrogate", "strings and keys must be Unicode text (a lone surrogate is not)"
        )
    return text


def normalize_value(value: Any, depth: int = 0, *, profile: str = PROFILE) -> Any:
    """Check a decoded value against a profile and return its JSON form (tuples become lists)."""
    _check_profile(profile)
    return _normalize(value, depth, profile == PROFILE_V2)


def _normalize(value: Any, depth: int, decimals: bool) -> Any:
    if depth > MAX_DEPTH:
        raise CanonicalError("too-deep", f"nesting deeper than {MAX_DEPTH}")
    if isinstance(value, str):
        return _no_nul(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _safe_integer(value)
    if isinstance(value, float):
        if decimals:
            return _finite_double(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise CanonicalError("unsupported-number", "NaN and infinities are not JSON numbers")
        return _parse_fraction(repr(value))
    if isinstance(value, Mapping):
        normalized: dict[str, Any] = {}
        for key, member in value.items():
            if not isinstance(key, str):
                raise CanonicalError("non-string-key", "object keys must be strings")
            normalized[_no_nul(key)] = _normalize(member, depth + 1, decimals)
        return normalized
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_normalize(item, depth + 1, decimals) for item in value]
    raise CanonicalError("unsupported-value", f"{type(value).__name__} is not a JSON value")


def canonical_bytes(value: Any, *, profile: str = PROFILE) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON value under a profile (v1 by default)."""
    normalized = normalize_value(value, profile=profile)
    try:
        encoded: bytes = rfc8785.dumps(normalized)
    except rfc8785.CanonicalizationError as error:
        # Lone surrogates in strings are the remaining case the library refuses.
        raise CanonicalError("unsupported-value", "string is not valid Unicode") from error
    return encoded


def canonical_digest(value: Any, *, profile: str = PROFILE) -> str:
    """`sha256:<hex>` of the canonical bytes of a JSON value under a profile (v1 by default)."""
    return sha256_digest(canonical_bytes(value, profile=profile))


def narrowest_profile(value: Any) -> str:
    """The oldest profile that accepts a value v2 accepts: v1 unless it holds a decimal.

    Both profiles give such a value the same bytes; naming v1 keeps the idempotency scope of
    inputs admitted before v2 (stored under scope version 1) unchanged.
    """
    try:
        normalize_value(value, profile=PROFILE)
    except CanonicalError:
        return PROFILE_V2
    return PROFILE
