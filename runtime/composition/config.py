"""Loading the service configuration: one YAML file (WORKFLOW_CONFIG) plus the environment.

The document's structure is runtime/settings.py (each domain owns its section), or a subclass
that adds a client's section (the command line loads gateway.settings.GatewayConfig); this
module reads it and applies WORKFLOW_<SECTION>_<KEY> variables over it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, overload

import msgspec
import yaml

from runtime.composition.environment import apply_environment
from runtime.settings import Settings

__all__ = ["Settings", "load_settings"]

Document = TypeVar("Document", bound=Settings)


@overload
def load_settings(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Settings: ...


@overload
def load_settings(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    document: type[Document],
) -> Document: ...


def load_settings(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    document: type[Settings] = Settings,
) -> Settings:
    """Load the document from the YAML file at path (or $WORKFLOW_CONFIG) and the environment."""
    environ = os.environ if environ is None else environ
    source = path if path is not None else environ.get("WORKFLOW_CONFIG")
    raw: dict[str, Any] = {}
    if source:
        loaded = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
        raw = loaded if isinstance(loaded, dict) else {}
    database_url = environ.get("DATABASE_URL")
    if database_url:
        # The conventional variable, kept for tooling; WORKFLOW_STORE_DATABASE_URL wins over it.
        apply_environment(raw, document, {"WORKFLOW_STORE_DATABASE_URL": database_url})
    return msgspec.convert(apply_environment(raw, document, environ), document)
