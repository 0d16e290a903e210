"""Outbound calls of a run: the wire (calls), the client and its connections (transport), the
credential a call carries (auth), response decoding and the endpoint label of the metrics.

Which destinations a run may reach is decided before any of this (runtime.execution.targets,
runtime.addresses); the effect ledger around a call is runtime.execution.effects.
"""

from __future__ import annotations

from runtime.execution.outbound.calls import (
    GatewayUnauthorized,
    encode_body,
    send_http,
    send_mcp,
)

__all__ = ["GatewayUnauthorized", "encode_body", "send_http", "send_mcp"]
