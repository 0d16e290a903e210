"""tests/mutation/mutations.yaml stays applicable: each snippet is in its file exactly once.

The mutation pass (`make mutation-pass`) is not part of `make test`; this check is, so a refactor
that moves a mutated check breaks here instead of turning the pass into silent errors.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.mutation.run import REPO, Mutation, load_catalog
from tests.support.requirements import load_manifest


@pytest.fixture(scope="module")
def catalog() -> list[Mutation]:
    return load_catalog()


def test_mutation_ids_are_unique(catalog: list[Mutation]) -> None:
    counts = Counter(m.id for m in catalog)
    assert [mutation_id for mutation_id, n in counts.items() if n > 1] == []


def test_every_snippet_occurs_exactly_once_in_its_file(catalog: list[Mutation]) -> None:
    misplaced = [
        (m.id, m.file, (REPO / m.file).read_text(encoding="utf-8").count(m.original))
        if (REPO / m.file).is_file()
        else (m.id, m.file, "no such file")
        for m in catalog
    ]
    assert [found for found in misplaced if found[2] != 1] == []


def test_every_mutation_changes_its_snippet_and_names_tests(catalog: list[Mutation]) -> None:
    assert [m.id for m in catalog if not m.original or m.original == m.replacement] == []
    assert [m.id for m in catalog if not m.tests] == []


def test_every_mutation_runs_tests_listed_under_its_rule(catalog: list[Mutation]) -> None:
    listed = {rule["id"]: set(rule["tests"]) for rule in load_manifest()}
    unknown_rules = [m.id for m in catalog if m.rule not in listed]
    assert unknown_rules == []
    unlisted = [(m.id, t) for m in catalog for t in m.tests if t not in listed[m.rule]]
    assert unlisted == []
