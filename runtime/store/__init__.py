"""PostgreSQL store: pool and transactions, migrations, named queries, rows, embedded cluster.

The launcher and the migration runner are imported lazily so that
``python -m runtime.store.embedded`` and ``python -m runtime.store.migrations`` do not import
their own module a second time through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runtime.store.database import Connection, Database, PerDatabase
from runtime.store.errors import (
    StoreUnavailable,
    is_connection_error,
    register_constraint_error,
    retry_on_connection_error,
    translate_error,
    wrap_errors,
)
from runtime.store.queries import Queries, QueryFileError, load_queries
from runtime.store.rows import (
    fetch_all,
    fetch_built,
    fetch_one,
    fetch_one_built,
    fetch_one_built_then,
    json_param,
)

if TYPE_CHECKING:
    from runtime.store.embedded import EmbeddedPostgres, EmbeddedPostgresError
    from runtime.store.migrations import MigrationError, migrate

_LAZY = {
    "EmbeddedPostgres": "runtime.store.embedded",
    "EmbeddedPostgresError": "runtime.store.embedded",
    "MigrationError": "runtime.store.migrations",
    "migrate": "runtime.store.migrations",
}

__all__ = [
    "Connection",
    "Database",
    "EmbeddedPostgres",
    "EmbeddedPostgresError",
    "MigrationError",
    "PerDatabase",
    "Queries",
    "QueryFileError",
    "StoreUnavailable",
    "fetch_all",
    "fetch_built",
    "fetch_one",
    "fetch_one_built",
    "fetch_one_built_then",
    "is_connection_error",
    "json_param",
    "load_queries",
    "migrate",
    "register_constraint_error",
    "retry_on_connection_error",
    "translate_error",
    "wrap_errors",
]


def __getattr__(name: str) -> Any:
    """Import the launcher and migration names on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
