"""The end-to-end suite drives a real server subprocess (``live_server``, tests/conftest.py)."""

from __future__ import annotations
