"""URI-template values cannot leave the approved path; compressed bodies decode within the bound."""

from __future__ import annotations

import gzip
import zlib

import pytest

from runtime.binding_reach import EndpointTarget
from runtime.engine.run import EffectFailure
from runtime.engine.run.call_dispatch import expand_template
from runtime.errors import WorkflowError
from runtime.execution.outbound.decoding import BodyDecoder
from runtime.execution.targets import policy_for

pytestmark = pytest.mark.requirement("001:Underlying API And MCP Calls")

DIGEST = "sha256:" + "c" * 64
TEMPLATE = "https://api.example.com/claims/{claimId}/summary"
SUMMARY = EndpointTarget("claims", TEMPLATE, ("GET",), (), DIGEST)
ROOT = EndpointTarget("root", "https://api.example.com/summary", ("GET",), (), DIGEST)


@pytest.mark.parametrize("value", ["..", ".", "%2e%2e", "%2E.", ".%2e", "a/../..", "..\\.."])
def test_a_template_value_with_a_dot_segment_never_reaches_another_path(value: str) -> None:
    uri = expand_template(TEMPLATE, {"claimId": value}, "/do/0/get")
    policy = policy_for([SUMMARY, ROOT], [], None)
    with pytest.raises(WorkflowError) as refused:
        policy.check("GET", uri)
    assert refused.value.code.value == "WORKFLOW_POLICY_DENIED"
    assert "segments" in refused.value.message


@pytest.mark.parametrize("value", ["C-1001", "..a", "a..", "...", "a b", "a/b", "é"])
def test_ordinary_values_stay_one_segment_of_the_target(value: str) -> None:
    uri = expand_template(TEMPLATE, {"claimId": value}, "/do/0/get")
    policy_for([SUMMARY], [], None).check("GET", uri)


def test_a_dot_segment_is_refused_on_the_allowlist_too() -> None:
    policy = policy_for(None, ["https://api.example.com/public/"], None)
    policy.check("GET", "https://api.example.com/public/a")
    with pytest.raises(WorkflowError):
        policy.check("GET", "https://api.example.com/public/../admin")
    with pytest.raises(WorkflowError):
        policy.check("GET", "https://api.example.com/public/%2E%2E/admin")


def test_the_path_is_normalised_before_it_is_matched() -> None:
    policy = policy_for([SUMMARY], [], None)
    # %63 is "c": the same path as /claims/..., so it is the same target.
    policy.check("GET", "https://api.example.com/%63laims/C-1/summary")
    with pytest.raises(WorkflowError):
        policy.check("GET", "https://api.example.com/claims/C-1/summary%2Fx")


BODY = b'{"claim":"C-1001","lines":[' + b",".join(b'"line"' for _ in range(2000)) + b"]}"


def _decode(encoding: str | None, data: bytes, max_bytes: int, chunk: int = 512) -> bytes:
    decoder = BodyDecoder(encoding, max_bytes)
    out = b"".join(decoder.feed(data[i : i + chunk]) for i in range(0, len(data), chunk))
    return out + decoder.finish()


@pytest.mark.parametrize(
    ("encoding", "data"),
    [
        ("gzip", gzip.compress(BODY)),
        ("x-gzip", gzip.compress(BODY)),
        ("deflate", zlib.compress(BODY)),
        ("deflate", zlib.compress(BODY)[2:-4]),  # raw deflate, as some servers send it
        ("gzip, deflate", zlib.compress(gzip.compress(BODY))),
        ("identity", BODY),
        (None, BODY),
    ],
    # Named ids: gzip stamps the time into its bytes, and xdist workers must collect alike.
    ids=["gzip", "x-gzip", "deflate", "raw-deflate", "deflate-of-gzip", "identity", "none"],
)
def test_compressed_bodies_are_decoded(encoding: str | None, data: bytes) -> None:
    assert _decode(encoding, data, 1 << 20) == BODY


def test_a_decompression_bomb_stops_at_the_bound() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))
    assert len(bomb) < 100_000
    with pytest.raises(EffectFailure, match="larger than 1048576 bytes once decompressed"):
        _decode("gzip", bomb, 1 << 20, chunk=65536)


def test_a_body_exactly_at_the_bound_is_kept() -> None:
    assert _decode("gzip", gzip.compress(b"x" * 4096), 4096) == b"x" * 4096
    with pytest.raises(EffectFailure):
        _decode("gzip", gzip.compress(b"x" * 4097), 4096)


def test_corrupt_and_unsupported_encodings_are_clear_errors() -> None:
    with pytest.raises(EffectFailure, match="gzip response is corrupt"):
        _decode("gzip", b"this is not gzip", 1 << 20)
    with pytest.raises(EffectFailure, match="Content-Encoding br is not supported"):
        BodyDecoder("br", 1 << 20)
