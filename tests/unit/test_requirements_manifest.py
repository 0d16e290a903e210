"""tests/requirements.yaml names real tests, and every requirement marker of the suite is in it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.support.requirements import index_suite, load_manifest
from tests.support.shared import shared_path

STATUSES = {None, "untested", "partial"}


@pytest.fixture(scope="module")
def rules() -> list[dict[str, object]]:
    return load_manifest()


def test_rule_ids_are_unique_and_each_rule_names_its_seed_section(
    rules: list[dict[str, object]],
) -> None:
    counts = Counter(rule["id"] for rule in rules)
    assert [rule_id for rule_id, count in counts.items() if count > 1] == []
    assert all(isinstance(rule.get("seed"), str) and rule["seed"] for rule in rules)


def test_every_listed_test_exists(rules: list[dict[str, object]]) -> None:
    suite = index_suite()
    missing = [
        (rule["id"], node_id)
        for rule in rules
        for node_id in rule["tests"]  # type: ignore[attr-defined]
        if node_id not in suite.tests
    ]
    assert missing == []


def test_every_requirement_marker_is_listed_under_its_rule(
    rules: list[dict[str, object]],
) -> None:
    listed = {rule["id"]: set(rule["tests"]) for rule in rules}  # type: ignore[call-overload]
    unlisted = [
        (ref, node_id)
        for ref, node_ids in index_suite().markers.items()
        for node_id in sorted(node_ids)
        if node_id not in listed.get(ref, set())
    ]
    assert unlisted == []


def test_a_rule_without_tests_says_it_is_untested_and_why(
    rules: list[dict[str, object]],
) -> None:
    for rule in rules:
        assert rule.get("status") in STATUSES, rule
        untested = rule.get("status") == "untested"
        assert untested == (not rule["tests"]), rule
        if rule.get("status") is not None:
            assert rule.get("note"), rule


# Sentence level (issue 21 item 5): each rule lists the seed's normative sentences it covers.
SENTENCE_STATUSES = {None, "untested", "partial", "out-of-scope"}
WITHOUT_TESTS = {"untested", "out-of-scope"}
SEED_FILES = {"000": "seeds/000_6a8019b2eed3e117.txt", "001": "seeds/001_a5afd8b519657bc4.txt"}


def _sentences(rules: list[dict[str, object]]) -> list[tuple[dict[str, object], dict[str, Any]]]:
    return [(rule, s) for rule in rules for s in rule.get("sentences", [])]  # type: ignore[attr-defined]


def _normalised(text: str) -> str:
    return " ".join(text.split())


def test_sentence_ids_are_unique_and_name_their_rule(rules: list[dict[str, object]]) -> None:
    counts = Counter(sentence["id"] for _, sentence in _sentences(rules))
    assert [sid for sid, count in counts.items() if count > 1] == []
    misnamed = [
        sentence["id"]
        for rule, sentence in _sentences(rules)
        if not str(sentence["id"]).startswith(f"{rule['id']}#")
    ]
    assert misnamed == []


def test_a_sentence_without_tests_says_why_and_its_tests_are_its_rules(
    rules: list[dict[str, object]],
) -> None:
    strays = []
    for rule, sentence in _sentences(rules):
        assert sentence.get("status") in SENTENCE_STATUSES, sentence
        assert isinstance(sentence.get("text"), str) and sentence["text"], sentence
        assert (sentence.get("status") in WITHOUT_TESTS) == (not sentence["tests"]), sentence
        if sentence.get("status") is not None:
            assert sentence.get("note"), sentence
        strays += [t for t in sentence["tests"] if t not in rule["tests"]]  # type: ignore[operator]
    # A sentence's tests are its rule's (every marked test is listed there, checked above).
    assert strays == []


def test_every_test_of_a_rule_with_sentences_proves_one_of_them_or_the_rule_says_why(
    rules: list[dict[str, object]],
) -> None:
    unused = []
    for rule in rules:
        if not rule.get("sentences") or rule.get("sentences_note"):
            continue
        used = {t for sentence in rule["sentences"] for t in sentence["tests"]}  # type: ignore[attr-defined]
        unused += [(rule["id"], t) for t in rule["tests"] if t not in used]  # type: ignore[attr-defined]
    assert unused == []


def test_every_rule_lists_its_sentences_or_says_why_it_has_none(
    rules: list[dict[str, object]],
) -> None:
    assert [r["id"] for r in rules if not r.get("sentences") and not r.get("sentences_note")] == []


@pytest.mark.parametrize("seed", sorted(SEED_FILES))
def test_every_sentence_is_quoted_verbatim_from_its_seed(
    rules: list[dict[str, object]], seed: str
) -> None:
    path = shared_path(SEED_FILES[seed])
    if not path.exists():
        pytest.skip(
            f"../shared/{SEED_FILES[seed]} is absent: the quotes are checked where it exists"
        )
    text = _normalised(path.read_text(encoding="utf-8"))
    quoted = [
        (sentence["id"], sentence["text"])
        for rule, sentence in _sentences(rules)
        if str(rule["id"]).startswith(f"{seed}:")
    ]
    assert quoted, seed
    assert [sid for sid, words in quoted if _normalised(str(words)) not in text] == []
