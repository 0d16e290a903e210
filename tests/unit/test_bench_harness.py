"""The bench's meters: CPU from /proc, and the per-call fit of bench.refusals."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.harness import tree_cpu_seconds
from bench.refusals import per_call_fit

BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"


def test_a_tree_keeps_the_cpu_of_children_that_exited() -> None:
    before = tree_cpu_seconds(os.getpid())
    # The child burns CPU, exits and is reaped: as a backend the postmaster reaps.
    subprocess.run([sys.executable, "-c", BURN], check=True)
    assert tree_cpu_seconds(os.getpid()) - before >= 0.25


def test_the_refusal_fit_recovers_the_cost_of_each_kind_of_call() -> None:
    loops = [
        {"ok": ok, "refused": refused, "serverCpuS": ok * 0.002 + refused * 0.0002}
        for ok, refused in [(1800, 0), (1900, 2000), (1700, 4000), (1600, 6000)]
    ]
    assert per_call_fit(loops) == {"serverMsPerAdmitted": 2.0, "serverMsPerRefusal": 0.2}
    assert per_call_fit([{"ok": 0, "refused": 0, "serverCpuS": 0.0}]) == {
        "serverMsPerAdmitted": None,
        "serverMsPerRefusal": None,
    }
