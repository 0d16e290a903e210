"""Storage helpers of the publication domain: each takes a connection and never commits."""

from __future__ import annotations
