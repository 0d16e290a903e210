"""Definition digests: YAML 1.2 core loading and the committed fixture set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.canonical import (
    DIGEST_PROFILE,
    MAX_DEFINITION_BYTES,
    CanonicalError,
    definition_digest,
    document_canonical_bytes,
    load_definition_yaml,
    schema_digest,
)

pytestmark = pytest.mark.requirement("000:Saved definitions")

FIXTURES_PATH = Path(__file__).resolve().parents[2] / "contracts/fixtures/definition-digests.json"
FIXTURES = json.loads(FIXTURES_PATH.read_text(encoding="utf-8"))
CASES: dict[str, dict[str, Any]] = {case["name"]: case for case in FIXTURES["cases"]}


def test_fixture_set_names_this_profile() -> None:
    assert FIXTURES["profile"] == DIGEST_PROFILE


@pytest.mark.parametrize("case", FIXTURES["cases"], ids=lambda case: case["name"])
def test_fixture_case_recomputes_to_its_pinned_digest(case: dict[str, Any]) -> None:
    document = load_definition_yaml(case["yaml"])
    assert document_canonical_bytes(document).decode("utf-8") == case["canonical"]
    assert definition_digest(case["yaml"]) == case["digest"]
    assert definition_digest(document) == case["digest"]
    assert schema_digest(document) == case["schemaDigest"]


@pytest.mark.parametrize("case", FIXTURES["errors"], ids=lambda case: case["name"])
def test_fixture_error_case_is_refused_with_its_discriminator(case: dict[str, Any]) -> None:
    with pytest.raises(CanonicalError) as caught:
        definition_digest(case["yaml"])
    assert caught.value.discriminator == case["error"]


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("integer-one", "float-one"),
        ("tilde-null", "quoted-null-is-string"),
        ("yaml12-booleans", "quoted-booleans-are-strings"),
        ("unicode-preserved-nfc", "unicode-preserved-nfd"),
    ],
)
def test_cases_that_yaml_1_1_would_conflate_have_different_digests(left: str, right: str) -> None:
    assert CASES[left]["digest"] != CASES[right]["digest"]


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("float-one", "float-one-trailing-dot"),
        ("tilde-null", "word-null"),
        ("tilde-null", "empty-null"),
        ("key-order-is-irrelevant-1", "key-order-is-irrelevant-2"),
    ],
)
def test_equivalent_spellings_share_one_digest(left: str, right: str) -> None:
    assert CASES[left]["digest"] == CASES[right]["digest"]


def test_yes_no_on_off_stay_strings() -> None:
    document = load_definition_yaml("a: yes\nb: no\nc: on\nd: off\n")
    assert document == {"a": "yes", "b": "no", "c": "on", "d": "off"}


def test_merge_key_is_an_ordinary_key() -> None:
    document = load_definition_yaml("child:\n  <<: {a: 1}\n  b: 2\n")
    assert document == {"child": {"<<": {"a": 1}, "b": 2}}


def test_definition_without_input_schema_digests_the_empty_schema() -> None:
    bare = load_definition_yaml("document: {name: x}\n")
    explicit = load_definition_yaml("input:\n  schema:\n    format: json\n    document: {}\n")
    assert schema_digest(bare) == schema_digest(explicit)


def test_input_schema_digest_ignores_the_rest_of_the_definition() -> None:
    first = load_definition_yaml("input: {schema: {document: {type: object}}}\ndo: []\n")
    second = load_definition_yaml("input: {schema: {document: {type: object}}}\ndo: [{a: {}}]\n")
    assert schema_digest(first) == schema_digest(second)
    assert definition_digest(first) != definition_digest(second)


def test_oversized_definition_text_is_refused() -> None:
    text = "a: '" + "x" * MAX_DEFINITION_BYTES + "'\n"
    with pytest.raises(CanonicalError) as caught:
        load_definition_yaml(text)
    assert caught.value.discriminator == "too-large"


def test_deeply_nested_definition_is_refused() -> None:
    text = "a: " + "[" * 200 + "]" * 200 + "\n"
    with pytest.raises(CanonicalError) as caught:
        load_definition_yaml(text)
    assert caught.value.discriminator == "too-deep"


def test_billion_laughs_is_refused_before_expansion() -> None:
    text = "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\n"
    with pytest.raises(CanonicalError) as caught:
        load_definition_yaml(text)
    assert caught.value.discriminator == "alias-refused"


def test_malformed_yaml_is_invalid_yaml() -> None:
    with pytest.raises(CanonicalError) as caught:
        load_definition_yaml("a: [1, 2\n")
    assert caught.value.discriminator == "invalid-yaml"


def test_multiple_documents_are_refused() -> None:
    with pytest.raises(CanonicalError) as caught:
        load_definition_yaml("a: 1\n---\nb: 2\n")
    assert caught.value.discriminator == "invalid-yaml"


@pytest.mark.parametrize(
    ("text", "discriminator"),
    [
        ('a: "x\\0y"\n', "nul-character"),
        ('"k\\x00": 1\n', "nul-character"),
        ("a: b\x00\n", "nul-character"),
        ('a: "\\ud800"\n', "lone-surrogate"),
        ("a: \udc00\n", "lone-surrogate"),
    ],
)
def test_nul_characters_and_lone_surrogates_are_refused_by_the_loader(
    text: str, discriminator: str
) -> None:
    with pytest.raises(CanonicalError) as caught:
        load_definition_yaml(text)
    assert caught.value.discriminator == discriminator


def test_canonical_bytes_of_a_lone_surrogate_key_are_a_canonical_error() -> None:
    with pytest.raises(CanonicalError) as caught:
        document_canonical_bytes({"\ud800": 1})
    assert caught.value.discriminator == "lone-surrogate"
