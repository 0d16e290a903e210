"""The handler table (handlers.HANDLERS) and the generated routes name the same tools."""

from __future__ import annotations

import typing

import pytest

from generated.routes import ROUTES
from generated.tools import TOOL_NAMES
from handlers import HANDLERS
from runtime.mcp.call import InputFailure, ToolCall


def test_every_generated_route_has_a_handler() -> None:
    assert [name for name in ROUTES if name not in HANDLERS] == []


def test_every_handler_has_a_generated_route() -> None:
    assert [name for name in HANDLERS if name not in ROUTES] == []


def test_the_table_is_in_catalog_order() -> None:
    assert tuple(HANDLERS) == TOOL_NAMES


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_each_handler_takes_its_routes_input_and_returns_its_output(name: str) -> None:
    route, handler = ROUTES[name], HANDLERS[name]
    hints = typing.get_type_hints(handler.handle)
    assert (hints["args"], hints["call"], hints["return"]) == (
        route.input_model,
        ToolCall,
        route.output_model,
    )
    if handler.refuse is not None:
        hints = typing.get_type_hints(handler.refuse)
        assert (hints["failure"], hints["call"], hints["return"]) == (
            InputFailure,
            ToolCall,
            route.output_model,
        )
