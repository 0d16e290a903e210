"""Profiling aid: `runtime.cli serve` with uvicorn's loop and HTTP parser forced (A/B runs).

    AB_LOOP=asyncio|uvloop AB_HTTP=h11|httptools python -m bench.serve_variant serve ...

Only bench/profile_invoke.py starts it (when AB_LOOP is set); the service never imports it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import uvicorn

from runtime.composition import cli

_run = uvicorn.run


def _forced(app: Any, **options: Any) -> None:
    options["loop"] = os.environ.get("AB_LOOP", "asyncio")
    options["http"] = os.environ.get("AB_HTTP", "h11")
    _run(app, **options)


if __name__ == "__main__":
    cli.uvicorn.run = _forced  # type: ignore[assignment]
    sys.exit(cli.main(sys.argv[1:]))
