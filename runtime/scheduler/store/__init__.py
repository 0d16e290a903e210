"""The scheduler's store helpers: every function takes a connection and never commits."""

from __future__ import annotations
