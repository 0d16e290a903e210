"""Interleaved A/B runs of bench.engine or bench.invoke in two worktrees, medians per side.

    .venv/bin/python -m bench.ab --base /work/wt-base --head . --rounds 5 engine \\
        -- --fast --samples 300 --warmup 20 --only run-1,workflow-1,workflow-8
    .venv/bin/python -m bench.ab --base /work/wt-base --head . --rounds 4 invoke \\
        -- --quick --fast --only sequential,closed,start

Runs alternate (base, head, base, head, ...) so that load from elsewhere on the machine falls
on both sides alike; each side's figures are the medians over its rounds. The engine bench of
this worktree runs against both trees' code (PYTHONPATH), so both report the CPU column; the
invoke bench is each worktree's own. Every run's raw output is kept in --keep (a temp dir).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENGINE_LINE = re.compile(
    r"^(?P<name>.+?)\s+p50\s+(?P<p50>[\d.]+) ms.*?mean\s+(?P<mean>[\d.]+) ms"
    r"\s+cpu\s+(?P<cpu>[\d.]+) ms/op"
)


def run_engine(tree: Path, extra: list[str], out: Path) -> dict[str, dict[str, float]]:
    """One bench.engine run on tree's code; {scenario: {p50, mean, cpu}} in ms."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    python = str(tree / ".venv" / "bin" / "python")
    text = subprocess.run(
        [python, str(HERE / "engine.py"), *extra],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    out.write_text(text)
    figures = {}
    for line in text.splitlines():
        match = ENGINE_LINE.match(line)
        if match:
            figures[match["name"].strip()] = {
                key: float(match[key]) for key in ("p50", "mean", "cpu")
            }
    return figures


def run_invoke(tree: Path, extra: list[str], out: Path) -> dict[str, dict[str, float]]:
    """One bench.invoke run of tree; {scenario: {p50, ok/s, service cpu, pg cpu}}."""
    python = str(tree / ".venv" / "bin" / "python")
    subprocess.run(
        [python, "-m", "bench.invoke", *extra, "--out", str(out)],
        cwd=tree, capture_output=True, text=True, check=True,
    )  # fmt: skip
    figures = {}
    for scenario in json.loads(out.read_text())["scenarios"]:
        figures[scenario["scenario"]] = {
            "p50": scenario["all"]["p50"],
            "ok/s": scenario["okPerS"],
            "service cpu": scenario["serverCpuMsPerCall"],
            "pg cpu": scenario["postgresCpuMsPerCall"],
        }
    return figures


def medians(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per scenario and figure, the median over the runs that reported it."""
    merged: dict[str, dict[str, list[float]]] = {}
    for figures in runs:
        for name, values in figures.items():
            for key, value in values.items():
                merged.setdefault(name, {}).setdefault(key, []).append(value)
    return {
        name: {key: statistics.median(values) for key, values in figures.items()}
        for name, figures in merged.items()
    }


def main() -> None:
    """CLI entry point."""
    parser = argparse.ArgumentParser(prog="python -m bench.ab")
    parser.add_argument("--base", type=Path, required=True, help="worktree measured first")
    parser.add_argument("--head", type=Path, required=True, help="worktree measured second")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None, help="directory for raw outputs")
    parser.add_argument("bench", choices=("engine", "invoke"))
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="-- then the bench's arguments")
    args = parser.parse_args()
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    keep = args.keep or Path(tempfile.mkdtemp(prefix="bench-ab-"))
    keep.mkdir(parents=True, exist_ok=True)
    run = run_engine if args.bench == "engine" else run_invoke
    sides = {"base": args.base.resolve(), "head": args.head.resolve()}
    results: dict[str, list[dict[str, dict[str, float]]]] = {side: [] for side in sides}
    for round_no in range(1, args.rounds + 1):
        for side, tree in sides.items():
            suffix = "txt" if args.bench == "engine" else "json"
            results[side].append(run(tree, extra, keep / f"{side}.{round_no}.{suffix}"))
            print(f"round {round_no} {side} done", flush=True)
    print(f"\nmedians over {args.rounds} interleaved rounds (raw outputs in {keep})")
    summary = {side: medians(runs) for side, runs in results.items()}
    for name, figures in summary["base"].items():
        head = summary["head"].get(name, {})
        cells = "  ".join(
            f"{key} {value:.2f} -> {head.get(key, float('nan')):.2f}"
            for key, value in figures.items()
        )
        print(f"{name:40s} {cells}")


if __name__ == "__main__":
    main()
