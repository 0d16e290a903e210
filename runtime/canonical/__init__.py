"""Canonical JSON (the v1 and v2 profiles), `sha256:` digests, the YAML 1.2 definition loader
and the contract's Timestamp form."""

from __future__ import annotations

from runtime.canonical.definition import (
    DIGEST_PROFILE,
    MAX_DEFINITION_BYTES,
    PROVENANCE_KEY,
    definition_digest,
    document_canonical_bytes,
    input_schema_of,
    load_definition_yaml,
    load_yaml_core,
    schema_digest,
    without_provenance,
)
from runtime.canonical.errors import CanonicalError, CanonicalErrorKind
from runtime.canonical.patterns import PatternError, re2_validator
from runtime.canonical.safe_json import (
    INPUT_PROFILE,
    PROFILE,
    PROFILE_V2,
    PROFILES,
    SAFE_INTEGER_MAX,
    canonical_bytes,
    canonical_digest,
    narrowest_profile,
    normalize_value,
    parse_json_strict,
    sha256_digest,
)
from runtime.canonical.timestamps import timestamp

__all__ = [
    "DIGEST_PROFILE",
    "INPUT_PROFILE",
    "MAX_DEFINITION_BYTES",
    "PROFILE",
    "PROFILES",
    "PROFILE_V2",
    "PROVENANCE_KEY",
    "SAFE_INTEGER_MAX",
    "CanonicalError",
    "CanonicalErrorKind",
    "PatternError",
    "canonical_bytes",
    "canonical_digest",
    "definition_digest",
    "document_canonical_bytes",
    "input_schema_of",
    "load_definition_yaml",
    "load_yaml_core",
    "narrowest_profile",
    "normalize_value",
    "parse_json_strict",
    "re2_validator",
    "schema_digest",
    "sha256_digest",
    "timestamp",
    "without_provenance",
]
