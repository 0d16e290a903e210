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
from runtime.store.sqlsplit import split_statements

log = logging.getLogger(__name__)

DEFAULT_DIRECTORY = Path(__file__).resolve().parent.parent.parent / "migrations"
# "wfmigrat" as a bigint: one lock per database for all runners of this service.
ADVISORY_LOCK_KEY = 0x77666D6967726174
_FILE_NAME = re.compile(
    r"^(?P<version>\d{4})_(?P<name>[a-z0-9]+(?:_[a-z0-9]+)*)(?P<nontx>\.nontx)?\.sql$"
)
_NOT_MIGRATIONS = frozenset({SNAPSHOT_FILE})

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
_RECORD = "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)"


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


async def migrate(
    conninfo: str, directory: str | os.PathLike[str] = DEFAULT_DIRECTORY
) -> list[MigrationFile]:
    """Apply the pending migrations of directory to the database; return the ones applied."""
    files = discover_migrations(directory)
    async with await AsyncConnection.connect(conninfo, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
        try:
            await conn.execute(_CREATE_TABLE)
            applied = await applied_migrations(conn)
            check_history(files, applied)
            done = {row.version for row in applied}
            pending = [file for file in files if file.version not in done]
            for file in pending:
                await _apply(conn, file)
            return pending
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
            applied = asyncio.run(migrate(url, args.directory))
            print(f"applied {len(applied)} migration(s)")
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
