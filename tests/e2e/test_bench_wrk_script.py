"""bench/peers/wrk_invoke.lua under the real wrk, for a second, against a stub MCP server.

The stub answers each call by its number: the first attempt of every fourth call is refused
(WORKFLOW_CAPACITY_EXHAUSTED), and other calls get an HTTP 503 without an id, an isError
without a code, a wrong decision or a JSON-RPC error; the rest the right decision after 50 ms,
except call 2, which waits out the phase.
So the script's classes, its per-class timing and both clients can be checked against what the
stub saw. Skipped where wrk is not installed (bench-peers installs it: `apt-get install wrk`).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from typing import Any

import pytest

from bench.peers import wrk

WRK = shutil.which("wrk")
pytestmark = pytest.mark.skipif(
    WRK is None, reason="wrk is not installed (Debian: apt-get install wrk)"
)
OK_DELAY_S = 0.05
PHASE_S = 1


class Stub:
    """A keep-alive HTTP/1.1 server answering tools/call by call number; what it answered."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self.refused: set[str] = set()
        self.answered: Counter[str] = Counter()

    def answer(self, message: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
        arguments = message["params"]["arguments"]
        decide = arguments.get("input", arguments)
        request_id, score = decide["requestId"], decide["creditScore"]
        n = int(request_id.rsplit("-", 1)[1])
        self.attempts[request_id] += 1
        rpc_id = message["id"]

        def result(structured: dict[str, Any], is_error: bool = False) -> dict[str, Any]:
            text = [{"type": "text", "text": json.dumps(structured)}]
            body = {"content": text, "structuredContent": structured, "isError": is_error}
            return {"jsonrpc": "2.0", "id": rpc_id, "result": body}

        if n % 4 == 1 and self.attempts[request_id] == 1:
            self.refused.add(request_id)
            refusal = {"error": {"code": "WORKFLOW_CAPACITY_EXHAUSTED", "retryAfterMs": 100}}
            return 200, result(refusal, True), "WORKFLOW_CAPACITY_EXHAUSTED"
        if n % 10 == 5:
            return 503, {"detail": "busy"}, "HTTP_503"
        if n % 10 == 7:
            return 200, result({"message": "boom"}, True), "TOOL_ERROR"
        if n % 10 == 9:
            return (
                200,
                result({"output": {"decision": "maybe", "requestId": request_id}}),
                ("WRONG_OUTPUT"),
            )
        if n % 20 == 3:
            error = {"code": -32602, "message": "bad"}
            return 200, {"jsonrpc": "2.0", "id": rpc_id, "error": error}, "RPC_-32602"
        decision = "approve" if score >= 650 else "decline"
        output = {"output": {"decision": decision, "requestId": request_id}, "status": "done"}
        return 200, result(output), "OK"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                status, body, outcome = self.answer(json.loads(await reader.readexactly(length)))
                if outcome == "OK":
                    slow = json.loads(body["result"]["content"][0]["text"])["output"]
                    long = slow["requestId"].endswith("-2")
                    await asyncio.sleep(PHASE_S + 1.0 if long else OK_DELAY_S)
                self.answered[outcome] += 1
                data = json.dumps(body).encode()
                writer.write(
                    b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                    b"\r\n%s" % (status, len(data), data)
                )
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _run(policy: str, era: str = wrk.MODERN) -> tuple[Stub, dict[str, Any]]:
    stub = Stub()
    server = await asyncio.start_server(stub.serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    auths = [{"Authorization": "Bearer a"}, {"Authorization": "Bearer b"}]
    sent = wrk.request(url, "workflow_invoke", auths, era, lambda i: {"ref": "t", "input": i})
    async with server:
        assert WRK is not None
        summary = await wrk.run(WRK, url, sent, policy, 4, PHASE_S, "phase-")
    return stub, summary


async def test_every_answer_is_classified_and_oks_and_refusals_are_timed_apart() -> None:
    stub, summary = await _run("fresh")
    assert set(summary["refusedByCode"]) == {"WORKFLOW_CAPACITY_EXHAUSTED"}
    assert set(summary["otherFailures"]) == {"TOOL_ERROR", "WRONG_OUTPUT", "RPC_-32602"}
    assert summary["http5xx"] == {"HTTP_503": summary["wrk"]["unmatched"]}
    assert summary["ok"] > 0 and summary["transportErrors"] == {}
    # wrk reads all but the answers still in flight when it stops (one per connection).
    counted = {"OK": summary["ok"], **summary["refusedByCode"], **summary["http5xx"]}
    counted |= summary["otherFailures"]
    for outcome, served in stub.answered.items():
        assert served - 4 <= counted[outcome] <= served, outcome
    assert summary["wrk"]["unanswered"] <= 4
    sent = summary["wrk"]["sent"]
    assert sent - 4 <= stub.attempts.total() <= sent
    # Call 2 was still waiting when wrk stopped: timed by the age it had reached. So are the
    # calls the 503 pages answered without naming them (wrk cannot tell which they were).
    waiting = summary["inFlight"]
    assert waiting["n"] == summary["wrk"]["unanswered"] + summary["wrk"]["unmatched"]
    assert waiting["max"] >= PHASE_S * 1000 * 0.7 and not summary["wrk"]["inFlightExact"]
    assert summary["admittedOrWaiting"]["max"] == waiting["max"]
    assert summary["admitted"]["max"] < waiting["max"]
    assert summary["admitted"]["p50"] >= OK_DELAY_S * 1000
    assert summary["refusal"]["p50"] < OK_DELAY_S * 1000 / 2
    assert (
        summary["refusalsWithRetryAfter"] == summary["refusedByCode"]["WORKFLOW_CAPACITY_EXHAUSTED"]
    )
    # A fresh client never sends a call twice.
    assert max(stub.attempts.values()) == 1 and summary["wrk"]["resent"] == 0


async def test_a_resending_client_sends_each_refused_call_again_with_its_request_id() -> None:
    stub, summary = await _run("resend", wrk.LEGACY_VERSION)
    again = {request_id for request_id, n in stub.attempts.items() if n > 1}
    assert again and again <= stub.refused and max(stub.attempts.values()) == 2
    assert summary["wrk"]["resent"] == len(again)
    # Only the refusals read in the last moment may not have been sent again yet.
    refused = summary["refusedByCode"]["WORKFLOW_CAPACITY_EXHAUSTED"]
    assert refused - 4 <= len(again) <= refused
