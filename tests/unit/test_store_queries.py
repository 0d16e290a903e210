"""The named-block SQL loader and the query-usage check."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.store.queries import QueryFileError, load_queries, parse_queries, query_usage_problems

GOOD = """\
-- claim_tasks --
-- Claim ready tasks for one worker.
SELECT id FROM tasks
WHERE host_id = %(host_id)s
LIMIT %(limit)s;

-- release_task --
-- Give a task back.
UPDATE tasks SET owner = NULL WHERE id = %(id)s;
"""


def test_blocks_are_loaded_by_name_with_description_and_sql(tmp_path: Path) -> None:
    path = tmp_path / "queries.sql"
    path.write_text(GOOD, encoding="utf-8")
    queries = load_queries(path)
    assert list(queries) == ["claim_tasks", "release_task"]
    assert queries["claim_tasks"].startswith("-- Claim ready tasks for one worker.\nSELECT id")
    assert "%(limit)s" in queries["claim_tasks"]
    assert queries["release_task"].endswith("WHERE id = %(id)s;")


def test_an_unknown_name_raises_key_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "queries.sql"
    path.write_text(GOOD, encoding="utf-8")
    with pytest.raises(KeyError, match=r"no query named 'claim_task'.*queries\.sql"):
        load_queries(path)["claim_task"]


def test_a_duplicate_name_is_refused() -> None:
    text = GOOD + "\n-- claim_tasks --\n-- Again.\nSELECT 1;\n"
    with pytest.raises(QueryFileError, match="duplicate query name 'claim_tasks'"):
        parse_queries(text)


def test_a_block_without_sql_is_refused() -> None:
    with pytest.raises(QueryFileError, match="'empty_one' is empty"):
        parse_queries("-- empty_one --\n-- Describes nothing.\n\n-- next --\n-- x\nSELECT 1;\n")


def test_a_block_without_a_description_is_refused() -> None:
    with pytest.raises(QueryFileError, match="lacks its one-line -- description"):
        parse_queries("-- bare --\nSELECT 1;\n")


def test_sql_before_the_first_name_is_refused() -> None:
    with pytest.raises(QueryFileError, match="before the first"):
        parse_queries("SELECT 1;\n-- named --\n-- x\nSELECT 2;\n")


def test_a_name_that_is_not_snake_case_is_refused() -> None:
    with pytest.raises(QueryFileError, match="not lower snake_case"):
        parse_queries("-- ClaimTasks --\n-- x\nSELECT 1;\n")


def test_usage_check_reports_unknown_and_unused_names(tmp_path: Path) -> None:
    sql_path = tmp_path / "queries.sql"
    sql_path.write_text(GOOD, encoding="utf-8")
    module = tmp_path / "store.py"
    module.write_text(
        'QUERIES = load_queries("queries.sql")\n'
        'await conn.execute(QUERIES["claim_tasks"], {})\n'
        "await conn.execute(QUERIES['claim_taks'], {})\n",
        encoding="utf-8",
    )
    assert query_usage_problems(sql_path, [module]) == [
        "unknown query 'claim_taks' used",
        "query 'release_task' is never used",
    ]


def test_usage_check_is_empty_when_every_block_is_used_exactly_by_name(tmp_path: Path) -> None:
    sql_path = tmp_path / "queries.sql"
    sql_path.write_text(GOOD, encoding="utf-8")
    module = tmp_path / "store.py"
    module.write_text('QUERIES["claim_tasks"]\nQUERIES[ "release_task" ]\n', encoding="utf-8")
    assert query_usage_problems(sql_path, [module]) == []
