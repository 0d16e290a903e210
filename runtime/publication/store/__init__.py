"""Storage of the publication domain: each helper takes a connection and never commits.

``QUERIES`` holds the named blocks of ``queries.sql``, loaded once for every row module here.
Rows come back as frozen structs. A JSON column the contract types (a binding, its write tasks,
annotations, warnings) decodes into its ``generated.models`` type, so a field renamed in the
contract fails type-checking here too; definition documents and stored receipts stay JSON
objects (the DSL and each tool's output define them, not one contract type).
Importing the package registers the errors the tables' named constraints become.
"""

from __future__ import annotations

from pathlib import Path

from runtime.publication.store import constraint_errors  # noqa: F401 (registers the errors)
from runtime.store import fetch_all, fetch_one, json_param, load_queries

QUERIES = load_queries(Path(__file__).with_name("queries.sql"))

__all__ = ["QUERIES", "fetch_all", "fetch_one", "json_param"]
