"""Settings of the store: where PostgreSQL is and how the connection pool is sized."""

from __future__ import annotations

from pathlib import Path

import msgspec

# The repository root: the development data dir lives under it unless configured elsewhere.
REPO_ROOT = Path(__file__).resolve().parents[2]


class StoreSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How to reach PostgreSQL; with no URL an embedded cluster is started under data_dir."""

    database_url: str | None = None
    data_dir: str = str(REPO_ROOT / ".data")
    pool_min_size: int = 2
    pool_max_size: int = 16
    # How long a request waits for a connection before it answers "unavailable" (retryable).
    pool_timeout_s: float = 5.0
    # The service SETs ROLE to this after connecting; None keeps the login role.
    runtime_role: str | None = "workflow_runtime"
