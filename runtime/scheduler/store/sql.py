"""The scheduler's named queries, loaded once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from runtime.store import load_queries

QUERIES_PATH = Path(__file__).resolve().parent.parent / "queries.sql"
QUERIES = load_queries(QUERIES_PATH)


def jsonb(value: Any) -> Jsonb | None:
    """A jsonb parameter; None stays SQL NULL."""
    return None if value is None else Jsonb(value)
