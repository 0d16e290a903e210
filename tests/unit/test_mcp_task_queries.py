"""The MCP tasks' queries.sql (runtime/mcp_tasks): blocks used by name, every one scoped by host,
and a task read only with the whole identity it is bound to."""

from __future__ import annotations

from runtime.mcp_tasks import store
from runtime.store.queries import query_usage_problems

ROOM = store.QUERIES.path.parent


def test_every_mcp_task_query_block_is_used_and_every_used_name_exists() -> None:
    assert query_usage_problems(store.QUERIES.path, sorted(ROOM.rglob("*.py"))) == []


def test_every_mcp_task_query_is_scoped_by_host_and_a_task_by_its_whole_binding() -> None:
    for name in ("insert_task", "select_task", "list_tasks", "open_assignments"):
        assert "%(host_id)s" in store.QUERIES[name], name
    for name in ("select_task", "list_tasks"):
        for bound in ("user_id", "end_user_subject", "principal_subject"):
            assert f"{bound} = %({bound})s" in store.QUERIES[name], (name, bound)
