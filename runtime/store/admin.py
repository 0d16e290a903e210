"""Cluster-level chores: derive per-database URLs, create and drop databases."""

from __future__ import annotations

from psycopg import AsyncConnection, sql
from psycopg.conninfo import make_conninfo


def with_database(conninfo: str, database: str) -> str:
    """The same server and credentials as conninfo, pointed at another database."""
    return make_conninfo(conninfo, dbname=database)


async def create_database(
    admin_conninfo: str, name: str, *, template: str | None = None, file_copy: bool = False
) -> str:
    """Create database name (optionally as a copy of template) and return its conninfo.

    file_copy asks PostgreSQL 15+ to copy files instead of WAL-logging every block, which is
    much faster for small templates on a test cluster.
    """
    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    async with await AsyncConnection.connect(admin_conninfo, autocommit=True) as conn:
        if template is not None:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
            if file_copy and conn.info.server_version >= 150000:
                statement += sql.SQL(" STRATEGY FILE_COPY")
        await conn.execute(statement)
    return with_database(admin_conninfo, name)


async def drop_database(admin_conninfo: str, name: str) -> None:
    """Drop database name if it exists, disconnecting any sessions still on it."""
    async with await AsyncConnection.connect(admin_conninfo, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
