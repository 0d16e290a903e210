"""The console's queries.sql (signed-out sessions): well-formed, every block used by name."""

from __future__ import annotations

from pathlib import Path

from runtime.console import revocations
from runtime.store.queries import query_usage_problems

CONSOLE = Path(revocations.__file__).parent


def test_every_query_block_is_used_and_every_used_name_exists() -> None:
    sources = sorted(CONSOLE.rglob("*.py"))
    assert query_usage_problems(CONSOLE / "queries.sql", sources) == []
