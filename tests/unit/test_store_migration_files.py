"""Migration file discovery, name format and history checks (no database needed)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from runtime.store.migrations import (
    DEFAULT_DIRECTORY,
    AppliedMigration,
    MigrationError,
    check_history,
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
