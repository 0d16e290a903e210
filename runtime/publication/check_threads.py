"""Publication's CPU-bound checks off the serving loop, on a small pool of threads.

Why: loading the YAML, parsing the DSL, compiling every CEL expression and running the
data-flow checker cost time in proportion to the definition. On the serving loop a
definition inside every size limit (60 tasks of 4 KB expressions) held it for 8-10 s, and
`/healthz` answered for no tenant meanwhile. Here that work runs on a pool thread while the
loop keeps answering; only the pure computation moves (no connection, no effect), so the
transaction and its locks stay on the loop as before.

Why a small pool of its own: the work is bounded per call by publication.limits, and a few
threads cap how much of the machine concurrent publishes take without queueing behind (or
in front of) the interpreter's engine threads.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

PUBLICATION_THREADS = 2
_pool = ThreadPoolExecutor(PUBLICATION_THREADS, thread_name_prefix="workflow-publication")


async def off_loop(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run the pure ``work(*args, **kwargs)`` on a publication thread and await its result."""
    loop = asyncio.get_running_loop()
    # The caller's context (trace span, log fields) goes with the work, as for engine threads.
    context = contextvars.copy_context()
    call = functools.partial(context.run, work, *args, **kwargs)
    return await loop.run_in_executor(_pool, call)
