"""The receiver bridge's queries.sql: blocks used by name, and every statement scoped by host but
the reply job's work list."""

from __future__ import annotations

from runtime.receiver import store
from runtime.store.queries import query_usage_problems

RECEIVER = store.QUERIES.path.parent
# The one statement across hosts: the background reply job hands each row on with its host.
ACROSS_HOSTS = {"select_due_replies"}


def test_every_receiver_query_block_is_used_and_every_used_name_exists() -> None:
    sources = sorted(RECEIVER.rglob("*.py"))
    assert query_usage_problems(store.QUERIES.path, sources) == []


def test_every_receiver_statement_but_the_reply_jobs_work_list_is_scoped_by_host() -> None:
    unscoped = sorted(name for name, sql in store.QUERIES.items() if "%(host_id)s" not in sql)
    assert unscoped == sorted(ACROSS_HOSTS)
