"""The individual checks of validate-contracts; each appends failures to a Report."""

from __future__ import annotations
