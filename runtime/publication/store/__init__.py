"""Storage of the publication domain: each helper takes a connection and never commits.

``QUERIES`` holds the named blocks of ``queries.sql``, loaded once for every row module here.
Importing the package registers the errors the tables' named constraints become.
"""

from __future__ import annotations

from pathlib import Path

from runtime.publication.store import constraint_errors  # noqa: F401 (registers the errors)
from runtime.store import load_queries

QUERIES = load_queries(Path(__file__).with_name("queries.sql"))
