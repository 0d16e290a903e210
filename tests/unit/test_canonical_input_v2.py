"""The rfc8785-json-v2 input profile: our vectors, RFC 8785 Appendix B, and v1 compatibility."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
import rfc8785

from runtime.canonical import (
    INPUT_PROFILE,
    PROFILE,
    PROFILE_V2,
    CanonicalError,
    canonical_bytes,
    canonical_digest,
    narrowest_profile,
    parse_json_strict,
)
from tests.support.shared import OWN_FIXTURES

pytestmark = pytest.mark.requirement("001:Canonical effective input")

V2_DOCUMENT = json.loads((OWN_FIXTURES / "vectors" / "canonical-input-v2.json").read_text())
V1_DOCUMENT = json.loads((OWN_FIXTURES / "vectors" / "canonical-input.json").read_text())


def _v2(text: str) -> bytes:
    return canonical_bytes(parse_json_strict(text, profile=PROFILE_V2), profile=PROFILE_V2)


def _double(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


def test_the_vectors_name_the_v2_profile_and_new_runs_use_it() -> None:
    assert V2_DOCUMENT["profile"] == PROFILE_V2 == INPUT_PROFILE


@pytest.mark.parametrize("vector", V2_DOCUMENT["vectors"], ids=lambda v: str(v["name"]))
def test_vector_gives_the_pinned_result(vector: dict[str, Any]) -> None:
    if "error" in vector:
        for text in vector["inputs"]:
            with pytest.raises(CanonicalError) as caught:
                _v2(text)
            assert caught.value.discriminator == vector["error"], text
        return
    results = [_v2(text) for text in vector["inputs"]]
    if "canonical" in vector:
        assert set(results) == {vector["canonical"].encode("utf-8")}
        digests = {
            canonical_digest(parse_json_strict(t, profile=PROFILE_V2), profile=PROFILE_V2)
            for t in vector["inputs"]
        }
        assert digests == {vector["digest"]}
    if vector.get("differentDigests"):
        assert len(set(results)) == len(results)


@pytest.mark.parametrize("case", V2_DOCUMENT["appendixB"], ids=lambda c: str(c["ieee754"]))
def test_every_number_of_rfc8785_appendix_b(case: dict[str, Any]) -> None:
    value = _double(case["ieee754"])
    if case["rfc8785"] is not None:
        # The serializer writes the RFC's form whatever the profile then decides.
        assert rfc8785.dumps(value) == case["rfc8785"].encode()
    if case["outcome"] == "accept":
        assert canonical_bytes(value, profile=PROFILE_V2) == case["rfc8785"].encode()
        # The RFC's text is itself an input with the same canonical form.
        assert _v2(case["rfc8785"]) == case["rfc8785"].encode()
        return
    with pytest.raises(CanonicalError) as caught:
        canonical_bytes(value, profile=PROFILE_V2)
    assert caught.value.discriminator == case["outcome"]


@pytest.mark.parametrize(
    "vector",
    [v for v in V1_DOCUMENT["vectors"] if "digest" in v],
    ids=lambda v: str(v["name"]),
)
def test_every_value_v1_accepts_keeps_its_v1_bytes_under_v2(vector: dict[str, Any]) -> None:
    for text in vector["inputs"]:
        v1 = canonical_bytes(parse_json_strict(text, profile=PROFILE), profile=PROFILE)
        assert _v2(text) == v1
        assert narrowest_profile(parse_json_strict(text, profile=PROFILE_V2)) == PROFILE


def test_a_decimal_needs_v2_and_v1_still_refuses_it() -> None:
    value = parse_json_strict('{"loanAmount": 100000.5}', profile=PROFILE_V2)
    assert narrowest_profile(value) == PROFILE_V2
    with pytest.raises(CanonicalError) as caught:
        canonical_bytes(value, profile=PROFILE)
    assert caught.value.discriminator == "unsupported-number"


def test_an_unknown_profile_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown canonical profile"):
        canonical_bytes({}, profile="rfc8785-json-v3")


@pytest.mark.parametrize("profile", [PROFILE, PROFILE_V2])
@pytest.mark.parametrize("value", [{"a": 1, "\ud800": 1}, ["x\udc00"], {"b": {"\udfff": "y"}}])
def test_a_lone_surrogate_is_a_canonical_error_under_every_profile(
    value: Any, profile: str
) -> None:
    with pytest.raises(CanonicalError) as caught:
        canonical_bytes(value, profile=profile)
    assert caught.value.discriminator == "lone-surrogate"


def test_a_non_zero_literal_that_underflows_to_zero_is_refused() -> None:
    with pytest.raises(CanonicalError, match="underflows to zero") as caught:
        parse_json_strict('{"rate": 1e-400}', profile=PROFILE_V2)
    assert caught.value.discriminator == "unsupported-number"
    assert parse_json_strict('{"rate": 0.0e-400}', profile=PROFILE_V2) == {"rate": 0.0}
