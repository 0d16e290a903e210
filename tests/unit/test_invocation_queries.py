"""The invocation queries.sql: well-formed, and every block used exactly by name."""

from __future__ import annotations

from pathlib import Path

from runtime.invocation import store
from runtime.store.queries import query_usage_problems

INVOCATION = Path(store.__file__).parent


def test_every_query_block_is_used_and_every_used_name_exists() -> None:
    sources = sorted(INVOCATION.rglob("*.py"))
    assert query_usage_problems(INVOCATION / "queries.sql", sources) == []


def test_admission_reads_lock_the_tool_head_and_version_for_share() -> None:
    assert "FOR SHARE" in store.QUERIES["lock_active_revision"]
    assert "FOR SHARE" in store.QUERIES["lock_version_for_share"]
    assert "pg_advisory_xact_lock" in store.QUERIES["lock_tool_admission"]
