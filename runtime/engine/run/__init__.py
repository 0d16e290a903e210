"""The pure interpreter: runs a parsed definition over a RunState, effects through a port.

``interpreter`` follows the data flow of each task and hands the kind-specific body to
``task_kinds`` (which sees it through the ``runner`` protocol; HTTP and MCP calls go out
through ``call_dispatch`` and the ``ports``). Time is a Clock with ``deadlines`` on it; a
fault is an RFC 7807 problem (``faults``) that ``error_mapping`` turns into the registry's
error. ``engine_threads`` runs interpretation off the serving loop.
"""

from __future__ import annotations

from runtime.engine.run.engine_threads import EngineThreads, LoopBoundEffects
from runtime.engine.run.faults import WorkflowFault
from runtime.engine.run.human import AskRequest, AwaitingAnswer
from runtime.engine.run.interpreter import run_workflow
from runtime.engine.run.ports import (
    Clock,
    EffectFailure,
    EffectPort,
    HttpRequest,
    HttpResponse,
    McpRequest,
    RealClock,
    RunLimits,
)
from runtime.engine.run.state import EffectState, RunOutcome, RunState
from runtime.engine.run.timers import AwaitingTimer

__all__ = [
    "AskRequest",
    "AwaitingAnswer",
    "AwaitingTimer",
    "Clock",
    "EffectFailure",
    "EffectPort",
    "EffectState",
    "EngineThreads",
    "HttpRequest",
    "HttpResponse",
    "LoopBoundEffects",
    "McpRequest",
    "RealClock",
    "RunLimits",
    "RunOutcome",
    "RunState",
    "WorkflowFault",
    "run_workflow",
]
