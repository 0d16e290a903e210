"""The one place the service touches psycopg below its public API.

`fetch_one_built_then` (runtime.store.rows) sends two statements in one round trip with a Sync
between them, so the first commits before the second starts. psycopg's public
`Pipeline.sync()` sends the Sync and waits for the first result (a round trip of its own);
queueing the Sync alone takes the pipeline's internal `_enqueue_sync`. psycopg is pinned in
pyproject.toml, and tests/unit/test_pinned_internals.py fails, naming this module, when the
installed version differs from the pin or no longer has what is used here.
"""

from __future__ import annotations

from psycopg import AsyncPipeline

# What this module relies on, checked against the installed psycopg by the test above.
PRIVATE_NAMES = {"AsyncPipeline": ("_enqueue_sync",)}


def queue_sync(pipeline: AsyncPipeline) -> None:
    """Queue a Sync in the pipeline without waiting for the results before it."""
    pipeline._enqueue_sync()
