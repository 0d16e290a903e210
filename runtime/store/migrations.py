"""The migration runner: ``migrations/NNNN_name.sql`` applied in order, each exactly once.

- Files are named ``NNNN_snake_case_name.sql`` (four digits); every other ``.sql`` file in the
  directory except ``schema.snapshot.sql`` is refused, as are two files with one version.
- Runners serialize on a PostgreSQL advisory lock, so of several concurrent runners one
  applies and the others then find everything applied.
- Each file runs in its own transaction together with the row recording it in
  ``schema_migrations`` (version, name, sha256 checksum, applied_at): a failing file leaves
  neither DDL nor a version behind.
- An applied file that was edited (checksum) or removed is refused before anything runs.
- ``NNNN_name.nontx.sql`` runs statement by statement outside a transaction (for
  ``CREATE INDEX CONCURRENTLY``); its version is recorded after the last statement, so its
  statements must be safe to re-run (``IF NOT EXISTS``).
- Pending files are applied in version order even if a higher version is already applied:
  the reserved number ranges let domains add files independently.

Authored function files, ``migrations/functions/snake_case_name.sql``, hold the current
definitions of function families (``CREATE OR REPLACE FUNCTION``) that change: a change is an
edit of the file, not a new numbered migration restating the family.

- They are installed after the numbered migrations, in the same run under the same lock, in
  name order, all in one transaction with their rows in ``schema_function_history`` (name,
  checksum, applied_at; one row per install): a file whose checksum differs from its last
  install, and every file after a run that applied a numbered migration (which may have
  replaced or dropped one of their functions). A failing file leaves none of them installed;
  the numbered migrations of the run stay applied (each committed on its own).
- A file holds only statements that are safe to run again: ``CREATE OR REPLACE FUNCTION`` or
  ``PROCEDURE``, ``DROP ... IF EXISTS``, ``COMMENT ON`` and ``GRANT``/``REVOKE ... ON``
  a function or procedure. A function is defined in one file only.
- On a fresh database a numbered migration runs before any authored file, so one that uses an
  authored function outside a PL/pgSQL body (a call, a trigger, a SQL function's body, a
  grant: anything resolved as the migration runs) is refused before anything runs, unless an
  earlier numbered migration (or the same one, before) created that function. A PL/pgSQL body
  may call one: it is resolved when it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import logging
import os
import re
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import dict_row

from runtime.store.admin import create_database, drop_database, with_database
from runtime.store.embedded import EmbeddedPostgres
from runtime.store.settings import StoreSettings
from runtime.store.snapshot import SNAPSHOT_FILE, dump_schema
from runtime.store.sqlsplit import code_of, split_statements

log = logging.getLogger(__name__)

DEFAULT_DIRECTORY = Path(__file__).resolve().parent.parent.parent / "migrations"
# "wfmigrat" as a bigint: one lock per database for all runners of this service.
ADVISORY_LOCK_KEY = 0x77666D6967726174
_FILE_NAME = re.compile(
    r"^(?P<version>\d{4})_(?P<name>[a-z0-9]+(?:_[a-z0-9]+)*)(?P<nontx>\.nontx)?\.sql$"
)
_NOT_MIGRATIONS = frozenset({SNAPSHOT_FILE})
# The folder of authored function files inside the migrations directory.
FUNCTIONS = "functions"
# Named like a numbered migration without its number, so neither is taken for the other.
_FUNCTION_FILE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*\.sql$")
_ROUTINE = r"(?:FUNCTION|PROCEDURE)"
# The statements an authored file may hold: each is safe to run again.
_REAPPLICABLE = re.compile(
    rf"^\s*(?:CREATE\s+OR\s+REPLACE\s+{_ROUTINE}|DROP\s+{_ROUTINE}\s+IF\s+EXISTS"
    rf"|COMMENT\s+ON\s+{_ROUTINE}|(?:GRANT|REVOKE)\s.*?\sON\s+(?:{_ROUTINE}|ROUTINE))\s",
    re.IGNORECASE | re.DOTALL,
)
_CREATES = re.compile(
    rf"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?{_ROUTINE}\s+(?:public\.)?(\w+)", re.IGNORECASE
)
_DROPS_IF_EXISTS = re.compile(rf"^\s*DROP\s+{_ROUTINE}\s+IF\s+EXISTS\s", re.IGNORECASE)
_PLPGSQL = re.compile(r"\bLANGUAGE\s+'?plpgsql\b", re.IGNORECASE)

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
_RECORD = "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)"
_CREATE_FUNCTION_HISTORY = """
CREATE TABLE IF NOT EXISTS schema_function_history (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
_RECORD_FUNCTIONS = "INSERT INTO schema_function_history (name, checksum) VALUES (%s, %s)"


class MigrationError(RuntimeError):
    """The migration directory or the database's migration history is not acceptable."""


@dataclass(frozen=True)
class MigrationFile:
    """One migration file on disk."""

    version: int
    name: str
    path: Path
    checksum: str
    transactional: bool

    def read(self) -> str:
        """The SQL text of the file."""
        return self.path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class FunctionFile:
    """One authored file of function definitions (``migrations/functions/NAME.sql``)."""

    name: str
    path: Path
    checksum: str

    @property
    def label(self) -> str:
        """The file as its messages name it: functions/NAME.sql."""
        return f"{FUNCTIONS}/{self.path.name}"

    def read(self) -> str:
        """The SQL text of the file."""
        return self.path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class AppliedMigration:
    """One row of schema_migrations."""

    version: int
    name: str
    checksum: str
    applied_at: datetime


def discover_migrations(
    directory: str | os.PathLike[str] = DEFAULT_DIRECTORY,
) -> list[MigrationFile]:
    """The migration files of directory in version order; refuses bad names and duplicates."""
    found: dict[int, MigrationFile] = {}
    for path in sorted(Path(directory).glob("*.sql")):
        if path.name in _NOT_MIGRATIONS:
            continue
        match = _FILE_NAME.match(path.name)
        if match is None:
            raise MigrationError(
                f"{path.name}: migration files are named NNNN_snake_case.sql (or .nontx.sql)"
            )
        version = int(match.group("version"))
        if version in found:
            raise MigrationError(f"{path.name}: version {version:04d} is used twice")
        found[version] = MigrationFile(
            version=version,
            name=match.group("name"),
            path=path,
            checksum=hashlib.sha256(path.read_bytes()).hexdigest(),
            transactional=match.group("nontx") is None,
        )
    return [found[version] for version in sorted(found)]


def discover_functions(
    directory: str | os.PathLike[str] = DEFAULT_DIRECTORY,
) -> list[FunctionFile]:
    """The authored function files of directory/functions in name order; refuses bad names."""
    found: list[FunctionFile] = []
    for path in sorted((Path(directory) / FUNCTIONS).glob("*.sql")):
        if _FUNCTION_FILE.match(path.name) is None:
            raise MigrationError(
                f"{FUNCTIONS}/{path.name}: function files are named snake_case.sql (no number)"
            )
        checksum = hashlib.sha256(path.read_bytes()).hexdigest()
        found.append(FunctionFile(name=path.stem, path=path, checksum=checksum))
    return found


def authored_functions(functions: Sequence[FunctionFile]) -> dict[str, FunctionFile]:
    """The functions (and procedures) the files define, by name, with the file of each.

    Refuses a statement that is not safe to run again and a function defined in two files.
    """
    defined: dict[str, FunctionFile] = {}
    for file in functions:
        for statement in split_statements(file.read()):
            code = code_of(statement, literals=False)
            if _REAPPLICABLE.match(code) is None:
                first = " ".join(code.split()[:4])
                raise MigrationError(
                    f"{file.label}: '{first} ...' cannot be run again; a function file holds"
                    " CREATE OR REPLACE FUNCTION, DROP FUNCTION IF EXISTS, COMMENT ON FUNCTION"
                    " and GRANT/REVOKE ON FUNCTION only (the rest goes in a numbered migration)"
                )
            created = _CREATES.match(code)
            if created is None:
                continue
            name = created.group(1).lower()
            other = defined.setdefault(name, file)
            if other is not file:
                raise MigrationError(f"{name} is defined in both {other.label} and {file.label}")
    return defined


def check_order(files: Sequence[MigrationFile], authored: dict[str, FunctionFile]) -> None:
    """Refuse a numbered migration that uses an authored function before one exists.

    On a fresh database the numbered migrations run before any function file. Whatever a
    statement resolves as it runs (a call, a trigger, a view, a SQL function's body, a grant,
    an ALTER) must then have been created by an earlier numbered migration; a PL/pgSQL body
    is resolved only when it runs, and DROP ... IF EXISTS needs nothing.
    """
    if not authored:
        return
    names = re.compile(
        r"(?<![\w$.])(?:public\.)?(" + "|".join(map(re.escape, authored)) + r")(?![\w$])",
        re.IGNORECASE,
    )
    created: set[str] = set()
    for file in files:
        for statement in split_statements(file.read()):
            code = code_of(statement)
            if _DROPS_IF_EXISTS.match(code):
                continue
            defines = _CREATES.match(code)
            if defines is not None:
                created.add(defines.group(1).lower())
                # Its own name is no use of it; a PL/pgSQL body is resolved when it runs.
                code = code[defines.end() :]
                if _PLPGSQL.search(code_of(code, literals=False)):
                    code = code_of(code, literals=False)
            for used in names.finditer(code):
                name = used.group(1).lower()
                if name not in created:
                    raise MigrationError(
                        f"{file.path.name} uses {name}, which {authored[name].label} defines:"
                        " function files are installed after the numbered migrations, so on a"
                        f" fresh database {name} does not exist yet when {file.path.name} runs"
                        " (call it only inside a PL/pgSQL function body)"
                    )


def check_history(files: Sequence[MigrationFile], applied: Sequence[AppliedMigration]) -> None:
    """Refuse when an applied migration was removed, renamed or edited since it ran."""
    by_version = {file.version: file for file in files}
    for row in applied:
        file = by_version.get(row.version)
        if file is None:
            raise MigrationError(f"applied migration {row.version:04d}_{row.name} was removed")
        if file.name != row.name:
            raise MigrationError(
                f"applied migration {row.version:04d}_{row.name} was renamed to {file.path.name}"
            )
        if file.checksum != row.checksum:
            raise MigrationError(f"applied migration {file.path.name} was edited after it ran")


async def applied_migrations(conn: AsyncConnection[Any]) -> list[AppliedMigration]:
    """The rows of schema_migrations in version order (empty if the table does not exist)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
        present = await cur.fetchone()
        if present is None or not present["present"]:
            return []
        await cur.execute(
            "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version"
        )
        return [AppliedMigration(**row) for row in await cur.fetchall()]


async def installed_functions(conn: AsyncConnection[Any]) -> dict[str, str]:
    """Each authored file's checksum at its last install, by name (empty before the first)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT to_regclass('schema_function_history') IS NOT NULL AS present")
        present = await cur.fetchone()
        if present is None or not present["present"]:
            return {}
        await cur.execute(
            "SELECT DISTINCT ON (name) name, checksum FROM schema_function_history"
            " ORDER BY name, id DESC"
        )
        return {row["name"]: row["checksum"] for row in await cur.fetchall()}


async def migrate(
    conninfo: str, directory: str | os.PathLike[str] = DEFAULT_DIRECTORY
) -> list[MigrationFile | FunctionFile]:
    """Apply the pending migrations of directory, then install its changed function files.

    Returns what was applied and installed, in that order.
    """
    files = discover_migrations(directory)
    functions = discover_functions(directory)
    check_order(files, authored_functions(functions))
    async with await AsyncConnection.connect(conninfo, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
        try:
            await conn.execute(_CREATE_TABLE)
            await conn.execute(_CREATE_FUNCTION_HISTORY)
            applied = await applied_migrations(conn)
            check_history(files, applied)
            done = {row.version for row in applied}
            pending = [file for file in files if file.version not in done]
            for file in pending:
                await _apply(conn, file)
            installed = await installed_functions(conn)
            changed = [
                file for file in functions if pending or installed.get(file.name) != file.checksum
            ]
            if changed:
                await _install(conn, changed)
            return [*pending, *changed]
        finally:
            # A broken connection has released the session lock already.
            with contextlib.suppress(psycopg.Error):
                await conn.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))


async def _apply(conn: AsyncConnection[Any], file: MigrationFile) -> None:
    log.info("applying migration %s", file.path.name)
    text = file.read()
    try:
        if file.transactional:
            async with conn.transaction():
                await conn.execute(text.encode())
                await conn.execute(_RECORD, (file.version, file.name, file.checksum))
        else:
            for statement in split_statements(text):
                await conn.execute(statement.encode())
            await conn.execute(_RECORD, (file.version, file.name, file.checksum))
    except psycopg.Error as exc:
        raise MigrationError(f"{file.path.name} failed: {exc}") from exc


async def _install(conn: AsyncConnection[Any], functions: Sequence[FunctionFile]) -> None:
    file = functions[0]
    try:
        async with conn.transaction():
            for file in functions:
                log.info("installing functions %s", file.label)
                await conn.execute(file.read().encode())
                await conn.execute(_RECORD_FUNCTIONS, (file.name, file.checksum))
    except psycopg.Error as exc:
        raise MigrationError(f"{file.label} failed: {exc}") from exc


def summary(done: Sequence[MigrationFile | FunctionFile]) -> str:
    """What a migrate run did, as the commands print it."""
    installed = sum(isinstance(file, FunctionFile) for file in done)
    text = f"applied {len(done) - installed} migration(s)"
    return f"{text}, installed {installed} function file(s)" if installed else text


async def snapshot(
    admin_conninfo: str, directory: str | os.PathLike[str] = DEFAULT_DIRECTORY
) -> str:
    """Migrate a scratch database from nothing and return its normalized schema dump."""
    scratch = f"wf_snapshot_{uuid.uuid4().hex[:12]}"
    url = await create_database(admin_conninfo, scratch)
    try:
        await migrate(url, directory)
        return await asyncio.to_thread(dump_schema, url)
    finally:
        await drop_database(admin_conninfo, scratch)


def _resolve_url(explicit: str | None) -> tuple[str, EmbeddedPostgres | None]:
    """The URL to migrate and the embedded cluster started for it (to stop afterwards)."""
    if explicit:
        return explicit, None
    # The configured store is the business of `workflow-mcp migrate`; this low-level entry point
    # knows only $DATABASE_URL and the default data dir.
    url = os.environ.get("DATABASE_URL")
    if url:
        return url, None
    cluster = EmbeddedPostgres(Path(StoreSettings().data_dir) / "pg")
    url = cluster.start()
    return url, (cluster if not cluster.reused else None)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: python -m runtime.store.migrations [up|snapshot] [--database-url URL]."""
    parser = argparse.ArgumentParser(prog="python -m runtime.store.migrations")
    parser.add_argument("command", nargs="?", choices=["up", "snapshot"], default="up")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--directory", type=Path, default=DEFAULT_DIRECTORY)
    parser.add_argument("--output", type=Path, default=None, help="snapshot file to write")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    url, started = _resolve_url(args.database_url)
    try:
        if args.command == "up":
            print(summary(asyncio.run(migrate(url, args.directory))))
        else:
            text = asyncio.run(snapshot(with_database(url, "postgres"), args.directory))
            output = args.output or args.directory / SNAPSHOT_FILE
            output.write_text(text, encoding="utf-8")
            print(f"wrote {output}")
    except MigrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if started is not None:
            started.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
