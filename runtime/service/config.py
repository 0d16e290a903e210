"""Service configuration: one YAML file (WORKFLOW_CONFIG) plus environment overrides.

Each domain owns the settings of its section; this module assembles them into one document.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml

from runtime.execution.settings import ServiceExecutionSettings
from runtime.security.settings import SecuritySettings
from runtime.service.environment import apply_environment
from runtime.store.settings import StoreSettings


class ServerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where the HTTP server listens and which browser origins it accepts."""

    host: str = "127.0.0.1"
    port: int = 8787
    allowed_origins: list[str] = msgspec.field(
        default_factory=lambda: ["http://localhost", "http://127.0.0.1"]
    )
    tools_list_page_size: int = 50
    tools_list_ttl_ms: int = 300_000


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


def load_settings(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Load settings from the YAML file at path (or $WORKFLOW_CONFIG) and the environment."""
    environ = os.environ if environ is None else environ
    source = path if path is not None else environ.get("WORKFLOW_CONFIG")
    raw: dict[str, Any] = {}
    if source:
        loaded = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
        raw = loaded if isinstance(loaded, dict) else {}
    database_url = environ.get("DATABASE_URL")
    if database_url:
        # The conventional variable, kept for tooling; WORKFLOW_STORE_DATABASE_URL wins over it.
        apply_environment(raw, Settings, {"WORKFLOW_STORE_DATABASE_URL": database_url})
    return msgspec.convert(apply_environment(raw, Settings, environ), Settings)
