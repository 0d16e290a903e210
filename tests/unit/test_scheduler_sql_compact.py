"""The scheduler's queries are compacted so psycopg caches their placeholder conversion."""

from __future__ import annotations

import re

from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH, MAX_CACHED_STATEMENT_PARAMS

from runtime.scheduler.store.sql import PSYCOPG_CACHED_LENGTH, QUERIES, QUERIES_PATH, compact_sql
from runtime.store import load_queries

_LITERAL = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")
_PARAM = re.compile(r"%\((\w+)\)s")


def _skeleton(sql: str) -> tuple[str, list[str]]:
    """The text without comments and blanks outside literals, and the literals in order.

    Comments go first (they hold apostrophes); no literal of the scheduler's holds "--".
    """
    rest = re.sub(r"--[^\n]*", "", sql)
    literals = _LITERAL.findall(rest)
    return re.sub(r"\s+", "", _LITERAL.sub("'?'", rest)), literals


def test_every_query_is_short_enough_for_psycopgs_conversion_cache() -> None:
    assert PSYCOPG_CACHED_LENGTH == MAX_CACHED_STATEMENT_LENGTH
    for name, sql in QUERIES.items():
        assert len(sql.encode()) <= MAX_CACHED_STATEMENT_LENGTH, name
        assert len(set(_PARAM.findall(sql))) <= MAX_CACHED_STATEMENT_PARAMS, name


def test_compaction_keeps_every_token_and_literal() -> None:
    original = load_queries(QUERIES_PATH)
    assert set(original) == set(QUERIES)
    for name, sql in original.items():
        assert _skeleton(QUERIES[name]) == _skeleton(sql), name
        assert "--" not in _LITERAL.sub("", QUERIES[name]), name


def test_literals_and_identifiers_are_kept_byte_for_byte() -> None:
    text = "SELECT 'a  -- b', 'it''s', \"x  y\" -- note\n  , f( 1 ,\n 2 ) FROM t -- end"
    assert compact_sql(text) == "SELECT 'a  -- b','it''s',\"x  y\",f(1,2) FROM t"


def test_what_it_cannot_read_is_left_alone() -> None:
    for text in ("SELECT $$ a  b $$", "SELECT /* x */ 1", "SELECT E'a\\'  b'"):
        assert compact_sql(text) == text
