"""Prometheus metrics with bounded labels: tool name, execution class, outcome code, endpoint.

Never a host id, user, run id or digest as a label (seed 001 "Observability And Audit").
Several processes: set PROMETHEUS_MULTIPROC_DIR (an empty directory shared by the service and
worker processes of one machine, cleared before they start) and any service process's
GET /metrics reports them all; without it each process reports only itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

EXECUTION_CLASSES = ("interactive", "standard", "batch")
_LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

REGISTRY = CollectorRegistry()

TOOL_CALLS = Counter(
    "workflow_tool_calls",
    "tools/call requests by tool and outcome code (ok, an error code, or a protocol fault)",
    ["tool", "code"],
    registry=REGISTRY,
)
TOOL_CALL_SECONDS = Histogram(
    "workflow_tool_call_seconds",
    "tools/call duration, end to end in this process (workflow_invoke: admission to result)",
    ["tool"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
ADMISSION_SECONDS = Histogram(
    "workflow_admission_seconds",
    "Admission transaction of workflow_invoke / workflow_start (idempotency, limits, enqueue)",
    ["operation"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
EVENT_LOOP_LAG_SECONDS = Histogram(
    "workflow_event_loop_lag_seconds",
    "How late this process's event loop ran a timer due now (sampled every "
    "capacity.sample_interval_ms): the wait every request and lease renewal here shares",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "workflow_queue_depth",
    "Runnable (ready, due) tasks in the shared queue per execution class, last sample",
    ["execution_class"],
    multiprocess_mode="livemax",
    registry=REGISTRY,
)
QUEUE_OLDEST_SECONDS = Gauge(
    "workflow_queue_oldest_runnable_seconds",
    "How long the oldest runnable task of the class has waited, last sample",
    ["execution_class"],
    multiprocess_mode="livemax",
    registry=REGISTRY,
)
CLAIM_SECONDS = Histogram(
    "workflow_claim_seconds",
    "One claim round trip of an executor",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
TASK_SERVICE_SECONDS = Histogram(
    "workflow_task_service_seconds",
    "A task's time in an executor slot, claim to completion",
    ["execution_class"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
SLOTS_AVAILABLE = Gauge(
    "workflow_executor_slots_available",
    "Free executor slots per class in this process (summed over live processes)",
    ["execution_class"],
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
DOOR_WAITING = Gauge(
    "workflow_door_waiting",
    "workflow_invoke calls waiting at the front door (summed over live processes)",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
DOOR_INSIDE = Gauge(
    "workflow_door_inside",
    "workflow_invoke calls past the front door whose run has not started yet",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
DOOR_ADMITTING = Gauge(
    "workflow_door_admitting",
    "workflow_invoke calls past the front door whose admission is not decided yet",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
DOOR_REFUSALS = Counter(
    "workflow_door_refusals",
    "workflow_invoke calls the front door refused on arrival (also in workflow_tool_calls)",
    registry=REGISTRY,
)
ADMISSION_STATEMENTS = Counter(
    "workflow_admission_statements",
    "workflow_invoke admission statements sent, by how many calls each admitted (1, or the batch)",
    ["calls"],
    registry=REGISTRY,
)
COMPLETION_STATEMENTS = Counter(
    "workflow_completion_statements",
    "One-statement task completions sent, by how many completions each carried (1, or the batch)",
    ["calls"],
    registry=REGISTRY,
)
LEASE_RECLAIMS = Counter(
    "workflow_lease_reclaims",
    "Expired task leases the reaper handed back to the queue",
    registry=REGISTRY,
)
BUDGET_EXHAUSTIONS = Counter(
    "workflow_budget_exhaustions",
    "Tasks failed with WORKFLOW_BUDGET_EXHAUSTED",
    ["execution_class"],
    registry=REGISTRY,
)
OUTBOUND_SECONDS = Histogram(
    "workflow_outbound_seconds",
    "Outbound HTTP and MCP calls of runs by endpoint reference",
    ["kind", "endpoint"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
OUTBOUND_FAILURES = Counter(
    "workflow_outbound_failures",
    "Outbound calls that raised (transport errors, timeouts, refusals) by endpoint reference",
    ["kind", "endpoint"],
    registry=REGISTRY,
)
POOL_CONNECTIONS = Gauge(
    "workflow_db_pool_connections",
    "PostgreSQL pool connections by pool and state (open, idle, waiting requests)",
    ["pool", "state"],
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
# Human answers take seconds to days: a second up to the 30-day run maximum.
_ANSWER_BUCKETS = (
    1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 86_400.0, 7 * 86_400.0,
    30 * 86_400.0,
)  # fmt: skip
HUMAN_TASKS_OPEN = Gauge(
    "workflow_human_tasks_open",
    "Human tasks (ask) waiting for an answer, all hosts, last sample",
    multiprocess_mode="livemax",
    registry=REGISTRY,
)
# Issue 42 item 3: active binding revisions whose dependencies drifted, by kind of drift.
BINDINGS_DRIFTED = Gauge(
    "workflow_bindings_drifted",
    "Active binding revisions with dependency drift of each kind, all hosts, last sample",
    ["kind"],
    multiprocess_mode="livemax",
    registry=REGISTRY,
)
HUMAN_TASK_ANSWER_SECONDS = Histogram(
    "workflow_human_task_answer_seconds",
    "A human task's time from opening to its answer",
    buckets=_ANSWER_BUCKETS,
    registry=REGISTRY,
)
COMPENSATIONS = Counter(
    "workflow_compensations",
    "Compensations of failed, cancelled or timed-out runs that ended, by outcome",
    ["outcome"],
    registry=REGISTRY,
)
HUMAN_TASK_TIMEOUTS = Counter(
    "workflow_human_task_timeouts",
    "Human tasks closed by their timeout, by what the timeout did (default, fail)",
    ["action"],
    registry=REGISTRY,
)


class SlotSettings(Protocol):
    """The per-class slot counts of an executor (runtime.scheduler SchedulerSettings)."""

    @property
    def interactive_slots(self) -> int: ...
    @property
    def standard_slots(self) -> int: ...
    @property
    def batch_slots(self) -> int: ...


_pools: dict[str, Callable[[], Mapping[str, int]]] = {}
M = TypeVar("M", Counter, Gauge, Histogram)
# Labelled children by (metric, label values). labels() takes a lock and rebuilds the key on
# every call; the label sets are bounded (see above), and the registry keeps each child for
# the life of the process anyway, so holding them here adds no series and no memory.
_children: dict[tuple[int, tuple[str, ...]], Any] = {}
# The last value each slot gauge was set to: an executor reports its slots after every claim
# and completion, and most reports change nothing.
_slots_reported: dict[str, int] = {}


def labelled(metric: M, *values: str) -> M:
    """metric.labels(*values), looked up once per label set."""
    key = (id(metric), values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child


def observe_claim(seconds: float) -> None:
    """One claim round trip."""
    CLAIM_SECONDS.observe(seconds)


def observe_service(execution_class: str, seconds: float) -> None:
    """One task's slot time."""
    labelled(TASK_SERVICE_SECONDS, _class(execution_class)).observe(seconds)


def record_queue(load: Mapping[str, tuple[int, float]]) -> None:
    """A queue sample: (runnable tasks, oldest runnable age in ms) per execution class."""
    for name in EXECUTION_CLASSES:
        ready, oldest_ms = load.get(name, (0, 0.0))
        labelled(QUEUE_DEPTH, name).set(ready)
        labelled(QUEUE_OLDEST_SECONDS, name).set(oldest_ms / 1000)


def record_slots(settings: SlotSettings, running_classes: Iterable[str]) -> None:
    """Free slots per class of this process's executor after a claim or a completion."""
    free = {
        "interactive": settings.interactive_slots,
        "standard": settings.standard_slots,
        "batch": settings.batch_slots,
        "other": 0,
    }
    for name in running_classes:
        free[_class(name)] -= 1
    for name in EXECUTION_CLASSES:
        value = max(0, free[name])
        if _slots_reported.get(name) != value:
            labelled(SLOTS_AVAILABLE, name).set(value)
            _slots_reported[name] = value


def record_door(inside: int, waiting: int, admitting: int) -> None:
    """The front door's occupancy after a call entered, waited, was admitted or left."""
    DOOR_INSIDE.set(inside)
    DOOR_WAITING.set(waiting)
    DOOR_ADMITTING.set(admitting)


def record_admission_statement(calls: int) -> None:
    """One admission statement sent for calls calls (1: a call alone; more: a batch)."""
    ADMISSION_STATEMENTS.labels(str(calls)).inc()


def record_completion_statement(calls: int) -> None:
    """One completion statement sent for calls completions (1: alone; more: a batch)."""
    COMPLETION_STATEMENTS.labels(str(calls)).inc()


def record_reclaims(count: int) -> None:
    """Leases the reaper reclaimed in one sweep."""
    if count:
        LEASE_RECLAIMS.inc(count)


def record_task_error(execution_class: str, code: str) -> None:
    """A task that ended with a typed error (only budget exhaustion is counted)."""
    if code == "WORKFLOW_BUDGET_EXHAUSTED":
        labelled(BUDGET_EXHAUSTIONS, _class(execution_class)).inc()


def record_open_human_tasks(count: int) -> None:
    """A sample of the open human tasks."""
    HUMAN_TASKS_OPEN.set(count)


def record_binding_drift(counts: Mapping[str, int]) -> None:
    """A sample of the drifted active revisions per kind of drift (a bounded label set)."""
    for kind, count in counts.items():
        labelled(BINDINGS_DRIFTED, kind).set(count)


def observe_human_answer(seconds: float) -> None:
    """One human task answered, seconds after it opened."""
    HUMAN_TASK_ANSWER_SECONDS.observe(max(0.0, seconds))


def record_human_timeout(action: str) -> None:
    """One human task closed by its timeout: a default answer or a failed ask."""
    labelled(HUMAN_TASK_TIMEOUTS, "default" if action == "default" else "fail").inc()


def record_compensation(outcome: str) -> None:
    """One compensation ended: completed, or failed (it stays visible until retried)."""
    labelled(COMPENSATIONS, "failed" if outcome == "failed" else "completed").inc()


def watch_pool(name: str, stats: Callable[[], Mapping[str, int]]) -> None:
    """Report a connection pool's psycopg_pool statistics at each scrape of this process."""
    _pools[name] = stats


def _class(name: str) -> str:
    # Bounded: anything unexpected is one label value, never a new series per input.
    return name if name in EXECUTION_CLASSES else "other"


def _sample_pools() -> None:
    for name, stats in list(_pools.items()):
        try:
            values = stats()
        except Exception:
            continue  # a closed pool reports nothing rather than failing the scrape
        labelled(POOL_CONNECTIONS, name, "open").set(values.get("pool_size", 0))
        labelled(POOL_CONNECTIONS, name, "idle").set(values.get("pool_available", 0))
        labelled(POOL_CONNECTIONS, name, "waiting").set(values.get("requests_waiting", 0))


def render() -> tuple[bytes, str]:
    """The exposition of this process, or of every process sharing PROMETHEUS_MULTIPROC_DIR."""
    _sample_pools()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
        return generate_latest(merged), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


for _name in EXECUTION_CLASSES:
    # Known label values start at zero, so a dashboard sees the series before the first event.
    BUDGET_EXHAUSTIONS.labels(_name)
for _action in ("default", "fail"):
    HUMAN_TASK_TIMEOUTS.labels(_action)
