"""bench/gateway_overhead.py run end to end with tiny counts, so it cannot rot silently.

The benchmark is not a test and its numbers are not checked: only that it starts our server and
the Gateway, makes every leg's calls (interleaved rounds, the overload phase and the closed loop)
without a failure and prints its table. It runs as its docstring says (`python -m`), on a fresh
migrated test database; every port it opens is a free one picked by the OS.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from bench.harness import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
ROUNDS = 3


def test_gateway_overhead_runs_every_leg_end_to_end(database_url: str) -> None:
    argv = [sys.executable, "-m", "bench.gateway_overhead", "--calls", str(ROUNDS)]
    argv += ["--warmup", "1", "--users", "2", "--after-overload", "3", "--closed", "2"]
    env = dict(os.environ, DATABASE_URL=database_url)
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout
    assert f"{ROUNDS} rounds in" in out, out
    for leg in ("direct", "direct-legacy", "gateway"):
        row = re.search(rf"^{leg} +n= *(\d+) .*failures (\{{.*\}})$", out, re.MULTILINE)
        assert row is not None, out
        assert (int(row.group(1)), row.group(2)) == (ROUNDS, "{}"), out
    assert "gateway - direct p50:" in out, out
    assert re.search(r"^overload: \d+ calls offered at 3.0/s$", out, re.MULTILINE), out
    assert re.search(r"^closed c=2: \d+ calls, [1-9]\d* ok", out, re.MULTILINE), out
