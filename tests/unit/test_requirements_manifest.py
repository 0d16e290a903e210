"""tests/requirements.yaml names real tests, and every requirement marker of the suite is in it."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.requirements import index_suite, load_manifest

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
