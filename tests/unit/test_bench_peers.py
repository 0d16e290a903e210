"""The pure pieces of bench/peers: request bodies, answer checks, quantiles, phase summaries."""

from __future__ import annotations

import asyncio
import gc
import json
import math

import pytest

from bench.harness import machine_busy_seconds
from bench.peers import report
from bench.peers.driver import (
    Connection,
    Sample,
    collector_paused,
    latency_summary,
    outcome_of,
    quantile,
    request_head,
    summarize,
    tool_call_caller,
)


def test_the_drivers_collector_is_paused_for_a_phase_and_back_after_it_even_on_failure() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a phase failed")
    assert gc.isenabled()


def test_prebuilt_body_is_the_tools_call_with_this_calls_score_and_request_id() -> None:
    caller = tool_call_caller("decide", {"Authorization": "Bearer u"})
    message = json.loads(caller.body(612, "run-1-7"))
    assert message["params"]["name"] == "decide"
    assert message["params"]["arguments"] == {"creditScore": 612, "requestId": "run-1-7"}
    assert caller.headers["Mcp-Name"] == "decide"
    assert caller.headers["Authorization"] == "Bearer u"


def test_wrapped_body_carries_the_decide_input_inside_workflow_invoke_arguments() -> None:
    caller = tool_call_caller("workflow_invoke", {}, lambda i: {"stableToolRef": "t", "input": i})
    arguments = json.loads(caller.body(700, "r"))["params"]["arguments"]
    assert arguments == {"stableToolRef": "t", "input": {"creditScore": 700, "requestId": "r"}}


def _answer(structured: dict[str, object], is_error: bool = False) -> tuple[int, bytes]:
    result = {"isError": is_error, "structuredContent": structured, "content": []}
    return 200, json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()


def test_outcome_checks_the_decision_bare_or_wrapped_in_output() -> None:
    bare = {"decision": "approve", "requestId": "r"}
    assert outcome_of(*_answer(bare), 700, "r") == ("OK", None)
    assert outcome_of(*_answer({"output": bare, "status": "completed"}), 700, "r") == ("OK", None)
    assert outcome_of(*_answer(bare), 600, "r")[0] == "WRONG_OUTPUT"


def test_outcome_of_a_refusal_is_its_code_with_retry_after() -> None:
    refusal = {"error": {"code": "WORKFLOW_CAPACITY_EXHAUSTED", "retryAfterMs": 250}}
    assert outcome_of(*_answer(refusal, is_error=True), 700, "r") == (
        "WORKFLOW_CAPACITY_EXHAUSTED",
        250,
    )
    assert outcome_of(503, b"{}", 700, "r")[0] == "HTTP_503"


def test_quantile_is_nearest_rank_in_ms() -> None:
    ordered = [i / 1000 for i in range(1, 101)]
    assert quantile(ordered, 0.5) == 51.0
    assert quantile(ordered, 0.99) == 99.0
    assert math.isnan(quantile([], 0.5))
    assert latency_summary([0.002, 0.001]) == {
        "n": 2, "p50": 1.0, "p95": 2.0, "p99": 2.0, "max": 2.0,
    }  # fmt: skip


def test_summary_keeps_transport_errors_5xx_and_refusals_apart() -> None:
    samples = [
        Sample(0.0, 0.010, "OK"),
        Sample(0.0, 0.020, "OK"),
        Sample(0.0, 0.001, "WORKFLOW_CAPACITY_EXHAUSTED", 100),
        Sample(0.0, 0.001, "WORKFLOW_CAPACITY_EXHAUSTED"),
        Sample(0.0, 0.5, "TRANSPORT_ReadError"),
        Sample(0.0, 0.5, "HTTP_502"),
        Sample(0.0, 15.0, "TIMEOUT_ReadTimeout"),
    ]
    summary = summarize(samples, 2.0)
    assert summary["ok"] == 2 and summary["okPerS"] == 1.0
    assert summary["refusedByCode"] == {"WORKFLOW_CAPACITY_EXHAUSTED": 2}
    assert summary["refusalsWithRetryAfter"] == 1
    assert summary["transportErrors"] == {"TRANSPORT_ReadError": 1}
    assert summary["http5xx"] == {"HTTP_502": 1}
    assert summary["otherFailures"] == {"TIMEOUT_ReadTimeout": 1}
    assert summary["admitted"]["n"] == 2


async def test_the_raw_connection_reads_length_and_chunked_bodies_and_reuses_itself() -> None:
    answers = [
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    ]
    accepted = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        for answer in answers:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            writer.write(answer)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    host, _, head = request_head(f"http://127.0.0.1:{port}/mcp", {"X-A": "1"})
    assert head.startswith(b"POST /mcp HTTP/1.1\r\n") and b"X-A: 1\r\n" in head
    connection = Connection(host, port)
    async with server:
        assert await connection.post(head, b"{}") == (200, b"ok")
        assert await connection.post(head, b"{}") == (200, b"abc")
    connection.close()
    assert accepted == 1


def _phase(phase: str, samples: list[Sample], window: float, **extra: object) -> dict[str, object]:
    return {"layout": "one-tool", "target": "ours-direct", "phase": phase, **extra} | summarize(
        samples, window, window
    )


def test_overload_pairs_judge_each_round_against_its_own_peak_and_stay_out_of_the_table(
    capsys: object,
) -> None:
    def loop(ok: int, refused: int = 0, errors: int = 0) -> list[Sample]:
        return (
            [Sample(0.0, 0.01, "OK")] * ok
            + [Sample(0.0, 0.002, "WORKFLOW_CAPACITY_EXHAUSTED", 50)] * refused
            + [Sample(0.0, 0.5, "TRANSPORT_ReadError")] * errors
        )

    rounds = [
        {
            "peak": _phase("p", loop(10), 1.0),
            "overload": _phase("o", loop(9, 12), 1.0, offeredPerS=20),
        },
        {
            "peak": _phase("p", loop(10), 1.0),
            "overload": _phase("o", loop(7, 14, 1), 1.0, offeredPerS=20),
        },
        {
            "peak": _phase("p", loop(8), 1.0),
            "overload": _phase("o", loop(8, 9), 1.0, offeredPerS=16),
        },
    ]
    pairs = report.overload_pairs("one-tool", "ours-direct", 50, rounds)
    assert pairs["ratios"] == [0.9, 0.7, 1.0]
    assert pairs["medianRatio"] == 0.9
    closed = _phase("closed c=10", loop(12), 1.0, callers=10)
    phases = [closed, pairs]
    assert report.ratios(phases)["ours-direct overload pairs medianRatio"] == 0.9
    row = report._row(phases, "one-tool", "ours-direct")
    # One loop cell (the closed loop), and the rounds' transport error counted.
    assert row == "| one-tool | ours-direct | - | - | - | - | 12 (10/10) | 1/0 |"


def test_the_machine_cost_of_an_ok_call_counts_the_refusals_of_its_phase() -> None:
    # 20 calls of which 10 admitted, 1.5 ms of the machine each: 3 ms per admitted call.
    assert report.machine_ms_per_ok({"machineCpuMsPerCall": 1.5, "calls": 20, "ok": 10}) == 3.0
    assert report.machine_ms_per_ok({"machineCpuMsPerCall": 1.5, "calls": 20, "ok": 0}) is None
    assert report.machine_ms_per_ok({"calls": 20, "ok": 10}) is None


def test_the_machine_meter_counts_busy_cpu_time_and_never_goes_back() -> None:
    first = machine_busy_seconds()
    sum(range(2_000_000))
    assert machine_busy_seconds() >= first > 0
