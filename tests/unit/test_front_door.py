"""The front door of workflow_invoke: bounded work in progress, arrival order, refusals on arrival.

runtime.admission.door, with a hand-driven clock: what it lets through, in which order, and when
it refuses a call at once (no Tool's deadline could be met) with a bounded retryAfterMs.
"""

from __future__ import annotations

import asyncio

import pytest

from runtime.admission import Admission, CapacitySettings, door
from runtime.telemetry import metrics

pytestmark = pytest.mark.requirement("001:Capacity And Availability")


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def front(clock: Clock) -> door.FrontDoor:
    made = Admission(clock=clock).door
    made.configure(
        CapacitySettings(door_concurrency=2, safety_factor=1.5, door_queue_target_ms=None)
    )
    return made


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_calls_go_through_at_once_while_there_is_room(front: door.FrontDoor) -> None:
    first, second = await front.enter(), await front.enter()
    assert front.inside == 2 and front.waiting == 0
    first.leave()
    first.leave()  # leaving twice gives the place back once
    assert front.inside == 1
    second.leave()
    assert front.inside == 0


async def test_past_the_limit_calls_wait_and_go_in_arrival_order(front: door.FrontDoor) -> None:
    held = [await front.enter(), await front.enter()]
    order: list[int] = []

    async def call(n: int) -> None:
        place = await front.enter()
        order.append(n)
        place.leave()

    waiting = [asyncio.create_task(call(n)) for n in range(4)]
    await _settle()
    assert front.waiting == 4 and order == []
    held[0].leave()
    await asyncio.gather(*waiting)
    assert order == [0, 1, 2, 3]
    held[1].leave()
    assert front.inside == 0 and front.waiting == 0


async def test_a_waiting_call_that_is_cancelled_leaves_no_place_behind(
    front: door.FrontDoor,
) -> None:
    held = [await front.enter(), await front.enter()]
    gone = asyncio.create_task(front.enter())
    await _settle()
    gone.cancel()
    await _settle()
    assert front.waiting == 0
    for place in held:
        place.leave()
    assert front.inside == 0
    assert (await front.enter()) is not None and front.inside == 1


async def test_nothing_is_refused_while_nobody_waits_or_before_any_budget_is_known(
    front: door.FrontDoor,
) -> None:
    held = [await front.enter(), await front.enter()]
    assert front.judge() is None  # full, but nobody waits yet
    waiter = asyncio.create_task(front.enter())
    await _settle()
    assert front.estimator is not None and front.estimator.longest_budget_ms() is None
    assert front.judge() is None  # no Tool's budget known: the controller judges later
    for place in held:
        place.leave()
    (await waiter).leave()


async def test_a_call_no_tools_deadline_could_fit_is_refused_with_a_bounded_retry(
    front: door.FrontDoor, clock: Clock
) -> None:
    assert front.estimator is not None
    front.estimator.longest_budget = 1000.0
    held = [await front.enter(), await front.enter()]  # two passes within the last second
    waiters = [asyncio.create_task(front.enter()) for _ in range(3)]
    await _settle()
    clock.now += 0.9  # the rate is measured over the 0.9 s since the first pass
    # 4 ahead of a new call at 2 passes in 0.9 s: 1.8 s of waiting, times 1.5 > 1 s of budget.
    retry = front.judge()
    settings = front.settings
    assert retry is not None
    assert settings.retry_after_min_ms <= retry <= settings.retry_after_max_ms
    # With a budget that fits the wait, the same queue is no reason to refuse.
    front.estimator.longest_budget = 10_000.0
    assert front.judge() is None
    for place in held:
        place.leave()
    for waiter in waiters:
        (await waiter).leave()


async def test_the_door_can_be_switched_off(clock: Clock) -> None:
    off = Admission(clock=clock).door
    off.configure(CapacitySettings(door_concurrency=0))
    places = [await off.enter() for _ in range(100)]
    assert off.inside == 0 and off.judge() is None
    for place in places:
        place.leave()
    with pytest.raises(ValueError):
        CapacitySettings(door_concurrency=-1)


async def test_a_standing_queue_past_its_target_refuses_who_would_wait_longer_still(
    clock: Clock,
) -> None:
    admission = Admission(clock=clock)
    admission.estimator.longest_budget = 60_000.0  # no deadline is at stake
    front = admission.door
    front.configure(CapacitySettings(door_concurrency=1, door_queue_target_ms=200))
    held = await front.enter()
    waiters = [asyncio.create_task(front.enter()) for _ in range(3)]
    await _settle()
    # A fresh burst: the oldest waiter has not waited the target yet, so nobody is refused.
    assert front.judge() is None
    clock.now += 0.5  # the queue stood for 500 ms: one pass in the last second, three ahead
    retry = front.judge()
    assert retry is not None and retry > 0
    # Once it drains, arrivals are let in again.
    held.leave()
    for waiter in waiters:
        (await waiter).leave()
    assert front.judge() is None


async def _standing_queue(clock: Clock, target_ms: int) -> tuple[door.FrontDoor, list[object]]:
    """A door of one place, held, with three calls waiting since 500 ms (past the target)."""
    admission = Admission(clock=clock)
    admission.estimator.longest_budget = 60_000.0  # no deadline is at stake
    front = admission.door
    front.configure(CapacitySettings(door_concurrency=1, door_queue_target_ms=target_ms))
    held = await front.enter()
    waiters = [asyncio.create_task(front.enter()) for _ in range(3)]
    await _settle()
    clock.now += 0.5
    return front, [held, *waiters]


async def _drain(parts: list[object]) -> None:
    held, *waiters = parts
    assert isinstance(held, door.Pass)
    held.leave()
    for waiter in waiters:
        assert isinstance(waiter, asyncio.Task)
        (await waiter).leave()


async def test_a_standing_queue_that_does_not_grow_is_not_refused(clock: Clock) -> None:
    # A closed loop: its callers send a call per answer, so fresh arrivals keep pace with the
    # passes and refusing them would shorten nothing (they come back at once).
    front, parts = await _standing_queue(clock, 200)
    front._passes.add(clock.now)  # another pass in the window: two passes, one arrival
    assert front.judge(fingerprint=1) is None
    await _drain(parts)


async def test_an_early_retry_of_a_refused_call_waits_instead_of_being_refused_again(
    clock: Clock,
) -> None:
    front, parts = await _standing_queue(clock, 200)
    front.judge(fingerprint=7)  # a fresh arrival: two arrivals against one pass
    retry_after = front.judge(fingerprint=8)
    assert retry_after is not None
    # The same call again at once (the impatient agent): it waits its turn at the door.
    assert front.judge(fingerprint=8) is None
    # A different call arriving now is still refused: the queue stands and grows.
    assert front.judge(fingerprint=9) is not None
    # Once its retryAfterMs is up, the same call is a fresh call again, judged as such.
    clock.now += retry_after / 1000
    front._passes.add(clock.now)
    front._arrivals.add(clock.now)
    front._arrivals.add(clock.now)
    assert front.judge(fingerprint=8) is not None
    await _drain(parts)


async def test_an_early_retry_is_still_refused_when_no_deadline_could_be_met(clock: Clock) -> None:
    front, parts = await _standing_queue(clock, 200)
    front.judge(fingerprint=7)
    retry_after = front.judge(fingerprint=8)
    assert retry_after is not None
    assert front.estimator is not None
    front.estimator.longest_budget = 100.0  # a 100 ms budget: three ahead at one per second
    assert front.judge(fingerprint=8) is not None
    await _drain(parts)


async def test_a_calls_place_waits_for_its_run_to_start_only_when_the_run_was_queued() -> None:
    front = Admission(CapacitySettings(door_concurrency=1)).door

    async def call(process_id: str, *, queued: bool) -> door.Pass:
        place = await front.enter()
        door.passed(0.0, place)
        door.expect_start(process_id)
        door.admitted(queued=queued)
        return place

    # Claimed in the admission statement: the place goes at once.
    await asyncio.create_task(call("run-1", queued=False))
    assert front.inside == 0
    # Left in the queue: the place is kept until an executor here starts the run.
    await asyncio.create_task(call("run-2", queued=True))
    assert front.inside == 1
    front.started("run-other")
    assert front.inside == 1
    front.started("run-2")
    assert front.inside == 0
    front.started("run-2")  # a later task of the same run changes nothing
    assert front.inside == 0


async def test_admissions_in_progress_have_their_own_smaller_bound(clock: Clock) -> None:
    # Three places, one admission at a time: a call whose run waits for an executor slot keeps
    # its place but no longer blocks the next admission (few admissions keep refusals quick,
    # many places keep the executor fed).
    front = Admission(CapacitySettings(door_concurrency=3, door_admitting=1)).door
    first = await front.enter()
    second = asyncio.create_task(front.enter())
    await _settle()
    assert front.waiting == 1 and front.inside == 1 and front.admitting == 1
    first.decided()  # admitted, its run queued
    second_place = await second
    assert front.inside == 2 and front.admitting == 1 and front.waiting == 0
    first.decided()  # deciding twice frees one admission
    assert front.admitting == 1
    second_place.decided()
    third = await front.enter()
    assert front.inside == 3 and front.admitting == 1
    third.decided()
    # All places held by queued runs: the next call waits although nobody is admitting.
    fourth = asyncio.create_task(front.enter())
    await _settle()
    assert front.waiting == 1 and front.admitting == 0
    first.leave()  # its run started
    fourth_place = await fourth
    assert front.inside == 3 and front.admitting == 1
    for place in (second_place, third, fourth_place):
        place.leave()
    assert front.inside == 0 and front.admitting == 0


async def test_a_queued_run_frees_its_admission_at_once_and_its_place_when_it_starts() -> None:
    front = Admission(CapacitySettings(door_concurrency=2, door_admitting=1)).door
    place = await front.enter()
    door.passed(0.0, place)
    door.expect_start("run-queued")
    door.admitted(queued=True)
    assert front.inside == 1 and front.admitting == 0
    front.started("run-queued")
    assert front.inside == 0 and front.admitting == 0
    # A run started by an executor before its admission was reported decided: both go once.
    place = await front.enter()
    door.passed(0.0, place)
    door.expect_start("run-early")
    front.started("run-early")
    door.admitted(queued=True)
    assert front.inside == 0 and front.admitting == 0


def test_door_admitting_must_not_be_negative() -> None:
    with pytest.raises(ValueError):
        CapacitySettings(door_admitting=-1)
    assert CapacitySettings(door_admitting=0).door_admitting == 0


async def test_door_admitting_zero_bounds_only_the_places(clock: Clock) -> None:
    front = Admission(CapacitySettings(door_concurrency=2, door_admitting=0)).door
    places = [await front.enter(), await front.enter()]
    assert front.admitting == 2
    waiter = asyncio.create_task(front.enter())
    await _settle()
    assert front.waiting == 1
    places[0].leave()
    places.append(await waiter)
    for place in places[1:]:
        place.leave()
    assert front.inside == 0


async def test_closing_the_door_answers_the_calls_waiting_and_every_new_one(
    front: door.FrontDoor,
) -> None:
    held = [await front.enter(), await front.enter()]
    waiters = [asyncio.create_task(front.enter()) for _ in range(3)]
    await _settle()
    front.close()
    for waiter in waiters:
        with pytest.raises(door.DoorClosed):
            await waiter
    assert front.waiting == 0
    assert front.judge() == front.settings.retry_after_min_ms
    for place in held:
        place.leave()
    assert front.inside == 0


async def test_the_doors_gauges_follow_its_calls(front: door.FrontDoor) -> None:
    def gauges() -> tuple[float | None, float | None, float | None]:
        registry = metrics.REGISTRY
        return (
            registry.get_sample_value("workflow_door_inside"),
            registry.get_sample_value("workflow_door_waiting"),
            registry.get_sample_value("workflow_door_admitting"),
        )

    held = [await front.enter(), await front.enter()]
    waiter = asyncio.create_task(front.enter())
    await _settle()
    assert gauges() == (2.0, 1.0, 2.0)
    held[0].leave()
    place = await waiter
    assert gauges() == (2.0, 0.0, 2.0)
    place.decided()
    assert gauges() == (2.0, 0.0, 1.0)
    for last in (held[1], place):
        last.leave()
    assert gauges() == (0.0, 0.0, 0.0)


async def test_by_default_a_growing_queue_whose_wait_fits_the_deadline_is_not_refused(
    clock: Clock,
) -> None:
    # Seed 001: refuse only when the remaining deadline cannot be met. A queue that stood for
    # 500 ms and grows (fresh calls outpace the passes) is no reason while every call fits.
    admission = Admission(CapacitySettings(door_concurrency=1), clock=clock)
    admission.estimator.longest_budget = 20_000.0
    front = admission.door
    held = await front.enter()
    waiters = [asyncio.create_task(front.enter()) for _ in range(3)]
    await _settle()
    clock.now += 0.5
    assert [front.judge(fingerprint=n) for n in range(10)] == [None] * 10
    # Once the wait no longer fits the longest deadline known, it is refused.
    admission.estimator.longest_budget = 100.0
    assert front.judge(fingerprint=11) is not None
    await _drain([held, *waiters])


async def test_a_burst_at_an_idle_door_is_judged_by_the_rate_measured_since_it_began(
    clock: Clock,
) -> None:
    # An idle door takes 400 calls at once: 16 pass at the first instant, the rest wait. A
    # second-long window would read 16 passes a second and predict 24 s of waiting (refused,
    # told to come back in 5 s); 100 ms after the burst began the door has let 16 through in
    # 100 ms, so the wait is 2.4 s, which fits a 20 s deadline.
    admission = Admission(CapacitySettings(door_concurrency=16, door_admitting=0), clock=clock)
    admission.estimator.longest_budget = 20_000.0
    front = admission.door
    held = [await front.enter() for _ in range(16)]
    waiters = [asyncio.create_task(front.enter()) for _ in range(384)]
    await _settle()
    clock.now += 0.1
    assert front.judge() is None
    # A door that really lets only 16 through a second is judged by that rate.
    clock.now += 0.9
    assert front.judge() is not None
    for place in held:
        place.leave()
    for waiter in waiters:
        (await waiter).leave()
