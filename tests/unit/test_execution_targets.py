"""The outbound policy refuses what it cannot judge, with a typed error, never a crash."""

from __future__ import annotations

import pytest

from runtime.errors import WorkflowError
from runtime.execution.targets import HttpPolicy
from runtime.publication.bindings.endpoint_coverage import uri_covered

POLICY = HttpPolicy(targets=None, allowlist=("https://api.example.com/",), environment=None)


@pytest.mark.parametrize("port", ["432100", "0", "http", "-1"])
def test_a_uri_whose_port_is_not_a_port_is_refused_by_policy_before_anything_is_sent(
    port: str,
) -> None:
    # A template value can put anything after the colon; urlsplit raises on reading it.
    with pytest.raises(WorkflowError) as refused:
        POLICY.check("get", f"https://api.example.com:{port}/orders")
    assert refused.value.code == "WORKFLOW_POLICY_DENIED"
    assert "port" in refused.value.message


def test_a_redirect_to_a_uri_whose_port_is_not_a_port_leaves_the_origin() -> None:
    assert not POLICY.same_origin("https://api.example.com/a", "https://api.example.com:99999/b")


def test_a_call_whose_port_is_not_a_port_is_covered_by_no_endpoint_target() -> None:
    assert not uri_covered("https://api.example.com:99999/a", "https://api.example.com/a")
