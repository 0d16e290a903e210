"""Configuration of durable execution: outbound destinations, the Gateway, size and time bounds."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

import msgspec

from runtime.engine.run.engine_threads import ON_LOOP_STEPS
from runtime.scheduler.models import SchedulerSettings

# Retries of one compensation step at most (each attempt has its own range of ledger steps).
MAX_COMPENSATION_RETRIES = 8
ClientAuthentication = Literal["client_secret_basic", "client_secret_post"]


class ServiceTokenSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Workflow's own application token for nested MCP calls: an OAuth 2.0 client-credentials
    grant (RFC 6749 section 4.4) at a token endpoint, renewed before it expires. None: no token.
    """

    endpoint: str | None = None
    client_id: str | None = None
    # The client secret is read from this file at every grant (rotation needs no restart).
    client_secret_file: str | None = None
    # Or from a host's secret store (workflow_secret_put / `workflow-mcp secrets put`): the
    # secret's name and the host that holds it, also read at every grant.
    client_secret_name: str | None = None
    client_secret_host: str | None = None
    # RFC 6749 section 2.3.1: HTTP Basic (every server must support it), or the id and secret
    # as form fields for servers that ask for them.
    client_auth: ClientAuthentication = "client_secret_basic"
    scope: str | None = None  # the scope asked for, when the endpoint needs one
    audience: str | None = None  # likewise an audience (a common extension parameter)
    # A token is renewed once this fraction of its lifetime (expires_in) has passed; the
    # current one is used until then, and until its expiry while a renewal fails.
    renew_fraction: float = 0.8
    timeout_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.endpoint is not None:
            parts = urlsplit(self.endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
                raise ValueError("service_token.endpoint must be an http(s) URL without user info")
            stored = self.client_secret_name is not None
            if stored != (self.client_secret_host is not None):
                raise ValueError("service_token needs client_secret_name and client_secret_host")
            if not self.client_id or stored == (self.client_secret_file is not None):
                raise ValueError(
                    "service_token needs client_id and one client secret: client_secret_file, "
                    "or client_secret_name with client_secret_host"
                )
        if not 0 < self.renew_fraction < 1:
            raise ValueError("service_token.renew_fraction must be between 0 and 1")
        if self.timeout_seconds <= 0:
            raise ValueError("service_token.timeout_seconds must be positive")

    @property
    def configured(self) -> bool:
        """True when nested MCP calls carry Workflow's own token."""
        return self.endpoint is not None


class ExecutionSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where outbound calls may go and how big and long they may be."""

    # URI prefixes HTTP calls of runs WITHOUT a binding may reach (a binding's pinned endpoint
    # targets replace this list for its runs). Empty: no direct HTTP at all.
    http_allowlist: list[str] = msgspec.field(default_factory=list)
    # The environment this service runs in; endpoint targets and grants listing environments
    # are reachable only from one of them.
    environment: str | None = None
    # The Gateway's MCP endpoint for nested calls. Its origin (scheme, host, port) is also
    # where a run's protected HTTP calls go once its token was exchanged (seed 000).
    gateway_mcp_url: str | None = None
    # Workflow's own application token for X-Scope-Token on nested MCP calls.
    service_token: ServiceTokenSettings = msgspec.field(default_factory=ServiceTokenSettings)
    max_response_bytes: int = 1 << 20
    max_redirects: int = 5
    connect_timeout_s: float = 5.0
    # A dispatched write may run this long past the deadline before its HTTP timeout fires:
    # before-effects-only lets a started write finish instead of cutting it mid-flight.
    write_overrun_s: float = 30.0
    # Evaluation steps (CEL steps plus one per task run) one task attempt may spend; a run's
    # maximumCostUnits caps it further. Deterministic, unlike a wall-clock limit: the same
    # input always stops at the same step, WORKFLOW_BUDGET_EXHAUSTED on the first attempt.
    # 50,000 steps are roughly one to two seconds of interpreter CPU on a small machine.
    task_step_budget: int = 50_000
    # Steps a task attempt may take on the serving loop before it starts over on an engine
    # thread (runtime.engine.run.engine_threads says why); an attempt reaching an effect
    # moves at once. 0: every attempt runs on an engine thread.
    on_loop_steps: int = ON_LOOP_STEPS
    # How long after a run ended (by its deadline too) its compensations may still start (at
    # most an hour, the compensation run's own ceiling, migration 0087), and how often a
    # failing compensation is tried again when its `compensate:` sets no retry of its own.
    compensation_allowance_s: float = 60.0
    compensation_retries: int = 2
    # A `wait` or retry back-off longer than this parks the run as a durable timer and gives
    # its executor slot back (runtime.engine.run.timers); a shorter one sleeps in the slot,
    # where parking would cost more than it frees.
    in_slot_wait_ms: int = 1000

    def __post_init__(self) -> None:
        if not 0 < self.compensation_allowance_s <= 3600:
            raise ValueError("compensation_allowance_s must be positive and at most 3600")
        if not 0 <= self.compensation_retries <= MAX_COMPENSATION_RETRIES:
            raise ValueError(
                f"compensation_retries must be between 0 and {MAX_COMPENSATION_RETRIES}"
            )
        if self.max_response_bytes <= 0 or self.max_redirects < 0:
            raise ValueError("max_response_bytes must be positive and max_redirects >= 0")
        if self.task_step_budget <= 0:
            raise ValueError("task_step_budget must be positive")
        if self.on_loop_steps < 0:
            raise ValueError("on_loop_steps must not be negative")
        if self.in_slot_wait_ms < 0:
            raise ValueError("in_slot_wait_ms must not be negative")
        if self.gateway_mcp_url is not None:
            parts = urlsplit(self.gateway_mcp_url)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
                raise ValueError("gateway_mcp_url must be an http(s) URL without user info")


class ServiceExecutionSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The `execution` section of the service configuration.

    With workers_enabled every service process also runs an Executor for workflow tasks, so
    `make run` executes workflows without a separate worker; several processes (and any
    `workflow-mcp worker` processes) may share the database, claims are fenced.
    """

    workers_enabled: bool = True
    # A slot mostly waits (on its statements' commits, on outbound calls) and holds a database
    # connection only for its statements: with 4, a popular Tool's one-task runs queued for
    # slots held by commits waiting out their WAL flushes (measured: 50 -> 80 ok/s at 50
    # callers on a loaded 2-core machine going from 4 to 16, and half the claim rounds, since
    # a free slot takes a run's first task at admission).
    interactive_slots: int = 16
    standard_slots: int = 2
    batch_slots: int = 2
    lease_ms: int = 1000
    renew_interval_ms: int = 250
    reap_interval_ms: int = 250
    poll_interval_ms: int = 250
    credential_sweep_interval_s: float = 60.0
    # The service's ceiling on fork width (seed 001: fork width is governed by this setting,
    # whatever a binding's maximumParallelism says): refused at binding publish, enforced again
    # by the executor for every run.
    maximum_parallelism: int = 8
    # The result waiter's dedicated LISTEN connections (seed 001, also read from
    # WORKFLOW_WAIT_LISTENER_CONNECTIONS): waiters are spread over this many by a hash of the
    # run id; 0 opens none and waiters poll durable status.
    wait_listener_connections: int = 8
    # The retention sweep: reservations whose run is over and whose window passed, and runs
    # finished longer than run_retention_s ago that no reservation can still replay.
    retention_sweep_interval_s: float = 3600.0
    run_retention_s: float = 7 * 24 * 3600.0
    retention_sweep_batch: int = 1000
    outbound: ExecutionSettings = msgspec.field(default_factory=ExecutionSettings)

    def __post_init__(self) -> None:
        slots = (self.interactive_slots, self.standard_slots, self.batch_slots)
        if min(slots) < 0 or sum(slots) == 0:
            raise ValueError("execution slots must be non-negative with at least one slot")
        if self.renew_interval_ms >= self.lease_ms:
            raise ValueError("renew_interval_ms must be shorter than lease_ms")
        if self.credential_sweep_interval_s <= 0:
            raise ValueError("credential_sweep_interval_s must be positive")
        if self.maximum_parallelism <= 0:
            raise ValueError("maximum_parallelism must be positive")
        if min(self.retention_sweep_interval_s, self.run_retention_s) <= 0:
            raise ValueError("retention_sweep_interval_s and run_retention_s must be positive")
        if self.wait_listener_connections < 0:
            raise ValueError("wait_listener_connections must not be negative")
        if self.retention_sweep_batch <= 0:
            raise ValueError("retention_sweep_batch must be positive")

    def scheduler(self) -> SchedulerSettings:
        """The executor settings of this section."""
        return SchedulerSettings(
            interactive_slots=self.interactive_slots,
            standard_slots=self.standard_slots,
            batch_slots=self.batch_slots,
            lease_ms=self.lease_ms,
            renew_interval_ms=self.renew_interval_ms,
            reap_interval_ms=self.reap_interval_ms,
            poll_interval_ms=self.poll_interval_ms,
            overrun_ms=round(self.outbound.write_overrun_s * 1000),
        )
