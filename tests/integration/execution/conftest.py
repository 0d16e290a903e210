"""Fixtures of the execution tests: a served token endpoint beside a checking Gateway."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from runtime.security.devtools import DevIdentity
from tests.support.service_tokens import GatewayAndEndpointFactory, serve_gateway_and_endpoint


@pytest.fixture
def gateway_and_endpoint(dev_identity: DevIdentity, tmp_path: Path) -> GatewayAndEndpointFactory:
    """serve_gateway_and_endpoint(**options) for the test's dev identity and directory."""
    return functools.partial(serve_gateway_and_endpoint, dev_identity, tmp_path)
