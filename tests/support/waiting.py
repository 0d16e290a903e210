"""A bounded wait on an observable condition, instead of a fixed sleep."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

Check = Callable[[], bool] | Callable[[], Awaitable[bool]]


async def wait_until(
    check: Check, *, what: str = "the condition", within_s: float = 10.0, every_s: float = 0.02
) -> None:
    """Poll check until it holds; fail the test when it has not within within_s seconds."""
    try:
        async with asyncio.timeout(within_s):
            while True:
                outcome = check()
                if inspect.isawaitable(outcome):
                    outcome = await outcome
                if outcome:
                    return
                await asyncio.sleep(every_s)
    except TimeoutError:
        raise AssertionError(f"{what} did not hold within {within_s}s") from None
