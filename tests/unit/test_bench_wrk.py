"""The pure pieces of bench-peers' wrk phases: requests, config, summary, targets, the table."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.peers import report, wrk
from bench.peers.driver import tool_call_caller
from bench.peers.run import FULL, Bench

URL = "http://127.0.0.1:8123/mcp"


def _wrap(decide_input: dict[str, Any]) -> dict[str, Any]:
    return {"stableToolRef": "t", "input": decide_input}


def _split(rendered: str) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    head, _, body = rendered.partition("\r\n\r\n")
    line, *fields = head.split("\r\n")
    headers = dict(field.split(": ", 1) for field in fields)
    assert int(headers.pop("Content-Length")) == len(body.encode())
    return line.split(" "), headers, json.loads(body)


def test_the_modern_request_is_the_drivers_call_with_the_scripts_own_json_rpc_id() -> None:
    auths = [{"Authorization": "Bearer u0"}, {"Authorization": "Bearer u1"}]
    sent = wrk.request(URL, "workflow_invoke", auths, wrk.MODERN, _wrap)
    line, headers, message = _split(sent.render(1, 7, 612, "run-3-7"))
    caller = tool_call_caller("workflow_invoke", auths[1], _wrap)
    assert line == ["POST", "/mcp", "HTTP/1.1"]
    assert headers == {"Host": "127.0.0.1:8123", **caller.headers}
    assert message == {**json.loads(caller.body(612, "run-3-7")), "id": "wrk-7"}
    # Users round-robin by head: the first head carries the first bearer.
    assert _split(sent.render(0, 8, 600, "r"))[1]["Authorization"] == "Bearer u0"


def test_the_legacy_request_has_no_mcp_headers_and_no_meta() -> None:
    sent = wrk.request(URL, "decide", [{"Authorization": "Bearer u"}], wrk.LEGACY_VERSION)
    _, headers, message = _split(sent.render(0, 1, 700, "r-1"))
    assert headers["MCP-Protocol-Version"] == "2025-11-25"
    assert "Mcp-Method" not in headers and "Mcp-Name" not in headers
    assert message["params"] == {
        "name": "decide", "arguments": {"creditScore": 700, "requestId": "r-1"},
    }  # fmt: skip


def test_lua_strings_escape_quotes_backslashes_and_every_byte_outside_printable_ascii() -> None:
    assert wrk.lua_string('a"b\\c\r\n\u00e9') == '"a\\034b\\092c\\013\\010\\195\\169"'
    assert wrk.lua_string("12") == '"12"'


def test_the_config_names_the_policy_prefix_output_heads_and_body_slices() -> None:
    sent = wrk.Request(("POST / HTTP/1.1\r\n",), ('{"id":"wrk-', '","n":', ',"r":"', '"}'))
    config = wrk.config_lua("resend", sent, "run-1-", Path("/tmp/out.json"))
    assert config.startswith("return {\n") and config.endswith("}\n")
    assert 'policy = "resend"' in config and 'prefix = "run-1-"' in config
    assert 'out = "/tmp/out.json"' in config
    assert 'heads = { "POST / HTTP/1.1\\013\\010" }' in config
    assert 'body = { "{\\034id\\034:\\034wrk-", ' in config
    with pytest.raises(ValueError, match="policy"):
        wrk.config_lua("polite", sent, "run-1-", Path("/tmp/out.json"))


def test_wrk_runs_one_thread_c_connections_whole_seconds_and_the_call_timeout() -> None:
    argv = wrk.command("/usr/bin/wrk", URL, 200, 15, Path("/tmp/c.lua"))
    assert argv[:6] == ["/usr/bin/wrk", "-t1", "-c200", "-d15s", "--timeout", "15s"]
    assert argv[6:] == ["-s", str(wrk.SCRIPT), URL, "--", "/tmp/c.lua"]
    assert wrk.SCRIPT.name == "wrk_invoke.lua" and wrk.SCRIPT.is_file()


def _raw(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "durationUs": 2_000_000,
        "requests": 13,
        "threads": 1,
        "errors": {"connect": 0, "read": 2, "write": 0, "status": 1, "timeout": 1},
        "histogramUs": {"p50": 9000, "p99": 30000, "max": 31000, "mean": 8000},
        "sent": 16,
        "answered": 13,
        "resent": 4,
        "unmatched": 1,
        "retryAfter": 4,
        "outcomes": {
            "OK": 6, "WORKFLOW_CAPACITY_EXHAUSTED": 4, "WORKFLOW_RATE_LIMITED": 1,
            "HTTP_503": 1, "TOOL_ERROR": 1,
        },
        "examples": {"HTTP_503": "busy", "TOOL_ERROR": "boom"},
        "okUs": [10_000, 20_000, 30_000, 40_000, 50_000, 60_000],
        "refusedUs": [1_000, 2_000, 3_000, 4_000, 5_000],
        "inFlightUs": [0, 70_000, 80_000],
    }  # fmt: skip
    return raw | changes


def test_the_scripts_summary_is_read_back_and_a_broken_one_is_refused() -> None:
    assert wrk.parse_summary(json.dumps(_raw())) == _raw()
    with pytest.raises(ValueError, match="okUs"):
        wrk.parse_summary(json.dumps(_raw(okUs={"1": 2})))
    with pytest.raises(ValueError, match="durationUs"):
        wrk.parse_summary(json.dumps(_raw(durationUs=0)))
    with pytest.raises(ValueError):
        wrk.parse_summary('{"durationUs": 1')
    with pytest.raises(ValueError, match="object"):
        wrk.parse_summary("[]")


def test_a_phase_counts_refusals_failures_and_lost_requests_apart_and_times_each_kind() -> None:
    summary = wrk.summarize(_raw(), 2.0)
    assert summary["calls"] == 13 and summary["ok"] == 6
    assert summary["okPerS"] == summary["okPerSWall"] == 3.0
    assert summary["elapsedS"] == 2.0 and summary["windowS"] == 2.0
    refused = {"WORKFLOW_CAPACITY_EXHAUSTED": 4, "WORKFLOW_RATE_LIMITED": 1}
    assert summary["refusedByCode"] == refused
    assert summary["refusalsWithRetryAfter"] == 4
    assert summary["http5xx"] == {"HTTP_503": 1}
    assert summary["otherFailures"] == {"TOOL_ERROR": 1}
    assert summary["transportErrors"] == {"TRANSPORT_ReadError": 2}
    # Microseconds in, milliseconds out, nearest rank as every other phase's.
    assert summary["admitted"] == {"n": 6, "p50": 30.0, "p95": 60.0, "p99": 60.0, "max": 60.0}
    assert summary["refusal"]["p50"] == 3.0 and summary["refusal"]["n"] == 5
    # The calls wrk dropped at the end, at the age they had reached, beside the OK answers.
    assert summary["inFlight"] == {"n": 3, "p50": 70.0, "p95": 80.0, "p99": 80.0, "max": 80.0}
    assert summary["admittedOrWaiting"]["n"] == 9
    assert summary["admittedOrWaiting"]["p99"] == 80.0
    # A transport error and an answer naming no request left requests that count as in flight.
    assert summary["wrk"]["inFlightExact"] is False
    clean = wrk.summarize(_raw(unmatched=0, errors={"read": 0, "status": 0, "timeout": 0}), 2.0)
    assert clean["wrk"]["inFlightExact"] is True
    assert summary["wrk"]["unanswered"] == 3 and summary["wrk"]["resent"] == 4
    assert summary["wrk"]["timeouts"] == 1 and summary["wrk"]["unmatched"] == 1
    assert summary["examples"] == {"HTTP_503": "busy", "TOOL_ERROR": "boom"}


def test_a_phase_without_an_admitted_call_has_no_latency() -> None:
    raw = _raw(outcomes={"WORKFLOW_CAPACITY_EXHAUSTED": 5}, okUs=[], inFlightUs=[])
    summary = wrk.summarize(raw, 2.0)
    assert summary["ok"] == 0 and summary["okPerS"] == 0.0
    assert summary["admitted"]["n"] == 0 and math.isnan(summary["admitted"]["p99"])
    assert summary["admittedOrWaiting"]["n"] == 0


def _phase(
    target: str, policy: str, callers: int, ok_per_s: float, p99: float = 500.0,
    era: str = wrk.MODERN, server_ms: float = 2.0,
) -> dict[str, Any]:  # fmt: skip
    return {
        "layout": "wrk", "target": target, "phase": wrk.phase_name(policy, callers, era),
        "policy": policy, "callers": callers, "era": era, "okPerS": ok_per_s, "ok": 100,
        "calls": 150, "serverCpuMsPerCall": server_ms, "windowS": 5.0,
        "admitted": {"n": 100, "p50": p99 / 2, "p99": p99},
        "admittedOrWaiting": {"n": 120, "p50": p99 / 2, "p99": p99},
        "refusedByCode": {"WORKFLOW_CAPACITY_EXHAUSTED": 50}, "transportErrors": {},
        "http5xx": {},
    }  # fmt: skip


def _judged(targets: list[dict[str, Any]]) -> dict[str, tuple[float | None, bool | None]]:
    return {t["target"]: (t["value"], t["holds"]) for t in targets}


def test_the_targets_judge_overload_against_c50_the_peer_and_the_eras_per_client() -> None:
    phases = [
        _phase("ours-direct", "resend", 50, 300.0),
        _phase("ours-direct", "resend", 50, 297.0, era=wrk.LEGACY_VERSION, server_ms=2.08),
        _phase("ours-direct", "resend", 200, 280.0, p99=1500.0),
        _phase("ours-direct", "resend", 400, 260.0, p99=2100.0),
        _phase("ours-direct", "fresh", 50, 290.0),
        _phase("ours-direct", "fresh", 50, 280.0, era=wrk.LEGACY_VERSION, server_ms=2.2),
        _phase("ours-direct", "fresh", 200, 70.0, p99=900.0),
        _phase("dbos", "fresh", 50, 95.0),
        _phase("dbos", "fresh", 200, 80.0),
        # Another layout's phases never count.
        {**_phase("ours-direct", "fresh", 400, 1.0), "layout": "one-tool"},
    ]
    judged = _judged(report.wrk_targets(phases))
    assert judged == {
        "resend c=200 keeps >= 90% of c=50's goodput": (0.93, True),
        "resend c=200 admitted p99 < 2000 ms": (1500.0, True),
        "resend c=400 keeps >= 90% of c=50's goodput": (0.87, False),
        "resend c=400 admitted p99 < 2000 ms": (2100.0, False),
        "resend c=50 >= 3x the peer's goodput": (3.16, True),
        "resend c=50: 2025-11-25 costs the server within 5% of 2026-07-28 per OK call": (
            1.04, True,
        ),
        "fresh c=200 keeps >= 90% of c=50's goodput": (0.24, False),
        "fresh c=200 admitted p99 < 2000 ms": (900.0, True),
        "fresh c=50 >= 3x the peer's goodput": (3.05, True),
        "fresh c=50: 2025-11-25 costs the server within 5% of 2026-07-28 per OK call": (
            1.1, False,
        ),
    }  # fmt: skip
    assert report.wrk_over_peer(phases) == {
        "resend c=50": 3.16, "resend c=200": 3.5, "fresh c=50": 3.05, "fresh c=200": 0.88,
    }  # fmt: skip


def test_without_the_peers_wrk_phase_the_drivers_figure_is_used_and_named() -> None:
    phases = [_phase("ours-direct", "resend", 50, 300.0)]
    (fallback,) = report.wrk_targets(phases, peer_fallback=120.0)
    assert (fallback["value"], fallback["holds"], fallback["peerSource"]) == (
        2.5, False, "driver closed",
    )  # fmt: skip
    (unmeasured,) = report.wrk_targets(phases)
    assert (unmeasured["value"], unmeasured["holds"]) == (None, None)
    # No admitted call at c=200, none in flight: no p99 to judge, and the target does not hold.
    starved = {**_phase("ours-direct", "resend", 200, 0.0), "admitted": {"n": 0}}
    starved["admittedOrWaiting"] = {"n": 0}
    judged = _judged(report.wrk_targets([*phases, starved]))
    assert judged["resend c=200 admitted p99 < 2000 ms"] == (None, False)
    assert judged["resend c=200 keeps >= 90% of c=50's goodput"] == (0.0, False)


def test_a_wait_longer_than_the_rest_of_the_phase_counts_against_the_p99() -> None:
    answered = {"n": 50, "p50": 400.0, "p99": 900.0}
    waiting = {"n": 60, "p50": 450.0, "p99": 2400.0}
    over = {**_phase("ours-direct", "fresh", 400, 280.0), "admitted": answered}
    over |= {"admittedOrWaiting": waiting, "inFlight": {"n": 10, "max": 2600.0}}
    (_, p99, _) = report.wrk_targets([_phase("ours-direct", "fresh", 50, 300.0), over])
    assert (p99["value"], p99["holds"]) == (2400.0, False)
    assert (p99["answeredP99"], p99["inFlightMax"]) == (900.0, 2600.0)
    # A phase of 2 s cannot show a wait of more than 2 s: not judged.
    (_, short, _) = report.wrk_targets(
        [_phase("ours-direct", "fresh", 50, 300.0), {**over, "windowS": 2.0}]
    )
    assert (short["value"], short["holds"]) == (2400.0, None)


def test_the_wrk_record_and_table_show_every_client_and_concurrency(
    capsys: pytest.CaptureFixture[str],
) -> None:
    phases = [
        _phase("ours-direct", "resend", 50, 300.0),
        _phase("ours-direct", "fresh", 50, 290.0),
        _phase("ours-direct", "fresh", 200, 70.0, p99=900.0),
        _phase("ours-direct", "resend", 50, 297.0, era=wrk.LEGACY_VERSION),
        _phase("dbos", "fresh", 50, 95.0),
        {"layout": "one-tool", "target": "dbos", "phase": "closed c=50", "okPerS": 90.0},
    ]
    record = report.wrk_results(phases, "wrk 4.1.0")
    assert record["version"] == "wrk 4.1.0"
    assert record["oursOverPeer"] == {"resend c=50": 3.16, "fresh c=50": 3.05}
    report.print_wrk(phases, record)
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines if line.startswith("| ")]
    assert table == [
        "| server | era | client | c=50 | c=200 | transport err/5xx |",
        "| ours-direct | 2026-07-28 | resend | 300 (250/500 r50) | - | 0/0 |",
        "| ours-direct | 2026-07-28 | fresh | 290 (250/500 r50) | 70 (450/900 r50) | 0/0 |",
        "| ours-direct | 2025-11-25 | resend | 297 (250/500 r50) | - | 0/0 |",
        "| dbos | 2026-07-28 | fresh | 95 (250/500 r50) | - | 0/0 |",
    ]
    assert any("fresh c=200 keeps >= 90% of c=50's goodput: 0.24 DOES NOT HOLD" in line
               for line in lines)  # fmt: skip


def test_only_picks_a_target_or_a_whole_layout() -> None:
    def bench(*only: str) -> Bench:
        return Bench(lambda: 0.0, {}, FULL, deadline=0.0, only=set(only))

    assert bench().selected("wrk", "dbos")
    assert bench("wrk").selected("wrk", "dbos")
    assert bench("wrk/ours-direct").selected("wrk", "ours-direct")
    assert not bench("wrk/ours-direct").selected("wrk", "dbos")
    assert not bench("wrk").selected("one-tool", "ours-direct")
    assert bench("one-tool/ours-direct").selected("one-tool", "ours-direct")


def test_without_wrk_and_root_the_benchmark_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wrk.shutil, "which", lambda name: None)
    monkeypatch.setattr(wrk.os, "geteuid", lambda: 1000)
    with pytest.raises(RuntimeError, match=r"apt-get install wrk.*--only one-tool"):
        wrk.ensure_wrk()
    monkeypatch.setattr(wrk.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert wrk.ensure_wrk() == "/usr/bin/wrk"
