"""The `capacity` section: deadline-aware admission (load shedding), its door and its sampler."""

from __future__ import annotations

import msgspec


class CapacitySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The `capacity` section: deadline-aware admission (load shedding) and its sampler."""

    # Off: admission never refuses on measured load (the Tool's admission limits still apply).
    enabled: bool = True
    # Predicted completion times this factor must fit the remaining deadline (>1 refuses
    # earlier, leaving room for what the prediction misses: the response, a slower backend).
    safety_factor: float = 1.5
    # Opt-in: also refuse interactive calls whose predicted queue wait alone exceeds this,
    # whatever their deadline. None (the default): only the call's deadline counts (seed 001).
    interactive_queue_wait_ms: int | None = None
    # retryAfterMs is the predicted time until the backlog fits, clamped to this range.
    retry_after_min_ms: int = 50
    retry_after_max_ms: int = 5000
    # How often each process samples the queue, and when a sample is too old to act on.
    sample_interval_ms: int = 50
    stale_after_ms: int = 1000
    # How often while the last sample found the queue empty: an idle service reads it twice a
    # second, not twenty times, and the next call this process admits wakes the sampler at
    # once. At most stale_after_ms, so a sample is never too old to act on.
    idle_sample_interval_ms: int = 500
    # The standing sojourn is the minimum queue wait of the tasks claimed over this interval.
    sojourn_interval_ms: int = 100
    # Completions per second are counted over this window.
    drain_window_ms: int = 1000
    # Service time assumed per run before this process has measured any (ms).
    default_service_ms: float = 20.0
    # Weight of the newest measurement in the moving averages.
    ewma_alpha: float = 0.1
    # Event-loop turns added to the prediction at the loop lag the sampler measures. The
    # measured waits (sojourn, arrival to admission) already include the lag of the turns
    # they span; one turn stands for the answer's own, more double-counts it and sheds calls
    # that fit (10 turns refused a quarter of the calls at 50 closed-loop callers).
    loop_lag_turns: int = 1
    # Tools whose budgets this process remembers for the pre-transaction check.
    budget_cache_size: int = 4096
    # Calls past the front door whose run has not started, at most (runtime.admission.door);
    # the others wait in arrival order. 0: no door. As many as the interactive slots: a run
    # that waits for a free slot keeps its place, so fewer places starve the executor (2
    # places took bench-invoke's closed loops from 188 to 131 ok/s, 10 callers, and 230 to
    # 156, 50; docs/PERFORMANCE.md). Earlier, 16 against 32 took c=50 from 362 to 428 ok/s.
    door_concurrency: int = 16
    # Of those, calls whose admission is not decided yet, at most (0: no bound of its own): the
    # work that delays refusals on the event loop. One Tool at up to 4x its capacity (bench-
    # refusals, alternating): refusal p50 10-15 ms with 16, 5-8 ms with 4, 2-3 ms with 2, and
    # 4 and 2 served 10-35% more than 16; bench-invoke's closed loops: 4 as 16, 2 below 4.
    door_admitting: int = 4
    # Opt-in: the door's queue target (CoDel-style): once the oldest waiting call has waited
    # longer, and fresh calls outpace the calls let through, a call predicted to wait longer
    # still is refused on arrival. None (the default): only deadlines count, as seed 001 says
    # ("rejects before acceptance when the remaining deadline cannot be met"). With 300 ms,
    # 200 callers that send a new call after each refusal (wrk, one Tool with a 20 s syncWaitMs)
    # were refused 6,000-7,500 times a second and served a quarter of what 50 callers were,
    # although all 200 calls fit their deadline (docs/PERFORMANCE.md). An operator who would
    # rather turn callers away than let them wait sets it: at twice a Tool's capacity (an open
    # loop), 300 ms kept admitted p99 about 1 s, 100 ms 0.2-0.4 s.
    door_queue_target_ms: int | None = None
    # Admission statements one Tool may have in flight at once in this process; its calls that
    # arrive meanwhile wait and then go together, up to 8 in one statement and commit
    # (runtime.admission.batches). One Tool, closed c=10 then open at 2x, six rounds
    # each, alternating (docs/PERFORMANCE.md): 1 served a median 497 and 430 ok/s with
    # refusals at p99 6-8 ms; 2 served 491 and 418 (p99 10-44 ms); 64 (no batch) 468 and 406.
    admission_statements_per_tool: int = 1
    # One-statement task completions this process has in flight at once; the ones that end
    # meanwhile wait and go together, up to 16 in one statement and commit
    # (runtime.scheduler.service). One Tool at 2x its capacity, six rounds each, alternating
    # (docs/PERFORMANCE.md): 4 served a median 472 ok/s (0.91-0.97 of the peak in that run,
    # 0.80-0.93 in a slower one later); no batch (64) 450; 2 only 426 and 1 swung from 357 to
    # 535 (one statement at a time left the machine a quarter idle: completions queued behind
    # each commit's flush).
    completion_statements: int = 4

    def __post_init__(self) -> None:
        if self.safety_factor <= 0 or not 0 < self.ewma_alpha <= 1:
            raise ValueError("capacity: safety_factor must be > 0 and ewma_alpha in (0, 1]")
        if not 0 < self.retry_after_min_ms <= self.retry_after_max_ms:
            raise ValueError("capacity: need 0 < retry_after_min_ms <= retry_after_max_ms")
        if self.sample_interval_ms <= 0 or self.stale_after_ms < self.sample_interval_ms:
            raise ValueError("capacity: need 0 < sample_interval_ms <= stale_after_ms")
        if not self.sample_interval_ms <= self.idle_sample_interval_ms <= self.stale_after_ms:
            raise ValueError(
                "capacity: need sample_interval_ms <= idle_sample_interval_ms <= stale_after_ms"
            )
        if self.sojourn_interval_ms <= 0 or self.drain_window_ms <= 0:
            raise ValueError("capacity: sojourn_interval_ms and drain_window_ms must be > 0")
        if self.door_concurrency < 0 or self.door_admitting < 0:
            raise ValueError("capacity: door_concurrency and door_admitting must not be negative")
        if self.admission_statements_per_tool < 1 or self.completion_statements < 1:
            raise ValueError(
                "capacity: admission_statements_per_tool and completion_statements must be >= 1"
            )
        if self.door_queue_target_ms is not None and self.door_queue_target_ms <= 0:
            raise ValueError("capacity: door_queue_target_ms must be positive (or null)")
