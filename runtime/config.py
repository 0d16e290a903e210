"""Service configuration: one YAML file (WORKFLOW_CONFIG) plus environment overrides."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import yaml

from runtime.execution.settings import ServiceExecutionSettings
from runtime.scheduler.capacity import CapacitySettings
from runtime.security.settings import SecuritySettings

REPO_ROOT = Path(__file__).resolve().parent.parent


class ServerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where the HTTP server listens and which browser origins it accepts."""

    host: str = "127.0.0.1"
    port: int = 8787
    allowed_origins: list[str] = msgspec.field(
        default_factory=lambda: ["http://localhost", "http://127.0.0.1"]
    )
    tools_list_page_size: int = 50
    tools_list_ttl_ms: int = 300_000


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


class DestinationSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Workflow's own policy for endpoint targets a binding may reach (None: any)."""

    allowed_schemes: list[str] = msgspec.field(default_factory=lambda: ["https"])
    allowed_hosts: list[str] | None = None
    allowed_ports: list[int] | None = None


class PublicationSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Binding publication: the destination policy and the receipt retention sweep."""

    destinations: DestinationSettings = msgspec.field(default_factory=DestinationSettings)
    receipt_sweep_interval_s: float = 3600.0


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The whole service configuration."""

    server: ServerSettings = msgspec.field(default_factory=ServerSettings)
    store: StoreSettings = msgspec.field(default_factory=StoreSettings)
    security: SecuritySettings = msgspec.field(default_factory=SecuritySettings)
    publication: PublicationSettings = msgspec.field(default_factory=PublicationSettings)
    # Durable execution in the service process (an in-process executor, outbound settings).
    execution: ServiceExecutionSettings = msgspec.field(default_factory=ServiceExecutionSettings)
    # Deadline-aware admission (load shedding) from measured executor capacity.
    capacity: CapacitySettings = msgspec.field(default_factory=CapacitySettings)


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load settings from the YAML file at path (or $WORKFLOW_CONFIG) and the environment."""
    source = path if path is not None else os.environ.get("WORKFLOW_CONFIG")
    raw: dict[str, Any] = {}
    if source:
        loaded = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
        raw = loaded if isinstance(loaded, dict) else {}
    settings = msgspec.convert(raw, Settings)
    database_url = os.environ.get("DATABASE_URL")
    if database_url:
        settings.store.database_url = database_url
    return settings
