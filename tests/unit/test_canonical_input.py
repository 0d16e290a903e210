"""The rfc8785-safe-json-v1 input profile against our vectors, the shared ones, and its rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.canonical import (
    PROFILE,
    CanonicalError,
    canonical_bytes,
    canonical_digest,
    parse_json_strict,
)
from tests.support.shared import OWN_FIXTURES, has_shared, requires_shared, shared_path

OWN_VECTORS = OWN_FIXTURES / "vectors" / "canonical-input.json"
SHARED_VECTORS = "reference/canonical-input-v1.json"


def load_vectors(path: Path) -> list[dict[str, Any]]:
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["profile"] == PROFILE
    vectors: list[dict[str, Any]] = document["vectors"]
    return vectors


def all_vectors() -> list[Any]:
    """Our vectors always; the shared reference vectors where ../shared exists."""
    own = [pytest.param(v, id=f"own-{v['name']}") for v in load_vectors(OWN_VECTORS)]
    if not has_shared(SHARED_VECTORS):
        skip = requires_shared(SHARED_VECTORS)
        return [*own, pytest.param(None, id="shared-reference", marks=skip)]
    shared = load_vectors(shared_path(SHARED_VECTORS))
    return [*own, *(pytest.param(v, id=f"shared-{v['name']}") for v in shared)]


@pytest.mark.parametrize("vector", all_vectors())
def test_vector_gives_the_pinned_result(vector: dict[str, Any]) -> None:
    if "error" in vector:
        for text in vector["inputs"]:
            with pytest.raises(CanonicalError) as caught:
                canonical_digest(parse_json_strict(text))
            assert caught.value.discriminator == vector["error"]
        return
    digests = [canonical_digest(parse_json_strict(text)) for text in vector["inputs"]]
    if "canonical" in vector:
        for text in vector["inputs"]:
            assert canonical_bytes(parse_json_strict(text)) == vector["canonical"].encode("utf-8")
    if "digest" in vector:
        assert set(digests) == {vector["digest"]}
    if vector.get("differentDigests"):
        assert len(set(digests)) == len(digests)


def test_members_are_ordered_by_utf16_code_units() -> None:
    # U+10000 encodes as a surrogate pair (D800) and so sorts before U+E000 in UTF-16.
    value = {"\ue000": 1, "\U00010000": 2, "a": 3}
    assert canonical_bytes(value) == '{"a":3,"\U00010000":2,"\ue000":1}'.encode()


def test_array_order_is_preserved() -> None:
    assert canonical_bytes(parse_json_strict("[3, 1, 2]")) == b"[3,1,2]"


def test_integral_number_spellings_share_one_canonical_form() -> None:
    spellings = ["1", "1.0", "1e0", "10e-1"]
    assert {canonical_bytes(parse_json_strict(text)) for text in spellings} == {b"1"}


@pytest.mark.parametrize("text", ["9007199254740991", "-9007199254740991"])
def test_the_largest_safe_integers_are_accepted(text: str) -> None:
    assert canonical_bytes(parse_json_strict(text)) == text.encode()


@pytest.mark.parametrize("text", ["-9007199254740992", "1e16", "NaN", "Infinity", "0.5"])
def test_numbers_outside_the_profile_are_refused(text: str) -> None:
    with pytest.raises(CanonicalError) as caught:
        parse_json_strict(text)
    assert caught.value.discriminator == "unsupported-number"


def test_python_values_outside_the_profile_are_refused() -> None:
    with pytest.raises(CanonicalError) as caught:
        canonical_bytes({"id": 2**60})
    assert caught.value.discriminator == "unsupported-number"
    with pytest.raises(CanonicalError) as caught:
        canonical_bytes({1: "x"})
    assert caught.value.discriminator == "non-string-key"
    with pytest.raises(CanonicalError) as caught:
        canonical_bytes({"when": object()})
    assert caught.value.discriminator == "unsupported-value"


def test_duplicate_keys_are_refused_at_any_depth() -> None:
    with pytest.raises(CanonicalError) as caught:
        parse_json_strict('{"outer": {"k": 1, "k": 1}}')
    assert caught.value.discriminator == "duplicate-key"


def test_malformed_text_is_invalid_json() -> None:
    with pytest.raises(CanonicalError) as caught:
        parse_json_strict('{"a": ')
    assert caught.value.discriminator == "invalid-json"


def test_digest_is_sha256_of_the_canonical_bytes() -> None:
    import hashlib

    value = {"b": [True, None, "x"], "a": -7}
    expected = "sha256:" + hashlib.sha256(b'{"a":-7,"b":[true,null,"x"]}').hexdigest()
    assert canonical_digest(value) == expected
