"""The committed schema snapshot: pg_dump of a freshly migrated database, normalized.

Normalizing drops what varies between pg_dump versions and runs (comments, SET lines,
``\\restrict`` guards, blank-line runs) so a diff of ``migrations/schema.snapshot.sql`` shows
only real schema changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from runtime.store.embedded import find_bindir

SNAPSHOT_FILE = "schema.snapshot.sql"
SNAPSHOT_HEADER = (
    "-- Schema after all migrations, from `python -m runtime.store.migrations snapshot`.\n"
    "-- Generated: do not edit by hand. Grants and ownership are not included.\n"
)
_NOISE_PREFIXES = ("--", "SET ", "SELECT pg_catalog.set_config(", "\\")


class SchemaDumpError(RuntimeError):
    """pg_dump failed."""


def pg_dump_path() -> str:
    """pg_dump from the server binaries (matching the embedded server), else from PATH."""
    try:
        candidate = find_bindir() / "pg_dump"
        if candidate.is_file():
            return str(candidate)
    except RuntimeError:
        pass
    found = shutil.which("pg_dump")
    if found is None:
        raise SchemaDumpError("pg_dump not found")
    return found


def normalize_dump(text: str) -> str:
    """The dump without comments, SET lines and version noise, blank runs collapsed."""
    kept: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith(_NOISE_PREFIXES):
            continue
        if not line and (not kept or not kept[-1]):
            continue
        kept.append(line)
    while kept and not kept[-1]:
        kept.pop()
    return "\n".join(kept) + "\n"


def dump_schema(conninfo: str) -> str:
    """The normalized schema-only dump of the database at conninfo, with the snapshot header."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    result = subprocess.run(
        [
            pg_dump_path(),
            "--schema-only",
            "--no-owner",
            "--no-privileges",
            f"--dbname={conninfo}",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        raise SchemaDumpError(f"pg_dump failed: {result.stderr.strip()}")
    return SNAPSHOT_HEADER + "\n" + normalize_dump(result.stdout)
