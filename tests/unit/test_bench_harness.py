"""bench.harness's CPU meters, read from /proc."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.harness import tree_cpu_seconds

BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"


def test_a_tree_keeps_the_cpu_of_children_that_exited() -> None:
    before = tree_cpu_seconds(os.getpid())
    # The child burns CPU, exits and is reaped: as a backend the postmaster reaps.
    subprocess.run([sys.executable, "-c", BURN], check=True)
    assert tree_cpu_seconds(os.getpid()) - before >= 0.25
