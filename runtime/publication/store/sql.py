"""The publication domain's named queries, loaded once."""

from __future__ import annotations

from pathlib import Path

from runtime.store import load_queries

QUERIES = load_queries(Path(__file__).resolve().parent.parent / "queries.sql")
