"""Profiling aid: `runtime.cli` under cProfile with a CPU-time clock, toggled by signals.

    python -m bench.cprofile_serve serve --config FILE

SIGUSR1 starts profiling, SIGUSR2 stops it and writes the stats to $WORKFLOW_CPROFILE_OUT.
Only bench/profile_invoke.py starts it; the service itself never imports it.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
import time
from types import FrameType

from workflow_mcp.cli import main

_PROFILE = cProfile.Profile(timer=time.thread_time)


def _start(signum: int, frame: FrameType | None) -> None:
    _PROFILE.enable()


def _stop(signum: int, frame: FrameType | None) -> None:
    _PROFILE.disable()
    _PROFILE.dump_stats(os.environ["WORKFLOW_CPROFILE_OUT"])


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    sys.exit(main(sys.argv[1:]))
