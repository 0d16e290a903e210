"""The publication queries.sql: every block is used and every used name exists."""

from __future__ import annotations

from pathlib import Path

import runtime.publication
from runtime.store.queries import query_usage_problems

PACKAGE = Path(runtime.publication.__file__).resolve().parent


def test_every_publication_query_is_used_and_defined() -> None:
    # The bindings subpackage has its own queries.sql (and its own test).
    sources = sorted(p for p in PACKAGE.rglob("*.py") if "bindings" not in p.parts)
    assert query_usage_problems(PACKAGE / "queries.sql", sources) == []
