"""Named fault points: a test kills or stalls a worker at an exact line.

``WORKFLOW_FAULTS="after_claim=kill,before_complete=sleep:500"`` configures points for a
worker process; in-process tests register async hooks with ``set_hook``. A point with
nothing configured costs one dict lookup.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable

ENV_VAR = "WORKFLOW_FAULTS"
Hook = Callable[[], Awaitable[None]]

_hooks: dict[str, Hook] = {}


def _parse(spec: str) -> dict[str, str]:
    actions: dict[str, str] = {}
    for item in spec.split(","):
        name, _, action = item.strip().partition("=")
        if name:
            actions[name] = action or "kill"
    return actions


_actions: dict[str, str] = _parse(os.environ.get(ENV_VAR, ""))


def configure(spec: str) -> None:
    """Replace the configured actions (the WORKFLOW_FAULTS syntax)."""
    _actions.clear()
    _actions.update(_parse(spec))


def set_hook(name: str, hook: Hook | None) -> None:
    """Run hook (or stop running one, with None) whenever point name is reached."""
    if hook is None:
        _hooks.pop(name, None)
    else:
        _hooks[name] = hook


async def point(name: str) -> None:
    """Reach fault point name: run its hook, then its configured action if any."""
    hook = _hooks.get(name)
    if hook is not None:
        await hook()
    action = _actions.get(name)
    if action is None:
        return
    if action == "kill":
        # SIGKILL: no cleanup, no lease release, exactly like a crashed host.
        os.kill(os.getpid(), signal.SIGKILL)
    elif action.startswith("sleep:"):
        await asyncio.sleep(int(action.removeprefix("sleep:")) / 1000)
    elif action == "raise":
        raise RuntimeError(f"fault point {name}")
