"""Start-up of the serving app: the heap it built is frozen once, at serve start-up only, and
the collector runs at the serving thresholds while it serves."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.mcp.app import SERVING_GC_THRESHOLDS, attach_services, create_app


async def test_attaching_services_freezes_nothing(services: Services) -> None:
    # Tests attach services to app after app: freezing each time would keep their garbage.
    before = gc.get_freeze_count()
    attach_services(create_app(), services, HANDLERS)
    # Frozen objects freed meanwhile lower the count; a freeze would raise it by thousands.
    assert gc.get_freeze_count() <= before


async def test_the_serving_lifespan_freezes_what_start_up_built(services: Services) -> None:
    closed: list[bool] = []

    async def close() -> None:
        closed.append(True)

    async def factory() -> tuple[Services, Callable[[], Awaitable[None]]]:
        return services, close

    app = create_app(factory, HANDLERS)
    gc.unfreeze()
    async with app.lifespan():
        assert gc.get_freeze_count() > 0
        assert app.state.services is services
    assert closed == [True]


async def test_the_serving_lifespan_collects_at_the_serving_thresholds_and_restores_them(
    services: Services,
) -> None:
    async def close() -> None:
        return None

    async def factory() -> tuple[Services, Callable[[], Awaitable[None]]]:
        return services, close

    before = gc.get_threshold()
    assert before != SERVING_GC_THRESHOLDS
    app = create_app(factory, HANDLERS)
    try:
        async with app.lifespan():
            assert gc.get_threshold() == SERVING_GC_THRESHOLDS
        assert gc.get_threshold() == before
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
