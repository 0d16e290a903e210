"""Migration and function file discovery, name format, content and history checks (no database)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from runtime.store.migrations import (
    DEFAULT_DIRECTORY,
    FUNCTIONS,
    AppliedMigration,
    MigrationError,
    authored_functions,
    check_history,
    check_order,
    discover_functions,
    discover_migrations,
)
from runtime.store.snapshot import normalize_dump


def write(directory: Path, name: str, text: str = "SELECT 1;") -> None:
    (directory / name).write_text(text, encoding="utf-8")


def test_files_are_ordered_by_version_and_nontx_files_are_marked(tmp_path: Path) -> None:
    write(tmp_path, "0010_later.sql")
    write(tmp_path, "0002_index_things.nontx.sql")
    write(tmp_path, "0001_first.sql")
    write(tmp_path, "schema.snapshot.sql", "CREATE TABLE ignored ();")
    write(tmp_path, "README.md", "not sql")
    files = discover_migrations(tmp_path)
    assert [(f.version, f.name, f.transactional) for f in files] == [
        (1, "first", True),
        (2, "index_things", False),
        (10, "later", True),
    ]


@pytest.mark.parametrize(
    "name",
    [
        "1_short.sql",
        "00001_five.sql",
        "0001-dash.sql",
        "0001_Upper.sql",
        "0001_.sql",
        "0001_a__b.sql",
        "notes.sql",
        "0001_x.tx.sql",
    ],
)
def test_a_badly_named_sql_file_is_refused(tmp_path: Path, name: str) -> None:
    write(tmp_path, name)
    with pytest.raises(MigrationError, match="NNNN_snake_case"):
        discover_migrations(tmp_path)


def test_two_files_with_one_version_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "0003_one.sql")
    write(tmp_path, "0003_other.sql")
    with pytest.raises(MigrationError, match="0003 is used twice"):
        discover_migrations(tmp_path)


def applied_row(version: int, name: str, checksum: str) -> AppliedMigration:
    return AppliedMigration(version, name, checksum, datetime.now(UTC))


def test_history_check_refuses_edited_removed_and_renamed_files(tmp_path: Path) -> None:
    write(tmp_path, "0001_first.sql")
    (first,) = discover_migrations(tmp_path)
    check_history([first], [applied_row(1, "first", first.checksum)])
    with pytest.raises(MigrationError, match="was edited"):
        check_history([first], [applied_row(1, "first", "0" * 64)])
    with pytest.raises(MigrationError, match="was removed"):
        check_history([first], [applied_row(2, "second", first.checksum)])
    with pytest.raises(MigrationError, match="was renamed"):
        check_history([first], [applied_row(1, "prime", first.checksum)])


def test_the_repository_migrations_are_well_formed() -> None:
    files = discover_migrations(DEFAULT_DIRECTORY)
    assert files[0].version == 1 and files[0].name == "roles"
    authored = authored_functions(discover_functions(DEFAULT_DIRECTORY))
    assert authored["workflow_admit_invoke_v2"].name == "invocation_admission"
    check_order(files, authored)


def write_function(directory: Path, name: str, text: str) -> None:
    (directory / FUNCTIONS).mkdir(exist_ok=True)
    write(directory / FUNCTIONS, name, text)


F = "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';"


def test_function_files_are_ordered_by_name_and_other_files_ignored(tmp_path: Path) -> None:
    assert discover_functions(tmp_path) == []
    write_function(tmp_path, "zeta.sql", F)
    write_function(tmp_path, "alpha_beta.sql", F.replace(" f(", " g("))
    write_function(tmp_path, "README.md", "not sql")
    files = discover_functions(tmp_path)
    assert [(f.name, f.label) for f in files] == [
        ("alpha_beta", "functions/alpha_beta.sql"),
        ("zeta", "functions/zeta.sql"),
    ]
    # They are no numbered migrations.
    assert discover_migrations(tmp_path) == []


@pytest.mark.parametrize("name", ["0001_numbered.sql", "Upper.sql", "dash-name.sql", "a__b.sql"])
def test_a_badly_named_function_file_is_refused(tmp_path: Path, name: str) -> None:
    write_function(tmp_path, name, F)
    with pytest.raises(MigrationError, match="function files are named snake_case"):
        discover_functions(tmp_path)


def test_a_function_file_holds_only_statements_that_can_run_again(tmp_path: Path) -> None:
    write_function(
        tmp_path,
        "family.sql",
        "-- A family.\n"
        "DROP FUNCTION IF EXISTS old_f(integer);\n"
        "create or replace function f() returns int language plpgsql as $$\n"
        "BEGIN CREATE TABLE inside_a_body (); RETURN 1; END $$;\n"
        "CREATE OR REPLACE PROCEDURE public.p() LANGUAGE sql AS 'SELECT 1';\n"
        "COMMENT ON FUNCTION f() IS 'one';\n"
        "REVOKE ALL ON FUNCTION f() FROM PUBLIC;\n"
        "GRANT EXECUTE ON FUNCTION f() TO PUBLIC;\n",
    )
    assert sorted(authored_functions(discover_functions(tmp_path))) == ["f", "p"]


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE TABLE t (id int)",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "DROP FUNCTION f()",
        "INSERT INTO t VALUES (1)",
        "GRANT SELECT ON TABLE t TO PUBLIC",
        "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO PUBLIC",
    ],
)
def test_a_statement_that_cannot_run_again_is_refused_in_a_function_file(
    tmp_path: Path, statement: str
) -> None:
    write_function(tmp_path, "family.sql", f"{F}\n{statement};\n")
    with pytest.raises(MigrationError, match=r"functions/family\.sql: .* cannot be run again"):
        authored_functions(discover_functions(tmp_path))


def test_a_function_defined_in_two_files_is_refused(tmp_path: Path) -> None:
    write_function(tmp_path, "one.sql", F)
    write_function(tmp_path, "two.sql", F.replace("SELECT 1", "SELECT 2"))
    with pytest.raises(MigrationError, match=r"f is defined in both functions/one\.sql and"):
        authored_functions(discover_functions(tmp_path))


def order_problem(tmp_path: Path, *migrations: str) -> str | None:
    """check_order's refusal for numbered migrations 0001... and the function file F."""
    write_function(tmp_path, "family.sql", F)
    for number, text in enumerate(migrations, start=1):
        write(tmp_path, f"{number:04d}_step.sql", text)
    try:
        check_order(discover_migrations(tmp_path), authored_functions(discover_functions(tmp_path)))
    except MigrationError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(
    "use",
    [
        "SELECT f();",
        "SELECT public.F ();",
        "DO $$ BEGIN PERFORM f(); END $$;",
        "CREATE TABLE t (n int DEFAULT f());",
        "CREATE VIEW v AS SELECT f() AS n;",
        "CREATE FUNCTION g() RETURNS int LANGUAGE sql AS $$ SELECT f() $$;",
        "CREATE FUNCTION g() RETURNS int LANGUAGE sql AS 'SELECT f()';",
        "CREATE TRIGGER t AFTER INSERT ON x FOR EACH ROW EXECUTE FUNCTION f();",
        "GRANT EXECUTE ON FUNCTION f() TO PUBLIC;",
        "ALTER FUNCTION f() SET search_path = public;",
        "DROP FUNCTION f();",
    ],
)
def test_a_numbered_migration_using_an_authored_function_before_it_exists_is_refused(
    tmp_path: Path, use: str
) -> None:
    problem = order_problem(tmp_path, "CREATE TABLE x (id int);", use)
    assert problem is not None
    assert problem.startswith("0002_step.sql uses f, which functions/family.sql defines:")
    assert "on a fresh database f does not exist yet" in problem


@pytest.mark.parametrize(
    "migrations",
    [
        # A PL/pgSQL body is resolved when it runs, after the function files are installed.
        ("CREATE FUNCTION g() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN f(); END $$;",),
        (
            "CREATE OR REPLACE FUNCTION g() RETURNS int"
            " AS 'BEGIN RETURN f(); END' LANGUAGE plpgsql;",
        ),
        # Mentioned in a comment, dropped if it exists, or made by an earlier migration first.
        ("-- f() is the family's\nSELECT 1;", "DROP FUNCTION IF EXISTS f();"),
        ("CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 0';", "SELECT f();"),
        (
            "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;\n"
            "CREATE TABLE x (id int);\n"
            "CREATE TRIGGER t AFTER INSERT ON x FOR EACH ROW EXECUTE FUNCTION f();",
        ),
        # Another function whose name only starts or ends like it.
        ("SELECT f_other(), other_f(), x.f FROM x;",),
    ],
)
def test_a_numbered_migration_that_needs_no_authored_function_yet_passes(
    tmp_path: Path, migrations: tuple[str, ...]
) -> None:
    assert order_problem(tmp_path, *migrations) is None


def test_dump_normalization_drops_comments_settings_and_version_noise() -> None:
    dump = (
        "--\n-- PostgreSQL database dump\n--\n\\restrict abc\nSET statement_timeout = 0;\n"
        "SELECT pg_catalog.set_config('search_path', '', false);\n\n\n"
        "CREATE TABLE public.t (\n    id integer\n);\n\n\n\n"
        "CREATE INDEX i ON public.t (id);\n\n\\unrestrict abc\n\n"
    )
    assert normalize_dump(dump) == (
        "CREATE TABLE public.t (\n    id integer\n);\n\nCREATE INDEX i ON public.t (id);\n"
    )
