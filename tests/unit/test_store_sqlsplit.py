"""Splitting non-transactional migration scripts into statements."""

from __future__ import annotations

from runtime.store.sqlsplit import code_of, split_statements


def test_statements_split_on_semicolons_outside_literals_and_comments() -> None:
    script = """
    -- a comment; with a semicolon
    CREATE INDEX CONCURRENTLY IF NOT EXISTS a_idx ON a (x);
    /* block; comment /* nested; */ still; */
    INSERT INTO t VALUES ('it''s; fine', "odd;name");
    """
    assert split_statements(script) == [
        "-- a comment; with a semicolon\n"
        "    CREATE INDEX CONCURRENTLY IF NOT EXISTS a_idx ON a (x)",
        "/* block; comment /* nested; */ still; */\n"
        "    INSERT INTO t VALUES ('it''s; fine', \"odd;name\")",
    ]


def test_dollar_quoted_bodies_stay_whole() -> None:
    script = "DO $body$ BEGIN PERFORM 1; PERFORM 2; END $body$;\nSELECT $$a;b$$;"
    assert split_statements(script) == [
        "DO $body$ BEGIN PERFORM 1; PERFORM 2; END $body$",
        "SELECT $$a;b$$",
    ]


def test_comment_only_and_empty_pieces_are_dropped() -> None:
    assert split_statements(";;\n-- only a comment\n;  SELECT 1  ") == ["SELECT 1"]


def test_code_of_drops_comments_and_on_request_literals() -> None:
    statement = (
        "-- f() in a comment\nCREATE FUNCTION g(a text DEFAULT 'x') RETURNS int\n"
        'LANGUAGE plpgsql AS $b$ BEGIN RETURN f(); END $b$ /* f() */, "odd--name"'
    )
    assert code_of(statement) == (
        " CREATE FUNCTION g(a text DEFAULT 'x') RETURNS int\n"
        'LANGUAGE plpgsql AS $b$ BEGIN RETURN f(); END $b$  , "odd--name"'
    )
    assert code_of(statement, literals=False) == (
        ' CREATE FUNCTION g(a text DEFAULT  ) RETURNS int\nLANGUAGE plpgsql AS    , "odd--name"'
    )
