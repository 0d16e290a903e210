"""The long-lived collaborators a request needs, built once per process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtime.config import Settings
    from runtime.security import Authenticator, Keyring
    from runtime.store import Database


@dataclass
class Services:
    """Settings, the database, the authenticator and the sealing keyring."""

    settings: Settings
    database: Database
    authenticator: Authenticator
    keyring: Keyring
