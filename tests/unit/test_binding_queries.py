"""The binding store's named queries: every name used exists and every block is used."""

from __future__ import annotations

from pathlib import Path

from runtime.store.queries import query_usage_problems

PACKAGE = Path(__file__).resolve().parents[2] / "runtime" / "publication" / "bindings"


def test_every_binding_query_is_defined_and_used() -> None:
    assert query_usage_problems(PACKAGE / "queries.sql", [PACKAGE / "store.py"]) == []
