"""What bench-peers prints and records: one block per phase, the table, ratios, the machine."""

from __future__ import annotations

import datetime
import os
import subprocess
from pathlib import Path
from typing import Any

from bench.harness import REPO


def machine() -> dict[str, Any]:
    """nproc, CPU model, memory, commit, date and load: the context every number needs."""
    cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    models = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    total_kb = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal")), 0)
    return {
        "nproc": os.cpu_count(),
        "cpuModel": models[0] if models else "unknown",
        "memoryGiB": round(total_kb / 1024 / 1024, 1),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "dateUtc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavgStart": loadavg(),
    }


def loadavg() -> str:
    """/proc/loadavg's three load figures (a busy shared machine shows here)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip()


def _lat(figures: dict[str, float]) -> str:
    if not figures.get("n"):
        return "n=0"
    n, p50, p95, p99 = figures["n"], figures["p50"], figures["p95"], figures["p99"]
    return f"n={n} p50 {p50:.2f} p95 {p95:.2f} p99 {p99:.2f} ms"


def print_phase(s: dict[str, Any]) -> None:
    """One phase: goodput, admitted and refusal latency, failures, CPU per call."""
    offered = f" offered {s['offeredPerS']}/s" if "offeredPerS" in s else ""
    window = f" (window {s['windowS']} s)" if s.get("windowS") else ""
    print(f"== {s['layout']} {s['target']} {s['phase']}{offered}: {s['calls']} calls in "
          f"{s['elapsedS']} s, {s['okPerS']} ok/s{window}, "
          f"{s['okPerSWall']} ok/s wall")  # fmt: skip
    print(f"   admitted {_lat(s['admitted'])}")
    if s["refusedByCode"]:
        print(f"   refused {s['refusedByCode']} {_lat(s['refusal'])};"
              f" with retryAfterMs {s['refusalsWithRetryAfter']}")  # fmt: skip
    print(f"   transport errors {s['transportErrors'] or 0}  HTTP 5xx {s['http5xx'] or 0}"
          f"  other failures {s['otherFailures'] or 0}")  # fmt: skip
    for outcome, example in s.get("examples", {}).items():
        print(f"   e.g. {outcome}: {example[:160]}")
    cpu = {k.removesuffix("CpuMsPerCall"): v for k, v in s.items() if k.endswith("CpuMsPerCall")}
    print(f"   CPU ms/call {cpu}", flush=True)


def _find(phases: list[dict[str, Any]], layout: str, target: str, phase: str) -> dict[str, Any]:
    for summary in phases:
        if (summary["layout"], summary["target"], summary["phase"]) == (layout, target, phase):
            return summary
    return {}


def _peak(phases: list[dict[str, Any]], layout: str, target: str) -> float:
    rates = [
        s["okPerS"] or 0.0
        for s in phases
        if s["layout"] == layout and s["target"] == target and s["phase"].startswith("closed")
    ]
    return max(rates, default=0.0)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0 or a != a or b != b:
        return None
    return round(a / b, 2)


def ratios(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """ours/DBOS (one Tool), one-Tool/8-Tools peaks, and the Gateway's added p50."""
    out: dict[str, Any] = {}
    dbos_seq = _find(phases, "one-tool", "dbos", "sequential")
    for ours in ("ours-direct", "ours-gateway"):
        seq = _find(phases, "one-tool", ours, "sequential")
        if not seq or not dbos_seq:
            continue
        out[f"{ours}/dbos"] = {
            "sequentialP50": _ratio(seq["admitted"]["p50"], dbos_seq["admitted"]["p50"]),
            "sequentialP99": _ratio(seq["admitted"]["p99"], dbos_seq["admitted"]["p99"]),
            "peakOkPerS": _ratio(
                _peak(phases, "one-tool", ours), _peak(phases, "one-tool", "dbos")
            ),
            "serverCpuPerCall": _ratio(
                seq["serverCpuMsPerCall"] + seq.get("gatewayCpuMsPerCall", 0.0),
                dbos_seq["serverCpuMsPerCall"],
            ),
            "postgresCpuPerCall": _ratio(
                seq["postgresNetIdleCpuMsPerCall"], dbos_seq["postgresNetIdleCpuMsPerCall"]
            ),
        }
    for target in ("ours-direct", "dbos"):
        out[f"{target} one-tool/8-tools peakOkPerS"] = _ratio(
            _peak(phases, "one-tool", target), _peak(phases, "8-tools", target)
        )
    pairs = _find(phases, "one-tool", "ours-direct", OVERLOAD_PAIRS)
    if pairs:
        out["ours-direct overload pairs medianRatio"] = pairs["medianRatio"]
    direct = _find(phases, "one-tool", "ours-direct", "sequential")
    gateway = _find(phases, "one-tool", "ours-gateway", "sequential")
    if direct and gateway:
        out["gatewayMinusDirectP50Ms"] = round(
            gateway["admitted"]["p50"] - direct["admitted"]["p50"], 2
        )
    paired = _find(phases, "one-tool", "ours-gateway-vs-direct", "sequential interleaved")
    if (
        paired
        and paired["direct"]["admitted"].get("p50")
        and paired["gateway"]["admitted"].get("p50")
    ):
        out["gatewayMinusDirectP50MsInterleaved"] = round(
            paired["gateway"]["admitted"]["p50"] - paired["direct"]["admitted"]["p50"], 2
        )
    return out


def _row(phases: list[dict[str, Any]], layout: str, target: str) -> str | None:
    mine = [s for s in phases if s["layout"] == layout and s["target"] == target]
    if not mine:
        return None
    seq = _find(phases, layout, target, "sequential")
    cells = [layout, target]
    if seq:
        a = seq["admitted"]
        server = seq["serverCpuMsPerCall"] + seq.get("gatewayCpuMsPerCall", 0.0)
        postgres, client = seq["postgresNetIdleCpuMsPerCall"], seq["driverCpuMsPerCall"]
        latency = f"{a['p50']:.1f}/{a['p95']:.1f}/{a['p99']:.1f}"
        cells += [latency, f"{server:.2f}", f"{postgres:.2f}", f"{client:.2f}"]
    else:
        cells += ["-", "-", "-", "-"]
    for s in mine:
        if s["phase"] in ("sequential", OVERLOAD_PAIRS):
            continue
        refused = sum(s["refusedByCode"].values())
        at = f"@{s['offeredPerS']}: " if s["phase"] == "open 2xpeak" else ""
        cells.append(f"{at}{s['okPerS']:.0f} ({s['admitted']['p50']:.0f}/{s['admitted']['p99']:.0f}"
                     f"{f' r{refused}' if refused else ''})")  # fmt: skip
    # The overload pairs' rounds count too (their summary holds them).
    counted = [s for s in mine if s["phase"] != OVERLOAD_PAIRS] + [
        r[side] for s in mine if s["phase"] == OVERLOAD_PAIRS for r in s["rounds"]
        for side in ("peak", "overload")
    ]  # fmt: skip
    errors = sum(sum(s["transportErrors"].values()) for s in counted)
    fives = sum(sum(s["http5xx"].values()) for s in counted)
    cells.append(f"{errors}/{fives}")
    return "| " + " | ".join(cells) + " |"


OVERLOAD_PAIRS = "overload pairs"


def overload_pairs(
    layout: str, target: str, callers: int, rounds: list[dict[str, Any]]
) -> dict[str, Any]:
    """The overload pairs' record: each round's goodput over its own peak, and the median."""
    ratios = [_ratio(r["overload"]["okPerS"], r["peak"]["okPerS"]) for r in rounds]
    known = sorted(r for r in ratios if r is not None)
    refusals = [r["overload"]["refusal"].get("p50") for r in rounds]
    return {
        "layout": layout,
        "target": target,
        "phase": OVERLOAD_PAIRS,
        "callers": callers,
        "ratios": ratios,
        "medianRatio": known[len(known) // 2] if known else None,
        "refusalP50Ms": refusals,
        # The whole machine's CPU per admitted call, at the peak and at 2x: what the refusals
        # (and everything else 2x adds) cost every process on the cores they share.
        "machineMsPerOk": [
            [machine_ms_per_ok(r["peak"]), machine_ms_per_ok(r["overload"])] for r in rounds
        ],
        "rounds": rounds,
    }


def machine_ms_per_ok(phase: dict[str, Any]) -> float | None:
    """The machine's busy CPU (every process, the driver's too) per OK call of a phase, in ms."""
    per_call, ok = phase.get("machineCpuMsPerCall"), phase.get("ok")
    if per_call is None or not ok:
        return None
    return round(per_call * phase["calls"] / ok, 2)


def print_overload_pairs(summary: dict[str, Any]) -> None:
    """One line per round (peak, 2x goodput, ratio, refusal p50) and the median ratio."""
    print(f"== {summary['layout']} {summary['target']} overload pairs "
          f"(closed c={summary['callers']}, then open at 2x what it served):")  # fmt: skip
    for number, (r, ratio) in enumerate(zip(summary["rounds"], summary["ratios"], strict=True), 1):
        peak, over = r["peak"], r["overload"]
        refused = sum(over["refusedByCode"].values())
        print(f"   round {number}: peak {peak['okPerS']:.0f} ok/s, 2x @{over['offeredPerS']}: "
              f"{over['okPerS']:.0f} ok/s = {ratio} of it; {refused} refused, p50 "
              f"{over['refusal'].get('p50')} ms; admitted p99 "
              f"{over['admitted'].get('p99')} ms; machine {peak.get('machineCores')} -> "
              f"{over.get('machineCores')} cores, {machine_ms_per_ok(peak)} -> "
              f"{machine_ms_per_ok(over)} ms per OK")  # fmt: skip
    print(f"   median ratio {summary['medianRatio']}", flush=True)


def print_table(results: dict[str, Any]) -> None:
    """The summary table (markdown), then the ratios."""
    phases = results["phases"]
    # The interleaved Gateway phase has a summary per side: it goes into the ratios only.
    loops = list(
        dict.fromkeys(
            s["phase"]
            for s in phases
            if not s["phase"].startswith("sequential") and s["phase"] != OVERLOAD_PAIRS
        )
    )
    print("\nok/s (admitted p50/p99 ms, rN = N refused); seq p50/p95/p99 ms; CPU ms/call (seq)")
    header = ["layout", "server", "seq p50/p95/p99", "server CPU", "PG CPU", "driver CPU"]
    header += [*loops, "transport err/5xx"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for layout in ("one-tool", "8-tools"):
        for target in ("ours-direct", "ours-gateway", "dbos"):
            row = _row(phases, layout, target)
            if row:
                print(row)
    print("\nratios:", results["ratios"])
    if results.get("skippedPhases"):
        print("SKIPPED (run budget spent):", ", ".join(results["skippedPhases"]))
    m = results["machine"]
    print(f"machine: {m['nproc']} x {m['cpuModel']}, {m['memoryGiB']} GiB, commit {m['commit']}"
          f"{' (dirty)' if m['dirty'] else ''}, {m['dateUtc']}, load {m['loadavgStart']} -> "
          f"{m['loadavgEnd']}", flush=True)  # fmt: skip
