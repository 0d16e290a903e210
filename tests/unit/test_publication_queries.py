"""The publication store's named queries: every name used exists and every block is used."""

from __future__ import annotations

from pathlib import Path

from runtime.store.queries import query_usage_problems

STORE = Path(__file__).resolve().parents[2] / "runtime" / "publication" / "store"


def test_every_publication_query_is_defined_and_used() -> None:
    sources = sorted(STORE.glob("*.py"))
    assert query_usage_problems(STORE / "queries.sql", sources) == []
